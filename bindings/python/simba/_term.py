"""Terms and the cancellation object leader work receives."""

from __future__ import annotations

import concurrent.futures
from ctypes import c_void_p
from typing import Any, Callable, Optional

from . import _lib
from ._errors import RevokeReason, TermKind, check, error
from ._lib import lib

_FOREVER_MS = -1


def to_ms(seconds: Optional[float], what: str, *, none_ms: int = _FOREVER_MS) -> int:
    """Seconds (float) to whole milliseconds for the C ABI; None means ``none_ms``."""
    if seconds is None:
        return none_ms
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise TypeError(f"{what} must be a number of seconds or None, not {type(seconds).__name__}")
    if seconds < 0:
        raise ValueError(f"{what} must not be negative")
    return int(round(seconds * 1000))


_gen = _lib.fork_generation
_retain = _lib.term_retain
_release_ref = lib.simba_term_release
_drop_released = _lib.term_drop_released
_fast_release = _lib.fast_lock_release
_term_name = _lib.term_name
_term_token = _lib.term_token
_term_is_valid = _lib.term_is_valid
_term_remaining_ms = _lib.term_remaining_ms
_term_revoke_reason = _lib.term_revoke_reason


class Term:
    """One period of ownership of a lease: a lock term or an election's term.

    Accessors never block and never take a lock. An ended term (released or
    revoked) stays readable: ``name``, ``token`` and ``revoke_reason`` as they
    were, ``valid`` False, ``remaining`` 0.0; only :meth:`ensure_valid` raises.
    A lock term is a context manager that releases the lock on exit; a lock term
    dropped without :meth:`release` is released when it is garbage-collected.
    """

    # _hv: the handle as a c_void_p (the GIL-keeping calls take it as is). The
    # object holds one reference, dropped when it is collected: the lock's own
    # (simba_lock_acquire's) while _owned is [1]; once released (list.pop is
    # atomic), one retained just before simba_lock_release dropped the lock's,
    # so that the ended term stays readable; an election's term, one retained
    # from the callback (_owned empty).
    __slots__ = ("_hv", "_owned", "_is_lock", "_name", "_token", "_gen", "__weakref__")

    def __init__(self, h: int, *, is_lock: bool, owned: bool, name: Optional[str] = None) -> None:
        hv = c_void_p(h)
        if not owned:
            _retain(hv)  # borrowed (a callback's): keep it
        self._hv = hv
        self._owned = [1] if owned else []
        self._is_lock = is_lock
        self._name = name
        self._gen = _gen[0]

    def __del__(self) -> None:
        # Never blocks: simba_term_release does not wait (a lock term whose last
        # reference goes is released in the background). Skipped in a forked
        # child, where the term belongs to the parent.
        try:
            hv = self._hv
        except AttributeError:
            return  # __init__ did not run
        if self._gen != _gen[0]:
            return
        if self._is_lock and not self._owned:
            _drop_released(hv)  # a released lock's: GIL kept (see _lib)
        else:
            _release_ref(hv)

    @property
    def name(self) -> str:
        """The lease name."""
        n = self._name
        if n is None:
            n = self._name = _lib.text(_term_name(self._hv))
        return n

    @property
    def token(self) -> int:
        """The fencing token: constant within the term, strictly increasing across terms of the name."""
        try:
            return self._token
        except AttributeError:  # not read yet (Client.lock leaves it unset)
            t = self._token = _term_token(self._hv)
            return t

    @property
    def valid(self) -> bool:
        """True while not revoked and the session's local deadline has not passed.
        Once False, never True again."""
        return bool(_term_is_valid(self._hv))

    @property
    def remaining(self) -> float:
        """Seconds left before the local deadline; 0.0 once the term ended."""
        return _term_remaining_ms(self._hv) / 1000.0

    @property
    def revoke_reason(self) -> RevokeReason:
        """Why the term ended; ``RevokeReason.NONE`` until it is revoked."""
        return RevokeReason(_term_revoke_reason(self._hv))

    @property
    def is_lock(self) -> bool:
        """True for a term this program releases (a lock's, a semaphore permit's, a
        read or write lock's: :meth:`release`), False for an election's."""
        return self._is_lock

    @property
    def kind(self) -> TermKind:
        """What the term is a term of (:class:`TermKind`; libsimba 1.5)."""
        return TermKind(_lib.require("simba_term_kind")(self._hv))

    def ensure_valid(self, min_remaining: float = 0.0) -> "Term":
        """Return self if the term stays valid for more than ``min_remaining``
        seconds; else raise :class:`TermExpired`."""
        check(lib.simba_term_ensure_valid(self._hv, to_ms(min_remaining, "min_remaining")))
        return self

    def wait_revoked(self, timeout: Optional[float] = None) -> bool:
        """Sleep until the term is revoked or stops being valid: True, or False
        at ``timeout`` seconds (None: no bound). The GIL is released meanwhile."""
        rc = lib.simba_term_wait_revoked(self._hv, to_ms(timeout, "timeout"))
        if rc == -4:
            return False
        check(rc)
        return True

    def revoke_fd(self) -> int:
        """A file descriptor that becomes readable once the term is revoked (owned
        by the term: do not read or close it)."""
        fd = lib.simba_term_revoke_fd(self._hv)
        if fd < 0:
            raise error(-1)
        return fd

    def on_revoked(self, fn: Callable[["Term", RevokeReason], Any]) -> None:
        """Call ``fn(term, reason)`` once when the term is revoked (at once, on
        another thread, if it already is). For a lock, every such function has
        run when :meth:`release` returns."""
        key = _lib.register((fn, self))
        rc = lib.simba_term_on_revoked(self._hv, _on_term_revoked, key)
        if rc < 0:
            _lib.unregister(key)
            check(rc)

    def release(self) -> None:
        """Release a lock term: revoke it (STOPPED), release the lease with its
        token and wait for the backend, so the name is free on return. Releasing
        again is a no-op. Inside a callback or leader work it does not wait."""
        if not self._is_lock:
            raise error(-1, "release: not a lock term (stop the election instead)")
        if self._gen != _gen[0]:
            raise error(-6, "release: this lock belongs to the parent process (fork)")
        try:
            self._owned.pop()
        except IndexError:
            return  # released already
        hv = self._hv
        _retain(hv)  # our own reference, to read the term after the release
        rc = _fast_release(hv)  # drops the lock's reference
        if rc:
            raise error(rc)

    def close_async(self, callback: Optional[Callable[[], Any]] = None
                    ) -> "concurrent.futures.Future[None]":
        """Drop this term without waiting, from anywhere (libsimba 1.4,
        ``simba_term_close_async``). A lock term not released yet is released as
        :meth:`release` does (revoked STOPPED, the lease released with its
        token); ``callback()`` then runs once the backend answered and every
        :meth:`on_revoked` function of the term ran. Any other term: it runs
        after the callbacks already queued for the term. The returned future
        completes after ``callback``. The term stays readable."""
        if self._gen != _gen[0]:
            raise error(-6, "close_async: this term belongs to the parent process (fork)")
        fut: "concurrent.futures.Future[None]" = concurrent.futures.Future()

        def done(err: int) -> None:
            try:
                if callback is not None:
                    callback()
            finally:
                fut.set_result(None)
        key = _lib.register(done)
        hv = self._hv
        _retain(hv)  # ours, to read the term afterwards; the close drops one
        try:
            self._owned.pop()  # the lock's reference goes with this close
        except IndexError:
            pass
        rc = lib.simba_term_close_async(hv, _on_done, key)
        if rc < 0:  # ENOMEM: nothing happened
            _lib.unregister(key)
            _release_ref(hv)
            raise error(rc)
        return fut

    async def aclose(self, callback: Optional[Callable[[], Any]] = None) -> None:
        """:meth:`close_async`, awaited (asyncio): returns after ``callback``."""
        import asyncio
        await asyncio.wrap_future(self.close_async(callback))

    def __enter__(self) -> "Term":
        return self

    def __exit__(self, *exc: object) -> None:
        if self._is_lock:
            self.release()

    def __repr__(self) -> str:
        return (f"<simba.Term {self.name!r} token={self.token} valid={self.valid} "
                f"reason={self.revoke_reason}>")


def _run_guarded(fn: Callable[..., Any], *args: Any) -> None:
    """Run a user callback on a library thread; an exception goes to
    sys.unraisablehook instead of crossing into C."""
    _lib.enter_callback()
    try:
        fn(*args)
    except BaseException as e:  # noqa: BLE001 - nothing may unwind into the library
        import sys
        sys.unraisablehook(_Unraisable(e, fn))  # type: ignore[arg-type]
    finally:
        _lib.leave_callback()


class _Unraisable:
    def __init__(self, exc: BaseException, obj: object) -> None:
        self.exc_type = type(exc)
        self.exc_value = exc
        self.exc_traceback = exc.__traceback__
        self.err_msg = "Exception ignored in simba callback"
        self.object = obj


@_lib.REVOKED_FN
def _on_term_revoked(ud: Optional[int], t: Optional[int], reason: int) -> None:
    entry = _lib._registry.pop(ud, None) if ud else None
    if entry is None:
        return
    fn, term = entry
    _run_guarded(fn, term, RevokeReason(reason))


class Cancellation:
    """What leader work receives: its term and whether the work must stop.

    Set when the term is revoked or stops being valid (deadline passed). Work
    checks :meth:`is_set` (or ``term.ensure_valid()``) between steps and sleeps
    with :meth:`wait`, which returns early at the revocation.
    """

    __slots__ = ("term",)

    def __init__(self, term: Term) -> None:
        self.term = term

    @property
    def token(self) -> int:
        """The term's fencing token, to pass with every write."""
        return self.term.token

    def is_set(self) -> bool:
        """True once the term is revoked or no longer valid."""
        return not self.term.valid

    @property
    def cancelled(self) -> bool:
        return self.is_set()

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Sleep up to ``timeout`` seconds (None: until revoked); True if cancelled."""
        return self.term.wait_revoked(timeout)

    def raise_if_cancelled(self, min_remaining: float = 0.0) -> None:
        """Raise :class:`TermExpired` if the term is not valid for ``min_remaining`` more seconds."""
        self.term.ensure_valid(min_remaining)

    def __bool__(self) -> bool:
        return self.is_set()

    def __repr__(self) -> str:
        return f"<simba.Cancellation {self.term.name!r} token={self.token} set={self.is_set()}>"


@_lib.DONE_FN
def _on_done(ud: Optional[int], err: int) -> None:
    """The done trampoline: the registered function, once, with err."""
    fn = _lib._registry.pop(ud, None) if ud else None
    if fn is not None:
        _run_guarded(fn, err)
