"""Shared helpers of the contrib/ end-to-end tests (ctest label `embed`).

Python 3 standard library only. Each test starts its own hosts (redis-server,
nginx) on 127.0.0.1, on free ports, with their files in a temporary directory,
and stops every process it started and removes the directory on exit, whatever
happened (an exception, a failed check, SIGTERM from ctest's timeout).
"""

import atexit
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

# free_port(), shared with the chaos harness (tests/support/free_port.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                                "support"))
from free_port import free_port  # noqa: E402,F401

SKIP = 77  # ctest SKIP_RETURN_CODE


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def skip(msg):
    print(f"SKIP: {msg}", flush=True)
    sys.exit(SKIP)


class Failure(AssertionError):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def wait_until(what, fn, timeout, interval=0.05):
    """Poll fn() until it returns a true value; return it, or raise Failure."""
    deadline = time.monotonic() + timeout
    last_exc = None
    while True:
        try:
            v = fn()
            if v:
                return v
        except (OSError, Failure, RespError) as e:  # not up yet
            last_exc = e
        if time.monotonic() > deadline:
            raise Failure(f"timed out after {timeout}s waiting for {what}"
                          + (f" (last error: {last_exc})" if last_exc else ""))
        time.sleep(interval)


class Sandbox:
    """A temporary directory and the processes started in it, all cleaned up."""

    def __init__(self, prefix):
        self.dir = tempfile.mkdtemp(prefix=f"simba-{prefix}-")
        self.procs = []
        self.extra_pids = []
        self.helpers = []  # closed gracefully first: EOF on stdin, then a bounded wait
        self._closed = False
        atexit.register(self.close)
        signal.signal(signal.SIGTERM, self._on_term)

    def _on_term(self, signum, frame):
        self.close()
        sys.exit(128 + signum)

    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    def spawn(self, args, name, **kw):
        out = open(self.path(f"{name}.out"), "ab")
        p = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, cwd=self.dir,
                             start_new_session=True, **kw)
        out.close()
        p.simba_name = name
        self.procs.append(p)
        return p

    def track_pid(self, pid):
        """A pid started outside spawn() (a daemonized nginx master)."""
        self.extra_pids.append(pid)

    def tail(self, name, n=40):
        try:
            with open(self.path(name), "rb") as f:
                lines = f.read().decode(errors="replace").splitlines()
            return "\n".join(lines[-n:])
        except OSError:
            return ""

    def close(self):
        if self._closed:
            return
        self._closed = True
        for p in self.helpers:
            try:
                p.stdin.close()
                p.wait(20)
            except (OSError, subprocess.TimeoutExpired):
                pass
        for pid in self.extra_pids:
            kill_group_or_pid(pid)
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except OSError:
                    pass
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    pass
        if os.environ.get("SIMBA_EMBED_KEEP"):
            print(f"kept {self.dir}", flush=True)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)


def kill_group_or_pid(pid):
    for fn in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            fn()
        except OSError:
            pass


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie counts as dead
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


# --- RESP (Redis protocol) --------------------------------------------------------------

class RespError(Exception):
    pass


class Resp:
    """A minimal blocking RESP2 client."""

    def __init__(self, port, timeout=5.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = b""

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()

    def send(self, *args):
        out = [f"*{len(args)}\r\n".encode()]
        for a in args:
            b = a if isinstance(a, bytes) else str(a).encode()
            out.append(f"${len(b)}\r\n".encode() + b + b"\r\n")
        self.sock.sendall(b"".join(out))

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise OSError("connection closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise OSError("connection closed")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def read(self):
        line = self._line()
        t, rest = line[:1], line[1:]
        if t == b"+":
            return rest.decode()
        if t == b"-":
            raise RespError(rest.decode())
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n).decode()
        if t == b"*":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise OSError(f"bad RESP line {line!r}")

    def call(self, *args):
        self.send(*args)
        return self.read()


def resp_call(port, *args, timeout=5.0):
    with Resp(port, timeout) as r:
        return r.call(*args)


def pairs(flat):
    """A RESP2 map (flat array) as a dict."""
    return {flat[i]: flat[i + 1] for i in range(0, len(flat), 2)}


# --- the backend the hosts contend on -----------------------------------------------------

def backend_url(sandbox, redis_server):
    """SIMBA_TEST_REDIS_URL (scripts/test.sh's test redis), else a redis-server of
    our own in the sandbox. Returns the URL."""
    url = os.environ.get("SIMBA_TEST_REDIS_URL")
    if url:
        return url
    port = free_port()
    sandbox.spawn([redis_server, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                   "--appendonly", "no", "--dir", sandbox.dir], "backend-redis")
    wait_until("the backend redis-server", lambda: resp_call(port, "PING") == "PONG", 10)
    log(f"backend: redis-server of our own on {port}")
    return f"redis://127.0.0.1:{port}"


def sql_backend(sandbox):
    """A backend other than redis:// (the Redis module cannot use one, see
    docs/embedding.md): SIMBA_TEST_POSTGRES_URL or SIMBA_TEST_ZOOKEEPER_URL (set by
    scripts/test.sh), else a throwaway PostgreSQL started with the suite's own
    scripts/lib/servers.sh, stopped when the sandbox closes."""
    for var in ("SIMBA_TEST_POSTGRES_URL", "SIMBA_TEST_ZOOKEEPER_URL"):
        if os.environ.get(var):
            return os.environ[var]
    root = os.environ.get("SIMBA_SOURCE_DIR") or os.path.dirname(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    script = os.path.join(root, "scripts", "lib", "servers.sh")
    err = open(sandbox.path("postgres-helper.out"), "ab")
    p = subprocess.Popen(
        ["bash", "-c", 'source "$0"; trap stop_servers EXIT; start_servers postgres >&2 || exit 1;'
         ' echo "$SIMBA_TEST_POSTGRES_URL"; read -r _', script],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, cwd=sandbox.dir)
    err.close()
    sandbox.helpers.append(p)
    url = p.stdout.readline().decode().strip()
    if not url:
        skip("no backend for the hosts: set SIMBA_TEST_POSTGRES_URL or SIMBA_TEST_ZOOKEEPER_URL "
             "(scripts/test.sh does), or install postgresql:\n"
             + sandbox.tail("postgres-helper.out"))
    log(f"backend: a PostgreSQL of our own ({url})")
    return url


def unique(prefix):
    return f"{prefix}-{os.getpid()}-{int(time.time() * 1000) % 100000000}"


def run_test(main):
    """Run main(); exit 0, 1 with the failure, or 77 (skip)."""
    start = time.monotonic()
    try:
        main()
    except Failure as e:
        print(f"FAIL: {e}", flush=True)
        sys.exit(1)
    log(f"PASS in {time.monotonic() - start:.1f}s")
    sys.exit(0)
