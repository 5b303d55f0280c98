//! Helpers of the integration tests: the backends to run on, unique names,
//! short leases, bounded waits.
#![allow(dead_code)]
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub const LEASE: Duration = Duration::from_millis(900);
/// Generous bound for anything that should happen within a few renew periods.
pub const WAIT: Duration = Duration::from_secs(15);

/// memory:// always, and each real server whose SIMBA_TEST_*_URL is set.
pub fn backends(tag: &str) -> Vec<(&'static str, String)> {
    let mut v = vec![("memory", format!("memory://rs-{tag}-{}", std::process::id()))];
    for (label, var) in [
        ("redis", "SIMBA_TEST_REDIS_URL"),
        ("postgres", "SIMBA_TEST_POSTGRES_URL"),
        ("zookeeper", "SIMBA_TEST_ZOOKEEPER_URL"),
    ] {
        match std::env::var(var) {
            Ok(u) if !u.is_empty() => v.push((label, u)),
            _ => skip_notice(var, label),
        }
    }
    v
}

/// Says once per test binary which backend is skipped, on the real stderr
/// (libtest captures `eprintln!`).
fn skip_notice(var: &str, label: &str) {
    use std::io::Write;
    static SAID: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
    if !said.iter().any(|v| v == var) {
        said.push(var.to_string());
        let _ = writeln!(std::io::stderr().lock(), "simba rust tests: {var} unset, skipping {label}");
    }
}

/// Only the real servers (for tests across processes).
pub fn servers(tag: &str) -> Vec<(&'static str, String)> {
    backends(tag).into_iter().filter(|(l, _)| *l != "memory").collect()
}

static SEQ: AtomicU64 = AtomicU64::new(0);

/// A lease name unique to this process and call.
pub fn name(tag: &str) -> String {
    format!("rs.{tag}.{}.{}", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed))
}

pub fn config() -> simba::Config {
    let mut c = simba::Config::new();
    c.lease_duration(LEASE).unwrap();
    c
}

pub fn open(url: &str) -> simba::Client {
    let c = simba::Client::open_with(url, &config()).unwrap_or_else(|e| panic!("open {url}: {e}"));
    c.wait_live(WAIT).unwrap_or_else(|e| panic!("wait_live {url}: {e}"));
    c
}

/// Polls `cond` until it holds or `timeout` passed; returns whether it held.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A minimal executor: polls `f` on this thread until it is ready or
/// `timeout` passed (`None`), parking between wake-ups.
pub fn block_on<F: std::future::Future>(f: F, timeout: Duration) -> Option<F::Output> {
    use std::task::{Context, Poll, Wake, Waker};
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.unpark()
        }
    }
    let waker = Waker::from(std::sync::Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    let end = Instant::now() + timeout;
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return Some(v);
        }
        let now = Instant::now();
        if now >= end {
            return None;
        }
        std::thread::park_timeout(end - now);
    }
}
