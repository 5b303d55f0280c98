"""The thread-based client (THREAD mode): locks, elections, leader work, observers."""

from __future__ import annotations

import atexit
import concurrent.futures
import ctypes
import json
import logging
import os
import queue
import threading
import weakref
from ctypes import byref, c_char_p, c_double, c_int64, c_void_p
from dataclasses import dataclass
from typing import (Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence,
                    Set, Union)

from . import _lib
from ._errors import (Closed, Event, InvalidArgument, InvalidType, RevokeReason, SessionStatus,
                      check, encode, encode_name, error)
from ._lib import lib
from ._errors import _name_cache as _names
from ._term import Cancellation, Term, _on_done, _run_guarded, to_ms

log = logging.getLogger("simba")
_lock_acquire = _lib.fast_lock_acquire
_FOREVER = _lib.FOREVER
_gen = _lib.fork_generation
_new_object = object.__new__

# Keyword options of Client(...) and the configuration keys they set.
_OPTIONS: Dict[str, str] = {
    "lease_duration": "session.lease-duration",
    "renew_interval": "session.renew-interval",
    "drift": "session.drift",
    "margin": "session.margin",
    "retry_jitter": "session.retry-jitter",
    "min_backoff": "session.min-backoff",
    "callback_executor": "callback.executor",
    "callback_threads": "callback.threads",
    "name": "client.name",
}
_DURATIONS = {"session.lease-duration", "session.renew-interval", "session.margin",
              "session.retry-jitter", "session.min-backoff"}
_LOG_LEVELS = {"debug": 0, "info": 1, "warn": 2, "warning": 2, "error": 3}
_PY_LEVELS = {0: logging.DEBUG, 1: logging.INFO, 2: logging.WARNING, 3: logging.ERROR}

ConfigValue = Union[str, int, float]


def _set_key(cfg: int, key: str, value: ConfigValue) -> None:
    k = encode(key, "configuration key")
    if isinstance(value, bool):
        raise InvalidType(-1, f"configuration value of {key} must be str or a number, not bool")
    if isinstance(value, (int, float)) and key in _DURATIONS:
        check(lib.simba_config_set_ms(cfg, k, to_ms(value, key)))  # seconds
    elif isinstance(value, (int, float)):
        check(lib.simba_config_set(cfg, k, repr(value).encode()))
    else:
        check(lib.simba_config_set(cfg, k, encode(value, f"configuration value of {key}")))


def config_items(options: Mapping[str, Any], config: Optional[Mapping[str, ConfigValue]]) -> List[tuple]:
    items = []
    for opt, value in options.items():
        if opt not in _OPTIONS:
            raise TypeError(f"unknown option {opt!r} (options: {', '.join(sorted(_OPTIONS))}; "
                            f"raw keys go in config={{...}})")
        items.append((_OPTIONS[opt], value))
    for key, value in (config or {}).items():
        items.append((key, value))
    return items


def check_config(config: Optional[Mapping[str, ConfigValue]] = None, **options: Any) -> Dict[str, float]:
    """Resolve and check a configuration as :class:`Client` takes it, without a
    client: the durations in seconds (derived defaults included) and the numbers.
    Raises :class:`InvalidArgument` for a broken rule."""
    cfg = c_void_p()
    check(lib.simba_config_new(byref(cfg)))
    try:
        for key, value in config_items(options, config):
            _set_key(cfg.value, key, value)
        check(lib.simba_config_validate(cfg))
        out: Dict[str, float] = {}
        for key in sorted(_DURATIONS):
            ms = c_int64()
            check(lib.simba_config_get_ms(cfg, key.encode(), byref(ms)))
            out[key] = ms.value / 1000.0
        for key in ("session.drift", "callback.threads"):
            d = c_double()
            check(lib.simba_config_get_double(cfg, key.encode(), byref(d)))
            out[key] = d.value
        return out
    finally:
        lib.simba_config_free(cfg)


class _ClientCore:
    """What a client's finalizer and callbacks need, without the client itself."""

    def __init__(self) -> None:
        self.h: Optional[int] = None
        # h as a ctypes argument for the fast calls: from_param's CArgObject,
        # which ctypes passes as is (a c_void_p is converted at every call).
        self.hv: Any = None
        self.pid = os.getpid()
        self.keys: List[int] = []  # registry keys of the client's sinks
        self.children: Set["_Handle"] = set()
        self.lock = threading.Lock()
        self.closed = threading.Event()

    def drop_keys(self) -> None:
        for k in self.keys:
            _lib.unregister(k)
        self.keys.clear()
        for ch in list(self.children):
            ch._forget()
        self.children.clear()
        self.closed.set()


def _finalize_client(core: _ClientCore) -> None:
    # GC or interpreter exit: never block here (a finalizer may run on any thread,
    # with any lock held): close on a library thread, drop the sinks in its done.
    if core.pid != os.getpid():
        return
    with core.lock:
        h, core.h, core.hv = core.h, None, None
    if h is None:
        return
    key = _lib.register(core.drop_keys)
    if lib.simba_client_close_async(h, _on_close_done, key) != 0:
        _lib.unregister(key)


@_lib.DONE_FN
def _on_close_done(ud: Optional[int], err: int) -> None:
    fn = _lib._registry.pop(ud, None) if ud else None
    if fn is not None:
        _run_guarded(fn)


_live_clients: "weakref.WeakSet[Client]" = weakref.WeakSet()


@atexit.register
def _close_at_exit() -> None:
    # At exit, close what is still open and wait (no library thread may run
    # while the interpreter tears down).
    for c in list(_live_clients):
        try:
            c.close()
        except Exception:  # noqa: BLE001
            pass


def _after_fork_in_child() -> None:
    # The child has none of the library's threads: the parent's clients (and
    # their terms) are unusable there; forget them without touching C.
    for c in list(_live_clients):
        c._core.h = c._core.hv = None
        c._core.closed.set()


os.register_at_fork(after_in_child=_after_fork_in_child)


@_lib.EVENT_FN
def _on_event(ud: Optional[int], kind: int, detail: Optional[bytes]) -> None:
    fn = _lib.lookup(ud)
    if fn is not None:
        _run_guarded(fn, Event(kind), _lib.text(detail))


@_lib.LOG_FN
def _on_log(ud: Optional[int], level: int, msg: Optional[bytes]) -> None:
    fn = _lib.lookup(ud)
    if fn is not None:
        _run_guarded(fn, level, _lib.text(msg))


_run_fn_cache: Dict[int, Any] = {}


@_lib.SUBMIT_FN
def _on_submit(ctx: Optional[int], run: Optional[int], arg: Optional[int]) -> int:
    ex = _lib.lookup(ctx)
    if ex is None or not run:
        return -1
    fn = _run_fn_cache.get(run)
    if fn is None:
        fn = _run_fn_cache.setdefault(run, _lib.RUN_FN(run))
    try:
        ex.submit(fn, arg)
    except Exception:  # noqa: BLE001 - a shut-down executor rejects the task
        return -1
    return 0


def open_client(core: _ClientCore, url: str, items: List[tuple], *, external: bool,
                executor: Optional[concurrent.futures.Executor],
                on_event: Optional[Callable[[Event, str], Any]],
                logger: Union[None, bool, Callable[[int, str], Any]], log_level: str) -> int:
    u = encode(url, "backend URL")
    cfg = c_void_p()
    check(lib.simba_config_new(byref(cfg)))
    try:
        for key, value in items:
            if key in ("loop.mode", "callback.executor") and (external or executor is not None):
                raise InvalidArgument(-1, f"{key} is set by the binding here")
            _set_key(cfg.value, key, value)
        if external:
            check(lib.simba_config_set(cfg, b"loop.mode", b"external"))
        if executor is not None:
            k = _lib.register(executor)
            core.keys.append(k)
            check(lib.simba_config_set_executor(cfg, _on_submit, k))
        if on_event is not None:
            k = _lib.register(on_event)
            core.keys.append(k)
            check(lib.simba_config_set_event_sink(cfg, _on_event, k))
        if logger is not None and logger is not False:
            if logger is True:
                def logger(level: int, line: str) -> None:  # noqa: F811
                    log.log(_PY_LEVELS.get(level, logging.INFO), "%s", line)
            if log_level not in _LOG_LEVELS:
                raise InvalidArgument(-1, f"log_level must be one of {sorted(_LOG_LEVELS)}")
            k = _lib.register(logger)
            core.keys.append(k)
            check(lib.simba_config_set_logger(cfg, _on_log, k, _LOG_LEVELS[log_level]))
        h = c_void_p()
        check(lib.simba_client_open(byref(h), u, cfg))
        assert h.value
        return h.value
    except BaseException:
        for k in core.keys:
            _lib.unregister(k)
        core.keys.clear()
        raise
    finally:
        lib.simba_config_free(cfg)


@dataclass(frozen=True)
class Change:
    """A change of an observed name's holder (or the state at the start)."""

    name: str
    holder_session: Optional[str]
    """The holding session's id; None when the name is free."""
    holder_client: Optional[str]
    """The holder's client.name; None when free or unknown."""
    token: int
    """The holder's token (the last granted when free, 0 if never)."""

    @property
    def held(self) -> bool:
        return self.holder_session is not None


class _Handle:
    """An election, task or observer: freed by close() or by its client's close."""

    _kind = "handle"

    def __init__(self, client: "_BaseClient", name: str) -> None:
        # The registry of callbacks holds handles; a weak reference to a THREAD
        # client lets an unclosed client be collected (and closed) even while
        # its elections run. An asyncio client is closed explicitly: strong.
        self._client: Any = weakref.proxy(client) if client._weak_handles else client
        self._core = client._core
        self._name = name
        self._h: Optional[int] = None
        self._keys: List[int] = []
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self._name

    @property
    def closed(self) -> bool:
        return self._h is None

    def _forget(self) -> None:
        # The client closed: its callbacks have all returned. Free the handle
        # (valid until freed; its stop is done) and drop the callbacks.
        with self._lock:
            h, self._h = self._h, None
        if h is not None and self._core.pid == os.getpid():
            self._free(h)
        for k in self._keys:
            _lib.unregister(k)
        self._keys.clear()

    def _free(self, h: int) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def _c_close_async(self, h: int, key: int) -> int:  # pragma: no cover - overridden
        raise NotImplementedError

    def _after_close(self) -> None:
        """Run in the close's done, before the user's callback."""

    def close_async(self, callback: Optional[Callable[[], Any]] = None
                    ) -> "concurrent.futures.Future[None]":
        """Close without waiting, from anywhere: a callback of this handle, leader
        work, another thread (libsimba 1.4, ``simba_*_close_async``).

        No callback of the handle starts once this returns (an election's
        ``on_revoked`` for the term this close stops included); an election or
        task is stopped as :meth:`stop` does, unless it was already. Then
        ``callback()`` runs once, on the callback executor, the handle's last
        callback (after the completions of an earlier stop or step-down, after a
        task's every run of its work returned), and the returned future
        completes. Closing a closed handle raises :class:`Closed`."""
        with self._lock:
            h, self._h = self._h, None
        if h is None:
            raise Closed(-6, f"close_async: the {self._kind} {self._name!r} is closed")
        return self._start_close(h, callback)

    def _start_close(self, h: int, callback: Optional[Callable[[], Any]]
                     ) -> "concurrent.futures.Future[None]":
        fut: "concurrent.futures.Future[None]" = concurrent.futures.Future()
        self._core.children.discard(self)
        if self._core.pid != os.getpid():
            fut.set_result(None)  # the parent's handle (fork): not ours to close
            return fut
        keys, self._keys = self._keys, []

        def done(err: int) -> None:
            # The handle's last callback: nothing of the library reaches its
            # trampolines' registry entries any more.
            for k in keys:
                _lib.unregister(k)
            try:
                self._after_close()
                if callback is not None:
                    callback()
            finally:
                fut.set_result(None)
        key = _lib.register(done)
        rc = self._c_close_async(h, key)
        if rc < 0:  # ENOMEM: nothing happened
            _lib.unregister(key)
            self._keys = keys
            self._h = h
            self._core.children.add(self)
            check(rc)
        kick = getattr(self._client, "_kick", None)
        if kick is not None:
            kick()  # an asyncio client: process soon, where done runs
        return fut

    def _close_and_wait(self) -> None:
        """close(): close_async, then wait for its done outside callbacks on a
        thread-driven client (on an asyncio client done runs on the loop)."""
        with self._lock:
            h, self._h = self._h, None
        if h is None:
            return
        fut = self._start_close(h, None)
        if not _lib.in_callback() and not self._client._external:
            fut.result()

    def _live(self, op: str) -> int:
        h = self._h
        if h is None:
            raise Closed(-6, f"{op}: the {self._kind} {self._name!r} is closed")
        return h

    def __enter__(self) -> "_Handle":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError


def _done_future(fut: "concurrent.futures.Future[None]") -> int:
    def done(err: int) -> None:
        if fut.done():
            return
        if err == 0:
            fut.set_result(None)
        else:
            fut.set_exception(error(err, f"stop failed ({err})"))
    return _lib.register(done)


class _Stoppable(_Handle):
    """Elections and tasks share stop / step_down / close."""

    def _c_stop(self, h: int, key: int) -> int:  # pragma: no cover - overridden
        raise NotImplementedError

    def _c_step_down(self, h: int, cooldown_ms: int, key: int) -> int:  # pragma: no cover
        raise NotImplementedError

    def stop(self) -> "concurrent.futures.Future[None]":
        """Start the stop: the term is revoked (STOPPED), leader work returns, the
        lease is released with its token. The future completes after the last
        callback. Stopping twice fails with :class:`StateError`."""
        fut: "concurrent.futures.Future[None]" = concurrent.futures.Future()
        key = _done_future(fut)
        rc = self._c_stop(self._live("stop"), key)
        if rc < 0:
            _lib.unregister(key)
            check(rc)
        return fut

    def step_down(self, cooldown: float = 0.0) -> "concurrent.futures.Future[None]":
        """Give the term up (STEPPED_DOWN) and do not contend for ``cooldown``
        seconds; the future completes once it was handed over."""
        fut: "concurrent.futures.Future[None]" = concurrent.futures.Future()
        key = _done_future(fut)
        rc = self._c_step_down(self._live("step_down"), to_ms(cooldown, "cooldown"), key)
        if rc < 0:
            _lib.unregister(key)
            check(rc)
        return fut

    def close(self) -> None:
        """Stop and free (:meth:`close_async`). Outside callbacks it waits until
        the stop completed and no callback runs; inside a callback or leader work
        it starts the close and returns. Closing again is a no-op."""
        self._close_and_wait()


class Election(_Stoppable):
    """Contending for a name; see :meth:`Client.elect`."""

    _kind = "election"

    def __init__(self, client: "_BaseClient", name: str,
                 on_elected: Optional[Callable[[Term], Any]],
                 on_revoked: Optional[Callable[[Term, RevokeReason], Any]]) -> None:
        super().__init__(client, name)
        self._on_elected = on_elected
        self._on_revoked = on_revoked
        self._term: Optional[Term] = None
        self._terms: Dict[int, Term] = {}

    def _start(self, n: bytes) -> None:
        key = _lib.register(self)
        self._keys.append(key)
        listener = _lib.Listener(_on_elected, _on_revoked, key)
        h = c_void_p()
        rc = lib.simba_election_start(byref(h), self._client._live("elect"), n, byref(listener))
        if rc < 0:
            e = error(rc)
            _lib.unregister(key)
            raise e
        self._h = h.value

    def _free(self, h: int) -> None:
        lib.simba_election_free(h)

    def _c_close_async(self, h: int, key: int) -> int:
        return lib.simba_election_close_async(h, _on_done, key)

    def _c_stop(self, h: int, key: int) -> int:
        return lib.simba_election_stop(h, _on_done, key)

    def _c_step_down(self, h: int, cooldown_ms: int, key: int) -> int:
        return lib.simba_election_step_down(h, cooldown_ms, _on_done, key)

    def stop_wait(self, timeout: Optional[float] = None) -> None:
        """Stop and wait for the stop (every on_revoked has run); raises
        :class:`Timeout` (the stop goes on) or :class:`WouldBlock` in a callback."""
        check(lib.simba_election_stop_wait(self._live("stop_wait"), to_ms(timeout, "timeout")))

    @property
    def term(self) -> Optional[Term]:
        """The current term while elected, else None."""
        t = self._term
        return t if t is not None and t.valid else None

    @property
    def is_leader(self) -> bool:
        return self.term is not None

    def __repr__(self) -> str:
        return f"<simba.Election {self._name!r} leader={self.is_leader} closed={self.closed}>"


@_lib.ELECTED_FN
def _on_elected(ud: Optional[int], t: Optional[int]) -> None:
    e = _lib.lookup(ud)
    if e is None or not t:
        return
    term = Term(t, is_lock=False, owned=False)
    e._terms[t] = term
    e._term = term
    if e._on_elected is not None:
        _run_guarded(e._on_elected, term)


@_lib.REVOKED_FN
def _on_revoked(ud: Optional[int], t: Optional[int], reason: int) -> None:
    e = _lib.lookup(ud)
    if e is None or not t:
        return
    term = e._terms.pop(t, None) or Term(t, is_lock=False, owned=False)
    if e._term is term:
        e._term = None
    if e._on_revoked is not None:
        _run_guarded(e._on_revoked, term, RevokeReason(reason))


class Task(_Stoppable):
    """Leader work, a schedule or a group membership; see :meth:`Client.run_while_leader`."""

    _kind = "task"

    def __init__(self, client: "_BaseClient", name: str, work: Callable[[Any], Any],
                 wants: str) -> None:
        super().__init__(client, name)
        self._work = work
        self._wants = wants  # "cancel" or "term"

    def _register(self) -> int:
        key = _lib.register(self)
        self._keys.append(key)
        return key

    def _free(self, h: int) -> None:
        lib.simba_task_close(h)

    def _c_close_async(self, h: int, key: int) -> int:
        return lib.simba_task_close_async(h, _on_done, key)

    def _c_stop(self, h: int, key: int) -> int:
        return lib.simba_task_stop(h, _on_done, key)

    def _c_step_down(self, h: int, cooldown_ms: int, key: int) -> int:
        return lib.simba_task_step_down(h, cooldown_ms, _on_done, key)

    def __repr__(self) -> str:
        return f"<simba.Task {self._name!r} closed={self.closed}>"


@_lib.WORK_FN
def _on_work(ud: Optional[int], t: Optional[int]) -> None:
    task = _lib.lookup(ud)
    if task is None or not t:
        return
    term = Term(t, is_lock=False, owned=False)
    _run_guarded(task._work, Cancellation(term))


class Observer(_Handle):
    """Follows who holds a name; iterate it (``for change in observer``) or pass
    a callback to :meth:`Client.observe`. Iteration ends when it is closed."""

    _kind = "observer"
    _END = object()

    def __init__(self, client: "_BaseClient", name: str,
                 callback: Optional[Callable[[Change], Any]]) -> None:
        super().__init__(client, name)
        self._callback = callback
        self._queue: "queue.SimpleQueue[Any]" = queue.SimpleQueue()

    def _deliver(self, change: Change) -> None:
        if self._callback is not None:
            self._callback(change)
        else:
            self._queue.put(change)

    def _free(self, h: int) -> None:
        lib.simba_observer_free(h)
        self._queue.put(self._END)

    def _c_close_async(self, h: int, key: int) -> int:
        return lib.simba_observer_close_async(h, _on_done, key)

    def _after_close(self) -> None:
        self._queue.put(self._END)

    def close(self) -> None:
        """Stop observing (:meth:`close_async`). Outside callbacks it waits until
        no callback of the observer runs; from its own callback no further call
        starts. Closing again is a no-op."""
        self._close_and_wait()

    def get(self, timeout: Optional[float] = None) -> Optional[Change]:
        """The next change, waiting up to ``timeout`` seconds (None: no bound);
        None at the timeout or once closed."""
        try:
            item = self._queue.get(timeout=timeout)
        except queue.Empty:
            return None
        if item is self._END:
            self._queue.put(self._END)
            return None
        return item  # type: ignore[no-any-return]

    def __iter__(self) -> Iterator[Change]:
        while True:
            item = self._queue.get()
            if item is self._END:
                self._queue.put(self._END)
                return
            yield item

    def __repr__(self) -> str:
        return f"<simba.Observer {self._name!r} closed={self.closed}>"


@_lib.OBSERVE_FN
def _on_observe(ud: Optional[int], name: Optional[bytes], session: Optional[bytes],
                client: Optional[bytes], token: int) -> None:
    ob = _lib.lookup(ud)
    if ob is None:
        return
    ch = Change(_lib.text(name), session.decode() if session is not None else None,
                client.decode() if client is not None else None, int(token))
    _run_guarded(ob._deliver, ch)


class _BaseClient:
    """What the thread client and the asyncio client share."""

    _core: _ClientCore
    _weak_handles = True
    _external = False  # EXTERNAL mode: callbacks run inside process() on the host loop

    def _live(self, op: str) -> int:
        h = self._core.h
        if h is None:
            if self._core.pid != os.getpid():
                raise Closed(-6, f"{op}: this client belongs to the parent process (fork): "
                                 "open a new client in the child")
            raise Closed(-6, f"{op}: the client is closed")
        return h

    @property
    def closed(self) -> bool:
        return self._core.h is None

    @property
    def status(self) -> SessionStatus:
        """The session status (never blocks)."""
        h = self._core.h
        return SessionStatus(lib.simba_client_status(h) if h is not None else 3)

    def snapshot(self) -> Dict[str, Any]:
        """The client's snapshot (session, elections, locks, counters) as a dict."""
        s = _lib.take_string(lib.simba_client_snapshot_json(self._live("snapshot")))
        if s is None:
            raise error(-6 if self.closed else -7)
        return json.loads(s)  # type: ignore[no-any-return]

    def metrics(self) -> str:
        """The client's metrics in the Prometheus text format."""
        s = _lib.take_string(lib.simba_client_metrics_text(self._live("metrics")))
        if s is None:
            raise error(-6 if self.closed else -7)
        return s

    def _add(self, handle: _Handle) -> None:
        self._core.children.add(handle)

    def _elect(self, cls: type, name: str, on_elected: Any, on_revoked: Any) -> Election:
        n = encode_name(name)
        e = cls(self, name, on_elected, on_revoked)
        e._start(n)
        self._add(e)
        return e

    def _task(self, cls: type, kind: str, name: str, work: Any, wants: str,
              initial_delay: float = 0.0, period: float = 0.0, partitions: int = 0,
              work_fn: Any = None) -> Task:
        if kind == "group":
            if not isinstance(name, str):
                raise InvalidType(-1, f"group name must be str, not {type(name).__name__}")
            n = encode(name, "group name")
        else:
            n = encode_name(name)
        if not callable(work):
            raise TypeError("work must be callable")
        t = cls(self, name, work, wants)
        key = t._register()
        h = c_void_p()
        c = self._live(kind)
        fn = work_fn if work_fn is not None else _on_work
        if kind == "run_while_leader":
            rc = lib.simba_run_while_leader(byref(h), c, n, fn, key)
        elif kind == "schedule":
            rc = lib.simba_schedule(byref(h), c, n, to_ms(initial_delay, "initial_delay"),
                                    to_ms(period, "period"), fn, key)
        else:
            if isinstance(partitions, bool) or not isinstance(partitions, int):
                raise TypeError("partitions must be int")
            rc = lib.simba_group_join(byref(h), c, n, partitions, fn, key)
        if rc < 0:
            e = error(rc)
            _lib.unregister(key)
            raise e
        t._h = h.value
        self._add(t)
        return t

    def _observe(self, cls: type, name: str, poll: Optional[float], callback: Any) -> Observer:
        n = encode_name(name)
        ob = cls(self, name, callback)
        key = _lib.register(ob)
        ob._keys.append(key)
        h = c_void_p()
        rc = lib.simba_observe_start(byref(h), self._live("observe"), n,
                                     to_ms(poll, "poll", none_ms=0), _on_observe, key)
        if rc < 0:
            e = error(rc)
            _lib.unregister(key)
            raise e
        ob._h = h.value
        self._add(ob)
        return ob

    def on_event(self, fn: Optional[Callable[[Event, str], Any]]) -> None:
        """Replace the session event sink: ``fn(event, detail_json)``; None stops delivery.
        (``Client(..., on_event=fn)`` also sees the first SESSION_OPENED.)"""
        c = self._live("on_event")
        if fn is None:
            check(lib.simba_client_on_event(c, ctypes.cast(None, _lib.EVENT_FN), None))
            return
        k = _lib.register(fn)
        rc = lib.simba_client_on_event(c, _on_event, k)
        if rc < 0:
            _lib.unregister(k)
            check(rc)
        self._core.keys.append(k)


class Client(_BaseClient):
    """A client: one session on one backend, its callbacks on the library's threads.

    ``Client(url, **options)`` opens at once (the session opens in the
    background). Options: ``lease_duration``, ``renew_interval``, ``margin``,
    ``retry_jitter``, ``min_backoff`` (seconds, or text such as ``"1.5s"``),
    ``drift``, ``callback_threads``, ``callback_executor`` (``"pool"`` or
    ``"direct"``), ``name`` (client.name); ``config={"session.margin": "20ms"}``
    for raw keys; ``executor=`` a :class:`concurrent.futures.Executor` that runs
    every callback (the library's host executor); ``on_event=fn(event, detail_json)``;
    ``logger=True`` (the ``simba`` logging logger) or ``fn(level, line)`` with
    ``log_level``. Use it as a context manager, or call :meth:`close`.
    """

    def __init__(self, url: str, *, executor: Optional[concurrent.futures.Executor] = None,
                 on_event: Optional[Callable[[Event, str], Any]] = None,
                 logger: Union[None, bool, Callable[[int, str], Any]] = None,
                 log_level: str = "info", config: Optional[Mapping[str, ConfigValue]] = None,
                 **options: Any) -> None:
        self._core = _ClientCore()
        self.url = url
        items = config_items(options, config)
        self._core.h = open_client(self._core, url, items, external=False, executor=executor,
                                   on_event=on_event, logger=logger, log_level=log_level)
        self._core.hv = c_void_p.from_param(self._core.h)
        self._finalizer = weakref.finalize(self, _finalize_client, self._core)
        self._finalizer.atexit = False
        _live_clients.add(self)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop every election, lock and task (terms revoked with STOPPED, in
        handover order), close the session and free the client; after it returns
        no callback of the client runs. Inside a callback or leader work it
        starts the close and returns. Closing again is a no-op."""
        core = self._core
        with core.lock:
            h, core.h, core.hv = core.h, None, None
        if h is None:
            return
        self._finalizer.detach()
        _live_clients.discard(self)
        if _lib.in_callback():
            key = _lib.register(core.drop_keys)
            if lib.simba_client_close_async(h, _on_close_done, key) != 0:
                _lib.unregister(key)
            return
        rc = lib.simba_client_close(h)
        core.drop_keys()
        check(rc)

    def wait_live(self, timeout: Optional[float] = None) -> None:
        """Wait until the session is LIVE; :class:`Timeout` after ``timeout`` seconds."""
        check(lib.simba_client_wait_live(self._live("wait_live"), to_ms(timeout, "timeout")))

    def lock(self, name: str, timeout: Optional[float] = None) -> Term:
        """Acquire the lock ``name``, waiting up to ``timeout`` seconds (None: no
        bound); raises :class:`Timeout`. Use the term as a context manager::

            with client.lock("report", timeout=2.0) as term:
                write(fencing_token=term.token)
        """
        try:
            n = _names[name]  # the checked bytes of a str used before
        except (KeyError, TypeError):
            n = encode_name(name)
        hv = self._core.hv
        if hv is None:
            self._live("lock")
        out = c_void_p()
        rc = _lock_acquire(byref(out), hv, n,
                           _FOREVER if timeout is None else c_int64(to_ms(timeout, "timeout")))
        if rc:
            raise error(rc)
        # Term(...) without its __init__ (one call less on the lock cycle).
        t = _new_object(Term)
        t._hv = out
        t._owned = [1]
        t._is_lock = True
        t._name = name
        t._gen = _gen[0]
        return t

    def try_lock(self, name: str) -> Term:
        """One attempt; raises :class:`Busy` when someone else holds it."""
        n = encode_name(name)
        out = c_void_p()
        check(lib.simba_lock_try_acquire(byref(out), self._live("try_lock"), n))
        return Term(out.value, is_lock=True, owned=True, name=name)  # type: ignore[arg-type]

    def lock_async(self, name: str, timeout: Optional[float] = None) -> "concurrent.futures.Future[Term]":
        """Acquire without blocking: a future of the term (or of :class:`Timeout`
        / :class:`Cancelled`). A term that arrives after the future was
        cancelled is released at once."""
        n = encode_name(name)
        h, ms = self._live("lock_async"), to_ms(timeout, "timeout")
        return _term_future(lambda key: lib.simba_lock_acquire_async(h, n, ms, _on_lock, key),
                            lambda err: error(err, f"lock {name!r}: {_errors_code(err)}"))

    # --- semaphores and read/write locks (libsimba 1.5, ADR 0046) -------------
    # A permit's term is a lock's: a context manager, released with release().
    def semaphore(self, name: str, permits: int, timeout: Optional[float] = None) -> Term:
        """Acquire a permit of semaphore ``name`` of ``permits`` permits, waiting up
        to ``timeout`` seconds (None: no bound); raises :class:`Timeout`, and
        :class:`StateError` when the semaphore has another size::

            with client.semaphore("encoders", 4, timeout=2.0) as term:
                encode(fencing_token=term.token)
        """
        return self._permit("semaphore", name, (_permits(permits),), timeout)

    def try_semaphore(self, name: str, permits: int) -> Term:
        """One attempt; raises :class:`Busy` when every permit is held."""
        return self._permit("semaphore", name, (_permits(permits),), None, try_=True)

    def semaphore_async(self, name: str, permits: int,
                        timeout: Optional[float] = None) -> "concurrent.futures.Future[Term]":
        """A future of a permit's term (or of :class:`Timeout`, :class:`StateError`,
        :class:`Cancelled`), as :meth:`lock_async`."""
        return self._permit_async("semaphore", name, (_permits(permits),), timeout)

    def read_lock(self, name: str, timeout: Optional[float] = None) -> Term:
        """Acquire read/write lock ``name`` shared; waits while a writer holds it
        or waits for it (writers are preferred). Its token is the name's write epoch."""
        return self._permit("rwlock", name, (READ,), timeout)

    def write_lock(self, name: str, timeout: Optional[float] = None) -> Term:
        """Acquire read/write lock ``name`` exclusive (waits for every reader, this
        client's own included: there is no upgrade)."""
        return self._permit("rwlock", name, (WRITE,), timeout)

    def try_read_lock(self, name: str) -> Term:
        """One attempt; :class:`Busy` while a writer holds or waits for it."""
        return self._permit("rwlock", name, (READ,), None, try_=True)

    def try_write_lock(self, name: str) -> Term:
        """One attempt; :class:`Busy` while anyone holds it (leaves no intent)."""
        return self._permit("rwlock", name, (WRITE,), None, try_=True)

    def read_lock_async(self, name: str,
                        timeout: Optional[float] = None) -> "concurrent.futures.Future[Term]":
        """A future of a read lock's term, as :meth:`lock_async`."""
        return self._permit_async("rwlock", name, (READ,), timeout)

    def write_lock_async(self, name: str,
                         timeout: Optional[float] = None) -> "concurrent.futures.Future[Term]":
        """A future of a write lock's term, as :meth:`lock_async`."""
        return self._permit_async("rwlock", name, (WRITE,), timeout)

    def _permit(self, what: str, name: str, args: tuple, timeout: Optional[float], *,
                try_: bool = False) -> Term:
        n = encode_name(name)
        out = c_void_p()
        if try_:
            fn = _lib.require(f"simba_{what}_try_acquire")
            check(fn(byref(out), self._live(what), n, *args))
        else:
            fn = _lib.require(f"simba_{what}_acquire")
            check(fn(byref(out), self._live(what), n, *args, to_ms(timeout, "timeout")))
        return Term(out.value, is_lock=True, owned=True, name=name)  # type: ignore[arg-type]

    def _permit_async(self, what: str, name: str, args: tuple,
                      timeout: Optional[float]) -> "concurrent.futures.Future[Term]":
        fn = _lib.require(f"simba_{what}_acquire_async")
        n = encode_name(name)
        h, ms = self._live(f"{what}_async"), to_ms(timeout, "timeout")
        return _term_future(lambda key: fn(h, n, *args, ms, _on_lock, key),
                            lambda err: permit_error(err, what, name))

    def elect(self, name: str, on_elected: Optional[Callable[[Term], Any]] = None,
              on_revoked: Optional[Callable[[Term, RevokeReason], Any]] = None) -> Election:
        """Contend for ``name``. Every ``on_elected(term)`` is followed by exactly
        one ``on_revoked(term, reason)`` for the same term, one at a time, on the
        library's threads (or the client's ``executor``)."""
        return self._elect(Election, name, on_elected, on_revoked)

    def run_while_leader(self, name: str, fn: Callable[[Cancellation], Any]) -> Task:
        """Each time this client is elected, run ``fn(cancel)`` on a thread of the
        library; ``cancel`` is set at the revocation (``cancel.term`` is the
        term). The lease is released only after ``fn`` returned (handover order)."""
        return self._task(Task, "run_while_leader", name, fn, "cancel")

    def schedule(self, name: str, fn: Callable[[Cancellation], Any], period: float,
                 initial_delay: float = 0.0) -> Task:
        """While leader, run ``fn(cancel)`` after ``initial_delay`` and then every
        ``period`` seconds (fixed delay)."""
        return self._task(Task, "schedule", name, fn, "cancel", initial_delay=initial_delay,
                          period=period)

    def join_group(self, group: str, partitions: int, fn: Callable[[Cancellation], Any]) -> Task:
        """Join the partition group: ``fn(cancel)`` runs for each partition
        ``GROUP.K`` this member leads (``cancel.term.name``)."""
        return self._task(Task, "group", group, fn, "cancel", partitions=partitions)

    def observe(self, name: str, callback: Optional[Callable[[Change], Any]] = None,
                poll: Optional[float] = None) -> Observer:
        """Follow who holds ``name`` without contending: iterate the observer, or
        pass ``callback(change)``. ``poll``: seconds between reads (None: the
        renew interval; else >= 0.01)."""
        return self._observe(Observer, name, poll, callback)

    def inspect(self, names: Optional[Sequence[str]] = None, timeout: float = 5.0) -> Dict[str, Any]:
        """What the backend holds (one read, outside the session), as a dict."""
        if isinstance(names, str):
            raise InvalidType(-1, "names must be a sequence of str, not str")
        enc = [encode_name(n) for n in (names or [])]
        arr = (c_char_p * len(enc))(*enc) if enc else None
        out = c_void_p()
        check(lib.simba_client_inspect_json(self._live("inspect"), arr, len(enc),
                                            to_ms(timeout, "timeout"), byref(out)))
        return json.loads(_lib.take_string(out.value) or "{}")  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"<simba.Client {self.url!r} status={self.status}>"


READ, WRITE = 1, 2  # simba_lock_mode_t


def _term_future(start: Callable[[int], int],
                 fail: Callable[[int], Exception]) -> "concurrent.futures.Future[Term]":
    """A future of the term an ``*_acquire_async`` call (``start(key)``) delivers
    to _on_lock; a term that arrives after the future was cancelled is released."""
    fut: "concurrent.futures.Future[Term]" = concurrent.futures.Future()

    def done(err: int, term: Optional[Term]) -> None:
        if err == 0 and term is not None:
            if not fut.set_running_or_notify_cancel():
                term.release()
                return
            fut.set_result(term)
        elif fut.set_running_or_notify_cancel():
            fut.set_exception(fail(err))
    key = _lib.register(done)
    rc = start(key)
    if rc < 0:
        _lib.unregister(key)
        check(rc)
    return fut


def _permits(permits: int) -> int:
    # Checked here: ctypes would wrap a negative or too large int into uint32.
    if isinstance(permits, bool) or not isinstance(permits, int):
        raise InvalidType(-1, f"permits must be an int, not {type(permits).__name__}")
    if not 1 <= permits <= 0xFFFFFFFF:
        raise InvalidArgument(-1, f"permits must be 1..4294967295, not {permits}")
    return permits


def permit_error(err: int, what: str, name: str) -> Exception:
    """An async permit's failure: ESTATE's detail (the size) is simba_last_error(),
    set for the callback's thread; the others say the code."""
    if err == -2:
        return error(err)
    return error(err, f"{what} {name!r}: {_errors_code(err)}")


def _errors_code(err: int) -> str:
    from ._errors import code_name
    return code_name(err)


@_lib.LOCK_FN
def _on_lock(ud: Optional[int], err: int, t: Optional[int]) -> None:
    fn = _lib._registry.pop(ud, None) if ud else None
    if fn is None:
        if err == 0 and t:
            lib.simba_term_release(t)  # nobody waits for it: free the name
        return
    term = Term(t, is_lock=True, owned=True) if err == 0 and t else None
    _run_guarded(fn, err, term)
