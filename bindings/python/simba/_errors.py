"""Exceptions, codes and the library's enums, named by the library itself."""

from __future__ import annotations

import enum
from typing import Dict, Optional, Type

from . import _lib
from ._lib import lib


def code_name(code: int) -> str:
    """The library's name of an error code: ``code_name(-9) == "EBUSY"``;
    ``"UNKNOWN"`` for a code this library does not define."""
    return _lib.text(lib.simba_code_name(int(code)))


def strerror(code: int) -> str:
    """The library's text of an error code."""
    return _lib.text(lib.simba_strerror(int(code)))


class SimbaError(Exception):
    """A failed libsimba call: ``code`` (negative, ``SIMBA_E*``), ``code_name``
    (the library's name, e.g. ``"EBUSY"``) and ``message`` (the library's detail
    of the failed call, ``simba_last_error()``)."""

    code: int = 0

    def __init__(self, code: int, message: str = "") -> None:
        self.code = int(code)
        self.code_name = code_name(self.code)
        self.message = message or strerror(self.code)
        super().__init__(f"{self.message} ({self.code_name})")


class InvalidArgument(SimbaError, ValueError):
    """SIMBA_EINVAL: a bad argument (lease name, URL, configuration, NUL byte)."""


class InvalidType(InvalidArgument, TypeError):
    """SIMBA_EINVAL raised for an argument of the wrong Python type (a name that is not ``str``)."""


class StateError(SimbaError):
    """SIMBA_ESTATE: not allowed now (name already used on this client, already stopped)."""


class TermExpired(SimbaError):
    """SIMBA_EEXPIRED: the term is not valid, or not for long enough."""


class Timeout(SimbaError, TimeoutError):
    """SIMBA_ETIMEDOUT: the timeout passed first."""


class Backend(SimbaError):
    """SIMBA_EBACKEND: the backend is unreachable or answered an error."""


class Closed(SimbaError):
    """SIMBA_ECLOSED: the client is closed or closing (or belongs to the parent of a fork)."""


class NoMemory(SimbaError, MemoryError):
    """SIMBA_ENOMEM."""


class WouldBlock(SimbaError):
    """SIMBA_EWOULDBLOCK: a blocking call from a callback or leader work of the library."""


class Busy(SimbaError):
    """SIMBA_EBUSY: try-lock found the lease held by someone else."""


class Unsupported(SimbaError):
    """SIMBA_EUNSUPPORTED: a URL scheme or feature not built into the library."""


class Cancelled(SimbaError):
    """SIMBA_ECANCELED: an asynchronous call was cancelled by a stop or a close."""


_BY_CODE: Dict[int, Type[SimbaError]] = {
    -1: InvalidArgument, -2: StateError, -3: TermExpired, -4: Timeout, -5: Backend, -6: Closed,
    -7: NoMemory, -8: WouldBlock, -9: Busy, -10: Unsupported, -11: Cancelled,
}


def error(code: int, message: Optional[str] = None) -> SimbaError:
    """The exception for ``code``; ``message`` defaults to this thread's simba_last_error()."""
    if message is None:
        message = _lib.text(lib.simba_last_error())
    return _BY_CODE.get(int(code), SimbaError)(code, message)


def check(rc: int) -> int:
    """Raise for a negative return code; read the detail on this same OS thread
    right after the call (CPython threads are OS threads, so nothing ran between)."""
    if rc < 0:
        raise error(rc)
    return rc


def nul_error(what: str, index: int) -> InvalidArgument:
    return InvalidArgument(-1, f"{what} contains a NUL byte at index {index}")


def encode(value: object, what: str) -> bytes:
    """A ``str`` for the C ABI: refuses other types and embedded NUL bytes."""
    if not isinstance(value, str):
        raise InvalidType(-1, f"{what} must be str, not {type(value).__name__}")
    i = value.find("\0")
    if i >= 0:
        raise nul_error(what, i)
    return value.encode("utf-8")


_name_cache: Dict[str, bytes] = {}


def encode_name(value: object, what: str = "lease name") -> bytes:
    """A lease name, checked by the library's own rule on its counted bytes
    (simba_lease_name_check), so a NUL byte is refused with the library's message."""
    if value.__class__ is str:
        b = _name_cache.get(value)  # type: ignore[arg-type]
        if b is not None:
            return b
    if value.__class__ is not str and not isinstance(value, str):
        raise InvalidType(-1, f"{what} must be str, not {type(value).__name__}")
    b = value.encode("utf-8")
    # Without a NUL byte the C string is the whole name, and every name-taking
    # function applies the rule itself; with one, the library's counted check
    # gives its message (the rule is never copied here).
    if b"\0" in b and lib.simba_lease_name_check(b, len(b)) != 0:
        raise error(-1)
    if value.__class__ is str and len(_name_cache) < 4096:
        _name_cache[value] = b  # type: ignore[index]
    return b


class _LibraryEnum(enum.IntEnum):
    """An enum whose names come from the library, and that keeps a value it does
    not know (from a newer libsimba) as a number named ``UNKNOWN(n)``."""

    @classmethod
    def _missing_(cls, value: object) -> "_LibraryEnum":
        if not isinstance(value, int):
            return None  # type: ignore[return-value]
        member = int.__new__(cls, value)
        member._name_ = f"UNKNOWN({value})"
        member._value_ = value
        return member

    @classmethod
    def _library_name(cls, value: int) -> str:  # pragma: no cover - overridden
        raise NotImplementedError

    @property
    def library_name(self) -> str:
        """The library's name of this value (``"UNKNOWN"`` for one it does not define)."""
        return self._library_name(int(self))

    def __str__(self) -> str:
        n = self.library_name
        return n if n != "UNKNOWN" else f"UNKNOWN({int(self)})"


class RevokeReason(_LibraryEnum):
    """Why a term ended (simba_revoke_reason_t)."""

    NONE = 0
    STOPPED = 1
    STEPPED_DOWN = 2
    DEADLINE_PASSED = 3
    SESSION_EXPIRED = 4
    TAKEN_OVER = 5

    @classmethod
    def _library_name(cls, value: int) -> str:
        return _lib.text(lib.simba_revoke_reason_name(value))


class TermKind(_LibraryEnum):
    """What a term is a term of (simba_term_kind_t, libsimba 1.5)."""

    ELECTION = 0
    LOCK = 1
    SEMAPHORE = 2
    READ = 3
    WRITE = 4

    @classmethod
    def _library_name(cls, value: int) -> str:
        return _lib.text(_lib.require("simba_term_kind_name")(value))


class SessionStatus(_LibraryEnum):
    """A client's session status (simba_session_status_t)."""

    OPENING = 0
    LIVE = 1
    SUSPENDED = 2
    CLOSED = 3

    @classmethod
    def _library_name(cls, value: int) -> str:
        return _lib.text(lib.simba_session_status_name(value))


class Event(_LibraryEnum):
    """A session event (simba_event_type_t)."""

    SESSION_OPENED = 0
    SESSION_LIVE = 1
    SESSION_SUSPENDED = 2
    SESSION_EXPIRED = 3
    SESSION_CLOSED = 4
    SESSION_LEASE_SHORTENED = 5

    @classmethod
    def _library_name(cls, value: int) -> str:
        return _lib.text(lib.simba_event_name(value))


class Code(_LibraryEnum):
    """Error codes (SIMBA_OK, SIMBA_E*)."""

    OK = 0
    EINVAL = -1
    ESTATE = -2
    EEXPIRED = -3
    ETIMEDOUT = -4
    EBACKEND = -5
    ECLOSED = -6
    ENOMEM = -7
    EWOULDBLOCK = -8
    EBUSY = -9
    EUNSUPPORTED = -10
    ECANCELED = -11

    @classmethod
    def _library_name(cls, value: int) -> str:
        return code_name(value)
