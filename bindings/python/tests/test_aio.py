"""simba.aio: a client driven by the running asyncio loop (EXTERNAL mode)."""

import asyncio
import threading
import time

import pytest

import simba
import simba.aio
from conftest import LEASE, LONG


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, LONG * 2))


def test_lock_try_timeout_and_cancel(url, name):
    async def main():
        async with simba.aio.Client(url, lease_duration=LEASE) as a, \
                simba.aio.Client(url, lease_duration=LEASE) as b:
            async with a.lock(name, timeout=LONG) as t:
                assert t.valid and t.token > 0
                with pytest.raises(simba.Busy):
                    await b.try_lock(name)
                with pytest.raises(simba.Timeout):
                    await b.lock(name, timeout=0.2)
                # cancelling a waiting coroutine cancels the wait cleanly
                waiter = asyncio.ensure_future(b.lock(name, timeout=LONG))
                await asyncio.sleep(0.05)
                waiter.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await waiter
            assert not t.valid and t.revoke_reason is simba.RevokeReason.STOPPED
            t2 = await b.lock(name, timeout=LONG)  # the cancelled one gave its term back
            assert t2.token > t.token
            await b.release(t2)
            assert threading.active_count() == threads_before
    threads_before = threading.active_count()
    run(main())


def test_elect_pairing_and_cancel(url, name):
    async def main():
        async with simba.aio.Client(url, lease_duration=LEASE) as a, \
                simba.aio.Client(url, lease_duration=LEASE) as b:
            log = []
            loop_thread = threading.get_ident()
            ea = a.election(name, lambda t: log.append(("E", t.token, threading.get_ident())),
                            lambda t, r: log.append(("R", t.token, r)))
            ta = await ea.elected()
            # b's elect waits; cancelling that await stops b's election
            waiting = asyncio.ensure_future(b.elect(name))
            await asyncio.sleep(0.1)
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            assert name not in b.elections
            later = asyncio.ensure_future(b.elect(name))
            await ea.close()
            tb = await later
            assert tb.token > ta.token and tb.valid
            assert log == [("E", ta.token, loop_thread), ("R", ta.token, simba.RevokeReason.STOPPED)]
            await b.elections[name].close()
            assert not tb.valid
    run(main())


def test_leader_work_cancelled_at_revocation(url, name):
    async def main():
        async with simba.aio.Client(url, lease_duration=LEASE) as a:
            seen = []

            async def work(cancel):
                seen.append(("start", cancel.token, cancel.term.valid))
                try:
                    await asyncio.sleep(LONG * 10)
                except asyncio.CancelledError:
                    seen.append(("cancelled", cancel.is_set()))
                    await asyncio.sleep(0.05)  # the lease stays held meanwhile
                    seen.append(("cleaned", time.monotonic()))
                    raise
            t = a.run_while_leader(name, work)
            while not seen:
                await asyncio.sleep(0.01)
            await t.close()
            stopped = time.monotonic()
            assert seen[0][0] == "start" and seen[0][2]
            assert seen[1] == ("cancelled", True)
            assert seen[2][0] == "cleaned" and seen[2][1] <= stopped
    run(main())


def test_observe(url, name):
    async def main():
        async with simba.aio.Client(url, lease_duration=LEASE, name="obs") as a, \
                simba.aio.Client(url, lease_duration=LEASE, name="holder") as b:
            changes = []
            async with a.observe(name, poll=0.05) as ob:
                holder = None
                async for ch in ob:
                    changes.append(ch)
                    if not ch.held and holder is None:
                        holder = await b.lock(name, timeout=LONG)
                    elif ch.held:
                        break
            assert changes[-1].holder_client == "holder" and changes[-1].token == holder.token
            await b.release(holder)
            assert ob.closed
    run(main())


def test_close_from_a_callback(url, name):
    async def main():
        a = simba.aio.Client(url, lease_duration=LEASE)
        closed = asyncio.Event()

        def on_elected(term):
            # a blocking call inside a callback would wait for itself
            try:
                simba.Client.try_lock(a, name + "x")  # the library's blocking try-lock
            except simba.WouldBlock:
                a.close_soon()
            closed.set()
        a.election(name, on_elected)
        await closed.wait()
        for _ in range(200):
            if a.closed:
                break
            await asyncio.sleep(0.01)
        assert a.closed
        await a.close()  # twice: a no-op
        with pytest.raises(simba.Closed):
            await a.lock(name)
    run(main())


def chaos_proxy():
    """The chaos suite's TCP proxy (tests/chaos/nemesis.py); 'blackhole'
    forwards nothing: the backend answers nothing, as if SIGSTOPped."""
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                    "tests", "chaos"))
    import nemesis
    return nemesis.Proxy


def test_close_against_a_silent_backend_keeps_the_loop_turning(url, backend, name):
    # libsimba 1.5: simba_client_close_async on the loop; the close settles by
    # the session's local deadline with a CloseWarning, the loop ticking meanwhile
    import warnings
    from urllib.parse import urlsplit
    if backend != "redis":
        pytest.skip("the silent backend is Redis behind the chaos proxy")
    if simba.version() < 0x010500:
        pytest.skip("libsimba 1.4 closes blocking")
    u = urlsplit(url)
    proxy = chaos_proxy()([u.port])
    purl = u._replace(netloc=f"{u.hostname}:{proxy.port}").geturl()
    lease = 2.0

    async def main():
        loop = asyncio.get_running_loop()
        c = simba.aio.Client(purl, lease_duration=lease)
        t = await c.lock(name, timeout=LONG)
        proxy.mode = "blackhole"
        gaps = []

        async def ticker():
            last = loop.time()
            while True:
                await asyncio.sleep(0.02)
                now = loop.time()
                gaps.append(now - last)
                last = now
        tk = asyncio.ensure_future(ticker())
        t0 = time.monotonic()
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            closing = asyncio.ensure_future(c.close())
            await asyncio.sleep(0)
            second = asyncio.ensure_future(c.aclose())  # joins the close in progress
            await asyncio.gather(closing, second)
        took = time.monotonic() - t0
        tk.cancel()
        print(f"close against a silent backend: {took * 1000:.0f} ms, {len(gaps)} ticks of 20 ms, "
              f"largest gap {max(gaps) * 1000:.0f} ms")
        assert 0.3 <= took <= lease + 1.0, took
        assert max(gaps) < 0.25, max(gaps)
        assert len(gaps) >= took / 0.02 / 2, (len(gaps), took)
        ws = [w.message for w in seen if issubclass(w.category, simba.aio.CloseWarning)]
        assert [w.code_name for w in ws] == ["ETIMEDOUT"], [str(w.message) for w in seen]
        assert c.closed and t.revoke_reason is simba.RevokeReason.STOPPED
        await c.close()  # closed: a no-op
        # its lease frees at the session's expiry (the proxy still holds the close)
        async with simba.aio.Client(url, lease_duration=lease) as other:
            t2 = await other.lock(name, timeout=LONG)
            assert t2.token > t.token
            await other.release(t2)
        # answered: released at once, no warning
        proxy.mode = "pass"
        c2 = simba.aio.Client(purl, lease_duration=lease)
        await c2.lock(name, timeout=LONG)
        with warnings.catch_warnings(record=True) as seen2:
            warnings.simplefilter("always")
            t0 = time.monotonic()
            await c2.close()
            assert time.monotonic() - t0 < 1.0
        assert not [w for w in seen2 if issubclass(w.category, simba.aio.CloseWarning)]
        async with simba.aio.Client(url, lease_duration=lease) as other:
            await other.release(await other.try_lock(name))
    try:
        run(main())
    finally:
        proxy.close()
