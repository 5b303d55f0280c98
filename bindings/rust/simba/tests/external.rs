//! EXTERNAL loop mode, host executors, thread-safety markers, and two processes.
mod common;
use common::*;
use simba::{ErrorKind, RevokeReason};
use std::cell::RefCell;
use std::io::{BufRead, BufReader};
use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

type Seen = (ThreadId, &'static str, u64);

fn assert_send_sync<T: Send + Sync>() {}
fn assert_send<T: Send>() {}

// Compiles only while T is !Sync.
trait AmbiguousIfSync<A> {
    fn check() {}
}
impl<T: ?Sized> AmbiguousIfSync<()> for T {}
impl<T: ?Sized + Sync> AmbiguousIfSync<u8> for T {}

// Compiles only while T is !Send: with T: Send both impls apply and `_` is ambiguous.
trait AmbiguousIfSend<A> {
    fn check() {}
}
impl<T: ?Sized> AmbiguousIfSend<()> for T {}
impl<T: ?Sized + Send> AmbiguousIfSend<u8> for T {}

#[test]
fn thread_safety_markers() {
    assert_send_sync::<simba::Client>();
    assert_send_sync::<simba::Term>();
    assert_send_sync::<simba::LockTerm>();
    assert_send_sync::<simba::Election>();
    assert_send_sync::<simba::Task>();
    assert_send::<simba::Config>();
    assert_send::<simba::Job>();
    assert_send_sync::<simba::Completion>();
    assert_send_sync::<simba::Error>();
    <simba::ExternalClient as AmbiguousIfSend<_>>::check();
    <simba::ExternalClient as AmbiguousIfSync<_>>::check();
    <simba::Config as AmbiguousIfSync<_>>::check();
}

#[test]
fn thread_mode_open_refuses_external_config() {
    let mut cfg = simba::Config::new();
    cfg.set("loop.mode", "external").unwrap();
    let e = simba::Client::open_with("memory://rs-ext-refuse", &cfg).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    // And a plain client has no fd.
    let c = simba::ExternalClient::open_with("memory://rs-ext-refuse", &cfg).unwrap();
    assert!(c.as_raw_fd() >= 0);
}

/// Drives `c` until `done()` or the deadline; callbacks run in here.
fn drive(c: &simba::ExternalClient, timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + timeout;
    while !done() {
        if Instant::now() >= end {
            return false;
        }
        c.poll_once(Duration::from_millis(50)).unwrap();
    }
    true
}

#[test]
fn external_client_runs_callbacks_on_the_host_thread() {
    for (label, url) in backends("ext") {
        let c = simba::ExternalClient::open_with(&url, &config()).unwrap();
        let host = std::thread::current().id();
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let (s1, s2) = (seen.clone(), seen.clone());
        let e = c
            .election(
                &name("ext"),
                simba::listener(
                    move |t| s1.lock().unwrap().push((std::thread::current().id(), "elected", t.token())),
                    move |t, _| s2.lock().unwrap().push((std::thread::current().id(), "revoked", t.token())),
                ),
            )
            .unwrap();
        // Nothing runs until the host processes.
        assert!(drive(&c, WAIT, || !seen.lock().unwrap().is_empty()), "{label}");
        // A live session always has its keep-alive timer pending.
        let to = c.timeout().unwrap_or_else(|| panic!("{label}: no timer with a live session"));
        assert!(to <= LEASE, "{label}: {to:?}");
        // stop_wait on the host thread runs the loop itself.
        e.stop_wait(WAIT).unwrap();
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 2, "{label}: {seen:?}");
        assert!(seen.iter().all(|(tid, _, _)| *tid == host), "{label}");
        assert_eq!(seen[0].1, "elected");
        assert_eq!(seen[1].1, "revoked");
        // Locks from another thread are queued for the host.
        std::thread::scope(|s| {
            let cl: &simba::Client = &c;
            let n = name("ext.lock");
            let h = s.spawn(move || cl.lock(&n, WAIT).map(|t| t.token()));
            drive(&c, WAIT, || h.is_finished());
            assert!(h.join().unwrap().unwrap() > 0, "{label}");
        });
        c.close().unwrap();
    }
}

#[test]
fn external_timeout_reports_the_next_timer() {
    let c = simba::ExternalClient::open_with("memory://rs-ext-timer", &config()).unwrap();
    let t = c.lock("rs.ext.timer", WAIT).unwrap();
    // With a live session, a keep-alive timer is pending within a renew interval.
    let to = c.timeout().expect("a keep-alive timer");
    assert!(to <= LEASE, "{to:?}");
    t.unlock().unwrap();
    // Keep the session alive through the host loop for more than one lease.
    let until = Instant::now() + LEASE * 2;
    drive(&c, LEASE * 4, || Instant::now() >= until);
    assert_eq!(c.status(), simba::SessionStatus::Live);
}

#[test]
fn external_client_in_host_local_state() {
    // !Send handles live in host-thread state, e.g. an Rc.
    let c = Rc::new(simba::ExternalClient::open("memory://rs-ext-rc").unwrap());
    let log = Rc::new(RefCell::new(Vec::new()));
    let host = c.clone();
    let held = host.lock("rs.ext.rc", WAIT).unwrap();
    log.borrow_mut().push(held.token());
    assert_eq!(c.try_lock("rs.ext.rc").unwrap_err().kind(), ErrorKind::Busy);
    drop(held);
    let again = c.try_lock("rs.ext.rc").unwrap();
    assert!(again.token() > log.borrow()[0]);
}

#[test]
fn host_executor_runs_every_callback() {
    let (jobs_tx, jobs_rx) = mpsc::channel::<simba::Job>();
    let jobs_tx = Mutex::new(jobs_tx);
    let runner = std::thread::spawn(move || {
        let mut n = 0usize;
        for job in jobs_rx {
            job.run();
            n += 1;
        }
        n
    });
    let mut cfg = config();
    cfg.executor(move |job| jobs_tx.lock().unwrap().send(job).map_err(|e| e.0)).unwrap();
    let c = simba::Client::open_with("memory://rs-exec", &cfg).unwrap();
    drop(cfg);
    let (tx, rx) = mpsc::channel();
    let tx2 = tx.clone();
    let e = c
        .election(
            "rs.exec",
            simba::listener(
                move |_| tx.send(("elected", std::thread::current().name().map(String::from))).unwrap(),
                move |_, r| {
                    assert_eq!(r, RevokeReason::Stopped);
                    tx2.send(("revoked", None)).unwrap()
                },
            ),
        )
        .unwrap();
    assert_eq!(rx.recv_timeout(WAIT).unwrap().0, "elected");
    e.stop().unwrap().wait(WAIT).unwrap();
    assert_eq!(rx.recv_timeout(WAIT).unwrap().0, "revoked");
    drop(e);
    drop(c); // drops the executor closure and with it the sender
    let ran = runner.join().unwrap();
    assert!(ran >= 3, "jobs run on the host executor: {ran}");
}

/// The child side of `two_processes_fence_each_other`: holds a lock until killed.
#[test]
#[ignore = "child process of two_processes_fence_each_other"]
fn child_holds_lock() {
    let (Ok(url), Ok(n)) = (std::env::var("SIMBA_RS_CHILD_URL"), std::env::var("SIMBA_RS_CHILD_NAME")) else {
        return;
    };
    let c = open(&url);
    let t = c.lock(&n, WAIT).unwrap();
    // Straight to the fd: the test harness captures print!.
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    writeln!(out, "HELD {}", t.token()).unwrap();
    out.flush().unwrap();
    drop(out);
    std::thread::sleep(Duration::from_secs(60));
    unreachable!("the parent kills this process");
}

#[test]
fn two_processes_fence_each_other() {
    for (label, url) in servers("twoproc") {
        let n = name("twoproc");
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "child_holds_lock", "--ignored", "--nocapture", "--test-threads=1"])
            .env("SIMBA_RS_CHILD_URL", &url)
            .env("SIMBA_RS_CHILD_NAME", &n)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        struct KillOnDrop(std::process::Child);
        impl Drop for KillOnDrop {
            fn drop(&mut self) {
                let _ = self.0.kill();
                let _ = self.0.wait();
            }
        }
        let stdout = child.stdout.take().unwrap();
        let mut child = KillOnDrop(child);
        let mut out = BufReader::new(stdout);
        let mut child_token = None;
        let mut line = String::new();
        while out.read_line(&mut line).unwrap() > 0 {
            // libtest prints "test child_holds_lock ... " before the output, without a newline.
            if let Some(t) = line.split("HELD ").nth(1) {
                let t = t.trim();
                child_token = Some(t.parse::<u64>().unwrap_or_else(|_| panic!("bad line {line:?}")));
                break;
            }
            line.clear();
        }
        let child_token = child_token.unwrap_or_else(|| panic!("{label}: child never held the lock"));
        let c = open(&url);
        assert_eq!(c.try_lock(&n).unwrap_err().kind(), ErrorKind::Busy, "{label}");
        // The child dies without closing: its lease frees when its session expires.
        child.0.kill().unwrap();
        child.0.wait().unwrap();
        let t0 = Instant::now();
        let t = c.lock(&n, WAIT).unwrap();
        assert!(t.token() > child_token, "{label}");
        assert!(t0.elapsed() < WAIT, "{label}");
        t.unlock().unwrap();
    }
}

#[test]
fn executor_dropping_jobs_in_submit_rejects_them() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let submitted = Arc::new(AtomicUsize::new(0));
    let s2 = submitted.clone();
    let mut cfg = config();
    cfg.executor(move |job| {
        s2.fetch_add(1, Ordering::SeqCst);
        drop(job); // rejected, not run inline
        Ok(())
    })
    .unwrap();
    let c = simba::Client::open_with("memory://rs-exec-reject", &cfg).unwrap();
    c.wait_live(WAIT).unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    let (r1, r2) = (ran.clone(), ran.clone());
    let e = c
        .election(
            "rs.exec.reject",
            simba::listener(
                move |_| {
                    r1.fetch_add(1, Ordering::SeqCst);
                },
                move |_, _| {
                    r2.fetch_add(1, Ordering::SeqCst);
                },
            ),
        )
        .unwrap();
    assert!(wait_until(WAIT, || submitted.load(Ordering::SeqCst) > 0), "submit never called");
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(ran.load(Ordering::SeqCst), 0, "a rejected job ran");
    // The engine itself goes on: locks need no callback.
    c.lock("rs.exec.reject.lock", WAIT).unwrap().unlock().unwrap();
    drop(e);
    c.close().unwrap();
}

#[test]
fn external_timed_out_lock_leaves_no_waiter_behind() {
    for (label, url) in backends("extabandon") {
        let other = open(&url);
        let c = simba::ExternalClient::open_with(&url, &config()).unwrap();
        c.wait_live(WAIT).unwrap();
        let n = name("extabandon");
        let held = other.lock(&n, WAIT).unwrap();
        let e = c.lock(&n, Duration::from_millis(300)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TimedOut, "{label}: {e}");
        // Still held elsewhere: Busy, and not because of the abandoned waiter.
        let busy = c.try_lock(&n).unwrap_err();
        assert_eq!(busy.kind(), ErrorKind::Busy, "{label}: {busy}");
        held.unlock().unwrap();
        let mut last = None;
        let got = drive(&c, WAIT, || match c.try_lock(&n) {
            Ok(t) => {
                t.unlock().unwrap();
                true
            }
            Err(e) => {
                last = Some(e);
                false
            }
        });
        assert!(got, "{label}: try_lock after an abandoned acquire: {last:?}");
        c.close().unwrap();
    }
}

/// CLOCK_MONOTONIC in ns: one clock for every process of this machine.
fn mono_ns() -> i64 {
    // struct timespec of 64-bit Linux.
    #[repr(C)]
    struct Timespec {
        sec: i64,
        nsec: i64,
    }
    extern "C" {
        fn clock_gettime(clk: i32, ts: *mut Timespec) -> i32;
    }
    let mut ts = Timespec { sec: 0, nsec: 0 };
    assert_eq!(unsafe { clock_gettime(1, &mut ts) }, 0);
    ts.sec * 1_000_000_000 + ts.nsec
}

fn say(line: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").unwrap();
    out.flush().unwrap();
}

/// The child side of `two_processes_hand_over_leadership`: leads until its
/// stdin closes, then closes cleanly.
#[test]
#[ignore = "child process of two_processes_hand_over_leadership"]
fn child_leads() {
    let (Ok(url), Ok(n)) = (std::env::var("SIMBA_RS_CHILD_URL"), std::env::var("SIMBA_RS_CHILD_NAME")) else {
        return;
    };
    let c = open(&url);
    let task = c
        .run_while_leader(&n, |t| {
            say(&format!("LEADER {}", t.token()));
            t.wait_revoked(Duration::MAX).unwrap();
            std::thread::sleep(Duration::from_millis(100)); // finishing the step
            say(&format!("EXIT {}", mono_ns()));
        })
        .unwrap();
    let mut sink = String::new();
    let _ = std::io::Read::read_to_string(&mut std::io::stdin(), &mut sink);
    task.close().unwrap();
    c.close().unwrap();
    say("CLOSED 0");
}

#[test]
fn two_processes_hand_over_leadership() {
    for (label, url) in servers("handover") {
        let n = name("handover");
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "child_leads", "--ignored", "--nocapture", "--test-threads=1"])
            .env("SIMBA_RS_CHILD_URL", &url)
            .env("SIMBA_RS_CHILD_NAME", &n)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        struct KillOnDrop(std::process::Child);
        impl Drop for KillOnDrop {
            fn drop(&mut self) {
                let _ = self.0.kill();
                let _ = self.0.wait();
            }
        }
        let mut child = KillOnDrop(child);
        let (ltx, lines) = mpsc::channel::<String>();
        let reader = std::thread::spawn(move || {
            for l in BufReader::new(stdout).lines() {
                let Ok(l) = l else { break };
                if ltx.send(l).is_err() {
                    break;
                }
            }
        });
        let field = |tag: &str| -> i64 {
            let end = Instant::now() + WAIT;
            while let Some(left) = end.checked_duration_since(Instant::now()) {
                let Ok(l) = lines.recv_timeout(left) else { break };
                if let Some(v) = l.split(&format!("{tag} ")).nth(1) {
                    return v.trim().parse().unwrap_or_else(|_| panic!("bad line {l:?}"));
                }
            }
            panic!("{label}: the child never said {tag}");
        };
        let child_token = field("LEADER") as u64;

        let c = open(&url);
        let (etx, elected) = mpsc::channel();
        let e = c.election(&n, simba::listener(move |t| etx.send((t.token(), mono_ns())).unwrap(), |_, _| {})).unwrap();
        // While the child leads, this node is only a candidate.
        assert!(elected.recv_timeout(LEASE * 2).is_err(), "{label}: two leaders");
        assert!(!e.is_leader(), "{label}");
        // Clean stop of the child: its work returns, then the lease is handed over.
        drop(stdin);
        let (token, elected_at) = elected.recv_timeout(WAIT).unwrap_or_else(|_| panic!("{label}: never elected"));
        let exited_at = field("EXIT");
        assert!(
            exited_at <= elected_at,
            "{label}: elected {} us before the old work returned",
            (exited_at - elected_at) / 1000
        );
        assert!(token > child_token, "{label}: {token} <= {child_token}");
        field("CLOSED");
        assert!(child.0.wait().unwrap().success(), "{label}: child failed");
        reader.join().unwrap();
        e.stop_wait(WAIT).unwrap();
    }
}
