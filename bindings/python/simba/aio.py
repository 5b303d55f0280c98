"""asyncio: a client driven on the running event loop, with no thread of its own.

The client runs in libsimba's EXTERNAL loop mode (``loop.mode=external``): the
event loop watches ``simba_client_fd()`` (``loop.add_reader``), arms a timer
from ``simba_client_timeout_ms()`` and calls ``simba_client_process()``; every
callback runs on the event loop's thread inside that call. Open the client in a
coroutine on the loop that will drive it::

    async with simba.aio.Client("redis://127.0.0.1:6379") as c:
        async with c.lock("report", timeout=2.0) as term:
            await write_report(term.token)
        term = await c.elect("scheduler")        # the term once elected
        async for change in c.observe("scheduler"):
            ...
"""

from __future__ import annotations

import asyncio
import os
import threading
import warnings
from ctypes import byref, c_void_p
from typing import Any, AsyncIterator, Awaitable, Callable, Dict, Generator, List, Optional, Union

from . import _lib
from ._client import (READ, WRITE, Change, Election, Observer, Task, _BaseClient, _ClientCore,
                      _on_lock, _permits, config_items, open_client, permit_error)
from ._errors import (Closed, Event, RevokeReason, StateError, check, code_name, encode_name,
                      error)
from ._lib import lib
from ._term import Cancellation, Term, _run_guarded, to_ms

__all__ = ["Client", "AioElection", "AioTask", "AioObserver", "CloseWarning"]


class CloseWarning(RuntimeWarning):
    """``await client.close()`` returned, but the backend did not confirm the
    close (``code_name``: ``"ETIMEDOUT"`` by the session's local deadline, or
    ``"EBACKEND"``; ``code`` the negative number): the client is freed; its
    leases free at the session's expiry."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code
        self.code_name = code_name(code)


@_lib.DONE_FN
def _on_aio_closed(ud: Optional[int], err: int) -> None:
    # inside simba_client_process() on the loop's thread: the client frees
    # itself once process() returned (Client._process)
    c = _lib.lookup(ud)
    if c is not None:
        c._close_err = err


class Client(_BaseClient):
    """A client driven by the running asyncio loop (EXTERNAL mode).

    Construct it inside a coroutine (it attaches to ``asyncio.get_running_loop()``);
    options as for :class:`simba.Client` (no ``executor``: callbacks run on the
    loop). Close it with ``await client.close()`` or ``async with``.
    """

    _weak_handles = False
    _external = True

    def __init__(self, url: str, *, on_event: Optional[Callable[[Event, str], Any]] = None,
                 logger: Union[None, bool, Callable[[int, str], Any]] = None,
                 log_level: str = "info", config: Optional[Dict[str, Any]] = None,
                 **options: Any) -> None:
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self._core = _ClientCore()
        self.url = url
        items = config_items(options, config)
        h = open_client(self._core, url, items, external=True, executor=None, on_event=on_event,
                        logger=logger, log_level=log_level)
        self._core.h = h
        self._fd = lib.simba_client_fd(h)
        self._timer: Optional[asyncio.TimerHandle] = None
        self._kicked = False
        self._closing = False
        self._close_started = False
        self._close_err: Optional[int] = None  # close_async's done ran (1.5)
        self._close_fut: Optional[asyncio.Future] = None
        self._close_key = 0
        self.elections: Dict[str, "AioElection"] = {}
        self._tasks: List["AioTask"] = []
        self._loop.add_reader(self._fd, self._process)
        self._kick()

    # --- driving the loop -------------------------------------------------
    def _process(self) -> None:
        self._kicked = False
        h = self._core.h
        if h is None:
            return
        rc = lib.simba_client_process(h)
        if self._close_err is not None:
            self._finish_close_async()
            return
        if self._close_started:
            self._loop.call_soon(self._finish_close)
            return
        if rc == -6:  # closed under us
            return
        self._arm()

    def _arm(self) -> None:
        h = self._core.h
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if h is None:
            return
        ms = lib.simba_client_timeout_ms(h)
        if ms == 0:
            self._kick()
        elif ms > 0:
            self._timer = self._loop.call_later(ms / 1000.0, self._process)

    def _kick(self) -> None:
        # A call on the host thread changes what is due: process soon.
        if not self._kicked:
            self._kicked = True
            self._loop.call_soon(self._process)

    def _check_thread(self, op: str) -> None:
        if threading.get_ident() != self._thread:
            raise error(-8, f"{op}: an asyncio client is used on its event loop's thread only")

    # --- closing -----------------------------------------------------------
    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Stop every task (its coroutine cancelled and awaited: handover order),
        every election and lock, close the session and free the client. Closing
        again is a no-op; a close in progress is awaited.

        With libsimba 1.5 the loop keeps running while the backend answers
        (``simba_client_close_async``): a backend that never answers delays this
        coroutine, not the loop, until the session's local deadline; then it
        returns after a :class:`CloseWarning` (``warnings.warn``), the leases
        freeing at the session's expiry. With libsimba 1.4 the close blocks the
        loop until then."""
        if self._close_fut is not None:
            await asyncio.shield(self._close_fut)
            return
        if self._core.h is None or self._closing:
            return
        self._closing = True
        for t in list(self._tasks):
            try:
                await t.stop()
            except (StateError, Closed):
                pass
        if not self._close_async_start():
            self._close_now()
            return
        await asyncio.shield(self._close_fut)  # type: ignore[arg-type]

    aclose = close  # contextlib.aclosing()

    def _close_async_start(self) -> bool:
        # libsimba 1.5: the close goes on while the loop drives the client
        h = self._core.h
        if (h is None or lib.simba_version() < 0x010500 or self._core.pid != os.getpid()
                or _lib.in_callback()):
            return False
        for t in self._tasks:
            t._abandon()  # work threads stop waiting for their coroutines
        self._close_key = _lib.register(self)
        if lib.simba_client_close_async(h, _on_aio_closed, self._close_key) != 0:
            _lib.unregister(self._close_key)
            return False
        self._close_fut = self._loop.create_future()
        self._kick()  # the close starts on the next process() turn
        return True

    def _finish_close_async(self) -> None:
        # close_async's done ran inside the process() call that just returned
        h, err = self._core.h, self._close_err
        _lib.unregister(self._close_key)
        self._loop.remove_reader(self._fd)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        lib.simba_client_close(h)  # frees at once
        self._core.h = None
        self._core.drop_keys()
        if err:
            warnings.warn(CloseWarning(
                f"the backend did not confirm the close ({code_name(err)}): its leases free "
                "when the session expires", err))
        if self._close_fut is not None and not self._close_fut.done():
            self._close_fut.set_result(None)

    def close_soon(self) -> None:
        """Close from a callback (or anywhere on the loop's thread) without
        waiting: the library starts the close, the loop finishes it."""
        if self._close_fut is not None:
            return  # closing without waiting already
        if _lib.in_callback():
            h = self._core.h
            if h is None or self._close_started:
                return
            self._close_started = True
            self._closing = True
            for t in self._tasks:
                t._abandon()
            lib.simba_client_close(h)  # EWOULDBLOCK: started, finished outside process()
            return
        self._loop.call_soon(self._close_now)

    def _finish_close(self) -> None:
        self._close_now()

    def _close_now(self) -> None:
        if self._core.pid != os.getpid():
            self._core.h = None
            return
        h = self._core.h
        if h is None:
            return
        for t in self._tasks:
            t._abandon()  # work threads stop waiting for their coroutines
        self._loop.remove_reader(self._fd)
        if self._timer is not None:
            self._timer.cancel()
        rc = lib.simba_client_close(h)  # runs the loop on this thread until done
        if rc == -8:  # inside a callback: finish later
            self._close_started = True
            self._loop.add_reader(self._fd, self._process)
            return
        self._core.h = None
        self._core.drop_keys()

    # --- locks ---------------------------------------------------------------
    def lock(self, name: str, timeout: Optional[float] = None) -> "_LockRequest":
        """``term = await c.lock(name, timeout)``, or ``async with c.lock(name) as term``.
        Cancelling the awaiting coroutine cancels the wait; a term granted after
        that is released at once."""
        return _LockRequest(self, name, timeout)

    async def try_lock(self, name: str) -> Term:
        """One attempt (:class:`simba.Busy` when held elsewhere). It waits for
        the backend's answer on this thread (one round trip: the library runs
        its loop meanwhile, callbacks included)."""
        self._check_thread("try_lock")
        n = encode_name(name)
        out = c_void_p()
        check(lib.simba_lock_try_acquire(byref(out), self._live("try_lock"), n))
        self._kick()
        return Term(out.value, is_lock=True, owned=True)  # type: ignore[arg-type]

    # --- semaphores and read/write locks (libsimba 1.5) -------------------------
    def semaphore(self, name: str, permits: int,
                  timeout: Optional[float] = None) -> "_LockRequest":
        """``term = await c.semaphore(name, permits, timeout)``, or ``async with``:
        a permit of semaphore ``name`` (:class:`simba.StateError` for another size)."""
        return _LockRequest(self, name, timeout, "semaphore", (_permits(permits),))

    def read_lock(self, name: str, timeout: Optional[float] = None) -> "_LockRequest":
        """``await`` / ``async with`` read/write lock ``name`` shared."""
        return _LockRequest(self, name, timeout, "rwlock", (READ,))

    def write_lock(self, name: str, timeout: Optional[float] = None) -> "_LockRequest":
        """``await`` / ``async with`` read/write lock ``name`` exclusive."""
        return _LockRequest(self, name, timeout, "rwlock", (WRITE,))

    async def try_semaphore(self, name: str, permits: int) -> Term:
        """One attempt (:class:`simba.Busy` when every permit is held), as :meth:`try_lock`."""
        return self._try_permit("semaphore", name, (_permits(permits),))

    async def try_read_lock(self, name: str) -> Term:
        """One attempt at a read lock (:class:`simba.Busy`)."""
        return self._try_permit("rwlock", name, (READ,))

    async def try_write_lock(self, name: str) -> Term:
        """One attempt at a write lock (:class:`simba.Busy`)."""
        return self._try_permit("rwlock", name, (WRITE,))

    def _try_permit(self, what: str, name: str, args: tuple) -> Term:
        self._check_thread(f"try_{what}")
        fn = _lib.require(f"simba_{what}_try_acquire")
        n = encode_name(name)
        out = c_void_p()
        check(fn(byref(out), self._live(f"try_{what}"), n, *args))
        self._kick()
        return Term(out.value, is_lock=True, owned=True)  # type: ignore[arg-type]

    async def _acquire(self, name: str, timeout: Optional[float], what: str = "lock",
                       args: tuple = ()) -> Term:
        self._check_thread(what)
        start = _lib.require(f"simba_{what}_acquire_async") if args else lib.simba_lock_acquire_async
        n = encode_name(name)
        fut: "asyncio.Future[Term]" = self._loop.create_future()

        def done(err: int, term: Optional[Term]) -> None:
            if fut.cancelled():
                if term is not None:
                    term.release()  # inside process(): does not wait
                return
            if err == 0 and term is not None:
                fut.set_result(term)
            elif args:
                fut.set_exception(permit_error(err, what, name))
            else:
                fut.set_exception(error(err, f"lock {name!r} not acquired"))

        key = _lib.register(done)
        rc = start(self._live(what), n, *args, to_ms(timeout, "timeout"), _on_lock, key)
        if rc < 0:
            _lib.unregister(key)
            check(rc)
        self._kick()
        return await fut

    async def release(self, term: Term) -> None:
        """Release a lock term (as ``term.release()``)."""
        term.release()
        self._kick()

    # --- elections -----------------------------------------------------------
    def election(self, name: str, on_elected: Optional[Callable[[Term], Any]] = None,
                 on_revoked: Optional[Callable[[Term, RevokeReason], Any]] = None) -> "AioElection":
        """Start contending for ``name``; callbacks run on the loop's thread."""
        self._check_thread("election")
        e = self._elect(AioElection, name, on_elected, on_revoked)
        self.elections[name] = e  # type: ignore[assignment]
        self._kick()
        return e  # type: ignore[return-value]

    async def elect(self, name: str) -> Term:
        """Contend for ``name`` and return the term once elected (the election is
        ``client.elections[name]``). Cancelling the await stops the election."""
        e = self.elections.get(name)
        if e is None or e.closed:
            e = self.election(name)
        try:
            return await e.elected()
        except asyncio.CancelledError:
            await asyncio.shield(e.close())
            raise

    # --- leader work ---------------------------------------------------------
    def run_while_leader(self, name: str,
                         fn: Callable[[Cancellation], Awaitable[Any]]) -> "AioTask":
        """Each time elected, run the coroutine ``fn(cancel)`` as a task on this
        loop; it is cancelled at the revocation, and the lease is released only
        after it finished (handover order)."""
        self._check_thread("run_while_leader")
        t = self._task(AioTask, "run_while_leader", name, fn, "cancel", work_fn=_on_aio_work)
        self._tasks.append(t)  # type: ignore[arg-type]
        self._kick()
        return t  # type: ignore[return-value]

    # --- observers -------------------------------------------------------------
    def observe(self, name: str, poll: Optional[float] = None) -> "AioObserver":
        """``async for change in client.observe(name)``; ``async with`` closes it."""
        self._check_thread("observe")
        ob = self._observe(AioObserver, name, poll, None)
        self._kick()
        return ob  # type: ignore[return-value]

    def __repr__(self) -> str:
        return f"<simba.aio.Client {self.url!r} status={self.status}>"


class _LockRequest:
    def __init__(self, client: Client, name: str, timeout: Optional[float], what: str = "lock",
                 args: tuple = ()) -> None:
        self._client = client
        self._name = name
        self._timeout = timeout
        self._what = what
        self._args = args
        self._term: Optional[Term] = None

    def __await__(self) -> Generator[Any, None, Term]:
        return self._client._acquire(self._name, self._timeout, self._what,
                                     self._args).__await__()

    async def __aenter__(self) -> Term:
        self._term = await self._client._acquire(self._name, self._timeout, self._what,
                                                 self._args)
        return self._term

    async def __aexit__(self, *exc: object) -> None:
        if self._term is not None:
            await self._client.release(self._term)


class AioElection(Election):
    """An election whose callbacks run on the loop; ``await e.elected()``."""

    def __init__(self, client: Any, name: str, on_elected: Any, on_revoked: Any) -> None:
        super().__init__(client, name, self._elected_cb, self._revoked_cb)
        self._user_elected = on_elected
        self._user_revoked = on_revoked
        self._waiters: List["asyncio.Future[Term]"] = []
        self._revoked_waiters: List["asyncio.Future[RevokeReason]"] = []

    def _elected_cb(self, term: Term) -> None:
        for f in self._waiters:
            if not f.done():
                f.set_result(term)
        self._waiters.clear()
        if self._user_elected is not None:
            self._user_elected(term)

    def _revoked_cb(self, term: Term, reason: RevokeReason) -> None:
        for f in self._revoked_waiters:
            if not f.done():
                f.set_result(reason)
        self._revoked_waiters.clear()
        if self._user_revoked is not None:
            self._user_revoked(term, reason)

    async def elected(self) -> Term:
        """The current term, or the next one."""
        t = self.term
        if t is not None:
            return t
        self._live("elected")
        f: "asyncio.Future[Term]" = self._client._loop.create_future()
        self._waiters.append(f)
        return await f

    async def revoked(self) -> RevokeReason:
        """Wait for the next revocation; its reason."""
        f: "asyncio.Future[RevokeReason]" = self._client._loop.create_future()
        self._revoked_waiters.append(f)
        return await f

    async def stop(self) -> None:  # type: ignore[override]
        """Stop (STOPPED): returns after the last callback."""
        fut = super().stop()
        self._client._kick()
        await asyncio.wrap_future(fut)

    async def step_down(self, cooldown: float = 0.0) -> None:  # type: ignore[override]
        fut = super().step_down(cooldown)
        self._client._kick()
        await asyncio.wrap_future(fut)

    async def close(self) -> None:  # type: ignore[override]
        """Stop (awaited: the listener hears the STOPPED revocation, a task's
        coroutine is cancelled and awaited), then :meth:`aclose`. Closing again
        is a no-op."""
        if self._h is None:
            return
        try:
            await self.stop()
        except StateError:
            pass
        if self._h is not None:
            await self.aclose()

    async def aclose(self, callback: Optional[Callable[[], Any]] = None) -> None:
        """:meth:`close_async`, awaited: returns after the election's last
        callback (its stop completed). Raises :class:`Closed` if closed already."""
        fut = self.close_async(callback)
        if self._client.elections.get(self._name) is self:
            del self._client.elections[self._name]
        await asyncio.wrap_future(fut)


class AioTask(Task):
    """Leader work run as an asyncio task; ``await t.stop()``, ``await t.close()``."""

    def __init__(self, client: Any, name: str, work: Any, wants: str) -> None:
        super().__init__(client, name, work, wants)
        self._abandoned = threading.Event()
        self._running: "set[asyncio.Task[Any]]" = set()

    def _abandon(self) -> None:
        # A close that cannot wait for the coroutines (from a callback): the
        # work threads stop waiting; the coroutines are cancelled.
        self._abandoned.set()
        for cur in list(self._running):
            cur.cancel()

    async def stop(self) -> None:  # type: ignore[override]
        """Stop: the running coroutine is cancelled and awaited, then the lease released."""
        fut = super().stop()
        self._client._kick()
        await asyncio.wrap_future(fut)

    async def step_down(self, cooldown: float = 0.0) -> None:  # type: ignore[override]
        fut = super().step_down(cooldown)
        self._client._kick()
        await asyncio.wrap_future(fut)

    async def close(self) -> None:  # type: ignore[override]
        """Stop (awaited: the listener hears the STOPPED revocation, a task's
        coroutine is cancelled and awaited), then :meth:`aclose`. Closing again
        is a no-op."""
        if self._h is None:
            return
        try:
            await self.stop()
        except StateError:
            pass
        if self._h is not None:
            await self.aclose()

    async def aclose(self, callback: Optional[Callable[[], Any]] = None) -> None:
        """:meth:`close_async`, awaited: returns once the stop completed and
        every run of the work (its coroutine) returned. Raises :class:`Closed`
        if closed already."""
        fut = self.close_async(callback)
        if self in self._client._tasks:
            self._client._tasks.remove(self)
        await asyncio.wrap_future(fut)


@_lib.WORK_FN
def _on_aio_work(ud: Optional[int], t: Optional[int]) -> None:
    # On the library's work thread: hand the coroutine to the loop, which
    # cancels it when the term's revoke fd turns readable (a task's on_revoked
    # only comes after its work returned), and return only once it finished,
    # so the lease is released after the work exited (handover order).
    task = _lib.lookup(ud)
    if task is None or not t:
        return
    loop = task._client._loop
    term = Term(t, is_lock=False, owned=False)
    cancel = Cancellation(term)
    finished = threading.Event()
    holder: List["asyncio.Task[Any]"] = []

    async def runner() -> None:
        me = asyncio.current_task()
        assert me is not None
        holder.append(me)
        task._running.add(me)
        fd = term.revoke_fd()
        watching = [True]

        def revoked() -> None:  # the fd stays readable: cancel once
            loop.remove_reader(fd)
            watching[0] = False
            me.cancel()
        loop.add_reader(fd, revoked)
        try:
            if not cancel.is_set():
                await task._work(cancel)
        except asyncio.CancelledError:
            pass
        finally:
            if watching[0]:
                loop.remove_reader(fd)
            task._running.discard(me)
            finished.set()

    def run() -> None:
        try:
            cf = asyncio.run_coroutine_threadsafe(runner(), loop)
        except RuntimeError:  # the loop is closed
            return
        while not finished.wait(0.1):
            if task._abandoned.is_set() or (cf.cancelled() and not holder):
                return
    _run_guarded(run)


class AioObserver(Observer):
    """``async for change in observer``; ``async with`` (or :meth:`close`) ends it."""

    def __init__(self, client: Any, name: str, callback: Any) -> None:
        super().__init__(client, name, None)
        self._aq: "asyncio.Queue[Any]" = asyncio.Queue()

    def _deliver(self, change: Change) -> None:
        self._aq.put_nowait(change)

    def _free(self, h: int) -> None:
        lib.simba_observer_free(h)
        self._aq.put_nowait(self._END)

    def _after_close(self) -> None:
        self._aq.put_nowait(self._END)

    async def aclose(self, callback: Optional[Callable[[], Any]] = None) -> None:
        """:meth:`close_async`, awaited: returns after the observer's last
        callback. Raises :class:`Closed` if closed already."""
        await asyncio.wrap_future(self.close_async(callback))

    def __aiter__(self) -> AsyncIterator[Change]:
        return self

    async def __anext__(self) -> Change:
        item = await self._aq.get()
        if item is self._END:
            self._aq.put_nowait(self._END)
            raise StopAsyncIteration
        return item  # type: ignore[no-any-return]

    async def get(self, timeout: Optional[float] = None) -> Optional[Change]:  # type: ignore[override]
        try:
            return await asyncio.wait_for(self.__anext__(), timeout)
        except (asyncio.TimeoutError, StopAsyncIteration):
            return None

    async def __aenter__(self) -> "AioObserver":
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()
