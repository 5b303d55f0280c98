//! The one close shape of libsimba 1.4 (`close_async`, `simba_*_close_async`)
//! on memory://: from outside and from the handle's own callback or work, the
//! completion is done exactly once, after the handle's last callback, with its
//! closure dropped; no callback of the handle runs after it.
mod common;
use common::*;
use simba::{Completion, ErrorKind, Term};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the handle's callbacks saw, shared with the test.
#[derive(Default)]
struct Probe {
    inside: AtomicUsize,
    calls: AtomicUsize,
    returned: AtomicUsize,
    sealed: AtomicBool,
    late: AtomicUsize,
}

impl Probe {
    /// Runs one callback of the handle, counting it and any after the seal.
    fn callback<R>(&self, f: impl FnOnce() -> R) -> R {
        self.inside.fetch_add(1, SeqCst);
        self.calls.fetch_add(1, SeqCst);
        if self.sealed.load(SeqCst) {
            self.late.fetch_add(1, SeqCst);
        }
        let r = f();
        self.returned.fetch_add(1, SeqCst);
        self.inside.fetch_sub(1, SeqCst);
        r
    }
}

/// Waits for the close's completion, seals the probe, and checks that the
/// closure (`alive`'s other owner) was dropped by then, that no callback ran
/// at that moment, and none comes over a quiet period.
fn expect_closed(c: &Completion, probe: &Probe, alive: &Arc<()>, label: &str) {
    c.wait(WAIT).unwrap_or_else(|e| panic!("{label}: close: {e}"));
    probe.sealed.store(true, SeqCst);
    assert_eq!(Arc::strong_count(alive), 1, "{label}: the closure outlived the close's done");
    assert_eq!(probe.inside.load(SeqCst), 0, "{label}: a callback still ran at done");
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(probe.late.load(SeqCst), 0, "{label}: a callback after done");
    assert!(c.is_done());
}

fn name_is_free(c: &simba::Client, n: &str, label: &str) {
    c.try_lock(n).unwrap_or_else(|e| panic!("{label}: {n} still held after done: {e}")).unlock().unwrap();
}

#[test]
fn election_close_async_from_outside_and_from_its_callback() {
    for from_callback in [false, true] {
        let label = if from_callback { "own callback" } else { "outside" };
        let url = format!("memory://rs-close-el-{from_callback}-{}", std::process::id());
        let (c, other) = (open(&url), open(&url));
        let n = name("close-el");
        let probe = Arc::new(Probe::default());
        let alive = Arc::new(());
        let slot: Arc<Mutex<Option<simba::Election>>> = Arc::new(Mutex::new(None));
        let closed: Arc<Mutex<Option<Completion>>> = Arc::new(Mutex::new(None));
        let revoked = Arc::new(AtomicUsize::new(0));
        let (p1, p2, a1, s1, c1, r1) =
            (probe.clone(), probe.clone(), alive.clone(), slot.clone(), closed.clone(), revoked.clone());
        let e = c
            .election(
                &n,
                simba::listener(
                    move |_t: &Term| {
                        let _keep = &a1;
                        p1.callback(|| {
                            if from_callback {
                                let e = loop {
                                    if let Some(e) = s1.lock().unwrap().take() {
                                        break e;
                                    }
                                    std::thread::yield_now();
                                };
                                *c1.lock().unwrap() = Some(e.close_async());
                                std::thread::sleep(Duration::from_millis(50)); // done waits for this
                            }
                        })
                    },
                    move |_t, _r| {
                        p2.callback(|| r1.fetch_add(1, SeqCst));
                    },
                ),
            )
            .unwrap();
        if from_callback {
            *slot.lock().unwrap() = Some(e);
        } else {
            assert!(wait_until(WAIT, || probe.calls.load(SeqCst) == 1), "{label}: never elected");
            *closed.lock().unwrap() = Some(e.close_async());
        }
        assert!(wait_until(WAIT, || closed.lock().unwrap().is_some()), "{label}: no close");
        let done = closed.lock().unwrap().clone().unwrap();
        expect_closed(&done, &probe, &alive, label);
        assert_eq!(revoked.load(SeqCst), 0, "{label}: the detached listener heard on_revoked");
        name_is_free(&other, &n, label);
    }
}

/// A stop asked for before completes first; dropping inside the callback is
/// the same close (no completion is cancelled any more).
#[test]
fn election_close_async_after_a_stop() {
    let c = open("memory://rs-close-el-stop");
    let alive = Arc::new(());
    let a1 = alive.clone();
    let probe = Arc::new(Probe::default());
    let p1 = probe.clone();
    let e = c
        .election(
            &name("close-stop"),
            simba::listener(
                move |_t: &Term| {
                    let _k = &a1;
                    p1.callback(|| ())
                },
                |_, _| {},
            ),
        )
        .unwrap();
    assert!(wait_until(WAIT, || probe.calls.load(SeqCst) == 1));
    let stopped = e.stop().unwrap();
    let closed = e.close_async();
    expect_closed(&closed, &probe, &alive, "after stop");
    assert!(stopped.is_done(), "the earlier stop completed after the close's done");
    stopped.wait(Duration::ZERO).unwrap();
}

#[test]
fn task_close_async_from_outside_and_from_its_work() {
    for group in [false, true] {
        for from_work in [false, true] {
            let label = format!("group {group}, from work {from_work}");
            let url = format!("memory://rs-close-task-{group}-{from_work}-{}", std::process::id());
            let (c, other) = (open(&url), open(&url));
            let n = name("close-task");
            let probe = Arc::new(Probe::default());
            let alive = Arc::new(());
            let slot: Arc<Mutex<Option<simba::Task>>> = Arc::new(Mutex::new(None));
            let closed: Arc<Mutex<Option<Completion>>> = Arc::new(Mutex::new(None));
            let (p1, a1, s1, c1) = (probe.clone(), alive.clone(), slot.clone(), closed.clone());
            let work = move |t: &Term| {
                let _k = &a1;
                p1.callback(|| {
                    if from_work && p1.calls.load(SeqCst) == 1 {
                        let task = loop {
                            if let Some(x) = s1.lock().unwrap().take() {
                                break x;
                            }
                            std::thread::yield_now();
                        };
                        *c1.lock().unwrap() = Some(task.close_async());
                    }
                    t.wait_revoked(Duration::MAX).unwrap();
                    std::thread::sleep(Duration::from_millis(100)); // returns late: done waits
                })
            };
            let task = if group { c.join_group(&n, 1, work) } else { c.run_while_leader(&n, work) }.unwrap();
            if from_work {
                *slot.lock().unwrap() = Some(task);
            } else {
                assert!(wait_until(WAIT, || probe.calls.load(SeqCst) == 1), "{label}: no work");
                *closed.lock().unwrap() = Some(task.close_async());
            }
            assert!(wait_until(WAIT, || closed.lock().unwrap().is_some()), "{label}: no close");
            let done = closed.lock().unwrap().clone().unwrap();
            expect_closed(&done, &probe, &alive, &label);
            assert_eq!(probe.returned.load(SeqCst), probe.calls.load(SeqCst), "{label}: work still running");
            let leased = if group { format!("{n}.0") } else { n.clone() };
            name_is_free(&other, &leased, &label);
        }
    }
}

#[test]
fn observer_close_async_from_outside_and_from_its_closure() {
    for from_closure in [false, true] {
        let label = if from_closure { "own closure" } else { "outside" };
        let url = format!("memory://rs-close-obs-{from_closure}-{}", std::process::id());
        let (c, holder) = (open(&url), open(&url));
        let n = name("close-obs");
        let probe = Arc::new(Probe::default());
        let alive = Arc::new(());
        let slot: Arc<Mutex<Option<simba::Observer>>> = Arc::new(Mutex::new(None));
        let closed: Arc<Mutex<Option<Completion>>> = Arc::new(Mutex::new(None));
        let (p1, a1, s1, c1) = (probe.clone(), alive.clone(), slot.clone(), closed.clone());
        let o = c
            .observe(&n, Duration::from_millis(20), move |h| {
                let _k = &a1;
                p1.callback(|| {
                    if from_closure && !h.is_free() {
                        if let Some(o) = s1.lock().unwrap().take() {
                            *c1.lock().unwrap() = Some(o.close_async());
                            std::thread::sleep(Duration::from_millis(50));
                        }
                    }
                })
            })
            .unwrap();
        assert!(wait_until(WAIT, || probe.calls.load(SeqCst) >= 1), "{label}: no first state");
        if from_closure {
            *slot.lock().unwrap() = Some(o);
            let held = holder.lock(&n, WAIT).unwrap();
            assert!(wait_until(WAIT, || closed.lock().unwrap().is_some()), "{label}: no close");
            held.unlock().unwrap();
        } else {
            *closed.lock().unwrap() = Some(o.close_async());
        }
        let done = closed.lock().unwrap().clone().unwrap();
        expect_closed(&done, &probe, &alive, label);
        // Changes after the close reach nobody.
        holder.lock(&n, WAIT).unwrap().unlock().unwrap();
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(probe.late.load(SeqCst), 0, "{label}: the closure was called after done");
    }
}

#[test]
fn lock_term_close_async_releases_without_waiting() {
    let url = format!("memory://rs-close-lock-{}", std::process::id());
    let (c, other) = (open(&url), open(&url));
    let n = name("close-lock");
    let held = c.lock(&n, WAIT).unwrap();
    let kept: Term = held.term().clone();
    let revoked = Arc::new(AtomicUsize::new(0));
    let r1 = revoked.clone();
    kept.on_revoked(move |_, _| {
        r1.fetch_add(1, SeqCst);
    })
    .unwrap();
    let done = held.close_async();
    done.wait(WAIT).unwrap();
    assert_eq!(revoked.load(SeqCst), 1, "on_revoked ran before the close's done");
    assert!(!kept.is_valid());
    assert_eq!(kept.revoke_reason(), Some(simba::RevokeReason::Stopped));
    name_is_free(&other, &n, "lock term");
    // A clone's reference closed from its own term's callback: only dropped.
    let held = c.lock(&n, WAIT).unwrap();
    let closed: Arc<Mutex<Option<Completion>>> = Arc::new(Mutex::new(None));
    let c1 = closed.clone();
    let clone = held.term().clone();
    held.term()
        .on_revoked(move |_, _| {
            *c1.lock().unwrap() = Some(clone.close_async());
        })
        .unwrap();
    held.unlock().unwrap();
    assert!(wait_until(WAIT, || closed.lock().unwrap().is_some()));
    let done = closed.lock().unwrap().clone().unwrap();
    done.wait(WAIT).unwrap();
}

#[test]
fn election_term_close_async_only_drops_the_reference() {
    let url = format!("memory://rs-close-term-{}", std::process::id());
    let (c, other) = (open(&url), open(&url));
    let n = name("close-term");
    let closed: Arc<Mutex<Option<Completion>>> = Arc::new(Mutex::new(None));
    let c1 = closed.clone();
    let e = c
        .election(
            &n,
            simba::listener(
                move |t: &Term| {
                    *c1.lock().unwrap() = Some(t.clone().close_async());
                },
                |_, _| {},
            ),
        )
        .unwrap();
    assert!(wait_until(WAIT, || closed.lock().unwrap().is_some()));
    closed.lock().unwrap().clone().unwrap().wait(WAIT).unwrap();
    assert!(e.is_leader(), "closing a reference revoked the term");
    assert_eq!(other.try_lock(&n).unwrap_err().kind(), ErrorKind::Busy);
    drop(e);
}
