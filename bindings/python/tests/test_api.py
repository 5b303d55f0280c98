"""Loading, names, enums, strings: no backend needed."""

import os
import re
import subprocess
import sys

import pytest

import simba
from simba import _lib

HERE = os.path.dirname(os.path.abspath(__file__))
HEADER = os.path.join(HERE, "..", "..", "..", "include", "simba.h")


def test_version_is_checked():
    assert simba.version() >= 0x010400
    assert simba.version_string().startswith("1.")


def test_every_abi_function_is_declared():
    with open(HEADER) as f:
        declared = set(re.findall(r"SIMBA_API [^;(]*?\b(simba_\w+)\s*\(", f.read()))
    assert declared == set(_lib.FUNCTIONS)


def test_every_abi_function_is_in_the_readme_table():
    with open(HEADER) as f:
        declared = set(re.findall(r"SIMBA_API [^;(]*?\b(simba_\w+)\s*\(", f.read()))
    with open(os.path.join(HERE, "..", "README.md")) as f:
        table = f.read().split("## simba.h → Python", 1)[1]
    rows = {n for line in table.splitlines() if line.startswith("| `simba_")
            for n in re.findall(r"`(simba_\w+)`", line.split(" | ")[0])}
    assert declared - rows == set()


def test_a_missing_library_is_a_clear_import_error():
    env = dict(os.environ, SIMBA_LIBRARY="/nonexistent/libsimba.so.1")
    r = subprocess.run([sys.executable, "-c", "import simba"], env=env, capture_output=True, text=True)
    assert r.returncode != 0
    assert "ImportError: simba needs libsimba 1.4.0 or later" in r.stderr


def test_the_soname_is_tried_last(monkeypatch):
    monkeypatch.delenv("SIMBA_LIBRARY", raising=False)
    assert _lib._candidates()[-1] == "libsimba.so.1"


def test_found_by_its_soname_without_pkg_config_or_find_library():
    # Debian's libsimba1 alone: no pkg-config, no gcc, no -dev symlink. The
    # dynamic linker finds libsimba.so.1 (here through LD_LIBRARY_PATH).
    built = os.path.realpath(os.environ["SIMBA_LIBRARY"])
    env = {k: v for k, v in os.environ.items() if k != "SIMBA_LIBRARY"}
    env.update(PATH="/nonexistent", LD_LIBRARY_PATH=os.path.dirname(built))
    code = ("import simba, os; print(simba.version_string()); "
            "print(*{l.split()[-1] for l in open('/proc/self/maps') if 'libsimba.so' in l})")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[1] == built


def test_names_from_the_library():
    assert simba.code_name(-9) == "EBUSY" and simba.code_name(0) == "OK"
    assert simba.code_name(-999) == "UNKNOWN"
    assert simba.strerror(-4)
    assert simba.reason_name(5) == "TAKEN_OVER" and simba.reason_name(77) == "UNKNOWN"
    assert simba.status_name(1) == "LIVE" and simba.status_name(9) == "UNKNOWN"
    assert simba.event_name(0) == "SESSION_OPENED" and simba.event_name(42) == "UNKNOWN"


def test_enums_keep_unknown_values():
    r = simba.RevokeReason(42)
    assert int(r) == 42 and str(r) == "UNKNOWN(42)" and r.library_name == "UNKNOWN"
    assert simba.RevokeReason(3) is simba.RevokeReason.DEADLINE_PASSED
    assert str(simba.RevokeReason.DEADLINE_PASSED) == "DEADLINE_PASSED"
    assert str(simba.Event(99)) == "UNKNOWN(99)"
    assert str(simba.SessionStatus.SUSPENDED) == "SUSPENDED"
    assert str(simba.Code(-12)) == "UNKNOWN(-12)" and str(simba.Code.ECANCELED) == "ECANCELED"


def test_exception_hierarchy():
    for cls, code in ((simba.InvalidArgument, -1), (simba.TermExpired, -3), (simba.Timeout, -4),
                      (simba.Backend, -5), (simba.Closed, -6), (simba.Busy, -9)):
        e = simba._errors.error(code, "detail")
        assert type(e) is cls and isinstance(e, simba.SimbaError)
        assert e.code == code and e.message == "detail" and e.code_name == simba.code_name(code)
    assert type(simba._errors.error(-55, "x")) is simba.SimbaError


def test_nul_bytes_are_refused():
    with pytest.raises(simba.InvalidArgument, match="NUL byte at index 4"):
        simba.check_name("jobs\0-tenant-1")
    with pytest.raises(simba.InvalidArgument, match="backend URL contains a NUL byte at index 9"):
        simba.Client("memory://\0x")
    with pytest.raises(simba.InvalidArgument, match="NUL"):
        simba.Client("memory://nul", config={"client.name": "a\0b"})
    with pytest.raises(simba.InvalidArgument, match="NUL"):
        simba.Client("memory://nul", config={"client.na\0me": "a"})
    with simba.Client("memory://nul") as c:
        for call in (c.lock, c.try_lock, c.elect, c.observe, c.lock_async):
            with pytest.raises(simba.InvalidArgument, match="NUL byte at index 1"):
                call("a\0b")
        with pytest.raises(simba.InvalidArgument, match="NUL"):
            c.join_group("g\0", 2, lambda cancel: None)
        with pytest.raises(simba.InvalidArgument, match="NUL"):
            c.inspect(["ok", "b\0"])


def test_non_str_names_are_refused():
    with simba.Client("memory://types") as c:
        for bad in (b"bytes", 42, None, ["x"]):
            for call in (c.lock, c.try_lock, c.elect, c.observe):
                with pytest.raises(simba.InvalidType) as ei:
                    call(bad)
                assert isinstance(ei.value, TypeError) and ei.value.code == -1
        with pytest.raises(TypeError):
            c.inspect("a-str-is-not-a-list")
    with pytest.raises(TypeError):
        simba.Client(b"memory://x")


def test_bad_names_and_config():
    with pytest.raises(simba.InvalidArgument, match="1-128 characters"):
        simba.check_name("a b")
    with pytest.raises(TypeError, match="unknown option"):
        simba.Client("memory://x", lease=3)
    with pytest.raises(simba.InvalidArgument):
        simba.Client("memory://x", lease_duration=1.0, renew_interval=0.9)
    with pytest.raises(simba.Unsupported):
        simba.Client("nosuch://x")
    cfg = simba.check_config(lease_duration=3.0)
    assert cfg["session.lease-duration"] == 3.0 and cfg["session.renew-interval"] == 1.0
    assert cfg["session.margin"] == 0.05 and cfg["callback.threads"] == 2


def test_schema():
    assert "CREATE" in simba.schema("postgresql://u@h/db")
    with pytest.raises(simba.Unsupported):
        simba.schema("memory://x")


def test_permits_on_a_1_4_library_say_what_they_need(monkeypatch):
    # A 1.4 libsimba loads (the package's minimum) without the SIMBA_1.5 symbols:
    # the permit calls then fail at the call, naming the version.
    monkeypatch.setitem(_lib._missing, "simba_semaphore_acquire", "1.5.0")
    monkeypatch.setitem(_lib._missing, "simba_term_kind", "1.5.0")
    with simba.Client("memory://old") as c:
        with pytest.raises(simba.Unsupported, match="simba_semaphore_acquire needs libsimba 1.5.0"):
            c.semaphore("s", 2)
        with c.lock("l") as t:
            with pytest.raises(simba.Unsupported, match="simba_term_kind needs libsimba 1.5.0"):
                t.kind
