"""The checks every Simba binding makes, on each backend (SIMBA_PY_BACKENDS)."""

import concurrent.futures
import gc
import threading
import time

import pytest

import simba
from conftest import LEASE, LONG, eventually


def test_lock_try_and_timeout(url, name, clients):
    a, b = clients(url), clients(url)
    with a.lock(name, timeout=LONG) as t:
        assert t.valid and t.is_lock and t.name == name and t.token > 0
        assert 0 < t.remaining <= LEASE
        with pytest.raises(simba.Busy) as ei:
            b.try_lock(name)
        assert ei.value.code == -9 and ei.value.code_name == "EBUSY" and ei.value.message
        start = time.monotonic()
        with pytest.raises(simba.Timeout):
            b.lock(name, timeout=0.2)
        assert time.monotonic() - start >= 0.15
        assert isinstance(simba.Timeout(-4), TimeoutError)
    assert not t.valid
    with b.try_lock(name) as t2:
        assert t2.token > t.token


def test_tokens_rise_across_holders(url, name, clients):
    a, b = clients(url), clients(url)
    tokens = []
    for i in range(6):
        with (a if i % 2 else b).lock(name, timeout=LONG) as t:
            tokens.append(t.token)
    assert tokens == sorted(tokens) and len(set(tokens)) == len(tokens), tokens


def test_lock_async_future(url, name, clients):
    a, b = clients(url), clients(url)
    held = a.lock(name, timeout=LONG)
    fut = b.lock_async(name, timeout=LONG)
    assert not fut.done()
    held.release()
    t = fut.result(LONG)
    assert t.token > held.token
    t.release()
    with pytest.raises(simba.Timeout):
        with a.lock(name):
            b.lock_async(name, timeout=0.1).result(LONG)


def _recorder():
    log, lock = [], threading.Lock()

    def on_elected(term):
        with lock:
            log.append(("E", term.token, term))

    def on_revoked(term, reason):
        with lock:
            log.append(("R", term.token, reason))
    return log, on_elected, on_revoked


def _check_pairs(log):
    # every elected is followed by exactly one revoked of the same term
    open_token = None
    for kind, token, _ in log:
        if kind == "E":
            assert open_token is None, log
            open_token = token
        else:
            assert token == open_token, log
            open_token = None
    return open_token


def test_election_pairing_and_handover(url, name, clients):
    a, b = clients(url), clients(url)
    la, ea_cb, ra_cb = _recorder()
    lb, eb_cb, rb_cb = _recorder()
    ea = a.elect(name, ea_cb, ra_cb)
    assert eventually(lambda: ea.is_leader)
    eb = b.elect(name, eb_cb, rb_cb)
    ta = ea.term
    ea.stop().result(LONG)
    assert la[-1][0] == "R" and la[-1][2] is simba.RevokeReason.STOPPED
    assert eventually(lambda: eb.is_leader)
    assert eb.term.token > ta.token
    eb.step_down(cooldown=0.0).result(LONG)
    assert lb[-1][2] is simba.RevokeReason.STEPPED_DOWN
    eb.stop_wait(LONG)
    ea.close()
    eb.close()
    ea.close()  # twice: a no-op
    assert _check_pairs(la) is None and _check_pairs(lb) is None
    assert la[0][0] == "E" and lb[0][0] == "E"
    tokens = [tok for k, tok, _ in sorted(la + lb, key=lambda e: e[1]) if k == "E"]
    assert tokens == sorted(set(tokens))


def test_work_cancelled_at_revocation(url, name, clients):
    a = clients(url)
    seen = {}
    started = threading.Event()

    def work(cancel):
        seen["token"] = cancel.token
        seen["valid_at_start"] = cancel.term.valid
        started.set()
        while not cancel.wait(0.05):
            pass
        seen["set"] = cancel.is_set()
        time.sleep(0.1)  # the lease stays held until the work returned
        seen["returned"] = time.monotonic()

    task = a.run_while_leader(name, work)
    assert started.wait(LONG)
    fut = task.stop()
    fut.result(LONG)
    done_at = time.monotonic()
    assert seen["valid_at_start"] and seen["set"] and seen["token"] > 0
    assert seen["returned"] <= done_at
    task.close()
    task.close()


def test_validity_never_restored(url, name, clients):
    a = clients(url)
    flips = []
    stop = threading.Event()
    t = a.lock(name, timeout=LONG)

    def watch():
        seen_invalid = False
        while not stop.is_set():
            v = t.valid
            if seen_invalid and v:
                flips.append(True)
            seen_invalid = seen_invalid or not v
    th = threading.Thread(target=watch)
    th.start()
    time.sleep(0.05)
    t.release()
    time.sleep(0.1)
    stop.set()
    th.join()
    assert not flips
    # an ended term stays readable
    assert t.name == name and t.token > 0
    assert t.valid is False and t.remaining == 0.0
    assert t.revoke_reason is simba.RevokeReason.STOPPED
    with pytest.raises(simba.TermExpired):
        t.ensure_valid()
    t.release()  # again: a no-op
    t2 = a.lock(name, timeout=LONG)
    assert t2.ensure_valid(min_remaining=0.1) is t2
    with pytest.raises(simba.TermExpired):
        t2.ensure_valid(min_remaining=LEASE * 10)
    a.close()
    assert not t2.valid and t2.revoke_reason is simba.RevokeReason.STOPPED


def test_double_close_and_use_after_close(url, name, clients):
    a = clients(url)
    e = a.elect(name)
    ob = a.observe(name)
    a.close()
    a.close()
    assert a.closed and a.status is simba.SessionStatus.CLOSED
    for call in (lambda: a.lock(name), lambda: a.try_lock(name), lambda: a.elect(name + "x"),
                 lambda: a.snapshot(), lambda: a.metrics(), lambda: a.wait_live(0.1),
                 lambda: a.run_while_leader(name, lambda c: None), lambda: a.observe(name)):
        with pytest.raises(simba.Closed):
            call()
    with pytest.raises(simba.Closed):
        e.stop()
    e.close()
    ob.close()
    assert all(isinstance(c, simba.Change) for c in ob)  # ends once closed


def test_gc_releases_a_dropped_lock(url, name, clients):
    a, b = clients(url), clients(url)
    t = a.lock(name, timeout=LONG)
    token = t.token
    del t
    gc.collect()
    # a's session stays live: b can only get the name because it was released
    got = eventually(lambda: _try(b, name), timeout=LONG)
    assert got and got.token > token
    got.release()


def test_gc_closes_a_dropped_client(url, name, clients):
    b = clients(url)
    a = simba.Client(url, lease_duration=30.0)  # its lease would last 30 s
    a.wait_live(LONG)
    held = a.lock(name, timeout=LONG)
    del a, held
    gc.collect()
    got = eventually(lambda: _try(b, name), timeout=10.0)  # well before the 30 s lease
    assert got, "the collected client's session was not closed"
    got.release()


def _try(c, name):
    try:
        return c.try_lock(name)
    except simba.Busy:
        return None


def test_close_from_own_callback(url, name, clients):
    a = clients(url)
    errs = []
    done = threading.Event()

    def on_elected(term):
        try:
            with pytest.raises(simba.WouldBlock):
                a.lock(name + "x", timeout=1)
            a.close()  # starts the close and returns
        except BaseException as e:  # noqa: BLE001
            errs.append(e)
        done.set()
    a.elect(name, on_elected)
    assert done.wait(LONG)
    assert not errs
    assert a.closed
    assert a._core.closed.wait(LONG)


def test_callbacks_on_a_user_executor(url, name, clients):
    with concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="userpool") as ex:
        a = clients(url, executor=ex)
        threads = []
        e = a.elect(name, lambda t: threads.append(threading.current_thread().name),
                    lambda t, r: threads.append(threading.current_thread().name))
        assert eventually(lambda: threads)
        e.stop().result(LONG)
        e.close()
        a.close()
    assert len(threads) == 2 and all(n.startswith("userpool") for n in threads), threads


def test_observe_shows_a_handover(url, name, clients):
    a, b, o = clients(url, name="py-a"), clients(url, name="py-b"), clients(url)
    ob = o.observe(name, poll=0.05)
    first = ob.get(LONG)
    assert first is not None and not first.held
    ta = a.lock(name, timeout=LONG)
    ta.release()
    tb = b.lock(name, timeout=LONG)
    changes = []
    assert eventually(lambda: (changes.extend(filter(None, [ob.get(0.05)])) or
                               any(c.holder_client == "py-b" for c in changes)))
    held = [c for c in changes if c.held]
    assert held[-1].holder_client == "py-b" and held[-1].token == tb.token
    assert all(x.token <= y.token for x, y in zip(changes, changes[1:]))
    tb.release()
    ob.close()
    rest = list(ob)  # changes queued before the close, then the end
    assert all(isinstance(c, simba.Change) for c in rest)
    assert ob.get(0.1) is None


def test_observe_callback(url, name, clients):
    a = clients(url)
    got = []
    ob = a.observe(name, callback=got.append, poll=0.05)
    with a.lock(name, timeout=LONG) as t:
        assert eventually(lambda: any(c.token == t.token and c.held for c in got))
    ob.close()
    ob.close()


def test_metrics_and_snapshot(url, name, clients):
    a = clients(url, name="pymetrics")
    for _ in range(3):
        with a.lock(name, timeout=LONG):
            pass
    text = a.metrics()
    assert 'simba_acquires_total{client="pymetrics"} 3' in text
    assert 'simba_releases_total{client="pymetrics"} 3' in text
    assert 'simba_revocations_total{client="pymetrics",reason="STOPPED"} 3' in text
    assert 'simba_session_state{client="pymetrics",state="LIVE"} 1' in text
    with a.lock(name, timeout=LONG) as t:
        snap = a.snapshot()
        assert snap["session"]["status"] == "LIVE"
        assert any(l["name"] == name and l["token"] == t.token for l in snap["elections"] if l["kind"] == "lock"), snap
        info = a.inspect([name])
        lease = [l for l in info["leases"] if l["name"] == name][0]
        assert lease["token"] == t.token and lease["holder"] == snap["session"]["id"]
    assert a.status is simba.SessionStatus.LIVE and str(a.status) == "LIVE"


def test_schedule_and_group(url, name, clients):
    a = clients(url)
    runs = []
    s = a.schedule(name, lambda c: runs.append(c.token), period=0.02)
    assert eventually(lambda: len(runs) >= 3)
    s.close()
    parts = set()
    g = a.join_group(name + "g", 3, lambda c: (parts.add(c.term.name), c.wait()))
    assert eventually(lambda: len(parts) == 3)
    g.close()
    assert parts == {f"{name}g.{i}" for i in range(3)}


def test_gc_closes_a_dropped_client_with_handles(url, name, clients):
    b = clients(url)
    a = simba.Client(url, lease_duration=30.0)
    a.wait_live(LONG)
    elected = threading.Event()
    a.elect(name, lambda t: elected.set())
    a.observe(name + "o", callback=lambda ch: None)
    a.run_while_leader(name + "w", lambda cancel: cancel.wait())
    assert elected.wait(LONG)
    core = a._core
    del a
    gc.collect()
    # closed on a library thread; its handles are freed in the close's done
    assert core.closed.wait(LONG) and not core.children
    got = eventually(lambda: _try(b, name), timeout=10.0)
    assert got
    got.release()
