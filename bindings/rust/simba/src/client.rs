use std::ffi::{c_char, c_void};
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::sync::Arc;
use std::time::Duration;

use simba_sys as sys;

use crate::config::Config;
use crate::election::{Election, Listener};
use crate::error::{check, cstring, lease_cstring, Error, Result};
use crate::event::{Event, SessionStatus};
use crate::observe::{Holder, Observation, Observer};
use crate::shared::Shared;
use crate::task::Task;
use crate::term::{LockMode, LockTerm, Term};
use crate::util::{ms_duration, run_callback, take_c_string, wait_ms, OneShot};

/// A Simba client: one session on one backend, in THREAD mode (the engine runs
/// on a thread of its own; callbacks run on the client's callback pool).
///
/// `Client` is `Send + Sync`: share it with an `Arc` or by reference. Dropping
/// it closes it: every election and lock stops (terms revoked with `Stopped`,
/// in handover order), the session closes (the backend frees every lease at
/// once), and when the drop returns outside a callback no callback of the client
/// or of its handles runs any more. Handles (elections, tasks, terms) stay
/// usable afterwards but are stopped.
///
/// ```
/// use std::time::Duration;
/// let client = simba::Client::open("memory://doc-client")?;
/// client.wait_live(Duration::from_secs(5))?;
/// assert_eq!(client.status(), simba::SessionStatus::Live);
/// let held = client.lock("doc.client", Duration::from_secs(5))?;
/// println!("token {}", held.token());
/// held.unlock()?;
/// client.close()?;
/// # Ok::<(), simba::Error>(())
/// ```
pub struct Client {
    raw: *mut sys::simba_client_t,
    shared: Arc<Shared>,
}

// SAFETY: in THREAD mode every function of the ABI may be called from any
// thread; the Rust state is behind mutexes.
unsafe impl Send for Client {}
unsafe impl Sync for Client {}

/// The oldest library this binding runs on: it takes its names from 1.3 and
/// closes every handle with the `X_close_async` of 1.4.
const MIN_VERSION: u32 = 0x010400;

fn open_raw(url: &str, cfg: Option<&Config>) -> Result<(*mut sys::simba_client_t, Arc<Shared>)> {
    let loaded = unsafe { sys::simba_version() };
    if loaded < MIN_VERSION {
        return Err(Error::with_message(
            sys::SIMBA_EUNSUPPORTED,
            format!("this binding needs libsimba >= 1.4, loaded {}", crate::version_string()),
        ));
    }
    let u = cstring(url, "backend URL")?;
    let mut raw = std::ptr::null_mut();
    let rc = unsafe { sys::simba_client_open(&mut raw, u.as_ptr(), cfg.map_or(std::ptr::null(), |c| c.as_raw())) };
    check(rc)?;
    Ok((raw, Shared::new(cfg.map(|c| c.hooks.clone()).unwrap_or_default())))
}

impl Client {
    /// Opens a client with the default configuration. Returns at once; the
    /// session opens in the background ([`Client::wait_live`] waits for it).
    ///
    /// URLs: `memory://NAME` (in-process), `redis://[user:pass@]host:port[/db][?prefix=simba]`,
    /// `postgresql://...`, `zookeeper://host:port[,...]/chroot`.
    pub fn open(url: &str) -> Result<Client> {
        Client::open_cfg(url, None)
    }

    /// Opens a client with `cfg` (copied). A config with `loop.mode = external`
    /// is refused here: open an [`ExternalClient`] instead.
    pub fn open_with(url: &str, cfg: &Config) -> Result<Client> {
        Client::open_cfg(url, Some(cfg))
    }

    fn open_cfg(url: &str, cfg: Option<&Config>) -> Result<Client> {
        let (raw, shared) = open_raw(url, cfg)?;
        if unsafe { sys::simba_client_fd(raw) } >= 0 {
            // EXTERNAL mode: this thread is its host, so the close completes here.
            unsafe { sys::simba_client_close(raw) };
            return Err(Error::with_message(
                sys::SIMBA_EINVAL,
                "loop.mode=external needs simba::ExternalClient (it is !Send)".into(),
            ));
        }
        Ok(Client { raw, shared })
    }

    /// The raw handle, for calls through `simba-sys` (do not close it).
    pub fn as_raw(&self) -> *mut sys::simba_client_t {
        self.raw
    }

    /// Waits until the session is live (`Duration::ZERO` checks, `Duration::MAX`
    /// waits without bound). `TimedOut`, `Closed`, `WouldBlock` in a callback.
    pub fn wait_live(&self, timeout: Duration) -> Result<()> {
        check(unsafe { sys::simba_client_wait_live(self.raw, wait_ms(timeout)) })
    }

    /// Current session status; never blocks.
    pub fn status(&self) -> SessionStatus {
        SessionStatus::from_raw(unsafe { sys::simba_client_status(self.raw) })
    }

    /// A JSON snapshot: session (id, status, remaining_ms, ...), every election
    /// and lock, and counters. Never blocks on the backend.
    pub fn snapshot_json(&self) -> Result<String> {
        let p = unsafe { sys::simba_client_snapshot_json(self.raw) };
        if p.is_null() {
            return Err(Error::last(sys::SIMBA_ECLOSED));
        }
        Ok(unsafe { take_c_string(p) })
    }

    /// What the backend holds, for operators: one read outside the session.
    /// `names` empty reports every lease the backend knows.
    pub fn inspect_json(&self, names: &[&str], timeout: Duration) -> Result<String> {
        let owned = names.iter().map(|n| lease_cstring(n)).collect::<Result<Vec<_>>>()?;
        let ptrs: Vec<*const c_char> = owned.iter().map(|c| c.as_ptr()).collect();
        let mut out = std::ptr::null_mut();
        let ms = wait_ms(timeout);
        let ms = if ms < 0 { i64::MAX } else { ms.max(1) };
        check(unsafe {
            sys::simba_client_inspect_json(
                self.raw,
                if ptrs.is_empty() { std::ptr::null() } else { ptrs.as_ptr() },
                ptrs.len(),
                ms,
                &mut out,
            )
        })?;
        Ok(unsafe { take_c_string(out) })
    }

    /// The client's metrics in the Prometheus text format (`simba_acquires_total`,
    /// `simba_terms_total`, `simba_revocations_total{reason}`, ...; see
    /// docs/observability.md), for a scrape endpoint. Never blocks on the backend.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let client = simba::Client::open("memory://doc-metrics")?;
    /// client.lock("doc.metrics", Duration::from_secs(5))?.unlock()?;
    /// let text = client.metrics_text()?;
    /// assert!(text.contains("simba_acquires_total{client=\"\"} 1\n"), "{text}");
    /// # Ok::<(), simba::Error>(())
    /// ```
    pub fn metrics_text(&self) -> Result<String> {
        let p = unsafe { sys::simba_client_metrics_text(self.raw) };
        if p.is_null() {
            return Err(Error::last(sys::SIMBA_ECLOSED));
        }
        Ok(unsafe { take_c_string(p) })
    }

    /// Follows who holds `name` without contending for it: `f` runs with the
    /// state at the start, then on every change (another holder, another
    /// token, free), one call at a time, in order, on the callback executor.
    /// A change shows within one release broadcast or one `poll`
    /// (`Duration::ZERO`: the renew interval; else at least 10 ms).
    ///
    /// ```
    /// # use std::time::Duration;
    /// use std::sync::mpsc;
    /// let client = simba::Client::open("memory://doc-observe")?;
    /// let (tx, rx) = mpsc::channel();
    /// let observer = client.observe("doc.observed", Duration::from_millis(50), move |h| {
    ///     let _ = tx.send(h.clone());
    /// })?;
    /// assert!(rx.recv_timeout(Duration::from_secs(5)).unwrap().is_free());
    /// let held = client.lock("doc.observed", Duration::from_secs(5))?;
    /// let seen = rx.recv_timeout(Duration::from_secs(5)).unwrap();
    /// assert_eq!(seen.token, held.token());
    /// drop(observer);
    /// # Ok::<(), simba::Error>(())
    /// ```
    pub fn observe<F>(&self, name: &str, poll: Duration, f: F) -> Result<Observer>
    where
        F: FnMut(&Holder) + Send + 'static,
    {
        Observer::start(self.raw, &self.shared, name, poll, f)
    }

    /// [`Client::observe`] as a blocking iterator of changes.
    pub fn observe_iter(&self, name: &str, poll: Duration) -> Result<Observation> {
        Observation::start(self.raw, &self.shared, name, poll)
    }

    /// Receives session events, one at a time, in order, on the callback
    /// executor. Replaces an earlier sink (also from inside the sink), and the
    /// config's ([`Config::event_sink`], which also sees the first `SessionOpened`).
    pub fn on_event<F>(&self, sink: F) -> Result<()>
    where
        F: FnMut(&Event) + Send + 'static,
    {
        self.set_sink(Some(Box::new(sink)))
    }

    /// Stops event delivery.
    pub fn clear_on_event(&self) -> Result<()> {
        self.set_sink(None)
    }

    fn set_sink(&self, sink: Option<crate::event::Sink>) -> Result<()> {
        self.shared.set_sink(self.raw, sink)
    }

    /// Acquires the lock `name`, waiting up to `timeout` (`Duration::MAX`:
    /// without bound). Locks of this client on one name queue first come, first
    /// served. `TimedOut`; `State` (an election of this client uses the name);
    /// `Closed`; `WouldBlock` in a callback.
    pub fn lock(&self, name: &str, timeout: Duration) -> Result<LockTerm> {
        let n = lease_cstring(name)?;
        let mut t = std::ptr::null_mut();
        check(unsafe { sys::simba_lock_acquire(&mut t, self.raw, n.as_ptr(), wait_ms(timeout)) })?;
        Ok(unsafe { LockTerm::from_owned(t) })
    }

    /// One attempt: `Busy` when someone else (here or elsewhere) holds it.
    pub fn try_lock(&self, name: &str) -> Result<LockTerm> {
        let n = lease_cstring(name)?;
        let mut t = std::ptr::null_mut();
        check(unsafe { sys::simba_lock_try_acquire(&mut t, self.raw, n.as_ptr()) })?;
        Ok(unsafe { LockTerm::from_owned(t) })
    }

    /// Runs `f` while holding the lock `name` (acquired within `timeout`) and
    /// releases it afterwards, also when `f` panics; returns what `f` returned.
    /// Pass `term.token()` with every write `f` makes.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let client = simba::Client::open("memory://doc-with-lock")?;
    /// let token = client.with_lock("doc.with", Duration::from_secs(5), |term| {
    ///     assert!(term.is_valid());
    ///     term.token()
    /// })?;
    /// assert!(token > 0);
    /// client.try_lock("doc.with")?.unlock()?; // released again
    /// # Ok::<(), simba::Error>(())
    /// ```
    pub fn with_lock<T>(&self, name: &str, timeout: Duration, f: impl FnOnce(&Term) -> T) -> Result<T> {
        let held = self.lock(name, timeout)?;
        let out = f(&held); // a panic unwinds through `held`'s drop, which releases
        held.unlock()?;
        Ok(out)
    }

    /// Acquires without blocking: `done` runs exactly once on the callback
    /// executor with the lock, `TimedOut`, or `Canceled` (client closed).
    pub fn lock_async<F>(&self, name: &str, timeout: Duration, done: F) -> Result<()>
    where
        F: FnOnce(Result<LockTerm>) + Send + 'static,
    {
        let ms = wait_ms(timeout);
        self.acquire_async(name, done, |c, n, cb, ud| unsafe { sys::simba_lock_acquire_async(c, n, ms, cb, ud) })
    }

    /// Starts an `X_acquire_async` (`start` gets the client, the name, the
    /// callback and its user data) whose outcome goes to `done`, once.
    fn acquire_async<F, S>(&self, name: &str, done: F, start: S) -> Result<()>
    where
        F: FnOnce(Result<LockTerm>) + Send + 'static,
        S: FnOnce(*mut sys::simba_client_t, *const c_char, sys::simba_lock_fn, *mut c_void) -> i32,
    {
        type Cb = Box<dyn FnOnce(Result<LockTerm>) + Send>;
        unsafe extern "C" fn tramp(ud: *mut c_void, err: i32, t: *mut sys::simba_term_t) {
            let f = Box::from_raw(ud as *mut Cb);
            // Own the term before anything can panic, so it is always released.
            // A refused size's detail is simba_last_error() here (1.5); other
            // failures leave no detail of their own.
            let r = match err {
                sys::SIMBA_OK => Ok(LockTerm::from_owned(t)),
                sys::SIMBA_ESTATE => Err(Error::last(err)),
                _ => Err(Error::code_only(err)),
            };
            run_callback("lock_async", move || f(r));
        }
        let n = lease_cstring(name)?;
        let ud = Box::into_raw(Box::new(Box::new(done) as Cb));
        let rc = start(self.raw, n.as_ptr(), Some(tramp), ud as *mut c_void);
        if rc != sys::SIMBA_OK {
            let e = Error::last(rc);
            drop(unsafe { Box::from_raw(ud) });
            return Err(e);
        }
        Ok(())
    }

    /// Acquires a permit of semaphore `name` of size `permits` (>= 1), waiting
    /// up to `timeout` (`Duration::MAX`: without bound). The first holder fixes
    /// the size while the name has holders: another size fails at once with
    /// `State` ("semaphore NAME has N permits, not M"). Permits are granted
    /// side by side, this client's own counting against the size; there is no
    /// queue and no FIFO order. Semaphores, read/write locks and locks are
    /// separate namespaces. Release the permit with [`LockTerm::unlock`]
    /// (libsimba 1.5).
    ///
    /// ```
    /// # use std::time::Duration;
    /// let client = simba::Client::open("memory://doc-semaphore")?;
    /// let a = client.acquire_semaphore("doc.pool", 2, Duration::from_secs(5))?;
    /// let b = client.try_acquire_semaphore("doc.pool", 2)?;
    /// assert_eq!(a.term().kind(), simba::TermKind::Semaphore);
    /// assert!(b.term().token() > a.term().token());
    /// let full = client.try_acquire_semaphore("doc.pool", 2).unwrap_err();
    /// assert_eq!(full.kind(), simba::ErrorKind::Busy);
    /// a.unlock()?;
    /// b.unlock()?;
    /// # Ok::<(), simba::Error>(())
    /// ```
    pub fn acquire_semaphore(&self, name: &str, permits: u32, timeout: Duration) -> Result<LockTerm> {
        let n = lease_cstring(name)?;
        let mut t = std::ptr::null_mut();
        check(unsafe { sys::simba_semaphore_acquire(&mut t, self.raw, n.as_ptr(), permits, wait_ms(timeout)) })?;
        Ok(unsafe { LockTerm::from_owned(t) })
    }

    /// One attempt at a permit: `Busy` when every permit is held.
    pub fn try_acquire_semaphore(&self, name: &str, permits: u32) -> Result<LockTerm> {
        let n = lease_cstring(name)?;
        let mut t = std::ptr::null_mut();
        check(unsafe { sys::simba_semaphore_try_acquire(&mut t, self.raw, n.as_ptr(), permits) })?;
        Ok(unsafe { LockTerm::from_owned(t) })
    }

    /// Acquires a permit without blocking: `done` runs exactly once on the
    /// callback executor with the permit, `TimedOut`, `State` (another size,
    /// with the library's detail) or `Canceled` (client closed).
    pub fn acquire_semaphore_async<F>(&self, name: &str, permits: u32, timeout: Duration, done: F) -> Result<()>
    where
        F: FnOnce(Result<LockTerm>) + Send + 'static,
    {
        let ms = wait_ms(timeout);
        self.acquire_async(name, done, |c, n, cb, ud| unsafe {
            sys::simba_semaphore_acquire_async(c, n, permits, ms, cb, ud)
        })
    }

    /// Acquires read/write lock `name` in `mode`, waiting up to `timeout`
    /// (`Duration::MAX`: without bound). Readers share the name; a writer
    /// excludes everyone, this client's own readers included (no upgrade), and
    /// while it waits its intent holds new readers back. A read's token is the
    /// name's write epoch. Release it with [`LockTerm::unlock`] (libsimba 1.5).
    ///
    /// ```
    /// # use std::time::Duration;
    /// use simba::LockMode;
    /// let client = simba::Client::open("memory://doc-rwlock")?;
    /// let w = client.rwlock("doc.rw", LockMode::Write, Duration::from_secs(5))?;
    /// let epoch = w.term().token();
    /// w.unlock()?;
    /// let r1 = client.rwlock("doc.rw", LockMode::Read, Duration::from_secs(5))?;
    /// let r2 = client.try_rwlock("doc.rw", LockMode::Read)?;
    /// assert_eq!(r1.term().kind(), simba::TermKind::Read);
    /// assert_eq!(r2.term().token(), epoch);
    /// r1.unlock()?;
    /// r2.unlock()?;
    /// # Ok::<(), simba::Error>(())
    /// ```
    pub fn rwlock(&self, name: &str, mode: LockMode, timeout: Duration) -> Result<LockTerm> {
        let n = lease_cstring(name)?;
        let mut t = std::ptr::null_mut();
        check(unsafe { sys::simba_rwlock_acquire(&mut t, self.raw, n.as_ptr(), mode.raw(), wait_ms(timeout)) })?;
        Ok(unsafe { LockTerm::from_owned(t) })
    }

    /// One attempt: `Busy` when a read finds a writer (or a live writer's
    /// intent), or a write finds anyone; a try-write leaves no intent.
    pub fn try_rwlock(&self, name: &str, mode: LockMode) -> Result<LockTerm> {
        let n = lease_cstring(name)?;
        let mut t = std::ptr::null_mut();
        check(unsafe { sys::simba_rwlock_try_acquire(&mut t, self.raw, n.as_ptr(), mode.raw()) })?;
        Ok(unsafe { LockTerm::from_owned(t) })
    }

    /// Acquires without blocking: `done` runs exactly once on the callback
    /// executor with the term, `TimedOut`, or `Canceled` (client closed).
    pub fn rwlock_async<F>(&self, name: &str, mode: LockMode, timeout: Duration, done: F) -> Result<()>
    where
        F: FnOnce(Result<LockTerm>) + Send + 'static,
    {
        let ms = wait_ms(timeout);
        self.acquire_async(name, done, |c, n, cb, ud| unsafe {
            sys::simba_rwlock_acquire_async(c, n, mode.raw(), ms, cb, ud)
        })
    }

    /// Acquires as a `Future` (any executor; no runtime is assumed): it
    /// resolves to the lock, `TimedOut`, or `Canceled` (client closed).
    /// Dropping it before it resolves gives up the wait: a lock granted
    /// afterwards is released at once.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # fn block_on<F: std::future::Future>(f: F) -> F::Output {
    /// #     use std::task::{Context, Poll, Wake, Waker};
    /// #     struct T(std::thread::Thread);
    /// #     impl Wake for T { fn wake(self: std::sync::Arc<Self>) { self.0.unpark() } }
    /// #     let w = Waker::from(std::sync::Arc::new(T(std::thread::current())));
    /// #     let mut f = std::pin::pin!(f);
    /// #     loop { if let Poll::Ready(v) = f.as_mut().poll(&mut Context::from_waker(&w)) { return v } std::thread::park() }
    /// # }
    /// let client = simba::Client::open("memory://doc-lock-future")?;
    /// let held = block_on(client.lock_future("doc.future.lock", Duration::from_secs(5))?)?;
    /// assert!(held.is_valid());
    /// held.unlock()?;
    /// # Ok::<(), simba::Error>(())
    /// ```
    pub fn lock_future(&self, name: &str, timeout: Duration) -> Result<LockFuture> {
        let shot = OneShot::new();
        let put = shot.clone();
        self.lock_async(name, timeout, move |r| put.put(r))?;
        Ok(LockFuture { shot, resolved: false })
    }

    /// Starts contending for `name`; every `on_elected` is followed by exactly
    /// one `on_revoked` for the same term. See [`Election`].
    pub fn election<L: Listener>(&self, name: &str, listener: L) -> Result<Election> {
        Election::start(self.raw, &self.shared, name, Box::new(listener))
    }

    /// Contends for `name`; each time elected runs `work(&term)` on a thread of
    /// its own. When work returns while the term is valid, the lease is released
    /// (`SteppedDown`) and the task contends again. Work must watch the term
    /// (`is_valid`, `ensure_valid`, `wait_revoked`, `revoke_fd`) and return soon
    /// after it is revoked. Runs of `work` never overlap in this process.
    pub fn run_while_leader<F>(&self, name: &str, work: F) -> Result<Task>
    where
        F: FnMut(&Term) + Send + 'static,
    {
        Task::run_while_leader((self.raw, &self.shared), name, work)
    }

    /// Contends for `name`; while leader, runs `run(&term)` after
    /// `initial_delay`, then with a fixed delay of `period` between runs.
    pub fn schedule<F>(&self, name: &str, initial_delay: Duration, period: Duration, run: F) -> Result<Task>
    where
        F: FnMut(&Term) + Send + 'static,
    {
        Task::schedule((self.raw, &self.shared), name, initial_delay, period, run)
    }

    /// Joins the partition group `group`: partitions `GROUP.0` .. `GROUP.N-1`
    /// are spread over the members, and `work(&term)` runs for each partition
    /// this member leads (`term.name()` is the partition), on a thread per
    /// partition: several run at once, hence `Fn + Sync`.
    pub fn join_group<F>(&self, group: &str, partitions: u32, work: F) -> Result<Task>
    where
        F: Fn(&Term) + Send + Sync + 'static,
    {
        Task::join_group((self.raw, &self.shared), group, partitions, work)
    }

    /// Closes the client (see the type's documentation). Called from a callback
    /// it starts the close and returns at once.
    pub fn close(self) -> Result<()> {
        let this = ManuallyDrop::new(self);
        let shared = unsafe { std::ptr::read(&this.shared) };
        close_thread_mode(this.raw, shared)
    }

    /// Closes without waiting, from any thread or callback: a library thread
    /// closes the client, then calls `done` after every other callback of the
    /// client returned.
    pub fn close_async<F>(self, done: F)
    where
        F: FnOnce() + Send + 'static,
    {
        let this = ManuallyDrop::new(self);
        let shared = unsafe { std::ptr::read(&this.shared) };
        close_async_raw(this.raw, shared, Some(Box::new(done)));
    }
}

/// A lock being acquired ([`Client::lock_future`]).
#[must_use = "a LockFuture does nothing unless awaited; dropped, it gives the lock up"]
pub struct LockFuture {
    shot: Arc<OneShot<Result<LockTerm>>>,
    resolved: bool,
}

impl std::future::Future for LockFuture {
    type Output = Result<LockTerm>;
    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<LockTerm>> {
        if self.resolved {
            return std::task::Poll::Ready(Err(Error::with_message(
                sys::SIMBA_ESTATE,
                "LockFuture polled after it resolved".into(),
            )));
        }
        let r = self.shot.poll_take(cx);
        if r.is_ready() {
            self.resolved = true;
        }
        r
    }
}

impl std::fmt::Debug for LockFuture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockFuture").field("resolved", &self.resolved).finish()
    }
}

struct AsyncClose {
    _shared: Arc<Shared>,
    done: Option<Box<dyn FnOnce() + Send>>,
}

unsafe extern "C" fn close_done(ud: *mut c_void, _err: i32) {
    let b = Box::from_raw(ud as *mut AsyncClose);
    run_callback("close_async", move || {
        let mut b = b;
        if let Some(f) = b.done.take() {
            f();
        }
        drop(b);
    });
}

fn close_async_raw(raw: *mut sys::simba_client_t, shared: Arc<Shared>, done: Option<Box<dyn FnOnce() + Send>>) {
    let ud = Box::into_raw(Box::new(AsyncClose { _shared: shared, done }));
    let rc = unsafe { sys::simba_client_close_async(raw, Some(close_done), ud as *mut c_void) };
    if rc != sys::SIMBA_OK {
        // Only for EXTERNAL mode, which a Client never is; keep the state alive.
        let _ = Error::last(rc);
        std::mem::forget(unsafe { Box::from_raw(ud) });
    }
}

fn close_thread_mode(raw: *mut sys::simba_client_t, shared: Arc<Shared>) -> Result<()> {
    if crate::util::in_callback() {
        // The handle is freed when the close completes: keep our state until then.
        close_async_raw(raw, shared, None);
        return Ok(());
    }
    let rc = unsafe { sys::simba_client_close(raw) };
    let r = check(rc);
    drop(shared);
    r
}

impl Drop for Client {
    fn drop(&mut self) {
        let shared = self.shared.clone();
        let _ = close_thread_mode(self.raw, shared);
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("status", &self.status()).finish_non_exhaustive()
    }
}

/// A client in EXTERNAL loop mode: it has no thread; the thread that opened it
/// (its host) polls [`AsRawFd::as_raw_fd`] for readability and calls
/// [`ExternalClient::process`] when readable or when [`ExternalClient::timeout`]
/// elapsed. Callbacks run on the host thread inside `process`.
///
/// It is `!Send`: it is processed and closed (dropped) on its host thread. Every
/// [`Client`] method is available through `Deref`; blocking calls made on the
/// host thread outside `process` run the loop themselves.
///
/// ```
/// use std::time::Duration;
/// let client = simba::ExternalClient::open("memory://doc-external")?;
/// let held = client.lock("doc.external", Duration::from_secs(5))?; // runs the loop itself
/// held.unlock()?;
/// // A host loop: poll the fd up to the client's timeout, then process.
/// for _ in 0..3 {
///     client.poll_once(Duration::from_millis(10))?;
/// }
/// # Ok::<(), simba::Error>(())
/// ```
///
/// It cannot leave its host thread:
///
/// ```compile_fail
/// fn needs_send<T: Send>(_: T) {}
/// needs_send(simba::ExternalClient::open("memory://doc-nosend").unwrap());
/// ```
pub struct ExternalClient {
    client: ManuallyDrop<Client>,
    _host_thread: PhantomData<*const ()>,
}

impl ExternalClient {
    /// Opens an EXTERNAL-mode client with the default configuration; this
    /// thread becomes its host thread.
    pub fn open(url: &str) -> Result<ExternalClient> {
        ExternalClient::open_with(url, &Config::new())
    }

    /// Opens an EXTERNAL-mode client with a copy of `cfg` (`loop.mode` is set to `external`).
    pub fn open_with(url: &str, cfg: &Config) -> Result<ExternalClient> {
        let mut cfg = cfg.clone();
        cfg.set("loop.mode", "external")?;
        let (raw, shared) = open_raw(url, Some(&cfg))?;
        Ok(ExternalClient { client: ManuallyDrop::new(Client { raw, shared }), _host_thread: PhantomData })
    }

    /// Runs what is ready, callbacks included. Never blocks. `WouldBlock` from
    /// one of its own callbacks.
    pub fn process(&self) -> Result<()> {
        check(unsafe { sys::simba_client_process(self.client.raw) })
    }

    /// How long the host may wait before calling `process` although the fd is
    /// not readable: `None` when no timer is pending, `Some(ZERO)` to process now.
    pub fn timeout(&self) -> Option<Duration> {
        let ms = unsafe { sys::simba_client_timeout_ms(self.client.raw) };
        if ms < 0 {
            None
        } else {
            Some(ms_duration(ms))
        }
    }

    /// One turn of a minimal host loop: waits for the fd up to the client's
    /// timeout (at most `max_wait`), then processes.
    pub fn poll_once(&self, max_wait: Duration) -> Result<()> {
        let mut wait = self.timeout().map_or(max_wait, |t| t.min(max_wait));
        if wait > Duration::from_millis(i32::MAX as u64) {
            wait = Duration::from_millis(i32::MAX as u64);
        }
        crate::util::poll_readable(self.as_raw_fd(), wait);
        self.process()
    }

    /// Closes the client on its host thread (what dropping it does), reporting
    /// the result. From one of its own callbacks the close only starts
    /// (`WouldBlock`) and the handle's memory is leaked rather than freed
    /// while the library may still use it.
    pub fn close(self) -> Result<()> {
        let mut this = ManuallyDrop::new(self);
        this.close_now()
    }

    fn close_now(&mut self) -> Result<()> {
        let raw = self.client.raw;
        let shared = unsafe { std::ptr::read(&self.client.shared) };
        let rc = unsafe { sys::simba_client_close(raw) };
        if rc == sys::SIMBA_OK {
            drop(shared);
            Ok(())
        } else {
            let e = Error::last(rc);
            std::mem::forget(shared);
            Err(e)
        }
    }
}

impl std::ops::Deref for ExternalClient {
    type Target = Client;
    fn deref(&self) -> &Client {
        &self.client
    }
}

impl AsRawFd for ExternalClient {
    fn as_raw_fd(&self) -> RawFd {
        unsafe { sys::simba_client_fd(self.client.raw) }
    }
}

impl AsFd for ExternalClient {
    fn as_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: the fd lives as long as the client.
        unsafe { BorrowedFd::borrow_raw(self.as_raw_fd()) }
    }
}

impl Drop for ExternalClient {
    fn drop(&mut self) {
        let _ = self.close_now();
    }
}

impl std::fmt::Debug for ExternalClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExternalClient").field("status", &self.status()).field("fd", &self.as_raw_fd()).finish()
    }
}

/// The DDL the backend of `url` installs (`simba schema`), for a DBA to apply
/// by hand. Only PostgreSQL has one; nothing connects.
///
/// ```
/// let sql = simba::backend_schema("postgresql://db.example/app?schema=simba");
/// match sql {
///     Ok(text) => assert!(text.contains("BEGIN")),
///     Err(e) => assert_eq!(e.kind(), simba::ErrorKind::Unsupported), // built without PostgreSQL
/// }
/// assert_eq!(simba::backend_schema("memory://x").unwrap_err().kind(), simba::ErrorKind::Unsupported);
/// ```
pub fn backend_schema(url: &str) -> Result<String> {
    let u = cstring(url, "backend URL")?;
    let mut out = std::ptr::null_mut();
    check(unsafe { sys::simba_backend_schema(u.as_ptr(), &mut out) })?;
    Ok(unsafe { take_c_string(out) })
}
