//! Elections, leader work, schedules, groups, callbacks' lifetime and panics.
mod common;
use common::*;
use simba::{ErrorKind, RevokeReason, Term};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Debug, PartialEq)]
enum Ev {
    Elected(u64),
    Revoked(u64, RevokeReason),
}

fn recording(tx: mpsc::Sender<Ev>) -> impl simba::Listener {
    let tx2 = tx.clone();
    simba::listener(
        move |t: &Term| {
            assert!(t.is_valid());
            let _ = tx.send(Ev::Elected(t.token()));
        },
        move |t: &Term, r| {
            let _ = tx2.send(Ev::Revoked(t.token(), r));
        },
    )
}

#[test]
fn failover_and_step_down() {
    for (label, url) in backends("elect") {
        let a = open(&url);
        let b = open(&url);
        let n = name("elect");
        let (ta, ra) = mpsc::channel();
        let (tb, rb) = mpsc::channel();
        let ea = a.election(&n, recording(ta)).unwrap();
        let Ev::Elected(tok1) = ra.recv_timeout(WAIT).unwrap() else { panic!("{label}") };
        let eb = b.election(&n, recording(tb)).unwrap();
        let now = ea.term().expect("a leads");
        assert_eq!(now.token(), tok1, "{label}");
        assert!(ea.is_leader() && !eb.is_leader(), "{label}");
        assert_eq!(a.election(&n, simba::listener(|_| {}, |_, _| {})).unwrap_err().kind(), ErrorKind::State);
        assert_eq!(a.try_lock(&n).unwrap_err().kind(), ErrorKind::State, "{label}");
        // Step down: b takes over, a gets SteppedDown.
        let done = ea.step_down(Duration::from_secs(60)).unwrap();
        done.wait(WAIT).unwrap();
        assert_eq!(ra.recv_timeout(WAIT).unwrap(), Ev::Revoked(tok1, RevokeReason::SteppedDown), "{label}");
        let Ev::Elected(tok2) = rb.recv_timeout(WAIT).unwrap() else { panic!("{label}") };
        assert!(tok2 > tok1, "{label}");
        assert!(!ea.is_leader() && !now.is_valid(), "{label}");
        assert_eq!(now.revoke_reason(), Some(RevokeReason::SteppedDown));
        assert!(wait_until(WAIT, || eb.is_leader()), "{label}");
        assert_eq!(eb.term().unwrap().token(), tok2);
        // Stop b: a is in its cooldown, so nobody is elected; stop_wait returns after on_revoked.
        eb.stop_wait(WAIT).unwrap();
        assert!(eb.term().is_none());
        assert_eq!(rb.try_recv().unwrap(), Ev::Revoked(tok2, RevokeReason::Stopped), "{label}");
        assert_eq!(eb.stop().unwrap_err().kind(), ErrorKind::State);
        eb.stop_wait(WAIT).unwrap(); // waits for the stop already done
        ea.stop().unwrap().wait(WAIT).unwrap();
        assert!(ra.recv_timeout(Duration::from_millis(100)).is_err(), "{label}: event after stop");
    }
}

#[test]
fn leader_close_hands_over() {
    for (label, url) in backends("handover") {
        let a = open(&url);
        let b = open(&url);
        let n = name("handover");
        let (ta, ra) = mpsc::channel();
        let (tb, rb) = mpsc::channel();
        let _ea = a.election(&n, recording(ta)).unwrap();
        let Ev::Elected(t1) = ra.recv_timeout(WAIT).unwrap() else { panic!() };
        let _eb = b.election(&n, recording(tb)).unwrap();
        drop(a); // close: on_revoked(Stopped) delivered before it returns
        assert_eq!(ra.try_recv().unwrap(), Ev::Revoked(t1, RevokeReason::Stopped), "{label}");
        let Ev::Elected(t2) = rb.recv_timeout(WAIT).unwrap() else { panic!() };
        assert!(t2 > t1, "{label}");
    }
}

#[test]
fn dropping_an_election_frees_its_listener() {
    for (label, url) in backends("free") {
        let c = open(&url);
        let alive = Arc::new(());
        let (tx, rx) = mpsc::channel();
        let a2 = alive.clone();
        let e = c
            .election(
                &name("free"),
                simba::listener(
                    move |t| {
                        let _k = &a2;
                        tx.send(t.token()).unwrap();
                    },
                    |_, _| {},
                ),
            )
            .unwrap();
        rx.recv_timeout(WAIT).unwrap();
        assert_eq!(Arc::strong_count(&alive), 2);
        drop(e);
        assert_eq!(Arc::strong_count(&alive), 1, "{label}: listener not freed by drop");
    }
}

#[test]
fn drop_inside_own_callback_is_deferred_safely() {
    for (label, url) in backends("selfdrop") {
        let c = open(&url);
        let alive = Arc::new(());
        let slot: Arc<Mutex<Option<simba::Election>>> = Arc::new(Mutex::new(None));
        let (tx, rx) = mpsc::channel();
        let s2 = slot.clone();
        let a2 = alive.clone();
        let n = name("selfdrop");
        let e = c
            .election(
                &n,
                simba::listener(
                    move |_t| {
                        let _k = &a2;
                        // Wait for the handle to be parked, then drop it from its own callback.
                        while s2.lock().unwrap().is_none() {
                            std::thread::yield_now();
                        }
                        let e = s2.lock().unwrap().take();
                        drop(e);
                        tx.send(()).unwrap();
                    },
                    |_, _| {},
                ),
            )
            .unwrap();
        *slot.lock().unwrap() = Some(e);
        rx.recv_timeout(WAIT).unwrap();
        assert!(wait_until(WAIT, || Arc::strong_count(&alive) == 1), "{label}: listener never freed");
        // The name is free again for a lock of this client.
        c.lock(&n, WAIT).unwrap().unlock().unwrap();
    }
}

#[test]
fn panics_in_callbacks_are_contained() {
    let c = open("memory://rs-panic");
    let (tx, rx) = mpsc::channel();
    let e = c
        .election("rs.panic", simba::listener(|_| panic!("boom in on_elected"), move |_, r| tx.send(r).unwrap()))
        .unwrap();
    // Pairing holds though on_elected panicked.
    e.stop().unwrap().wait(WAIT).unwrap();
    assert_eq!(rx.recv_timeout(WAIT).unwrap(), RevokeReason::Stopped);
    let held = c.lock("rs.panic2", WAIT).unwrap();
    held.on_revoked(|_, _| panic!("boom in on_revoked")).unwrap();
    held.unlock().unwrap();
    // The client still works.
    c.lock("rs.panic3", WAIT).unwrap().unlock().unwrap();
}

#[test]
fn run_while_leader_work_sees_revocation_before_handover() {
    for (label, url) in backends("rwl") {
        let a = open(&url);
        let b = open(&url);
        let n = name("rwl");
        let returned = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel();
        let r2 = returned.clone();
        let task = a
            .run_while_leader(&n, move |t| {
                tx.send(t.token()).unwrap();
                assert!(t.wait_revoked(Duration::MAX).unwrap());
                assert!(!t.is_valid());
                assert_eq!(t.ensure_valid(Duration::ZERO).unwrap_err().kind(), ErrorKind::Expired);
                std::thread::sleep(Duration::from_millis(50)); // finishing the step
                r2.store(true, Ordering::SeqCst);
            })
            .unwrap();
        let tok = rx.recv_timeout(WAIT).unwrap();
        // Another node cannot get the lease while the work runs.
        assert_eq!(b.try_lock(&n).unwrap_err().kind(), ErrorKind::Busy, "{label}");
        let done = task.stop().unwrap();
        done.wait(WAIT).unwrap();
        assert!(returned.load(Ordering::SeqCst), "{label}: stop completed before the work returned");
        let t = b.try_lock(&n).unwrap();
        assert!(t.token() > tok);
        t.unlock().unwrap();
    }
}

#[test]
fn work_that_returns_is_elected_again() {
    for (label, url) in backends("again") {
        let c = open(&url);
        let (tx, rx) = mpsc::channel();
        let task = c.run_while_leader(&name("again"), move |t| tx.send(t.token()).unwrap()).unwrap();
        let t1 = rx.recv_timeout(WAIT).unwrap();
        let t2 = rx.recv_timeout(WAIT).unwrap();
        assert!(t2 > t1, "{label}: {t1} {t2}");
        drop(task);
    }
}

#[test]
fn schedule_runs_periodically_within_one_term() {
    for (label, url) in backends("sched") {
        let c = open(&url);
        let runs = Arc::new(Mutex::new(Vec::new()));
        let r2 = runs.clone();
        let task = c
            .schedule(&name("sched"), Duration::from_millis(10), Duration::from_millis(30), move |t| {
                r2.lock().unwrap().push((t.token(), std::time::Instant::now()))
            })
            .unwrap();
        assert!(wait_until(WAIT, || runs.lock().unwrap().len() >= 4), "{label}");
        task.close().unwrap();
        let runs = runs.lock().unwrap().clone();
        let n = runs.len();
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(n, runs.len());
        assert!(
            runs.windows(2).all(|w| w[1].1.duration_since(w[0].1) >= Duration::from_millis(29) || w[1].0 != w[0].0),
            "{label}"
        );
        assert_eq!(
            c.schedule("rs.bad", Duration::ZERO, Duration::ZERO, |_| {}).unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
    }
}

#[test]
fn dropping_a_task_inside_its_work_is_safe() {
    let c = open("memory://rs-taskdrop");
    let alive = Arc::new(());
    let slot: Arc<Mutex<Option<simba::Task>>> = Arc::new(Mutex::new(None));
    let (s2, a2) = (slot.clone(), alive.clone());
    let (tx, rx) = mpsc::channel();
    let task = c
        .run_while_leader("rs.taskdrop", move |_t| {
            let _k = &a2;
            while s2.lock().unwrap().is_none() {
                std::thread::yield_now();
            }
            let t = s2.lock().unwrap().take();
            drop(t);
            let _ = tx.send(());
        })
        .unwrap();
    *slot.lock().unwrap() = Some(task);
    rx.recv_timeout(WAIT).unwrap();
    assert!(wait_until(WAIT, || Arc::strong_count(&alive) == 1), "work closure never freed");
}

#[test]
fn group_spreads_partitions_without_overlap() {
    for (label, url) in backends("group") {
        let a = open(&url);
        let b = open(&url);
        let g = name("group");
        let held: [Arc<Mutex<HashSet<String>>>; 2] = Default::default();
        let overlap = Arc::new(AtomicUsize::new(0));
        let all = Arc::new(Mutex::new(HashSet::<String>::new()));
        let mk = |mine: Arc<Mutex<HashSet<String>>>| {
            let (overlap, all) = (overlap.clone(), all.clone());
            move |t: &Term| {
                let p = t.name().to_string();
                if !all.lock().unwrap().insert(p.clone()) {
                    overlap.fetch_add(1, Ordering::SeqCst);
                }
                mine.lock().unwrap().insert(p.clone());
                t.wait_revoked(Duration::MAX).unwrap();
                mine.lock().unwrap().remove(&p);
                all.lock().unwrap().remove(&p);
            }
        };
        let ga = a.join_group(&g, 4, mk(held[0].clone())).unwrap();
        assert!(wait_until(WAIT, || held[0].lock().unwrap().len() == 4), "{label}: a did not take all 4");
        let gb = b.join_group(&g, 4, mk(held[1].clone())).unwrap();
        assert!(
            wait_until(WAIT, || held[0].lock().unwrap().len() == 2 && held[1].lock().unwrap().len() == 2),
            "{label}: not balanced: {:?} {:?}",
            held[0].lock().unwrap(),
            held[1].lock().unwrap()
        );
        let expect: HashSet<String> = (0..4).map(|i| format!("{g}.{i}")).collect();
        let union: HashSet<String> = held[0].lock().unwrap().union(&held[1].lock().unwrap()).cloned().collect();
        assert_eq!(union, expect, "{label}");
        gb.close().unwrap();
        assert!(held[1].lock().unwrap().is_empty());
        assert!(wait_until(WAIT, || held[0].lock().unwrap().len() == 4), "{label}: a did not take back");
        ga.close().unwrap();
        assert_eq!(overlap.load(Ordering::SeqCst), 0, "{label}: a partition ran twice at once");
        assert_eq!(a.join_group(&g, 0, |_| {}).unwrap_err().kind(), ErrorKind::InvalidArgument);
    }
}

#[test]
fn client_dropped_inside_a_callback_closes() {
    let slot: Arc<Mutex<Option<simba::Client>>> = Arc::new(Mutex::new(None));
    let c = open("memory://rs-clientdrop");
    let (tx, rx) = mpsc::channel();
    let s2 = slot.clone();
    let held = c.lock("rs.clientdrop", WAIT).unwrap();
    let term = held.term().clone();
    std::mem::forget(held); // released by the close below (its reference stays leaked)
    *slot.lock().unwrap() = Some(c);
    let c2 = open("memory://rs-clientdrop");
    let e = c2
        .election(
            "rs.clientdrop.trigger",
            simba::listener(
                move |_| {
                    drop(s2.lock().unwrap().take()); // close from a callback of another client
                    tx.send(()).unwrap();
                },
                |_, _| {},
            ),
        )
        .unwrap();
    rx.recv_timeout(WAIT).unwrap();
    assert!(wait_until(WAIT, || term.revoke_reason() == Some(RevokeReason::Stopped)));
    assert!(wait_until(WAIT, || c2.try_lock("rs.clientdrop").is_ok()));
    drop(e);
}

#[test]
fn blocking_calls_in_callbacks_would_block() {
    let c = Arc::new(open("memory://rs-wouldblock"));
    let (tx, rx) = mpsc::channel();
    let c2 = c.clone();
    let e = c
        .election(
            "rs.wb",
            simba::listener(
                move |_| {
                    let r1 = c2.wait_live(Duration::from_millis(10)).map_err(|e| e.kind());
                    let r2 = c2.lock("rs.wb.other", Duration::from_millis(10)).map(|_| ()).map_err(|e| e.kind());
                    tx.send((r1, r2)).unwrap();
                },
                |_, _| {},
            ),
        )
        .unwrap();
    let (r1, r2) = rx.recv_timeout(WAIT).unwrap();
    assert_eq!(r1, Err(ErrorKind::WouldBlock));
    assert_eq!(r2, Err(ErrorKind::WouldBlock));
    let done = e.stop().unwrap();
    done.wait(WAIT).unwrap();
}

#[test]
fn election_dropped_in_its_stop_is_freed_after_its_last_callback() {
    let c = open("memory://rs-graveyard");
    let alive = Arc::new(());
    let slot: Arc<Mutex<Option<simba::Election>>> = Arc::new(Mutex::new(None));
    let (tx, rx) = mpsc::channel();
    let (el_tx, el_rx) = mpsc::channel();
    let (s2, a2) = (slot.clone(), alive.clone());
    let e = c
        .election(
            "rs.graveyard",
            simba::listener(
                move |_| el_tx.send(()).unwrap(),
                move |_, r| {
                    let _k = &a2;
                    // Dropped from its own on_revoked while its stop is under way:
                    // closed with simba_election_close_async, whose done frees the
                    // listener after this callback and the stop's done.
                    drop(s2.lock().unwrap().take());
                    tx.send(r).unwrap();
                },
            ),
        )
        .unwrap();
    el_rx.recv_timeout(WAIT).unwrap();
    let done = {
        let mut g = slot.lock().unwrap();
        let done = e.stop().unwrap();
        *g = Some(e);
        done
    };
    assert_eq!(rx.recv_timeout(WAIT).unwrap(), RevokeReason::Stopped);
    // The stop's done still runs (the close's done comes after it).
    done.wait(WAIT).unwrap();
    assert!(wait_until(WAIT, || Arc::strong_count(&alive) == 1), "listener not freed after its last callback");
    c.close().unwrap();
}

#[test]
fn close_async_calls_done_last() {
    for (label, url) in backends("closeasync") {
        let c = open(&url);
        let held = c.lock(&name("closeasync"), WAIT).unwrap();
        let term = held.term().clone();
        let (tx, rx) = mpsc::channel();
        let t2 = term.clone();
        c.close_async(move || tx.send(t2.revoke_reason()).unwrap());
        assert_eq!(rx.recv_timeout(WAIT).unwrap(), Some(RevokeReason::Stopped), "{label}");
        drop(held);
    }
}

#[test]
fn step_down_cooldown_keeps_the_election_out() {
    for (label, url) in backends("cooldown") {
        let c = open(&url);
        let (tx, rx) = mpsc::channel();
        let e = c.election(&name("cooldown"), recording(tx)).unwrap();
        let Ev::Elected(t1) = rx.recv_timeout(WAIT).unwrap() else { panic!() };
        let t0 = std::time::Instant::now();
        e.step_down(Duration::from_millis(400)).unwrap().wait(WAIT).unwrap();
        assert_eq!(rx.recv_timeout(WAIT).unwrap(), Ev::Revoked(t1, RevokeReason::SteppedDown));
        let Ev::Elected(t2) = rx.recv_timeout(WAIT).unwrap() else { panic!() };
        assert!(t0.elapsed() >= Duration::from_millis(390), "{label}: re-elected after {:?}", t0.elapsed());
        assert!(t2 > t1);
        // Negative cooldowns cannot be expressed; a stopped election refuses.
        e.stop_wait(WAIT).unwrap();
        assert_eq!(e.step_down(Duration::ZERO).unwrap_err().kind(), ErrorKind::State, "{label}");
    }
}

#[test]
fn tasks_report_the_terms_they_lead() {
    for (label, url) in backends("terms") {
        let c = open(&url);
        let other = open(&url);
        // run_while_leader: the term of the running work.
        let n = name("terms");
        let (tx, rx) = mpsc::channel();
        let task = c
            .run_while_leader(&n, move |t| {
                tx.send(t.token()).unwrap();
                t.wait_revoked(Duration::MAX).unwrap();
            })
            .unwrap();
        let tok = rx.recv_timeout(WAIT).unwrap();
        let terms = task.terms();
        assert_eq!(terms.len(), 1, "{label}");
        assert_eq!((terms[0].name(), terms[0].token()), (n.as_str(), tok), "{label}");
        assert!(task.is_leader(), "{label}");
        task.step_down(Duration::from_secs(60)).unwrap().wait(WAIT).unwrap();
        assert!(!task.is_leader(), "{label}");
        assert!(wait_until(WAIT, || task.terms().is_empty()), "{label}: {:?}", task.terms());
        // Stepped down for the cooldown: the other node gets the name.
        other.try_lock(&n).unwrap().unlock().unwrap();
        drop(task);

        // schedule: the term stays listed between runs.
        let (tx, rx) = mpsc::channel();
        let sched = c
            .schedule(&name("terms.sched"), Duration::ZERO, Duration::from_millis(300), move |t| {
                let _ = tx.send(t.token());
            })
            .unwrap();
        let tok = rx.recv_timeout(WAIT).unwrap();
        std::thread::sleep(Duration::from_millis(50)); // between two runs
        assert_eq!(sched.terms().iter().map(Term::token).collect::<Vec<_>>(), vec![tok], "{label}");
        assert!(sched.is_leader(), "{label}");
        sched.close().unwrap();

        // A group of one member leads every partition.
        let g = name("terms.group");
        let group = c
            .join_group(&g, 3, |t: &Term| {
                t.wait_revoked(Duration::MAX).unwrap();
            })
            .unwrap();
        let want: Vec<String> = (0..3).map(|i| format!("{g}.{i}")).collect();
        assert!(
            wait_until(WAIT, || group.terms().iter().map(|t| t.name().to_string()).collect::<Vec<_>>() == want),
            "{label}: {:?}",
            group.terms()
        );
        group.close().unwrap();
    }
}

#[test]
fn completions_can_be_awaited() {
    for (label, url) in backends("await") {
        let c = open(&url);
        let (tx, rx) = mpsc::channel();
        let revoked = Arc::new(AtomicBool::new(false));
        let r2 = revoked.clone();
        let task = c
            .run_while_leader(&name("await"), move |t| {
                tx.send(()).unwrap();
                t.wait_revoked(Duration::MAX).unwrap();
                r2.store(true, Ordering::SeqCst);
            })
            .unwrap();
        rx.recv_timeout(WAIT).unwrap();
        let stopped = task.stop().unwrap();
        assert_eq!(block_on(stopped.clone(), WAIT).map(|r| r.is_ok()), Some(true), "{label}");
        assert!(revoked.load(Ordering::SeqCst), "{label}: the stop resolved before the work returned");
        assert!(stopped.is_done());
        // A second stop is refused, the first one stays resolved.
        assert_eq!(task.stop().unwrap_err().kind(), ErrorKind::State, "{label}");
        assert!(block_on(stopped, Duration::ZERO).is_some());
    }
}
