"""Loading libsimba with ctypes and declaring its C ABI (include/simba.h).

Nothing here is public. The library is looked up in this order:

1. ``SIMBA_LIBRARY``: a path (or a soname) to load, nothing else is tried;
2. ``pkg-config --variable=libdir simba``: ``<libdir>/libsimba.so.1``;
3. ``ctypes.util.find_library("simba")`` (the linker's cache);
4. the soname ``libsimba.so.1``, as the dynamic linker finds it (LD_LIBRARY_PATH,
   ld.so.cache, the default directories): Debian's libsimba1 alone, with no
   pkg-config and no -dev symlink on the machine.

A library older than 1.4 (``simba_version() < 0x010400``: the closes
``simba_*_close_async`` of version node SIMBA_1.4) is refused with an
ImportError naming the version this package needs.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import itertools
import os
import shutil
import subprocess
import threading
from ctypes import (CFUNCTYPE, POINTER, c_char_p, c_double, c_int, c_int64, c_size_t, c_uint,
                    c_uint32, c_uint64, c_void_p)
from typing import Any, Dict, List, Optional

REQUIRED_VERSION = 0x010400
REQUIRED_VERSION_STRING = "1.4.0"
SONAME = "libsimba.so.1"


def _version_text(v: int) -> str:
    return f"{v >> 16}.{(v >> 8) & 0xFF}.{v & 0xFF}"


def _candidates() -> List[str]:
    env = os.environ.get("SIMBA_LIBRARY")
    if env:
        return [env]
    found: List[str] = []
    if shutil.which("pkg-config"):
        try:
            out = subprocess.run(["pkg-config", "--variable=libdir", "simba"], capture_output=True,
                                 text=True, timeout=10, check=False)
            libdir = out.stdout.strip()
            if out.returncode == 0 and libdir:
                found.append(os.path.join(libdir, "libsimba.so.1"))
        except (OSError, subprocess.SubprocessError):
            pass
    name = ctypes.util.find_library("simba")
    if name:
        found.append(name)
    if SONAME not in found:
        found.append(SONAME)
    return found


def _load() -> ctypes.CDLL:
    tried: List[str] = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path}: {e}")
            continue
        try:
            fn = lib.simba_version
        except AttributeError:
            tried.append(f"{path}: not libsimba (no simba_version)")
            continue
        fn.restype = c_uint
        fn.argtypes = []
        v = int(fn())
        if (v >> 16) != 1 or v < REQUIRED_VERSION:
            raise ImportError(f"simba needs libsimba {REQUIRED_VERSION_STRING} or later "
                              f"(1.x, simba_version() >= 0x{REQUIRED_VERSION:06x}); "
                              f"{path} is {_version_text(v)}")
        return lib
    detail = "; ".join(tried) if tried else "not found through SIMBA_LIBRARY, pkg-config, find_library or the soname"
    raise ImportError(f"simba needs libsimba {REQUIRED_VERSION_STRING} or later "
                      f"(libsimba.so.1): {detail}")


lib = _load()

# Callback types (simba.h typedefs).
DONE_FN = CFUNCTYPE(None, c_void_p, c_int)
ELECTED_FN = CFUNCTYPE(None, c_void_p, c_void_p)
REVOKED_FN = CFUNCTYPE(None, c_void_p, c_void_p, c_int)
LOCK_FN = CFUNCTYPE(None, c_void_p, c_int, c_void_p)
WORK_FN = CFUNCTYPE(None, c_void_p, c_void_p)
OBSERVE_FN = CFUNCTYPE(None, c_void_p, c_char_p, c_char_p, c_char_p, c_uint64)
EVENT_FN = CFUNCTYPE(None, c_void_p, c_int, c_char_p)
LOG_FN = CFUNCTYPE(None, c_void_p, c_int, c_char_p)
RUN_FN = CFUNCTYPE(None, c_void_p)
SUBMIT_FN = CFUNCTYPE(c_int, c_void_p, c_void_p, c_void_p)


class Listener(ctypes.Structure):
    _fields_ = [("on_elected", ELECTED_FN), ("on_revoked", REVOKED_FN), ("ud", c_void_p)]


_P = c_void_p
_SIGS: Dict[str, Any] = {
    "simba_version": (c_uint, []),
    "simba_version_string": (c_char_p, []),
    "simba_strerror": (c_char_p, [c_int]),
    "simba_last_error": (c_char_p, []),
    "simba_free": (None, [_P]),
    "simba_code_name": (c_char_p, [c_int]),
    "simba_config_new": (c_int, [POINTER(_P)]),
    "simba_config_copy": (c_int, [POINTER(_P), _P]),
    "simba_config_free": (None, [_P]),
    "simba_config_set": (c_int, [_P, c_char_p, c_char_p]),
    "simba_config_set_ms": (c_int, [_P, c_char_p, c_int64]),
    "simba_config_get_ms": (c_int, [_P, c_char_p, POINTER(c_int64)]),
    "simba_config_get_double": (c_int, [_P, c_char_p, POINTER(c_double)]),
    "simba_config_set_executor": (c_int, [_P, SUBMIT_FN, _P]),
    "simba_config_set_logger": (c_int, [_P, LOG_FN, _P, c_int]),
    "simba_config_validate": (c_int, [_P]),
    "simba_config_set_event_sink": (c_int, [_P, EVENT_FN, _P]),
    "simba_client_open": (c_int, [POINTER(_P), c_char_p, _P]),
    "simba_client_wait_live": (c_int, [_P, c_int64]),
    "simba_client_close": (c_int, [_P]),
    "simba_client_close_async": (c_int, [_P, DONE_FN, _P]),
    "simba_client_status": (c_int, [_P]),
    "simba_session_status_name": (c_char_p, [c_int]),
    "simba_client_snapshot_json": (_P, [_P]),
    "simba_client_inspect_json": (c_int, [_P, POINTER(c_char_p), c_size_t, c_int64, POINTER(_P)]),
    "simba_client_metrics_text": (_P, [_P]),
    "simba_observe_start": (c_int, [POINTER(_P), _P, c_char_p, c_int64, OBSERVE_FN, _P]),
    "simba_observer_free": (None, [_P]),
    "simba_observer_close_async": (c_int, [_P, DONE_FN, _P]),
    "simba_client_on_event": (c_int, [_P, EVENT_FN, _P]),
    "simba_event_name": (c_char_p, [c_int]),
    "simba_client_fd": (c_int, [_P]),
    "simba_client_timeout_ms": (c_int64, [_P]),
    "simba_client_process": (c_int, [_P]),
    "simba_backend_schema": (c_int, [c_char_p, POINTER(_P)]),
    "simba_term_name": (c_char_p, [_P]),
    "simba_term_token": (c_uint64, [_P]),
    "simba_term_is_valid": (c_int, [_P]),
    "simba_term_remaining_ms": (c_int64, [_P]),
    "simba_term_ensure_valid": (c_int, [_P, c_int64]),
    "simba_term_revoke_reason": (c_int, [_P]),
    "simba_revoke_reason_name": (c_char_p, [c_int]),
    "simba_term_on_revoked": (c_int, [_P, REVOKED_FN, _P]),
    "simba_term_wait_revoked": (c_int, [_P, c_int64]),
    "simba_term_revoke_fd": (c_int, [_P]),
    "simba_term_retain": (None, [_P]),
    "simba_term_release": (None, [_P]),
    "simba_term_close_async": (c_int, [_P, DONE_FN, _P]),
    "simba_lease_name_check": (c_int, [c_char_p, c_size_t]),
    "simba_election_start": (c_int, [POINTER(_P), _P, c_char_p, POINTER(Listener)]),
    "simba_election_stop": (c_int, [_P, DONE_FN, _P]),
    "simba_election_step_down": (c_int, [_P, c_int64, DONE_FN, _P]),
    "simba_election_stop_wait": (c_int, [_P, c_int64]),
    "simba_election_free": (None, [_P]),
    "simba_election_close_async": (c_int, [_P, DONE_FN, _P]),
    "simba_lock_acquire": (c_int, [POINTER(_P), _P, c_char_p, c_int64]),
    "simba_lock_try_acquire": (c_int, [POINTER(_P), _P, c_char_p]),
    "simba_lock_acquire_async": (c_int, [_P, c_char_p, c_int64, LOCK_FN, _P]),
    "simba_lock_release": (c_int, [_P]),
    "simba_run_while_leader": (c_int, [POINTER(_P), _P, c_char_p, WORK_FN, _P]),
    "simba_schedule": (c_int, [POINTER(_P), _P, c_char_p, c_int64, c_int64, WORK_FN, _P]),
    "simba_group_join": (c_int, [POINTER(_P), _P, c_char_p, c_uint32, WORK_FN, _P]),
    "simba_task_stop": (c_int, [_P, DONE_FN, _P]),
    "simba_task_step_down": (c_int, [_P, c_int64, DONE_FN, _P]),
    "simba_task_close": (c_int, [_P]),
    "simba_task_close_async": (c_int, [_P, DONE_FN, _P]),
    # 1.5 (SIMBA_1.5): bound when the library has them, else require() says so.
    "simba_term_kind": (c_int, [_P]),
    "simba_term_kind_name": (c_char_p, [c_int]),
    "simba_semaphore_acquire": (c_int, [POINTER(_P), _P, c_char_p, c_uint32, c_int64]),
    "simba_semaphore_try_acquire": (c_int, [POINTER(_P), _P, c_char_p, c_uint32]),
    "simba_semaphore_acquire_async": (c_int, [_P, c_char_p, c_uint32, c_int64, LOCK_FN, _P]),
    "simba_rwlock_acquire": (c_int, [POINTER(_P), _P, c_char_p, c_int, c_int64]),
    "simba_rwlock_try_acquire": (c_int, [POINTER(_P), _P, c_char_p, c_int]),
    "simba_rwlock_acquire_async": (c_int, [_P, c_char_p, c_int, c_int64, LOCK_FN, _P]),
}
_SINCE_1_5 = {n for n in _SIGS if n.startswith(("simba_semaphore_", "simba_rwlock_",
                                                 "simba_term_kind"))}
_missing: Dict[str, str] = {}

for _name, (_res, _args) in _SIGS.items():
    try:
        _f = getattr(lib, _name)
    except AttributeError:
        if _name not in _SINCE_1_5:
            raise
        _missing[_name] = "1.5.0"
        continue
    _f.restype = _res
    _f.argtypes = _args


def require(name: str) -> Any:
    """The C function ``name``, or :class:`simba.Unsupported` naming the libsimba it
    needs (the package loads 1.4, which has no semaphores or read/write locks)."""
    need = _missing.get(name)
    if need is not None:
        from ._errors import Unsupported
        raise Unsupported(-10, f"{name} needs libsimba {need} or later; the loaded one is "
                                  f"{_version_text(int(lib.simba_version()))}")
    return getattr(lib, name)


# The lock cycle's two calls without argtypes (ctypes then skips converting each
# argument; callers pass ctypes objects): measured ~0.4 us less per
# cycle on memory:// (docs/benchmarks.md, "Python binding").
_fast = ctypes.CDLL(lib._name)
fast_lock_acquire = _fast.simba_lock_acquire
fast_lock_acquire.restype = c_int
fast_lock_release = _fast.simba_lock_release
fast_lock_release.restype = c_int
FOREVER = c_int64.from_param(-1)  # passed as is, like Client's handle

# Calls that keep the GIL (PyDLL), without argtypes (callers pass a c_void_p):
# the term accessors, which read only atomics and the clock (src/capi/term.cpp),
# simba_term_retain (an atomic increment) and simba_term_release of a lock term
# the binding already released (a decrement; at zero it frees memory and an
# eventfd, nothing that waits). Releasing the GIL around a call of a few
# nanoseconds costs more than the call (docs/benchmarks.md, "Python binding").
_gil = ctypes.PyDLL(lib._name)
term_name = _gil.simba_term_name
term_name.restype = c_char_p
term_token = _gil.simba_term_token
term_token.restype = c_uint64
term_is_valid = _gil.simba_term_is_valid
term_is_valid.restype = c_int
term_remaining_ms = _gil.simba_term_remaining_ms
term_remaining_ms.restype = c_int64
term_revoke_reason = _gil.simba_term_revoke_reason
term_revoke_reason.restype = c_int
term_retain = _gil.simba_term_retain
term_retain.restype = None
term_drop_released = _gil.simba_term_release
term_drop_released.restype = None

# Every SIMBA_API function, for the README's table and a test that none is missing.
FUNCTIONS = tuple(_SIGS)


def text(b: Optional[bytes]) -> str:
    return b.decode("utf-8", "replace") if b is not None else ""


def take_string(p: Optional[int]) -> Optional[str]:
    """A `char *` the library returned: copy it and simba_free() it."""
    if not p:
        return None
    try:
        return ctypes.string_at(p).decode("utf-8", "replace")
    finally:
        lib.simba_free(p)


# User data: C gets an integer key, the Python object lives in this table. The
# trampolines below are module-level objects that live as long as the process,
# so a callback that arrives late finds no entry and returns instead of calling
# freed memory (ADR 0032).
_registry: Dict[int, Any] = {}
_ids = itertools.count(1)


def register(obj: Any) -> int:
    key = next(_ids)
    _registry[key] = obj
    return key


def unregister(key: Optional[int]) -> None:
    if key:
        _registry.pop(key, None)


def lookup(key: Optional[int]) -> Any:
    return _registry.get(key) if key else None


# Set while a trampoline runs Python code on this thread: a close or free made
# there must only start (the library would refuse to wait for itself).
_tls = threading.local()


# Bumped in a forked child: objects made before the fork belong to the parent
# (cheaper to compare than os.getpid() on every term).
fork_generation = [0]


def _bump_fork_generation() -> None:
    fork_generation[0] += 1


os.register_at_fork(after_in_child=_bump_fork_generation)


def in_callback() -> bool:
    return getattr(_tls, "depth", 0) > 0


def enter_callback() -> None:
    _tls.depth = getattr(_tls, "depth", 0) + 1


def leave_callback() -> None:
    _tls.depth -= 1
