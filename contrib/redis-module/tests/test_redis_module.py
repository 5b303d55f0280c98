"""End to end: two redis-servers load simba_redis.so and contend for one name on a
separate backend: PostgreSQL or ZooKeeper (SIMBA_TEST_POSTGRES_URL or
SIMBA_TEST_ZOOKEEPER_URL, else a PostgreSQL of our own). A redis:// backend is
refused inside redis-server (docs/embedding.md, "Known limits").

Checks: bad module arguments make the server refuse to start with a clear message;
exactly one server leads; `kill -9` of the leader hands the name over within the
lease bound; a graceful SHUTDOWN and SIMBA.RESIGN hand it over at once; every
new term has a larger token; elections and revocations are published on the
channel; the commands reject bad input, and a name with a NUL byte inside is
refused by every command (not cut: "name\\0junk" must not resign "name"); module
arguments with a NUL byte are refused at MODULE LOAD. SIMBA.CLOSE against a backend
that answers nothing (the chaos suite's proxy in blackhole mode) blocks only its
caller: other clients' PINGs are answered at once, the other commands answer
"closing", a second SIMBA.CLOSE joins, MODULE UNLOAD is refused; the callers get +OK
when the backend resumes, the library's reason by the local deadline when it never
does; a SHUTDOWN during the close exits 0 (SIMBA_REDIS_MODULE_VALGRIND=1: these
servers run under valgrind).
"""

import json
import os
import shutil
import re
import signal
import socket
import subprocess
import sys
import threading
import time

from embedtest import (Failure, Resp, RespError, Sandbox, check, free_port, log,
                       pairs, resp_call, run_test, skip, sql_backend, unique, wait_until)

LEASE_MS = 3000
RENEW_MS = 1000
# After a leader dies, its session expires on the backend within the lease duration
# of its last keep-alive; the survivor's candidate retries every renew/2 + jitter
# (jitter < renew/2). Slack for a loaded 2-core machine.
FAILOVER_BOUND_S = (LEASE_MS + RENEW_MS) / 1000 + 2.0
HANDOVER_BOUND_S = RENEW_MS / 1000 + 1.5  # a released lease: one candidate retry
CHANNEL = "simba.leadership"


def libsimba_links_libhiredis():
    """True while libsimba.so.1 needs libhiredis.so (the module then refuses redis://)."""
    lib = os.environ.get("SIMBA_LIBSIMBA", "")
    try:
        with open(lib, "rb") as f:
            return b"libhiredis.so" in f.read()
    except OSError:
        return True


def chaos_proxy():
    """The chaos suite's TCP proxy (tests/chaos/nemesis.py): its 'blackhole' mode
    forwards nothing (the backend answers nothing, as if SIGSTOPped; the suite's
    PostgreSQL may be shared, so it is not stopped itself) and the bytes flow, late,
    back in 'pass'."""
    root = os.environ.get("SIMBA_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))))
    sys.path.insert(0, os.path.join(root, "tests", "chaos"))
    import nemesis
    return nemesis.Proxy


def ping_latency(port, conn=None):
    """Seconds a PING takes to be answered: on conn (a Resp: the server's own
    latency), else from a fresh redis-cli (its start-up included)."""
    t0 = time.monotonic()
    cli = shutil.which("redis-cli")
    if conn is not None:
        out = conn.call("PING")
    elif cli:
        out = subprocess.run([cli, "-h", "127.0.0.1", "-p", str(port), "PING"],
                             capture_output=True, timeout=10).stdout.decode().strip()
    else:
        out = resp_call(port, "PING")
    check(out == "PONG", f"PING answered {out!r}")
    return time.monotonic() - t0


def shutdown(port, timeout=60):
    """SHUTDOWN NOSAVE, returning once the server closed the connection."""
    with Resp(port, timeout=timeout) as r:
        r.send("SHUTDOWN", "NOSAVE")
        try:
            r.read()
        except OSError:
            pass  # the server closes the connection


def stop_cleanly(sb, h):
    """SHUTDOWN NOSAVE; the server must exit 0 (under valgrind: without an error)."""
    shutdown(h.port)
    rc = h.wait(60)
    check(rc == 0, f"{h.tag}: exit status {rc}:\n{sb.tail(f'{h.tag}.out', 100)}")


def pending(r, wait=0.1):
    """True while the connection r has no reply within `wait` seconds."""
    r.sock.settimeout(wait)
    try:
        got = r.read()
    except (socket.timeout, TimeoutError):
        return True
    finally:
        r.sock.settimeout(10)
    raise Failure(f"answered while the close is pending: {got!r}")


def main():
    server = os.environ.get("SIMBA_REDIS_SERVER") or shutil.which("redis-server")
    module = os.environ.get("SIMBA_REDIS_MODULE")
    if not server or not os.path.exists(server):
        skip("redis-server not installed (Debian package redis-server)")
    check(module and os.path.exists(module), f"SIMBA_REDIS_MODULE={module!r}: module not built")

    sb = Sandbox("redis-module")
    backend = sql_backend(sb)
    name = unique("redis-module")

    def start(tag, *module_args, expect_fail=False, bare=False, wrap=()):
        port = free_port()
        args = [*wrap, server, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", sb.dir, "--logfile", "",
                "--enable-module-command", "yes"]
        if not bare:
            args += ["--loadmodule", module, *module_args]
        p = sb.spawn(args, tag)
        p.port = port
        p.tag = tag
        if expect_fail:
            try:
                p.wait(10)
            except Exception:
                raise Failure(f"{tag}: the server started although the module arguments are bad")
            return p
        try:
            wait_until(f"{tag} on {port}", lambda: resp_call(port, "PING") == "PONG",
                       60 if wrap else 10)
        except Failure:
            print(sb.tail(f"{tag}.out"))
            raise
        return p

    # --- bad module arguments: the server refuses to start and says why -------------
    for tag, args, words in [
        ("bad-missing-backend", ["contend", name], "missing module argument: backend"),
        ("bad-name", ["backend", backend, "contend", "no spaces"], "character ' ' at index 2"),
        ("bad-key", ["backend", backend, "session.lease-duration", "fast"], "session.lease-duration"),
        ("bad-odd", ["backend"], "pairs"),
        ("bad-mode", ["backend", backend, "loop.mode", "thread"], "set by the module"),
        ("bad-scheme", ["backend", "nosuch://x"], "cannot open a client"),
    ] + ([("bad-redis", ["backend", "redis://127.0.0.1:1"], "cannot be used from inside redis-server")]
         if libsimba_links_libhiredis() else []):
        p = start(tag, *args, expect_fail=True)
        out = sb.tail(f"{tag}.out", 200)
        check(p.returncode != 0, f"{tag}: exit status {p.returncode}")
        check(words in out, f"{tag}: the log does not say {words!r}:\n{out}")
    log("bad module arguments are refused with a message")

    # A NUL byte can reach the module's arguments through MODULE LOAD (RESP strings are
    # counted): refused, never cut into another name or URL.
    bare = start("bare", bare=True)
    for args, words in [
        (("backend", backend, "contend", name + "\0junk"), f"NUL byte at index {len(name)}"),
        (("backend", "memory://\0x"), "NUL byte at index 9"),
        (("backend", backend, "client.name\0x", "y"), "NUL byte at index 11"),
    ]:
        try:
            r = resp_call(bare.port, "MODULE", "LOAD", module, *args)
            raise Failure(f"MODULE LOAD {args!r} answered {r!r}, not an error")
        except RespError:
            pass
        out = sb.tail("bare.out", 200)
        check(words in out, f"MODULE LOAD {args!r}: the log does not say {words!r}:\n{out}")
    check(resp_call(bare.port, "MODULE", "LIST") == [], "a module stayed loaded after a refusal")
    bare.terminate()
    bare.wait(10)
    log("module arguments with a NUL byte are refused at MODULE LOAD")

    common = ["backend", backend, "contend", name, "session.lease-duration", f"{LEASE_MS}ms",
              "session.renew-interval", f"{RENEW_MS}ms", "channel", CHANNEL]
    hosts = {}
    for tag in ("a", "b"):
        hosts[tag] = start(f"host-{tag}", *common, "client.name", f"redis-host-{tag}")

    # Subscribers record what each server publishes.
    subs = {}

    def subscribe(tag):
        s = Resp(hosts[tag].port, timeout=0.2)
        s.send("SUBSCRIBE", CHANNEL)
        s.sock.settimeout(5)
        check(s.read()[0] == "subscribe", "SUBSCRIBE answered")
        s.sock.settimeout(0.2)
        subs[tag] = (s, [])

    def drain(tag):
        s, got = subs[tag]
        while True:
            try:
                m = s.read()
            except (socket.timeout, TimeoutError):
                return got
            if m and m[0] == "message":
                got.append(json.loads(m[2]))

    for tag in hosts:
        subscribe(tag)

    def token(tag):
        return resp_call(hosts[tag].port, "SIMBA.TOKEN", name)

    def leaders():
        return {t: tok for t in hosts if (tok := token(t)) is not None}

    def one_leader():
        ls = leaders()
        check(len(ls) <= 1, f"two leaders at once: {ls}")
        return ls if len(ls) == 1 else None

    t0 = time.monotonic()
    ls = wait_until("a leader", one_leader, 15)
    (leader, tok1), = ls.items()
    log(f"host-{leader} leads with token {tok1} after {time.monotonic() - t0:.2f}s")
    # Exactly one leader, sampled for a while (a lease and a half).
    end = time.monotonic() + 1.5
    while time.monotonic() < end:
        ls = leaders()
        check(ls == {leader: tok1}, f"leadership moved or doubled while nothing failed: {ls}")
        time.sleep(0.1)
    follower = "b" if leader == "a" else "a"

    st = pairs(resp_call(hosts[leader].port, "SIMBA.STATUS"))
    check(st["session"] == "live", f"STATUS session: {st}")
    lease = pairs(st["leases"][0])
    check(lease["name"] == name and lease["state"] == "leader" and lease["leader"] == 1
          and lease["token"] == tok1 and 0 < lease["remaining_ms"] <= LEASE_MS,
          f"leader STATUS: {lease}")
    fl = pairs(pairs(resp_call(hosts[follower].port, "SIMBA.STATUS"))["leases"][0])
    check(fl["state"] == "candidate" and fl["leader"] == 0, f"follower STATUS: {fl}")
    snap = json.loads(resp_call(hosts[leader].port, "SIMBA.SNAPSHOT"))
    check(isinstance(snap, dict) and "session" in snap, f"SNAPSHOT: {snap}")
    drain(leader)  # its election may precede the subscription: later ones are checked

    # --- kill -9 the leader: the follower leads within the lease bound ------------------
    t0 = time.monotonic()
    os.killpg(hosts[leader].pid, signal.SIGKILL)
    hosts[leader].wait(5)
    subs[leader][0].close()
    dead = leader
    ls = wait_until("the survivor to lead", lambda: {follower: token(follower)}
                    if token(follower) is not None else None, FAILOVER_BOUND_S + 2)
    took = time.monotonic() - t0
    tok2 = ls[follower]
    log(f"kill -9 host-{dead}: host-{follower} leads with token {tok2} after {took:.2f}s")
    check(took <= FAILOVER_BOUND_S, f"failover took {took:.2f}s > {FAILOVER_BOUND_S}s")
    check(tok2 > tok1, f"token did not increase: {tok1} then {tok2}")
    ev = drain(follower)
    check({"event": "elected", "name": name, "token": tok2} in ev, f"published: {ev}")

    # The killed server comes back as a follower.
    hosts[dead] = start(f"host-{dead}-2", *common, "client.name", f"redis-host-{dead}")
    subscribe(dead)
    time.sleep(1.0)
    check(one_leader() == {follower: tok2}, f"after the restart: {leaders()}")

    # --- graceful SHUTDOWN: the lease is released, the other leads at once ------------------
    leader, follower = follower, dead
    t0 = time.monotonic()
    shutdown(hosts[leader].port, timeout=5)
    hosts[leader].wait(10)
    ls = wait_until("the other to lead after SHUTDOWN",
                    lambda: token(follower), HANDOVER_BOUND_S + 3)
    took = time.monotonic() - t0
    tok3 = ls
    log(f"SHUTDOWN host-{leader}: host-{follower} leads with token {tok3} after {took:.2f}s")
    check(took <= HANDOVER_BOUND_S, f"handover after SHUTDOWN took {took:.2f}s > {HANDOVER_BOUND_S}s"
          " (was the lease released?)")
    check(tok3 > tok2, f"token did not increase: {tok2} then {tok3}")
    out = sb.tail(f"{hosts[leader].tag}.out", 200)
    check("releasing leases" in out, f"no release in the log:\n{out}")
    ev = drain(follower)
    check({"event": "elected", "name": name, "token": tok3} in ev, f"published: {ev}")

    # --- SIMBA.RESIGN and SIMBA.CONTEND: hand over on request, then contend again ---------------
    hosts[leader] = start(f"host-{leader}-3", *common, "client.name", f"redis-host-{leader}")
    subscribe(leader)
    time.sleep(0.5)
    leader, follower = follower, leader
    check(one_leader() == {leader: tok3}, f"before RESIGN: {leaders()}")
    t0 = time.monotonic()
    check(resp_call(hosts[leader].port, "SIMBA.RESIGN", name) == "OK", "RESIGN")
    tok4 = wait_until("the other to lead after RESIGN", lambda: token(follower),
                      HANDOVER_BOUND_S + 3)
    took = time.monotonic() - t0
    log(f"SIMBA.RESIGN on host-{leader}: host-{follower} leads with token {tok4} after {took:.2f}s")
    check(took <= HANDOVER_BOUND_S, f"handover after RESIGN took {took:.2f}s")
    check(tok4 > tok3, f"token did not increase: {tok3} then {tok4}")
    check(token(leader) is None, "the resigned server still answers a token")
    ev = drain(leader)
    check(any(e.get("event") == "revoked" and e.get("token") == tok3 and e.get("reason") == "stopped"
              for e in ev), f"revocation not published: {ev}")
    st = pairs(resp_call(hosts[leader].port, "SIMBA.STATUS"))
    check(st["leases"] == [], f"STATUS after RESIGN: {st}")
    check(resp_call(hosts[leader].port, "SIMBA.CONTEND", name) == "OK", "CONTEND again")
    time.sleep(1.0)
    check(one_leader() == {follower: tok4}, f"after CONTEND again: {leaders()}")

    # --- bad input ------------------------------------------------------------------------------
    port = hosts[leader].port
    for args, words in [
        (("SIMBA.CONTEND", name), "already contending"),
        (("SIMBA.CONTEND", "a b"), "character ' ' at index 1"),
        (("SIMBA.CONTEND", "x" * 129), "129 characters long (at most 128"),
        (("SIMBA.CONTEND", ".."), "is not allowed"),
        (("SIMBA.TOKEN", "a/b"), "character '/' at index 1"),
        (("SIMBA.RESIGN", ""), "lease name is empty"),
        (("SIMBA.CONTEND",), "wrong number of arguments"),
        (("SIMBA.RESIGN", "nobody"), "not contending"),
        (("SIMBA.TOKEN",), "wrong number of arguments"),
        (("SIMBA.STATUS", "x"), "wrong number of arguments"),
    ]:
        try:
            r = resp_call(port, *args)
            raise Failure(f"{args} answered {r!r}, not an error")
        except RespError as e:
            check(words in str(e), f"{args}: error {e!r} does not say {words!r}")
    check(resp_call(port, "SIMBA.TOKEN", "never-contended") is None, "TOKEN of an unknown name")
    check(resp_call(port, "PING") == "PONG", "the server survived the bad input")
    log("commands reject bad input with clear errors")

    # --- a NUL byte inside a name: refused by every command, never cut to the name -------------
    # "name\0junk" once matched "name" (strcmp on a copy): RESIGN revoked the leader's term.
    leader, follower = follower, leader
    check(one_leader() == {leader: tok4}, f"before the NUL names: {leaders()}")
    for cmd in ("SIMBA.RESIGN", "SIMBA.TOKEN", "SIMBA.CONTEND"):
        for host in (leader, follower):
            try:
                r = resp_call(hosts[host].port, cmd, name + "\0junk")
                raise Failure(f"{cmd} of a name with a NUL byte answered {r!r}, not an error")
            except RespError as e:
                check(f"lease name has a NUL byte at index {len(name)}" in str(e),
                      f"{cmd} with a NUL byte: {e!r}")
    time.sleep(0.5)  # a resign would have handed over by now (a released lease: one retry)
    check(one_leader() == {leader: tok4}, f"a name with a NUL byte moved leadership: {leaders()}")
    for host in (leader, follower):
        ls = pairs(resp_call(hosts[host].port, "SIMBA.STATUS"))["leases"]
        check([pairs(x)["name"] for x in ls] == [name], f"STATUS after the NUL names: {ls}")
        check(pairs(ls[0])["state"] != "stopping", f"host-{host} is resigning: {ls}")
    log("a name with a NUL byte is refused by SIMBA.RESIGN, SIMBA.TOKEN and SIMBA.CONTEND")

    # --- SIMBA.CLOSE then MODULE UNLOAD on the leader: released, the other leads --------------
    check(one_leader() == {leader: tok4}, f"before CLOSE: {leaders()}")
    try:
        resp_call(hosts[leader].port, "MODULE", "UNLOAD", "simba")
        raise Failure("MODULE UNLOAD of a running client was accepted")
    except RespError as e:
        check("timer" in str(e), f"MODULE UNLOAD before SIMBA.CLOSE: {e}")
    t0 = time.monotonic()
    check(resp_call(hosts[leader].port, "SIMBA.CLOSE") == "OK", "SIMBA.CLOSE")
    tok5 = wait_until("the other to lead after SIMBA.CLOSE", lambda: token(follower),
                      HANDOVER_BOUND_S + 3)
    took = time.monotonic() - t0
    check(took <= HANDOVER_BOUND_S and tok5 > tok4, f"after SIMBA.CLOSE: {took:.2f}s, token {tok5}")
    st = pairs(resp_call(hosts[leader].port, "SIMBA.STATUS"))
    check(st["session"] == "closed" and st["leases"] == [], f"STATUS after CLOSE: {st}")
    check(resp_call(hosts[leader].port, "MODULE", "UNLOAD", "simba") == "OK", "MODULE UNLOAD")
    check(resp_call(hosts[leader].port, "PING") == "PONG", "the server after MODULE UNLOAD")
    log(f"SIMBA.CLOSE: host-{follower} leads with token {tok5} after {took:.2f}s; MODULE UNLOAD ok")

    close_against_a_silent_backend(sb, start, backend)

    # --- a redis:// backend from inside redis-server (libsimba's own hiredis, ADR 0021) ----
    redis_backend = os.environ.get("SIMBA_TEST_REDIS_URL")
    if libsimba_links_libhiredis() or not redis_backend:
        log("redis:// backend from inside redis-server: skipped (libsimba links libhiredis.so,"
            " or SIMBA_TEST_REDIS_URL is unset)")
        return
    rname = unique("redis-module-on-redis")
    rhost = start("host-r", "backend", redis_backend, "contend", rname,
                  "session.lease-duration", f"{LEASE_MS}ms", "session.renew-interval",
                  f"{RENEW_MS}ms", "client.name", "redis-host-r")
    rtok = wait_until("the host on a redis:// backend to lead",
                      lambda: resp_call(rhost.port, "SIMBA.TOKEN", rname), 15)
    check(resp_call(rhost.port, "SIMBA.RESIGN", rname) == "OK", "SIMBA.RESIGN on redis://")
    check(resp_call(rhost.port, "PING") == "PONG", "the server on a redis:// backend")
    log(f"redis:// backend from inside redis-server: led with token {rtok}, resigned")


def close_against_a_silent_backend(sb, start, backend):
    """SIMBA.CLOSE never stalls the server: against a backend that answers nothing,
    other clients are served at once while the caller waits for the close."""
    m = re.search(r"(://(?:[^@/]*@)?)(127\.0\.0\.1|localhost):(\d+)", backend)
    check(m is not None, f"no loopback host:port in {backend!r}")
    proxy = chaos_proxy()([int(m.group(3))])
    purl = backend[:m.start()] + f"{m.group(1)}127.0.0.1:{proxy.port}" + backend[m.end():]
    args = ["session.lease-duration", f"{LEASE_MS}ms", "session.renew-interval", f"{RENEW_MS}ms"]
    # SIMBA_REDIS_MODULE_VALGRIND=1 runs these servers under valgrind (exit 99 on an error).
    wrap = ()
    if os.environ.get("SIMBA_REDIS_MODULE_VALGRIND") and shutil.which("valgrind"):
        wrap = ("valgrind", "--error-exitcode=99", "--errors-for-leak-kinds=none",
                "--trace-children=no")

    def leading_host(tag, name):
        h = start(tag, "backend", purl, "contend", name, *args, wrap=wrap)
        wait_until(f"{tag} to lead", lambda: resp_call(h.port, "SIMBA.TOKEN", name), 30)
        return h

    # The backend resumes after a while: the caller (and a second SIMBA.CLOSE, which
    # joins) get +OK then, while PINGs were answered all along.
    name = unique("redis-module-close")
    h = leading_host("host-c", name)
    proxy.mode = "blackhole"
    t0 = time.monotonic()
    closer = Resp(h.port, timeout=10)
    closer.send("SIMBA.CLOSE")
    other = Resp(h.port, timeout=10)  # another client of the server, connected before
    pings = [ping_latency(h.port, other) for _ in range(5)]
    cli_pings = [ping_latency(h.port) for _ in range(3)]
    joiner = Resp(h.port, timeout=10)
    joiner.send("SIMBA.CLOSE")
    for args_ in (("SIMBA.CONTEND", "other"), ("SIMBA.TOKEN", name), ("SIMBA.STATUS",)):
        try:
            r = resp_call(h.port, *args_)
            raise Failure(f"{args_} during the close answered {r!r}")
        except RespError as e:
            check("closing" in str(e), f"{args_} during the close: {e}")
    try:
        resp_call(h.port, "MODULE", "UNLOAD", "simba")
        raise Failure("MODULE UNLOAD during SIMBA.CLOSE was accepted")
    except RespError as e:
        check("blocked clients" in str(e) or "unload" in str(e).lower(),
              f"MODULE UNLOAD during SIMBA.CLOSE: {e}")
    while time.monotonic() - t0 < 1.0:
        pings.append(ping_latency(h.port, other))
        time.sleep(0.05)
    cli_pings.append(ping_latency(h.port))
    check(pending(closer) and pending(joiner), "SIMBA.CLOSE answered before the backend did")
    worst, cli_worst = max(pings), max(cli_pings)
    check(worst < 0.2, f"PING took {worst * 1000:.0f} ms while SIMBA.CLOSE was pending")
    # redis-cli's own start-up counts here: a looser bound on a loaded machine.
    check(cli_worst < 0.5, f"redis-cli PING took {cli_worst * 1000:.0f} ms during SIMBA.CLOSE")
    t1 = time.monotonic()
    proxy.mode = "pass"
    check(closer.read() == "OK", "SIMBA.CLOSE after the backend resumed")
    took = time.monotonic() - t1
    check(joiner.read() == "OK", "the joined SIMBA.CLOSE")
    check(took < LEASE_MS / 1000, f"SIMBA.CLOSE answered {took:.2f}s after the backend resumed")
    st = pairs(resp_call(h.port, "SIMBA.STATUS"))
    check(st["session"] == "closed" and st["leases"] == [], f"STATUS after CLOSE: {st}")
    check(resp_call(h.port, "MODULE", "UNLOAD", "simba") == "OK", "MODULE UNLOAD after CLOSE")
    log(f"SIMBA.CLOSE against a paused backend: {len(pings)} PINGs, worst"
        f" {worst * 1000:.0f} ms ({len(cli_pings)} redis-cli PINGs, worst"
        f" {cli_worst * 1000:.0f} ms); answered {took * 1000:.0f} ms after the resume")
    other.close()
    closer.close()
    joiner.close()
    stop_cleanly(sb, h)

    # The backend never resumes: the caller is answered by the session's local deadline,
    # with the library's reason (the leases free when the session expires on the backend).
    name = unique("redis-module-close-deadline")
    h = leading_host("host-d", name)
    proxy.mode = "blackhole"
    t0 = time.monotonic()
    closer = Resp(h.port, timeout=LEASE_MS / 1000 + 5)
    closer.send("SIMBA.CLOSE")
    with Resp(h.port, timeout=10) as other:
        worst = max(ping_latency(h.port, other) for _ in range(5))
    try:
        r = closer.read()
    except RespError as e:
        r = f"-{e}"
    took = time.monotonic() - t0
    check(worst < 0.2, f"PING took {worst * 1000:.0f} ms while SIMBA.CLOSE was pending")
    check(took <= LEASE_MS / 1000 + 1.0, f"SIMBA.CLOSE took {took:.2f}s (local deadline)")
    check(r.startswith("-") and "closing the session failed" in r
          and "free when it expires on the backend" in r, f"SIMBA.CLOSE by the deadline: {r!r}")
    check(resp_call(h.port, "PING") == "PONG", "the server after the close")
    log(f"SIMBA.CLOSE against a silent backend: answered {r!r} after {took:.2f}s, PINGs"
        f" worst {worst * 1000:.0f} ms")
    closer.close()
    stop_cleanly(sb, h)
    proxy.mode = "pass"

    # SHUTDOWN during the close: finished blocking, the server exits cleanly.
    name = unique("redis-module-close-shutdown")
    h = leading_host("host-e", name)
    proxy.mode = "blackhole"
    closer = Resp(h.port, timeout=30)
    closer.send("SIMBA.CLOSE")
    check(pending(closer, 0.3), "SIMBA.CLOSE answered before the backend did")
    t0 = time.monotonic()
    # SHUTDOWN closes blocking (no event loop any more): the backend resumes meanwhile.
    resume = threading.Timer(0.5, setattr, (proxy, "mode", "pass"))
    resume.start()
    shutdown(h.port)
    rc = h.wait(60)
    took = time.monotonic() - t0
    resume.join()
    out = sb.tail(f"{h.tag}.out", 400)
    check(rc == 0, f"SHUTDOWN during SIMBA.CLOSE: exit status {rc}:\n{out}")
    check("crashed" not in out and "Invalid read" not in out and "Invalid write" not in out,
          f"SHUTDOWN during SIMBA.CLOSE:\n{out}")
    check(took < LEASE_MS / 1000 + (10 if wrap else 0),
          f"SHUTDOWN took {took:.2f}s although the backend resumed after 0.5 s")
    closer.close()
    proxy.close()
    log(f"SHUTDOWN during SIMBA.CLOSE (the backend resumed after 0.5 s): exit 0 after {took:.2f}s"
        + (" (under valgrind, no error)" if wrap else ""))


if __name__ == "__main__":
    run_test(main)
