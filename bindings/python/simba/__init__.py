"""Simba for Python: distributed locks and leader election over libsimba's C ABI.

Loaded with ctypes (no compiled extension); needs libsimba 1.4 or later (1.5 for
semaphores and read/write locks), found through ``SIMBA_LIBRARY``, pkg-config's
libdir, or ``ctypes.util.find_library``.

    import simba

    with simba.Client("redis://127.0.0.1:6379", lease_duration=3.0) as c:
        with c.lock("report", timeout=2.0) as term:
            write_report(fencing_token=term.token)

``simba.aio`` drives a client on the running asyncio event loop.
"""

from __future__ import annotations

from . import _errors, _lib
from ._client import Change, Client, Election, Observer, Task, check_config
from ._errors import (Backend, Busy, Cancelled, Closed, Code, Event, InvalidArgument, InvalidType,
                      NoMemory, RevokeReason, SessionStatus, SimbaError, StateError, TermExpired,
                      TermKind, Timeout, Unsupported, WouldBlock, code_name, strerror)
from ._errors import check as _check
from ._errors import encode as _encode
from ._errors import encode_name as _encode_name
from ._lib import lib as _c
from ._term import Cancellation, Term

__all__ = [
    "Backend", "Busy", "Cancellation", "Cancelled", "Change", "Client", "Closed", "Code",
    "Election", "Event", "InvalidArgument", "InvalidType", "NoMemory", "Observer",
    "RevokeReason", "SessionStatus", "SimbaError", "StateError", "Task", "Term", "TermExpired",
    "TermKind", "kind_name",
    "Timeout", "Unsupported", "WouldBlock", "check_config", "check_name", "code_name",
    "event_name", "reason_name", "schema", "status_name", "strerror", "version",
    "version_string", "__version__",
]

__version__ = "1.5.0"


def version() -> int:
    """The loaded library's version: ``(major << 16) | (minor << 8) | patch``."""
    return int(_c.simba_version())


def version_string() -> str:
    """The loaded library's version as ``"major.minor.patch"``."""
    return _lib.text(_c.simba_version_string())


def reason_name(value: int) -> str:
    """The library's name of a revoke reason (``"UNKNOWN"`` for one it does not define)."""
    return _lib.text(_c.simba_revoke_reason_name(int(value)))


def kind_name(value: int) -> str:
    """The library's name of a term kind (libsimba 1.5; ``"UNKNOWN"`` for one it does not define)."""
    return _lib.text(_lib.require("simba_term_kind_name")(int(value)))


def status_name(value: int) -> str:
    """The library's name of a session status."""
    return _lib.text(_c.simba_session_status_name(int(value)))


def event_name(value: int) -> str:
    """The library's name of a session event."""
    return _lib.text(_c.simba_event_name(int(value)))


def check_name(name: str) -> None:
    """Apply the library's lease-name rule (NUL bytes included); raises
    :class:`InvalidArgument` with the library's message."""
    b = _encode_name(name)
    if _c.simba_lease_name_check(b, len(b)) != 0:
        raise _errors.error(-1)


def schema(url: str) -> str:
    """The DDL the backend of ``url`` installs (postgresql:// only; nothing connects)."""
    import ctypes
    out = ctypes.c_void_p()
    _check(_c.simba_backend_schema(_encode(url, "backend URL"), ctypes.byref(out)))
    return _lib.take_string(out.value) or ""
