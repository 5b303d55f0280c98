"""close_async (libsimba 1.4, simba_*_close_async): one close for every handle,
from outside and from the handle's own callback; its callback runs once, last."""

import asyncio
import threading

import pytest

import simba
import simba.aio
from conftest import LEASE, LONG, eventually


class Log:
    """Events in the order they happened, from any thread."""

    def __init__(self):
        self.items = []
        self.lock = threading.Lock()
        self.dones = 0

    def add(self, item):
        with self.lock:
            self.items.append(item)

    def done(self):
        with self.lock:
            self.dones += 1
            self.items.append("D")

    def __str__(self):
        with self.lock:
            return "".join(self.items)


def settle():
    # A done that would come twice, or a callback after done, shows up here.
    threading.Event().wait(0.1)


def test_election_from_outside(url, name, clients):
    a, b = clients(url), clients(url)
    log = Log()
    elected = threading.Event()
    e = a.elect(name, lambda t: (log.add("E"), elected.set()), lambda t, r: log.add("R"))
    assert elected.wait(LONG)
    fut = e.close_async(log.done)
    assert e.closed
    with pytest.raises(simba.Closed):
        e.close_async()
    fut.result(LONG)
    settle()
    assert log.dones == 1
    assert str(log) == "ED"  # the listener is detached: no on_revoked
    got = threading.Event()
    eb = b.elect(name, lambda t: got.set())  # the name was released
    assert got.wait(LONG)
    e.close()  # closed already: a no-op
    eb.close()


def test_election_from_its_own_callback(url, name, clients):
    a = clients(url)
    log = Log()
    futs = []
    me = []  # the election, once elect() returned (callbacks run on other threads)

    def on_elected(term):
        log.add("E<")
        assert eventually(lambda: me)
        futs.append(me[0].close_async(log.done))
        settle()  # done never runs inside the call, nor before this returns
        log.add(">")
    me.append(a.elect(name, on_elected, lambda t, r: log.add("R")))
    assert eventually(lambda: futs)
    futs[0].result(LONG)
    settle()
    assert log.dones == 1
    assert str(log) == "E<>D"


def test_earlier_stop_done_runs_first(url, name, clients):
    a = clients(url)
    log = Log()
    elected = threading.Event()
    e = a.elect(name, lambda t: elected.set())
    assert elected.wait(LONG)
    e.stop().add_done_callback(lambda f: log.add("S"))
    e.close_async(log.done).result(LONG)
    assert str(log) == "SD"


def test_task_from_its_own_work(url, name, clients):
    a = clients(url)
    log = Log()
    futs = []
    me = []

    def work(cancel):
        log.add("W")
        assert eventually(lambda: me)
        futs.append(me[0].close_async(log.done))
        assert cancel.wait(LONG)  # the close revokes the term
        settle()
        log.add("X")
    me.append(a.run_while_leader(name, work))
    assert eventually(lambda: futs)
    futs[0].result(LONG)
    settle()
    assert log.dones == 1
    assert str(log) == "WXD"  # done after the work returned


def test_task_from_outside_while_its_work_runs(url, name, clients):
    a = clients(url)
    log = Log()
    started = threading.Event()

    def work(cancel):
        started.set()
        cancel.wait(LONG)
        log.add("X")
    t = a.run_while_leader(name, work)
    assert started.wait(LONG)
    t.close_async(log.done).result(LONG)
    settle()
    assert str(log) == "XD"


def test_observer_from_its_callback_and_from_outside(url, name, clients):
    w = clients(url)
    log = Log()
    futs = []
    me = []

    def seen(change):
        log.add("O")
        if not futs:
            assert eventually(lambda: me)
            futs.append(me[0].close_async(log.done))
    me.append(w.observe(name, seen, poll=0.02))
    ob = me[0]
    assert eventually(lambda: futs)
    futs[0].result(LONG)
    settle()
    assert str(log) == "OD"
    assert ob.get(0) is None  # ended
    log2 = Log()
    ob2 = w.observe(name + "2", lambda ch: log2.add("O"), poll=0.02)
    assert eventually(lambda: str(log2))
    ob2.close_async(log2.done).result(LONG)
    n = str(log2)
    settle()
    assert str(log2) == n and n.endswith("D") and log2.dones == 1


def test_lock_term(url, name, clients):
    a = clients(url)
    log = Log()
    t = a.lock(name, timeout=LONG)
    t.on_revoked(lambda term, reason: log.add("R" + reason.name))
    t.close_async(log.done).result(LONG)
    settle()
    assert str(log) == "RSTOPPEDD"
    assert not t.valid and t.name == name  # still readable
    t.release()  # released already: a no-op
    t2 = a.try_lock(name)  # the name is free
    assert t2.token > t.token
    t2.release()


def test_election_term_only_drops_a_reference(url, name, clients):
    a = clients(url)
    terms = []
    e = a.elect(name, terms.append)
    assert eventually(lambda: terms)
    log = Log()
    terms[0].close_async(log.done).result(LONG)
    assert str(log) == "D"
    assert e.is_leader and terms[0].valid
    e.close()


def test_close_from_a_callback_completes(url, name, clients):
    a, b = clients(url), clients(url)
    closed = threading.Event()
    me = []

    def on_elected(term):
        assert eventually(lambda: me)
        me[0].close()  # from a callback: starts the close, returns
        closed.set()
    me.append(a.elect(name, on_elected))
    e = me[0]
    assert closed.wait(LONG)
    assert e not in a._core.children
    got = threading.Event()
    b.elect(name, lambda t: got.set())
    assert got.wait(LONG)
    assert eventually(lambda: not e._keys)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, LONG * 2))


def test_aio_aclose(url, name):
    async def main():
        async with simba.aio.Client(url, lease_duration=LEASE) as a:
            log = Log()
            e = a.election(name, lambda t: log.add("E"), lambda t, r: log.add("R"))
            await e.elected()
            await e.aclose(log.done)
            assert e.closed and str(log) == "ED"
            with pytest.raises(simba.Closed):
                await e.aclose()

            # from its own callback
            log = Log()
            futs = []

            def on_elected(t):
                log.add("E")
                futs.append(e2.close_async(log.done))
            e2 = a.election(name, on_elected)
            while not futs:
                await asyncio.sleep(0.01)
            await asyncio.wrap_future(futs[0])
            assert str(log) == "ED"

            # a task: done after its coroutine returned
            log = Log()
            started = asyncio.Event()

            async def work(cancel):
                started.set()
                try:
                    await asyncio.sleep(LONG)
                finally:
                    log.add("X")
            t = a.run_while_leader(name + "t", work)
            await started.wait()
            await t.aclose(log.done)
            assert str(log) == "XD"

            # an observer, and a lock term
            ob = a.observe(name + "o", poll=0.02)
            assert await ob.get(LONG) is not None
            await ob.aclose()
            assert await ob.get(0.05) is None
            term = await a.lock(name + "l", timeout=LONG)
            log = Log()
            term.on_revoked(lambda tm, r: log.add("R"))
            await term.aclose(log.done)
            assert str(log) == "RD" and not term.valid
    run(main())
