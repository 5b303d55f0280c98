"""Two processes: a handover between them, and os.fork() with an open client."""

import os
import subprocess
import sys
import time

import pytest

import simba
from conftest import LEASE, LONG, eventually

HERE = os.path.dirname(os.path.abspath(__file__))


def _child(url, name, lease):
    return subprocess.Popen([sys.executable, os.path.join(HERE, "child.py"), url, name, str(lease)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


@pytest.mark.parametrize("mode", ["stop", "crash"])
def test_two_process_handover(url, name, mode, clients):
    if url.startswith("memory://"):
        pytest.skip("memory:// is one process's store: the handover needs a server")
    child = _child(url, name, LEASE)
    try:
        line = child.stdout.readline().split()
        assert line[0] == "ELECTED", line
        child_token = int(line[1])
        me = clients(url)
        elected = []
        e = me.elect(name, lambda t: elected.append((time.monotonic(), t.token)))
        time.sleep(0.2)
        assert not elected  # the child holds it
        asked = time.monotonic()
        child.stdin.write(mode + "\n")
        child.stdin.flush()
        assert eventually(lambda: elected, timeout=LONG)
        took = elected[0][0] - asked
        assert elected[0][1] > child_token
        if mode == "stop":
            # a clean close frees the lease at once, well before the session's expiry
            assert child.stdout.readline().strip() == "CLOSED"
            assert took < LEASE, took
        else:
            # a crash only frees it after the child's session expired
            assert took >= LEASE * 0.5, took
        e.close()
    finally:
        child.stdin.close()
        assert child.wait(LONG) == (0 if mode == "stop" else 3)


def test_fork_with_an_open_client(url, name, clients):
    """The child cannot use the parent's client (it has none of the library's
    threads): every call raises Closed, its finalizers do nothing, and a new
    client in the child works. The parent's client is not disturbed."""
    parent = clients(url)
    held = parent.lock(name, timeout=LONG)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: report through the pipe, exit without cleanup
        code = 1
        try:
            out = []
            try:
                parent.lock(name + "x", timeout=0.1)
                out.append("parent client usable")
            except simba.Closed as e:
                assert "parent process" in str(e)
            try:
                held.release()
                out.append("parent term released")
            except simba.Closed:
                pass
            assert held.token > 0 and held.name == name  # still readable
            with simba.Client(url, lease_duration=LEASE) as c:
                c.wait_live(LONG)
                if not url.startswith("memory://"):
                    try:
                        c.try_lock(name)
                        out.append("parent's lock not held")
                    except simba.Busy:
                        pass
                with c.lock(name + ".child", timeout=LONG) as t:
                    assert t.valid
            del held  # the finalizer must not touch the parent's term
            import gc
            gc.collect()
            os.write(w, ("; ".join(out) or "ok").encode())
            code = 0
        except BaseException as e:  # noqa: BLE001
            os.write(w, repr(e).encode())
        finally:
            os._exit(code)
    os.close(w)
    _, status = os.waitpid(pid, 0)
    with os.fdopen(r) as f:
        report = f.read()
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 and report == "ok", report
    assert held.valid and held.ensure_valid()
    held.release()
    with parent.lock(name, timeout=LONG) as t:
        assert t.token > held.token
