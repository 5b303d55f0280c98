//! Clients, errors, locks and terms, on memory:// and every real server set.
mod common;
use common::*;
use simba::{ErrorKind, RevokeReason, SessionStatus};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[test]
fn open_status_snapshot_close() {
    for (label, url) in backends("open") {
        let c = open(&url);
        assert_eq!(c.status(), SessionStatus::Live, "{label}");
        let snap = c.snapshot_json().unwrap();
        assert!(snap.contains("\"session\""), "{label}: {snap}");
        c.close().unwrap();
    }
}

#[test]
fn errors_carry_kind_and_detail() {
    let e = simba::Client::open("bogus://x").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported);
    assert_eq!(e.code(), simba::sys::SIMBA_EUNSUPPORTED);
    let e = simba::Client::open("no scheme").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(!e.message().is_empty());
    assert!(e.to_string().contains("EINVAL"), "{e}");

    let c = simba::Client::open("memory://rs-errors").unwrap();
    for bad in ["", ".", "..", "has space", "slash/name"] {
        let e = c.try_lock(bad).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{bad:?}");
    }
    let long = "x".repeat(129);
    assert_eq!(c.lock(&long, Duration::ZERO).unwrap_err().kind(), ErrorKind::InvalidArgument);
    // An interior NUL never reaches C.
    assert_eq!(c.try_lock("a\0b").unwrap_err().kind(), ErrorKind::InvalidArgument);

    let mut cfg = simba::Config::new();
    let e = cfg.set("no.such.key", "1").map(|_| ()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.message().contains("no.such.key"), "{}", e.message());
    cfg.lease_duration(Duration::from_secs(1)).unwrap().renew_interval(Duration::from_millis(600)).unwrap();
    let e = cfg.validate().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert_eq!(simba::Client::open_with("memory://rs-errors2", &cfg).unwrap_err().kind(), ErrorKind::InvalidArgument);
}

#[test]
fn config_values_round_trip() {
    let mut cfg = simba::Config::new();
    assert_eq!(cfg.get_duration("session.lease-duration").unwrap(), Duration::from_secs(15));
    assert_eq!(cfg.get_duration("session.renew-interval").unwrap(), Duration::from_secs(5));
    cfg.drift(0.02).unwrap().callback_threads(3).unwrap().margin(Duration::from_micros(1500)).unwrap();
    assert_eq!(cfg.get_f64("session.drift").unwrap(), 0.02);
    assert_eq!(cfg.get_f64("callback.threads").unwrap(), 3.0);
    // Sub-millisecond values round up, never down to zero.
    assert_eq!(cfg.get_duration("session.margin").unwrap(), Duration::from_millis(2));
    let copy = cfg.clone();
    cfg.margin(Duration::from_millis(7)).unwrap();
    assert_eq!(copy.get_duration("session.margin").unwrap(), Duration::from_millis(2));
    assert_eq!(cfg.get_duration("session.drift").unwrap_err().kind(), ErrorKind::InvalidArgument);
}

#[test]
fn lock_unlock_and_tokens_increase() {
    for (label, url) in backends("lock") {
        let c = open(&url);
        let n = name("lock");
        let a = c.lock(&n, WAIT).unwrap();
        assert_eq!(a.name(), n);
        assert!(a.is_valid(), "{label}");
        assert!(a.remaining() > Duration::ZERO && a.remaining() <= LEASE, "{label}: {:?}", a.remaining());
        assert_eq!(a.revoke_reason(), None);
        let kept = a.term().clone();
        assert_eq!(&kept, a.term());
        let io: std::io::Error = c.try_lock(&n).map(|_| ()).unwrap_err().into();
        assert_eq!(io.kind(), std::io::ErrorKind::ResourceBusy, "{label}");
        let t1 = a.token();
        a.unlock().unwrap();
        assert!(!kept.is_valid());
        assert_eq!(kept.revoke_reason(), Some(RevokeReason::Stopped), "{label}");
        assert_eq!(kept.ensure_valid(Duration::ZERO).unwrap_err().kind(), ErrorKind::Expired);
        let b = c.try_lock(&n).unwrap();
        assert!(b.token() > t1, "{label}: {} then {}", t1, b.token());
        drop(b); // drop releases too
        let b2 = c.try_lock(&n).unwrap();
        b2.unlock().unwrap();
    }
}

#[test]
fn second_client_is_busy_and_times_out_then_acquires() {
    for (label, url) in backends("busy") {
        let a = open(&url);
        let b = open(&url);
        let n = name("busy");
        let held = a.lock(&n, WAIT).unwrap();
        assert_eq!(b.try_lock(&n).unwrap_err().kind(), ErrorKind::Busy, "{label}");
        let t0 = Instant::now();
        assert_eq!(b.lock(&n, Duration::from_millis(200)).unwrap_err().kind(), ErrorKind::TimedOut, "{label}");
        assert!(t0.elapsed() >= Duration::from_millis(190), "{label}: {:?}", t0.elapsed());
        // A waiter gets the lock once it is released.
        std::thread::scope(|s| {
            let w = s.spawn(|| b.lock(&n, WAIT).map(|t| t.token()));
            std::thread::sleep(Duration::from_millis(50));
            let tok = held.token();
            held.unlock().unwrap();
            let t2 = w.join().unwrap().unwrap();
            assert!(t2 > tok, "{label}");
        });
    }
}

#[test]
fn locks_of_one_client_queue() {
    for (label, url) in backends("queue") {
        let c = open(&url);
        let n = name("queue");
        let first = c.lock(&n, WAIT).unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        std::thread::scope(|s| {
            let o = order.clone();
            let (c, n) = (&c, &n);
            let h = s.spawn(move || {
                let t = c.lock(n, WAIT).unwrap();
                o.lock().unwrap().push("second");
                t.unlock().unwrap();
            });
            std::thread::sleep(Duration::from_millis(100));
            order.lock().unwrap().push("first-release");
            first.unlock().unwrap();
            h.join().unwrap();
        });
        assert_eq!(*order.lock().unwrap(), vec!["first-release", "second"], "{label}");
    }
}

#[test]
fn lock_async_delivers_once() {
    for (label, url) in backends("async") {
        let a = open(&url);
        let b = open(&url);
        let n = name("async");
        let (tx, rx) = mpsc::channel();
        let tx2 = tx.clone();
        a.lock_async(&n, WAIT, move |r| tx.send(r.map(|t| t.term().clone()).map_err(|e| e.kind())).unwrap()).unwrap();
        let term = rx.recv_timeout(WAIT).unwrap().unwrap();
        // The LockTerm was dropped inside the callback: that released it.
        assert!(wait_until(WAIT, || term.revoke_reason() == Some(RevokeReason::Stopped)), "{label}");
        let held = a.lock(&n, WAIT).unwrap();
        b.lock_async(&n, Duration::from_millis(150), move |r| {
            tx2.send(r.map(|t| t.term().clone()).map_err(|e| e.kind())).unwrap()
        })
        .unwrap();
        assert_eq!(rx.recv_timeout(WAIT).unwrap().unwrap_err(), ErrorKind::TimedOut, "{label}");
        held.unlock().unwrap();
        // Cancelled by close.
        let held = a.lock(&n, WAIT).unwrap();
        let (tx3, rx3) = mpsc::channel();
        b.lock_async(&n, Duration::MAX, move |r| tx3.send(r.map(|_| ()).map_err(|e| e.kind())).unwrap()).unwrap();
        b.close().unwrap();
        assert_eq!(rx3.recv_timeout(WAIT).unwrap().unwrap_err(), ErrorKind::Canceled, "{label}");
        assert!(rx3.recv_timeout(Duration::from_millis(50)).is_err(), "{label}: ran twice");
        held.unlock().unwrap();
    }
}

#[test]
fn on_revoked_runs_exactly_once_and_closure_is_freed() {
    for (label, url) in backends("onrev") {
        let c = open(&url);
        let held = c.lock(&name("onrev"), WAIT).unwrap();
        let token = Arc::new(());
        let (tx, rx) = mpsc::channel();
        let t2 = token.clone();
        held.on_revoked(move |t, reason| {
            let _keep = &t2;
            tx.send((t.token(), reason)).unwrap();
        })
        .unwrap();
        let tok = held.token();
        held.unlock().unwrap();
        assert_eq!(rx.recv_timeout(WAIT).unwrap(), (tok, RevokeReason::Stopped), "{label}");
        assert!(wait_until(WAIT, || Arc::strong_count(&token) == 1), "{label}: closure not freed");
    }
}

#[test]
fn term_wait_and_fd_see_revocation() {
    for (label, url) in backends("wait") {
        let c = open(&url);
        let held = c.lock(&name("wait"), WAIT).unwrap();
        let term = held.term().clone();
        assert!(!term.wait_revoked(Duration::from_millis(30)).unwrap(), "{label}");
        let fd = std::os::fd::AsRawFd::as_raw_fd(&term.revoke_fd().unwrap());
        assert!(fd >= 0);
        std::thread::scope(|s| {
            let h = s.spawn(|| term.wait_revoked(Duration::MAX).unwrap());
            std::thread::sleep(Duration::from_millis(30));
            held.unlock().unwrap();
            assert!(h.join().unwrap());
        });
        let fd2 = std::os::fd::AsRawFd::as_raw_fd(&term.revoke_fd().unwrap());
        assert_eq!(fd, fd2);
    }
}

#[test]
fn close_revokes_locks_and_term_outlives_client() {
    for (label, url) in backends("close") {
        let c = open(&url);
        let other = open(&url);
        let n = name("close");
        let held = c.lock(&n, WAIT).unwrap();
        let term = held.term().clone();
        drop(c);
        assert_eq!(term.revoke_reason(), Some(RevokeReason::Stopped), "{label}");
        assert!(!term.is_valid());
        assert_eq!(term.on_revoked(|_, _| {}).unwrap_err().kind(), ErrorKind::Closed, "{label}");
        // The session closed: the lease is free at once.
        let t = other.try_lock(&n).unwrap();
        assert!(t.token() > term.token());
        drop(held); // releasing after close only drops the reference
    }
}

#[test]
fn events_are_delivered_in_order() {
    for (label, url) in backends("events") {
        let c = simba::Client::open_with(&url, &config()).unwrap();
        let (tx, rx) = mpsc::channel();
        // The sink can only be set once the client is open: SessionOpened may
        // already have been delivered (to no sink) by then.
        c.on_event(move |e| {
            let _ = tx.send(e.clone());
        })
        .unwrap();
        c.wait_live(WAIT).unwrap();
        c.close().unwrap();
        // Every event was delivered before close returned.
        let kinds: Vec<_> = rx.try_iter().map(|e| e.kind).collect();
        assert_eq!(kinds.last(), Some(&simba::EventKind::SessionClosed), "{label}: {kinds:?}");
        assert!(kinds[..kinds.len() - 1].iter().all(|k| *k == simba::EventKind::SessionOpened), "{label}: {kinds:?}");
    }
}

#[test]
fn event_sink_can_be_replaced_from_inside_itself() {
    let c = Arc::new(open("memory://rs-sink-replace"));
    let (tx, rx) = mpsc::channel();
    let c2 = Arc::downgrade(&c);
    let tx1 = tx.clone();
    c.on_event(move |e| {
        tx1.send(("first", e.kind)).unwrap();
        if let Some(c) = c2.upgrade() {
            let tx2 = tx.clone();
            c.on_event(move |e| tx2.send(("second", e.kind)).unwrap()).unwrap();
        }
    })
    .unwrap();
    // The sink may hold an upgraded reference for a moment.
    let mut c = c;
    let c = loop {
        match Arc::try_unwrap(c) {
            Ok(c) => break c,
            Err(again) => {
                c = again;
                std::thread::yield_now();
            }
        }
    };
    c.close().unwrap();
    let got: Vec<_> = rx.try_iter().collect();
    assert_eq!(got.first().map(|g| g.0), Some("first"), "{got:?}");
}

#[test]
fn inspect_reports_the_holder() {
    for (label, url) in backends("inspect") {
        let c = open(&url);
        let n = name("inspect");
        let held = c.lock(&n, WAIT).unwrap();
        let json = c.inspect_json(&[n.as_str()], WAIT).unwrap();
        assert!(json.contains(&n), "{label}: {json}");
        assert!(
            json.contains(&format!("\"token\":{}", held.token()))
                || json.contains(&format!("\"token\": {}", held.token())),
            "{label}: {json}"
        );
        held.unlock().unwrap();
    }
}

#[test]
fn logger_receives_lines() {
    let lines = Arc::new(Mutex::new(Vec::<(simba::LogLevel, String)>::new()));
    let mut cfg = config();
    let l = lines.clone();
    cfg.logger(simba::LogLevel::Info, move |lvl, msg| l.lock().unwrap().push((lvl, msg.to_string()))).unwrap();
    // Nothing listens on port 1: the client logs its failed connection attempts.
    let c = simba::Client::open_with("redis://127.0.0.1:1", &cfg).unwrap();
    drop(cfg); // the client keeps the logger alive
    assert!(wait_until(WAIT, || !lines.lock().unwrap().is_empty()), "no log line");
    assert_eq!(c.status(), SessionStatus::Opening);
    c.close().unwrap();
    let lines = lines.lock().unwrap();
    assert!(
        lines.iter().all(|(lvl, m)| *lvl >= simba::LogLevel::Info && !m.is_empty() && !m.contains('\n')),
        "{lines:?}"
    );
}

#[test]
fn timed_out_lock_leaves_no_waiter_behind() {
    // An acquire that timed out must not stay queued: once the holder lets
    // go, a try_lock of the same client gets the name at once.
    for (label, url) in backends("abandon") {
        let a = open(&url);
        let b = open(&url);
        let n = name("abandon");
        let held = a.lock(&n, WAIT).unwrap();
        for _ in 0..2 {
            let e = b.lock(&n, Duration::from_millis(300)).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::TimedOut, "{label}: {e}");
        }
        held.unlock().unwrap();
        // The backend may answer the abandoned attempt late (for at most two
        // call timeouts, see the contract); within that, try_lock must succeed.
        let mut last = None;
        let got = wait_until(WAIT, || match b.try_lock(&n) {
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
        // And the first client can take it back.
        a.lock(&n, WAIT).unwrap().unlock().unwrap();
    }
}

#[test]
fn with_lock_releases_after_return_and_panic() {
    for (label, url) in backends("with") {
        let c = open(&url);
        let n = name("with");
        let (tok, valid) = c.with_lock(&n, WAIT, |t| (t.token(), t.is_valid())).unwrap();
        assert!(tok > 0 && valid, "{label}");
        let other = open(&url);
        other.try_lock(&n).unwrap().unlock().unwrap();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            c.with_lock(&n, WAIT, |_| panic!("work failed")).unwrap();
        }));
        assert!(r.is_err(), "{label}");
        // Released by the unwinding guard: free for another client.
        let t = other.try_lock(&n).unwrap_or_else(|e| panic!("{label}: still held after a panic: {e}"));
        assert!(t.token() > tok, "{label}");
        t.unlock().unwrap();
        // A lock already held elsewhere times out without running the closure.
        let held = other.lock(&n, WAIT).unwrap();
        let mut ran = false;
        let e = c.with_lock(&n, Duration::from_millis(200), |_| ran = true).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TimedOut, "{label}");
        assert!(!ran, "{label}");
        held.unlock().unwrap();
    }
}

#[test]
fn locks_exclude_across_threads_and_clients() {
    use std::sync::atomic::{AtomicBool, Ordering};
    for (label, url) in backends("mutex") {
        let clients = [open(&url), open(&url)];
        let n = name("mutex");
        let inside = AtomicBool::new(false);
        let tokens = Mutex::new(Vec::new());
        std::thread::scope(|s| {
            for c in &clients {
                for _ in 0..2 {
                    s.spawn(|| {
                        for _ in 0..5 {
                            let t = c.lock(&n, WAIT).unwrap_or_else(|e| panic!("{label}: {e}"));
                            assert!(!inside.swap(true, Ordering::SeqCst), "{label}: two holders at once");
                            tokens.lock().unwrap().push(t.token());
                            std::thread::sleep(Duration::from_millis(2));
                            inside.store(false, Ordering::SeqCst);
                            t.unlock().unwrap();
                        }
                    });
                }
            }
        });
        let tokens = tokens.into_inner().unwrap();
        assert_eq!(tokens.len(), 20, "{label}");
        assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{label}: tokens not increasing: {tokens:?}");
    }
}

#[test]
fn lock_future_resolves_times_out_and_gives_up_when_dropped() {
    for (label, url) in backends("future") {
        let a = open(&url);
        let b = open(&url);
        let n = name("future");
        let held = block_on(a.lock_future(&n, WAIT).unwrap(), WAIT).expect("resolved").unwrap();
        assert!(held.is_valid(), "{label}");
        // Held elsewhere: pending, then TimedOut.
        let fut = b.lock_future(&n, Duration::from_millis(200)).unwrap();
        let e = block_on(fut, WAIT).expect("resolved").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TimedOut, "{label}");
        // A future dropped while waiting: the lock granted later is let go.
        let mut fut = Box::pin(b.lock_future(&n, WAIT).unwrap());
        assert!(block_on(fut.as_mut(), Duration::from_millis(50)).is_none(), "{label}: resolved while held");
        drop(fut);
        let tok = held.token();
        held.unlock().unwrap();
        let mut last = None;
        let freed = wait_until(WAIT, || match a.try_lock(&n) {
            Ok(t) => {
                assert!(t.token() > tok);
                t.unlock().unwrap();
                true
            }
            Err(e) => {
                last = Some(e);
                false
            }
        });
        assert!(freed, "{label}: the abandoned future kept the lock: {last:?}");
    }
}

#[test]
fn term_revoked_future_resolves_with_the_reason() {
    for (label, url) in backends("revfut") {
        let c = open(&url);
        let held = c.lock(&name("revfut"), WAIT).unwrap();
        let term = held.term().clone();
        let mut revoked = Box::pin(term.revoked().unwrap());
        assert!(block_on(revoked.as_mut(), Duration::from_millis(50)).is_none(), "{label}: resolved while held");
        held.unlock().unwrap();
        assert_eq!(block_on(revoked.as_mut(), WAIT), Some(RevokeReason::Stopped), "{label}");
        // Polled again, it stays resolved.
        assert_eq!(block_on(revoked.as_mut(), WAIT), Some(RevokeReason::Stopped), "{label}");
        // On a revoked term of a closed client, it resolves at once.
        c.close().unwrap();
        assert_eq!(block_on(term.revoked().unwrap(), WAIT), Some(RevokeReason::Stopped), "{label}");
    }
}

/// Semaphores (1.5): the size holds for everyone (a client's own permits
/// count), tokens increase across permits, another size is refused by name, a
/// lock of the name is another resource, a waiter gets a released permit.
#[test]
fn semaphore_permits() {
    use simba::TermKind;
    for (label, url) in backends("sem") {
        let (a, b) = (open(&url), open(&url));
        let n = name("sem");
        let p1 = a.acquire_semaphore(&n, 2, WAIT).unwrap();
        let p2 = a.try_acquire_semaphore(&n, 2).unwrap();
        assert_eq!(p1.term().kind(), TermKind::Semaphore, "{label}");
        assert_eq!(p1.term().name(), n);
        assert!(p1.term().token() > 0 && p2.term().token() > p1.term().token(), "{label}");
        for c in [&a, &b] {
            assert_eq!(c.try_acquire_semaphore(&n, 2).unwrap_err().kind(), ErrorKind::Busy, "{label}");
        }
        let e = b.acquire_semaphore(&n, 3, WAIT).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::State, "{label}");
        assert!(e.message().contains("has 2 permits, not 3"), "{label}: {e}");
        let l = b.try_lock(&n).unwrap();
        assert_eq!(l.term().kind(), TermKind::Lock);
        l.unlock().unwrap();
        // The async form: the refused size's detail, then a permit freed under it.
        let (tx, rx) = mpsc::channel();
        let tx2 = tx.clone();
        b.acquire_semaphore_async(&n, 4, WAIT, move |r| tx2.send(r).unwrap()).unwrap();
        let e = rx.recv_timeout(WAIT).unwrap().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::State, "{label}");
        assert!(e.message().contains("has 2 permits, not 4"), "{label}: {e}");
        b.acquire_semaphore_async(&n, 2, WAIT, move |r| tx.send(r).unwrap()).unwrap();
        let top = p2.term().token();
        let gone = p1.term().clone();
        p1.unlock().unwrap();
        assert_eq!(gone.revoke_reason(), Some(RevokeReason::Stopped));
        let p3 = rx.recv_timeout(WAIT).unwrap().unwrap();
        assert!(p3.term().token() > top, "{label}");
        p2.unlock().unwrap();
        p3.unlock().unwrap();
        // No holder left: the next first holder fixes another size.
        b.try_acquire_semaphore(&n, 5).unwrap().unlock().unwrap();
        // A bounded wait ends with TimedOut.
        let full: Vec<_> = (0..2).map(|_| a.try_acquire_semaphore(&n, 2).unwrap()).collect();
        let began = Instant::now();
        assert_eq!(b.acquire_semaphore(&n, 2, Duration::from_millis(200)).unwrap_err().kind(), ErrorKind::TimedOut);
        assert!(began.elapsed() >= Duration::from_millis(150), "{label}");
        full.into_iter().for_each(|p| p.unlock().unwrap());
        assert_eq!(a.acquire_semaphore(&n, 0, WAIT).unwrap_err().kind(), ErrorKind::InvalidArgument);
    }
}

/// Read/write locks (1.5): readers share the name and carry the write epoch, a
/// writer excludes everyone and moves it, a waiting writer holds new readers
/// back, the async form.
#[test]
fn rwlock_modes_and_tokens() {
    use simba::{LockMode, TermKind};
    for (label, url) in backends("rw") {
        let (a, b) = (open(&url), open(&url));
        let n = name("rw");
        let r1 = a.rwlock(&n, LockMode::Read, WAIT).unwrap();
        let r2 = b.try_rwlock(&n, LockMode::Read).unwrap();
        assert_eq!(r1.term().kind(), TermKind::Read, "{label}");
        assert_eq!((r1.term().token(), r2.term().token()), (0, 0), "{label}");
        assert_eq!(b.try_rwlock(&n, LockMode::Write).unwrap_err().kind(), ErrorKind::Busy);
        r1.unlock().unwrap();
        r2.unlock().unwrap();
        let w = a.try_rwlock(&n, LockMode::Write).unwrap();
        assert_eq!(w.term().kind(), TermKind::Write);
        let wtok = w.term().token();
        assert!(wtok > 0, "{label}");
        for mode in [LockMode::Read, LockMode::Write] {
            assert_eq!(b.try_rwlock(&n, mode).unwrap_err().kind(), ErrorKind::Busy, "{label} {mode:?}");
        }
        w.unlock().unwrap();
        let r = b.rwlock(&n, LockMode::Read, WAIT).unwrap();
        assert_eq!(r.term().token(), wtok, "{label}");
        // A writer waiting behind the read holds new readers back.
        let (tx, rx) = mpsc::channel();
        a.rwlock_async(&n, LockMode::Write, WAIT, move |res| tx.send(res).unwrap()).unwrap();
        assert!(
            wait_until(WAIT, || match b.try_rwlock(&n, LockMode::Read) {
                Ok(x) => x.unlock().is_err(),
                Err(e) => e.kind() == ErrorKind::Busy,
            }),
            "{label}: the writer's intent"
        );
        r.unlock().unwrap();
        let w2 = rx.recv_timeout(WAIT).unwrap().unwrap();
        assert!(w2.term().token() > wtok, "{label}");
        w2.unlock().unwrap();
        assert_eq!(a.try_rwlock("bad name", LockMode::Read).unwrap_err().kind(), ErrorKind::InvalidArgument);
        assert_eq!(a.try_rwlock("a\0b", LockMode::Write).unwrap_err().kind(), ErrorKind::InvalidArgument);
    }
}

/// Term kinds by the library's names, unknown values included, and a closed
/// client's permits revoked.
#[test]
fn term_kinds_and_close() {
    use simba::{LockMode, TermKind};
    assert_eq!(TermKind::Election.to_string(), "ELECTION");
    assert_eq!(TermKind::Lock.to_string(), "LOCK");
    assert_eq!(TermKind::Semaphore.name(), "SEMAPHORE");
    assert_eq!(TermKind::Read.to_string(), "READ");
    assert_eq!(TermKind::Write.to_string(), "WRITE");
    assert_eq!(TermKind::Other(42).to_string(), "UNKNOWN(42)");
    assert_eq!(TermKind::Write.raw(), simba::sys::SIMBA_TERM_WRITE);
    let c = open(&backends("kinds")[0].1);
    let p = c.try_acquire_semaphore("k", 1).unwrap();
    let w = c.try_rwlock("k", LockMode::Write).unwrap(); // another namespace
    let terms = [p.term().clone(), w.term().clone()];
    c.close().unwrap();
    for t in terms {
        assert!(!t.is_valid());
        assert_eq!(t.revoke_reason(), Some(RevokeReason::Stopped), "{}", t.kind());
    }
    drop((p, w)); // after the close: nothing left to release
}
