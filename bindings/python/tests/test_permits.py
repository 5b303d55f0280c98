"""Semaphores and read/write locks (libsimba 1.5, ADR 0046) on each backend."""

import asyncio
import time

import pytest

import simba
import simba.aio
from conftest import LEASE, LONG


def test_semaphore_counts_permits_and_tokens_rise(url, name, clients):
    a, b = clients(url), clients(url)
    t1 = a.semaphore(name, 2, timeout=LONG)
    t2 = b.semaphore(name, 2, timeout=LONG)
    assert t1.kind is simba.TermKind.SEMAPHORE and str(t2.kind) == "SEMAPHORE"
    assert t1.is_lock and t1.name == name and t1.valid and 0 < t1.remaining <= LEASE
    assert 0 < t1.token < t2.token
    with pytest.raises(simba.Busy):
        b.try_semaphore(name, 2)
    start = time.monotonic()
    with pytest.raises(simba.Timeout):
        a.semaphore(name, 2, timeout=0.2)
    assert time.monotonic() - start >= 0.15
    fut = b.semaphore_async(name, 2, timeout=LONG)
    assert not fut.done()
    t1.release()
    assert not t1.valid and t1.revoke_reason is simba.RevokeReason.STOPPED
    t3 = fut.result(LONG)
    assert t3.token > t2.token and t3.kind is simba.TermKind.SEMAPHORE
    with t3:  # a permit's term is a context manager
        pass
    assert not t3.valid
    t2.release()


def test_semaphore_of_another_size_is_refused(url, name, clients):
    a, b = clients(url), clients(url)
    with a.semaphore(name, 3, timeout=LONG):
        with pytest.raises(simba.StateError, match=f"semaphore {name} has 3 permits, not 2"):
            b.semaphore(name, 2, timeout=LONG)
        with pytest.raises(simba.StateError, match="has 3 permits, not 5"):
            b.semaphore_async(name, 5, timeout=LONG).result(LONG)
    with b.semaphore(name, 2, timeout=LONG):  # the size went with its last holder
        pass


def test_permits_argument_is_checked(url, name, clients):
    a = clients(url)
    for bad in (0, -1, 2 ** 32):
        with pytest.raises(simba.InvalidArgument, match="permits must be 1..4294967295"):
            a.semaphore(name, bad)
    for bad in (True, 2.0, "2", None):
        with pytest.raises(simba.InvalidType):
            a.try_semaphore(name, bad)
    with pytest.raises(simba.InvalidArgument, match="NUL byte at index 1"):
        a.read_lock("a\0b")


def test_readers_share_writer_excludes(url, name, clients):
    a, b = clients(url), clients(url)
    w0 = a.write_lock(name, timeout=LONG)
    assert w0.kind is simba.TermKind.WRITE and w0.token > 0
    with pytest.raises(simba.Busy):
        b.try_read_lock(name)
    w0.release()
    r1 = a.read_lock(name, timeout=LONG)
    r2 = b.try_read_lock(name)
    assert r1.kind is simba.TermKind.READ and r1.token == r2.token == w0.token  # the write epoch
    with pytest.raises(simba.Busy):
        a.try_write_lock(name)
    fut = b.write_lock_async(name, timeout=LONG)
    deadline = time.monotonic() + LONG
    while True:  # the writer's intent reaches the backend: new readers wait
        try:
            a.try_read_lock(name).release()
        except simba.Busy:
            break
        assert time.monotonic() < deadline, "the writer's intent never made a reader wait"
        time.sleep(0.01)
    r1.release()
    r2.release()
    w1 = fut.result(LONG)
    assert w1.kind is simba.TermKind.WRITE and w1.token > w0.token
    rf = a.read_lock_async(name, timeout=LONG)
    w1.release()
    with rf.result(LONG) as r3:
        assert r3.token == w1.token
    with pytest.raises(simba.Timeout):
        with b.read_lock(name, timeout=LONG):
            a.write_lock(name, timeout=0.2)


def test_term_kinds_of_locks_and_elections(url, name, clients):
    a = clients(url)
    with a.lock(name, timeout=LONG) as t:
        assert t.kind is simba.TermKind.LOCK
    assert [simba.kind_name(k) for k in range(6)] == [
        "ELECTION", "LOCK", "SEMAPHORE", "READ", "WRITE", "UNKNOWN"]
    assert str(simba.TermKind(9)) == "UNKNOWN(9)"


def test_a_closed_client_revokes_its_permits(url, name, clients):
    a, b = clients(url), clients(url)
    s = a.semaphore(name, 1, timeout=LONG)
    r = a.read_lock(name, timeout=LONG)
    a.close()
    assert not s.valid and not r.valid
    assert s.revoke_reason is simba.RevokeReason.STOPPED
    with pytest.raises(simba.Closed):
        a.semaphore(name, 1)
    with b.semaphore(name, 1, timeout=LONG), b.write_lock(name, timeout=LONG):
        pass


def test_asyncio_permits(url, name):
    async def main():
        async with simba.aio.Client(url, lease_duration=LEASE) as c, \
                simba.aio.Client(url, lease_duration=LEASE) as d:
            async with c.semaphore(name, 1, timeout=LONG) as s:
                assert s.kind is simba.TermKind.SEMAPHORE
                with pytest.raises(simba.Busy):
                    await d.try_semaphore(name, 1)
                with pytest.raises(simba.StateError, match="has 1 permits, not 2"):
                    await d.semaphore(name, 2, timeout=LONG)
                with pytest.raises(simba.Timeout):
                    await d.semaphore(name, 1, timeout=0.1)
            assert not s.valid
            r = await c.read_lock(name, timeout=LONG)
            r2 = await d.try_read_lock(name)
            with pytest.raises(simba.Busy):
                await d.try_write_lock(name)
            w = asyncio.ensure_future(d.write_lock(name, timeout=LONG))
            await asyncio.sleep(0.05)
            assert not w.done()
            await c.release(r)
            await d.release(r2)
            wt = await w
            assert wt.kind is simba.TermKind.WRITE and wt.token > r.token
            await d.release(wt)
            assert not wt.valid
    asyncio.run(main())
