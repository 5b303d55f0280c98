use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use simba_sys as sys;

use crate::error::{check, cstring, Error, Result};
use crate::event::{Event, Sink};
use crate::util::{lock, ms_duration, run_callback, span_ms};

/// Log levels of the client's logger.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LogLevel {
    /// Detail for debugging.
    Debug,
    /// Normal operation.
    Info,
    /// Something degraded (a failed keep-alive, a shortened lease).
    Warn,
    /// Something failed.
    Error,
}

impl LogLevel {
    fn raw(self) -> c_int {
        match self {
            LogLevel::Debug => sys::SIMBA_LOG_DEBUG,
            LogLevel::Info => sys::SIMBA_LOG_INFO,
            LogLevel::Warn => sys::SIMBA_LOG_WARN,
            LogLevel::Error => sys::SIMBA_LOG_ERROR,
        }
    }
    fn from_raw(l: c_int) -> LogLevel {
        match l {
            sys::SIMBA_LOG_DEBUG => LogLevel::Debug,
            sys::SIMBA_LOG_INFO => LogLevel::Info,
            sys::SIMBA_LOG_WARN => LogLevel::Warn,
            _ => LogLevel::Error,
        }
    }
}

pub(crate) type LogFn = Mutex<Box<dyn FnMut(LogLevel, &str) + Send>>;

/// A unit of callback work handed to a host [`Config::executor`]: run it
/// exactly once, later, on any thread. Dropping a `Job` inside the `submit`
/// that received it rejects it; dropping it anywhere else without running it
/// runs it on the dropping thread (the library requires every accepted job to run).
pub struct Job {
    run: Option<unsafe extern "C" fn(*mut c_void)>,
    arg: *mut c_void,
}

// SAFETY: the ABI lets the host run a job on a thread of its choice.
unsafe impl Send for Job {}

impl Job {
    /// Runs the job.
    pub fn run(mut self) {
        self.run_now();
    }
    fn run_now(&mut self) {
        if let Some(f) = self.run.take() {
            unsafe { f(self.arg) };
        }
    }
}

thread_local! {
    /// The `arg` of the job being submitted on this thread, and whether it
    /// was dropped unrun inside its submit (then it counts as rejected).
    static SUBMITTING: std::cell::Cell<(*mut c_void, bool)> = const { std::cell::Cell::new((std::ptr::null_mut(), false)) };
}

impl Drop for Job {
    fn drop(&mut self) {
        if self.run.is_some() && !self.arg.is_null() && SUBMITTING.with(|s| s.get().0) == self.arg {
            // Dropped inside its own submit: report a rejection instead of running
            // it inside submit (the ABI wants the run later).
            self.run = None;
            SUBMITTING.with(|s| s.set((self.arg, true)));
            return;
        }
        self.run_now();
    }
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job").finish_non_exhaustive()
    }
}

pub(crate) type SubmitFn = Box<dyn Fn(Job) -> std::result::Result<(), Job> + Send + Sync>;

/// What a client keeps alive for the C side of its config (logger, executor).
#[derive(Clone, Default)]
pub(crate) struct Hooks {
    pub(crate) logger: Option<Arc<LogFn>>,
    pub(crate) executor: Option<Arc<SubmitFn>>,
    pub(crate) event_sink: Option<Arc<ConfigSink>>,
}

type ConfigSink = Mutex<Sink>;

/// Client configuration (the seed's `SimbaConfig`), a plain value copied by
/// [`Client::open_with`](crate::Client::open_with).
///
/// ```
/// use std::time::Duration;
/// let mut cfg = simba::Config::new();
/// cfg.lease_duration(Duration::from_millis(900))?
///    .client_name("doc-node")?;
/// // renew-interval follows lease-duration / 3 while it is not set.
/// assert_eq!(cfg.get_duration("session.renew-interval")?, Duration::from_millis(300));
/// cfg.validate()?;
/// assert!(cfg.renew_interval(Duration::from_secs(1)).is_ok());
/// assert_eq!(cfg.validate().unwrap_err().kind(), simba::ErrorKind::InvalidArgument);
/// # Ok::<(), simba::Error>(())
/// ```
pub struct Config {
    raw: *mut sys::simba_config_t,
    pub(crate) hooks: Hooks,
    /// The C config is not thread-safe, not even for reads: `!Sync`.
    _not_sync: std::marker::PhantomData<std::cell::Cell<()>>,
}

// SAFETY: a config is a plain value that may move between threads; it is
// `!Sync`, so it is never used from two threads at once.
unsafe impl Send for Config {}

impl Config {
    /// A configuration holding the seed's defaults.
    pub fn new() -> Config {
        let mut raw = std::ptr::null_mut();
        let rc = unsafe { sys::simba_config_new(&mut raw) };
        if rc != sys::SIMBA_OK || raw.is_null() {
            std::alloc::handle_alloc_error(std::alloc::Layout::new::<usize>());
        }
        Config { raw, hooks: Hooks::default(), _not_sync: std::marker::PhantomData }
    }

    pub(crate) fn as_raw(&self) -> *const sys::simba_config_t {
        self.raw
    }

    /// Sets a key from text, as the `simba.session.*` properties
    /// (`"session.lease-duration"` = `"15s"`, `"callback.executor"` = `"direct"`, ...).
    pub fn set(&mut self, key: &str, value: &str) -> Result<&mut Config> {
        let k = cstring(key, "config key")?;
        let v = cstring(value, format_args!("config value of {key}"))?;
        check(unsafe { sys::simba_config_set(self.raw, k.as_ptr(), v.as_ptr()) })?;
        Ok(self)
    }

    /// Sets a duration key (rounded up to milliseconds).
    pub fn set_duration(&mut self, key: &str, value: Duration) -> Result<&mut Config> {
        let k = cstring(key, "config key")?;
        check(unsafe { sys::simba_config_set_ms(self.raw, k.as_ptr(), span_ms(value)) })?;
        Ok(self)
    }

    /// Reads a duration key, derived defaults included.
    pub fn get_duration(&self, key: &str) -> Result<Duration> {
        let k = cstring(key, "config key")?;
        let mut ms = 0i64;
        check(unsafe { sys::simba_config_get_ms(self.raw, k.as_ptr(), &mut ms) })?;
        Ok(ms_duration(ms))
    }

    /// Reads a numeric key that is not a duration (`"session.drift"`, `"callback.threads"`).
    pub fn get_f64(&self, key: &str) -> Result<f64> {
        let k = cstring(key, "config key")?;
        let mut v = 0f64;
        check(unsafe { sys::simba_config_get_double(self.raw, k.as_ptr(), &mut v) })?;
        Ok(v)
    }

    /// `session.lease-duration`: the backend expires a session this long after its last keep-alive.
    pub fn lease_duration(&mut self, d: Duration) -> Result<&mut Config> {
        self.set_duration("session.lease-duration", d)
    }
    /// `session.renew-interval`: the keep-alive period (default lease-duration / 3).
    pub fn renew_interval(&mut self, d: Duration) -> Result<&mut Config> {
        self.set_duration("session.renew-interval", d)
    }
    /// `session.margin`: subtracted from every deadline.
    pub fn margin(&mut self, d: Duration) -> Result<&mut Config> {
        self.set_duration("session.margin", d)
    }
    /// `session.retry-jitter`: candidates retry after renew-interval / 2 + random [0, jitter).
    pub fn retry_jitter(&mut self, d: Duration) -> Result<&mut Config> {
        self.set_duration("session.retry-jitter", d)
    }
    /// `session.min-backoff`: least backoff after a failed keep-alive.
    pub fn min_backoff(&mut self, d: Duration) -> Result<&mut Config> {
        self.set_duration("session.min-backoff", d)
    }
    /// `session.drift`: clock rate bound, in [0, 0.5).
    pub fn drift(&mut self, drift: f64) -> Result<&mut Config> {
        self.set("session.drift", &drift.to_string())
    }
    /// `callback.threads`: size of the client's callback pool, 1..64.
    pub fn callback_threads(&mut self, n: u32) -> Result<&mut Config> {
        self.set("callback.threads", &n.to_string())
    }
    /// `callback.executor = direct`: callbacks run on the loop thread (must not block).
    pub fn direct_callbacks(&mut self) -> Result<&mut Config> {
        self.set("callback.executor", "direct")
    }
    /// `client.name`: shown in snapshots and backend status.
    pub fn client_name(&mut self, name: &str) -> Result<&mut Config> {
        self.set("client.name", name)
    }

    /// Sends the client's log lines at or above `min_level` to `log`, called on
    /// the loop thread (it must not block). Clients opened with this config
    /// keep the logger until they are closed.
    pub fn logger<F>(&mut self, min_level: LogLevel, log: F) -> Result<&mut Config>
    where
        F: FnMut(LogLevel, &str) + Send + 'static,
    {
        unsafe extern "C" fn tramp(ud: *mut c_void, level: c_int, msg: *const c_char) {
            let f = &*(ud as *const LogFn);
            run_callback("logger", || {
                let m = CStr::from_ptr(msg).to_string_lossy();
                (lock(f))(LogLevel::from_raw(level), &m);
            });
        }
        let f: Arc<LogFn> = Arc::new(Mutex::new(Box::new(log)));
        check(unsafe {
            sys::simba_config_set_logger(self.raw, Some(tramp), Arc::as_ptr(&f) as *mut c_void, min_level.raw())
        })?;
        self.hooks.logger = Some(f);
        Ok(self)
    }

    /// Runs callbacks on the host's executor: `submit` gets each [`Job`] and
    /// must run it exactly once, later, on a thread of its choice, returning
    /// `Ok(())`; `Err(job)` rejects it (the job is then not run). `submit` is
    /// called from library threads and must not block.
    pub fn executor<F>(&mut self, submit: F) -> Result<&mut Config>
    where
        F: Fn(Job) -> std::result::Result<(), Job> + Send + Sync + 'static,
    {
        unsafe extern "C" fn tramp(
            ctx: *mut c_void,
            run: Option<unsafe extern "C" fn(*mut c_void)>,
            arg: *mut c_void,
        ) -> c_int {
            let f = &*(ctx as *const SubmitFn);
            // Not marked as a callback: submit runs on the loop thread itself.
            let saved = SUBMITTING.with(|s| s.replace((arg, false)));
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(Job { run, arg })));
            let dropped = SUBMITTING.with(|s| s.replace(saved)).1;
            match r {
                Ok(Err(mut job)) => {
                    job.run = None; // rejected: must not run
                    -1
                }
                // Dropped (also while unwinding) inside submit: rejected.
                _ if dropped => -1,
                // Accepted (or kept by the host before it panicked): it will run.
                Ok(Ok(())) => 0,
                Err(_) => {
                    let _ = std::panic::catch_unwind(|| eprintln!("simba: panic in executor submit (contained)"));
                    0
                }
            }
        }
        let f: Arc<SubmitFn> = Arc::new(Box::new(submit));
        check(unsafe { sys::simba_config_set_executor(self.raw, Some(tramp), Arc::as_ptr(&f) as *mut c_void) })?;
        self.hooks.executor = Some(f);
        Ok(self)
    }

    /// The event sink every client opened with this config starts with
    /// (`simba_config_set_event_sink`): unlike [`Client::on_event`](crate::Client::on_event),
    /// it also sees the first `SessionOpened`. Events of every client opened
    /// with this config (or a clone) come to this one closure, one at a time;
    /// a client's `on_event` replaces it for that client.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use std::sync::mpsc;
    /// let (tx, rx) = mpsc::channel();
    /// let mut cfg = simba::Config::new();
    /// cfg.event_sink(move |ev| {
    ///     let _ = tx.send(ev.kind);
    /// })?;
    /// let client = simba::Client::open_with("memory://doc-config-sink", &cfg)?;
    /// assert_eq!(rx.recv_timeout(Duration::from_secs(5)).unwrap(), simba::EventKind::SessionOpened);
    /// # Ok::<(), simba::Error>(())
    /// ```
    pub fn event_sink<F>(&mut self, sink: F) -> Result<&mut Config>
    where
        F: FnMut(&Event) + Send + 'static,
    {
        unsafe extern "C" fn tramp(ud: *mut c_void, kind: sys::simba_event_type_t, detail: *const c_char) {
            let f = &*(ud as *const ConfigSink);
            run_callback("event", || {
                let ev = Event::from_c(kind, detail);
                (lock(f))(&ev);
            });
        }
        let f: Arc<ConfigSink> = Arc::new(Mutex::new(Box::new(sink)));
        check(unsafe { sys::simba_config_set_event_sink(self.raw, Some(tramp), Arc::as_ptr(&f) as *mut c_void) })?;
        self.hooks.event_sink = Some(f);
        Ok(self)
    }

    /// Checks the seed's cross-field rules (renew-interval × 2 ≤ lease-duration, ...).
    pub fn validate(&self) -> Result<()> {
        check(unsafe { sys::simba_config_validate(self.raw) })
    }
}

impl Default for Config {
    fn default() -> Config {
        Config::new()
    }
}

impl Clone for Config {
    /// An independent copy (`toBuilder()`), sharing the logger and executor.
    fn clone(&self) -> Config {
        let mut raw = std::ptr::null_mut();
        let rc = unsafe { sys::simba_config_copy(&mut raw, self.raw) };
        if rc != sys::SIMBA_OK || raw.is_null() {
            let _ = Error::last(rc);
            std::alloc::handle_alloc_error(std::alloc::Layout::new::<usize>());
        }
        Config { raw, hooks: self.hooks.clone(), _not_sync: std::marker::PhantomData }
    }
}

impl Drop for Config {
    fn drop(&mut self) {
        unsafe { sys::simba_config_free(self.raw) };
    }
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("Config");
        for k in ["session.lease-duration", "session.renew-interval", "session.margin"] {
            if let Ok(v) = self.get_duration(k) {
                d.field(k, &v);
            }
        }
        d.finish_non_exhaustive()
    }
}
