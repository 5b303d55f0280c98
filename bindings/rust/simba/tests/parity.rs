//! Issue 36's parity with the C ABI: NUL bytes refused in every string that
//! crosses into C, observers, metrics, the config's event sink, names from the
//! library (unknown values included), ended terms staying readable.
mod common;
use common::*;
use simba::{ErrorKind, EventKind, Holder, RevokeReason, SessionStatus};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// An InvalidArgument whose message says NUL and what the string was.
fn assert_nul<T: std::fmt::Debug>(r: simba::Result<T>, what: &str) {
    let e = r.expect_err(what);
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{what}: {e}");
    assert!(e.message().contains("NUL"), "{what}: {e}");
    assert!(e.message().contains(what), "{what}: {e}");
}

#[test]
fn nul_bytes_are_refused_in_every_string() {
    // URLs.
    assert_nul(simba::Client::open("memory://acc\0 b"), "backend URL");
    assert_nul(simba::ExternalClient::open("memory://acc\0 b"), "backend URL");
    assert_nul(simba::Client::open_with("memory://x\0", &simba::Config::new()), "backend URL");
    assert_nul(simba::backend_schema("postgresql://db/app\0?schema=x"), "backend URL");
    let e = simba::Client::open("memory://acc\0 b").unwrap_err();
    assert_eq!(e.message(), "backend URL contains a NUL byte at index 12");

    // Config keys and values (client.name among them).
    let mut cfg = simba::Config::new();
    assert_nul(cfg.set("session.lease-duration\0x", "1s").map(|_| ()), "config key");
    assert_nul(cfg.set("client.name", "node\0-2").map(|_| ()), "config value of client.name");
    assert_nul(cfg.client_name("a\0b").map(|_| ()), "config value of client.name");
    assert_nul(cfg.set_duration("session.margin\0", Duration::from_millis(5)).map(|_| ()), "config key");
    assert_nul(cfg.get_duration("session.margin\0"), "config key");
    assert_nul(cfg.get_f64("session.drift\0"), "config key");
    // Nothing was set by the refused calls: "a\0b" did not become "a".
    cfg.client_name("rs-nul").unwrap();
    assert_eq!(cfg.get_duration("session.lease-duration").unwrap(), Duration::from_secs(15));

    for (label, url) in backends("nul") {
        let c = open(&url);
        let n = name("nul");
        let held = c.lock(&n, WAIT).unwrap();
        let other = open(&url);
        // "N\0x" is not "N": another client gets InvalidArgument, never Busy.
        let with_nul = format!("{n}\0-tenant-2");
        for r in [other.try_lock(&with_nul).map(|_| ()), other.lock(&with_nul, Duration::ZERO).map(|_| ())] {
            assert_nul(r, "lease name");
        }
        let e = other.try_lock(&with_nul).unwrap_err();
        assert!(e.message().contains(&format!("index {}", n.len())), "{label}: {e}");
        assert_nul(other.lock_async(&with_nul, WAIT, |_| {}), "lease name");
        assert_nul(other.lock_future(&with_nul, WAIT), "lease name");
        assert_nul(other.election(&with_nul, simba::listener(|_| {}, |_, _| {})), "lease name");
        assert_nul(other.run_while_leader(&with_nul, |_| {}), "lease name");
        assert_nul(other.schedule(&with_nul, Duration::ZERO, Duration::from_secs(1), |_| {}), "lease name");
        assert_nul(other.join_group("grp\0x", 2, |_| {}), "group name");
        assert_nul(other.observe(&with_nul, Duration::ZERO, |_| {}), "lease name");
        assert_nul(other.inspect_json(&[n.as_str(), with_nul.as_str()], WAIT), "lease name");
        assert_nul(simba::check_lease_name(&with_nul), "lease name");
        // The name itself is still held by the first client only.
        assert_eq!(other.try_lock(&n).unwrap_err().kind(), ErrorKind::Busy, "{label}");
        held.unlock().unwrap();
        other.try_lock(&n).unwrap().unlock().unwrap();
    }
}

#[test]
fn names_come_from_the_library_and_survive_unknown_values() {
    assert_eq!(RevokeReason::Stopped.to_string(), "STOPPED");
    assert_eq!(RevokeReason::SteppedDown.to_string(), "STEPPED_DOWN");
    assert_eq!(RevokeReason::DeadlinePassed.name(), "DEADLINE_PASSED");
    assert_eq!(RevokeReason::SessionExpired.name(), "SESSION_EXPIRED");
    assert_eq!(RevokeReason::TakenOver.to_string(), "TAKEN_OVER");
    assert_eq!(RevokeReason::from_raw(0), None);
    assert_eq!(RevokeReason::from_raw(9), Some(RevokeReason::Other(9)));
    assert_eq!(RevokeReason::Other(9).to_string(), "UNKNOWN(9)");
    assert_eq!(RevokeReason::Other(9).raw(), 9);
    for r in 1..=5 {
        assert_eq!(RevokeReason::from_raw(r).unwrap().raw(), r);
    }

    assert_eq!(SessionStatus::Live.to_string(), "LIVE");
    assert_eq!(SessionStatus::Opening.name(), "OPENING");
    assert_eq!(SessionStatus::Suspended.name(), "SUSPENDED");
    assert_eq!(SessionStatus::Closed.name(), "CLOSED");
    assert_eq!(SessionStatus::from_raw(7), SessionStatus::Other(7));
    assert_eq!(SessionStatus::from_raw(7).to_string(), "UNKNOWN(7)");

    assert_eq!(EventKind::SessionOpened.to_string(), "SESSION_OPENED");
    assert_eq!(EventKind::SessionLeaseShortened.name(), "SESSION_LEASE_SHORTENED");
    assert_eq!(EventKind::from_raw(6), EventKind::Other(6));
    assert_eq!(EventKind::Other(6).to_string(), "UNKNOWN(6)");
    for k in 0..=5 {
        assert_eq!(EventKind::from_raw(k).raw(), k);
    }

    assert_eq!(ErrorKind::Busy.to_string(), "EBUSY");
    assert_eq!(ErrorKind::from_code(-42), ErrorKind::Other(-42));
    assert_eq!(ErrorKind::Other(-42).to_string(), "UNKNOWN(-42)");
    // An error of a live call prints its code's name.
    let c = simba::Client::open("memory://rs-names").unwrap();
    let held = c.try_lock("rs.names").unwrap();
    let e = c.try_lock("rs.names").unwrap_err();
    assert!(e.to_string().contains("EBUSY"), "{e}");
    assert_eq!(c.status().to_string(), "LIVE");
    held.unlock().unwrap();
}

#[test]
fn ended_terms_stay_readable() {
    let c = simba::Client::open("memory://rs-ended").unwrap();
    let held = c.lock("rs.ended", WAIT).unwrap();
    let token = held.token();
    let kept = held.term().clone();
    held.unlock().unwrap();
    assert_eq!(kept.name(), "rs.ended");
    assert_eq!(kept.token(), token);
    assert!(!kept.is_valid());
    assert_eq!(kept.remaining(), Duration::ZERO);
    assert_eq!(kept.revoke_reason(), Some(RevokeReason::Stopped));
    assert_eq!(kept.ensure_valid(Duration::ZERO).unwrap_err().kind(), ErrorKind::Expired);
    c.close().unwrap();
    assert_eq!(kept.token(), token, "readable after the client closed too");
}

fn named(url: &str, client_name: &str) -> simba::Client {
    let mut cfg = config();
    cfg.client_name(client_name).unwrap();
    let c = simba::Client::open_with(url, &cfg).unwrap();
    c.wait_live(WAIT).unwrap();
    c
}

fn session_id(c: &simba::Client) -> String {
    let snap = c.snapshot_json().unwrap();
    let at = snap.find("\"id\":\"").expect(&snap) + 6;
    snap[at..at + snap[at..].find('"').unwrap()].to_string()
}

/// Waits for a report on `rx` that `pred` accepts; returns it.
fn seen(rx: &mpsc::Receiver<Holder>, what: &str, mut pred: impl FnMut(&Holder) -> bool) -> Holder {
    let end = std::time::Instant::now() + WAIT;
    let mut log = Vec::new();
    while let Some(left) = end.checked_duration_since(std::time::Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(h) if pred(&h) => return h,
            Ok(h) => log.push(h),
            Err(_) => break,
        }
    }
    panic!("{what}: not seen; saw {log:?}");
}

#[test]
fn observer_sees_a_handover() {
    for (label, url) in backends("observe") {
        let a = named(&url, "rs-obs-a");
        let b = named(&url, "rs-obs-b");
        let watcher = open(&url);
        let n = name("observe");
        let (tx, rx) = mpsc::channel();
        let observer = watcher
            .observe(&n, Duration::from_millis(50), move |h| {
                let _ = tx.send(h.clone());
            })
            .unwrap();
        let first = seen(&rx, "the state at the start", |_| true);
        assert!(first.is_free(), "{label}: {first:?}");
        assert_eq!(first.name, n);

        let ta = a.election(&n, simba::listener(|_| {}, |_, _| {})).unwrap();
        let ha = seen(&rx, "holder A", |h| !h.is_free());
        assert_eq!(ha.session.as_deref(), Some(session_id(&a).as_str()), "{label}: {ha:?}");
        assert_eq!(ha.client.as_deref(), Some("rs-obs-a"), "{label}: {ha:?}");
        assert_eq!(Some(ha.token), ta.term().map(|t| t.token()), "{label}");

        // B waits as a candidate; A stops: B takes the name over.
        let tb = b.election(&n, simba::listener(|_| {}, |_, _| {})).unwrap();
        ta.stop_wait(WAIT).unwrap();
        let hb = seen(&rx, "holder B", |h| h.client.as_deref() == Some("rs-obs-b"));
        assert_eq!(hb.session.as_deref(), Some(session_id(&b).as_str()), "{label}: {hb:?}");
        assert!(hb.token > ha.token, "{label}: {ha:?} then {hb:?}");
        assert!(wait_until(WAIT, || tb.term().is_some_and(|t| t.token() == hb.token)), "{label}");
        drop(observer);
        drop(tb);
    }
}

#[test]
fn observe_iter_and_observer_dropped_in_its_own_callback() {
    // Compiles only while observers may cross threads.
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<simba::Observer>();
    send::<simba::Observation>();

    let c = simba::Client::open("memory://rs-observe-iter").unwrap();
    let mut it = c.observe_iter("rs.iter", Duration::from_millis(20)).unwrap();
    assert!(it.next().unwrap().is_free());
    let held = c.lock("rs.iter", WAIT).unwrap();
    let h = it.next_timeout(WAIT).unwrap();
    assert_eq!((h.is_free(), h.token), (false, held.token()));
    drop(it);

    // Dropped inside its own callback: no further call, the closure freed in
    // the done of its close (simba_observer_close_async), not kept until the
    // client's close.
    struct Flag(Arc<AtomicBool>);
    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let freed = Arc::new(AtomicBool::new(false));
    let slot: Arc<Mutex<Option<simba::Observer>>> = Arc::default();
    let calls = Arc::new(Mutex::new(0));
    let (s2, c2, flag) = (slot.clone(), calls.clone(), Flag(freed.clone()));
    // Stored before its first call can take it.
    let mut stored = slot.lock().unwrap();
    *stored = Some(
        c.observe("rs.iter", Duration::from_millis(10), move |_| {
            let _keep = &flag;
            *c2.lock().unwrap() += 1;
            drop(s2.lock().unwrap().take());
        })
        .unwrap(),
    );
    drop(stored);
    assert!(wait_until(WAIT, || slot.lock().unwrap().is_none()));
    held.unlock().unwrap(); // a change no observer reports any more
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(*calls.lock().unwrap(), 1);
    assert!(wait_until(WAIT, || freed.load(Ordering::SeqCst)), "freed once its last call returned");
    c.close().unwrap();
}

#[test]
fn metrics_count_known_activity() {
    for (label, url) in backends("metrics") {
        let c = named(&url, "rs-metrics");
        let n = name("metrics");
        for _ in 0..3 {
            c.lock(&n, WAIT).unwrap().unlock().unwrap();
        }
        let held = c.lock(&n, WAIT).unwrap();
        let text = c.metrics_text().unwrap();
        for line in [
            "# TYPE simba_acquires_total counter\n",
            "simba_acquires_total{client=\"rs-metrics\"} 4\n",
            "simba_terms_total{client=\"rs-metrics\"} 4\n",
            "simba_releases_total{client=\"rs-metrics\"} 3\n",
            "simba_revocations_total{client=\"rs-metrics\",reason=\"STOPPED\"} 3\n",
            "simba_leases_held{client=\"rs-metrics\"} 1\n",
            "simba_session_state{client=\"rs-metrics\",state=\"LIVE\"} 1\n",
        ] {
            assert!(text.contains(line), "{label}: no {line:?} in\n{text}");
        }
        held.unlock().unwrap();
        assert!(c.snapshot_json().unwrap().contains("\"metrics\""), "{label}");
        c.close().unwrap();
    }
}

/// A client opened with a config whose event sink sends to the receiver.
fn with_config_sink(url: &str) -> (simba::Client, mpsc::Receiver<EventKind>) {
    let (tx, rx) = mpsc::channel();
    let mut cfg = simba::Config::new();
    cfg.event_sink(move |ev| {
        let _ = tx.send(ev.kind);
    })
    .unwrap();
    let c = simba::Client::open_with(url, &cfg).unwrap();
    drop(cfg); // the client keeps the sink
    assert_eq!(rx.recv_timeout(WAIT).unwrap(), EventKind::SessionOpened, "the first event");
    (c, rx)
}

#[test]
fn config_event_sink_sees_the_first_event_until_replaced() {
    let (c, rx) = with_config_sink("memory://rs-config-sink");
    let (tx2, rx2) = mpsc::channel();
    c.on_event(move |ev| {
        let _ = tx2.send(ev.kind);
    })
    .unwrap();
    c.close().unwrap();
    assert_eq!(rx2.recv_timeout(WAIT).unwrap(), EventKind::SessionClosed);
    assert!(rx.try_recv().is_err(), "the config's sink was replaced");

    // clear_on_event also silences the config's sink.
    let (c, rx) = with_config_sink("memory://rs-config-sink2");
    c.clear_on_event().unwrap();
    c.close().unwrap();
    assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
}
