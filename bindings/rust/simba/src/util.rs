//! Internals shared by every handle: durations, the "inside a callback" flag,
//! panic containment, one-shot completions.
use std::cell::Cell;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use simba_sys as sys;

use crate::error::{Error, Result};

/// A wait as the C ABI takes it: milliseconds rounded up; `Duration::MAX` (or
/// anything beyond `i64::MAX` ms) waits without bound (-1).
pub(crate) fn wait_ms(d: Duration) -> i64 {
    if d == Duration::MAX {
        return -1;
    }
    let ms = d.as_nanos().div_ceil(1_000_000);
    if ms > i64::MAX as u128 {
        -1
    } else {
        ms as i64
    }
}

/// A non-negative span (config value, cooldown, period) in milliseconds, rounded up, saturating.
pub(crate) fn span_ms(d: Duration) -> i64 {
    let ms = d.as_nanos().div_ceil(1_000_000);
    ms.min(i64::MAX as u128) as i64
}

pub(crate) fn ms_duration(ms: i64) -> Duration {
    Duration::from_millis(ms.max(0) as u64)
}

thread_local! {
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// True while this thread runs a callback or leader work of this binding:
/// there a blocking call would wait for itself and handles are freed lazily.
pub(crate) fn in_callback() -> bool {
    DEPTH.with(|d| d.get() > 0)
}

/// Runs `f` as a callback: marks the thread, and contains a panic (a panic
/// must never unwind into C). A panic is reported on stderr and swallowed.
pub(crate) fn run_callback<F: FnOnce()>(what: &str, f: F) {
    struct Guard;
    impl Drop for Guard {
        fn drop(&mut self) {
            DEPTH.with(|d| d.set(d.get() - 1));
        }
    }
    DEPTH.with(|d| d.set(d.get() + 1));
    let _g = Guard;
    if let Err(p) = catch_unwind(AssertUnwindSafe(f)) {
        let msg = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "non-string panic payload".into());
        // Best effort: even writing to stderr must not panic out of here.
        let _ = catch_unwind(|| eprintln!("simba: panic in {what} callback (contained): {msg}"));
    }
}

/// Locks a mutex, ignoring poisoning (a panicking callback poisons; the data is
/// a closure that may be called again).
pub(crate) fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[derive(Default)]
struct CompletionState {
    result: Mutex<Option<Result<()>>>,
    cv: Condvar,
    /// Tasks awaiting it as a `Future`; locked inside `result` only.
    wakers: Mutex<Vec<Waker>>,
}

/// The completion of an asynchronous stop or step-down (the seed's
/// `CompletionStage<Void>`): done once the last `on_revoked` of it ran.
///
/// ```
/// # use std::time::Duration;
/// let client = simba::Client::open("memory://doc-completion")?;
/// let election = client.election("doc.completion", simba::listener(|_t| {}, |_t, _r| {}))?;
/// let stopped = election.stop()?;
/// stopped.wait(Duration::from_secs(5))?;
/// assert!(stopped.is_done());
/// # Ok::<(), simba::Error>(())
/// ```
#[derive(Clone)]
pub struct Completion {
    state: Arc<CompletionState>,
}

impl std::fmt::Debug for Completion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Completion").field("done", &self.is_done()).finish()
    }
}

impl Completion {
    pub(crate) fn new() -> Completion {
        Completion { state: Arc::new(CompletionState::default()) }
    }

    pub(crate) fn complete(&self, r: Result<()>) {
        let mut g = lock(&self.state.result);
        if g.is_none() {
            *g = Some(r);
        }
        self.state.cv.notify_all();
        let wakers = std::mem::take(&mut *lock(&self.state.wakers));
        drop(g);
        for w in wakers {
            w.wake();
        }
    }

    /// Whether it completed.
    pub fn is_done(&self) -> bool {
        lock(&self.state.result).is_some()
    }

    /// The result if it completed.
    pub fn try_result(&self) -> Option<Result<()>> {
        lock(&self.state.result).clone()
    }

    /// Waits up to `timeout` (`Duration::MAX`: without bound) for the completion.
    ///
    /// Errors: the completion's own error; `TimedOut`; `WouldBlock` when called
    /// from a callback or leader work that has not completed yet (waiting there
    /// would wait for itself).
    pub fn wait(&self, timeout: Duration) -> Result<()> {
        let mut g = lock(&self.state.result);
        if let Some(r) = g.as_ref() {
            return r.clone();
        }
        if in_callback() {
            return Err(Error::with_message(
                sys::SIMBA_EWOULDBLOCK,
                "Completion::wait from a callback or leader work would wait for itself".into(),
            ));
        }
        let deadline = if timeout == Duration::MAX { None } else { Instant::now().checked_add(timeout) };
        loop {
            if let Some(r) = g.as_ref() {
                return r.clone();
            }
            match deadline {
                None => g = self.state.cv.wait(g).unwrap_or_else(|e| e.into_inner()),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return Err(Error::with_message(sys::SIMBA_ETIMEDOUT, "completion wait timed out".into()));
                    }
                    g = self.state.cv.wait_timeout(g, d - now).unwrap_or_else(|e| e.into_inner()).0;
                }
            }
        }
    }
}

/// Awaiting a completion (any executor: no runtime is assumed) waits for it
/// like [`Completion::wait`] without blocking a thread.
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
/// let client = simba::Client::open("memory://doc-completion-future")?;
/// let election = client.election("doc.future", simba::listener(|_t| {}, |_t, _r| {}))?;
/// block_on(election.stop()?)?;
/// # Ok::<(), simba::Error>(())
/// ```
impl Future for Completion {
    type Output = Result<()>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let g = lock(&self.state.result);
        if let Some(r) = g.as_ref() {
            return Poll::Ready(r.clone());
        }
        let mut w = lock(&self.state.wakers);
        if !w.iter().any(|x| x.will_wake(cx.waker())) {
            w.push(cx.waker().clone());
        }
        Poll::Pending
    }
}

/// A value delivered once by a callback, awaited as a `Future`.
pub(crate) struct OneShot<T> {
    slot: Mutex<(Option<T>, Option<Waker>)>,
}

impl<T> OneShot<T> {
    pub(crate) fn new() -> Arc<OneShot<T>> {
        Arc::new(OneShot { slot: Mutex::new((None, None)) })
    }
    pub(crate) fn put(&self, v: T) {
        let w = {
            let mut g = lock(&self.slot);
            g.0 = Some(v);
            g.1.take()
        };
        if let Some(w) = w {
            w.wake();
        }
    }
    pub(crate) fn poll_take(&self, cx: &mut Context<'_>) -> Poll<T> {
        let mut g = lock(&self.slot);
        match g.0.take() {
            Some(v) => Poll::Ready(v),
            None => {
                g.1 = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

/// `simba_done_fn` user data: a completion to fulfil.
pub(crate) unsafe extern "C" fn done_trampoline(ud: *mut std::ffi::c_void, err: i32) {
    let c = Box::from_raw(ud as *mut Completion);
    run_callback("done", move || {
        c.complete(crate::error::check_async(err));
    });
}

/// Starts an asynchronous C call taking a done callback; returns the completion.
pub(crate) fn with_completion(
    start: impl FnOnce(sys::simba_done_fn, *mut std::ffi::c_void) -> i32,
) -> Result<Completion> {
    let c = Completion::new();
    let ud = Box::into_raw(Box::new(c.clone()));
    let rc = start(Some(done_trampoline), ud as *mut _);
    if rc != sys::SIMBA_OK {
        // Not started: done will not be called.
        drop(unsafe { Box::from_raw(ud) });
        return Err(Error::last(rc));
    }
    Ok(c)
}

pub(crate) unsafe fn take_c_string(p: *mut std::ffi::c_char) -> String {
    let s = std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned();
    sys::simba_free(p as *mut _);
    s
}

#[repr(C)]
struct PollFd {
    fd: i32,
    events: i16,
    revents: i16,
}

extern "C" {
    fn poll(fds: *mut PollFd, nfds: std::ffi::c_ulong, timeout: i32) -> i32;
}

/// Waits up to `wait` for `fd` to be readable (EINTR and errors return early).
pub(crate) fn poll_readable(fd: i32, wait: Duration) -> bool {
    const POLLIN: i16 = 1;
    let mut p = PollFd { fd, events: POLLIN, revents: 0 };
    let ms = wait.as_millis().min(i32::MAX as u128) as i32;
    unsafe { poll(&mut p, 1, ms) > 0 && (p.revents & POLLIN) != 0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn waits_round_up_to_milliseconds() {
        assert_eq!(wait_ms(Duration::ZERO), 0);
        assert_eq!(wait_ms(Duration::from_nanos(1)), 1);
        assert_eq!(wait_ms(Duration::from_micros(1500)), 2);
        assert_eq!(wait_ms(Duration::from_millis(7)), 7);
        assert_eq!(wait_ms(Duration::MAX), -1);
        assert_eq!(wait_ms(Duration::from_secs(u64::MAX / 1000)), -1, "beyond i64 ms waits without bound");
        assert_eq!(span_ms(Duration::from_nanos(999_999)), 1);
        assert_eq!(span_ms(Duration::MAX), i64::MAX, "spans saturate, never wrap negative");
        assert_eq!(ms_duration(-5), Duration::ZERO);
        assert_eq!(ms_duration(1234), Duration::from_millis(1234));
    }

    #[test]
    fn callbacks_contain_panics_and_mark_the_thread() {
        assert!(!in_callback());
        let mut seen = false;
        run_callback("test", || {
            seen = in_callback();
            run_callback("nested", || panic!("inner"));
            assert!(in_callback(), "still inside the outer callback after a nested panic");
        });
        assert!(seen);
        run_callback("test", || std::panic::panic_any(42u8));
        assert!(!in_callback(), "the mark is cleared after a panic");
    }

    #[test]
    fn completion_settles_once_and_wakes_waiters() {
        let c = Completion::new();
        assert!(!c.is_done());
        assert!(c.try_result().is_none());
        let t0 = Instant::now();
        assert_eq!(c.wait(Duration::from_millis(30)).unwrap_err().kind(), ErrorKind::TimedOut);
        assert!(t0.elapsed() >= Duration::from_millis(30));
        let c2 = c.clone();
        let h = std::thread::spawn(move || c2.wait(Duration::MAX));
        std::thread::sleep(Duration::from_millis(20));
        c.complete(Ok(()));
        c.complete(Err(Error::with_message(sys::SIMBA_ECANCELED, String::new())));
        assert!(h.join().unwrap().is_ok(), "the first result wins");
        assert!(c.wait(Duration::ZERO).is_ok());
        // Pending, inside a callback: refused instead of waiting for itself.
        let pending = Completion::new();
        let mut r = None;
        run_callback("test", || r = Some(pending.wait(Duration::from_secs(5))));
        assert_eq!(r.unwrap().unwrap_err().kind(), ErrorKind::WouldBlock);
    }

    #[test]
    fn poll_sees_a_readable_fd() {
        let (mut w, r) = std::os::unix::net::UnixStream::pair().unwrap();
        use std::io::Write;
        use std::os::fd::AsRawFd;
        assert!(!poll_readable(r.as_raw_fd(), Duration::from_millis(10)));
        w.write_all(b"x").unwrap();
        assert!(poll_readable(r.as_raw_fd(), Duration::from_secs(5)));
    }
}
