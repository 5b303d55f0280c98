"""End to end: two nginx instances load ngx_http_simba_module.so and contend for one
lease on one backend (the suite's test redis, SIMBA_TEST_REDIS_URL, else a
redis-server of our own, else PostgreSQL).

An upstream written here (Python http.server) fences: it accepts a request only
if its X-Fencing-Token is at least the largest it accepted, and records every
request. Checks: bad directives fail `nginx -t` with a clear message (a NUL byte in
a lease name, URL or option too); exactly one instance leads and every worker of an
instance agrees; followers answer 503, except the status location under a
server-level `simba_leader_only on`;
`kill -9` of the leader's master and workers hands over within the lease bound;
a reload keeps leadership or hands it over cleanly (never two leaders, old
workers exit, no alert in the log); QUIT releases the lease at once; the upstream
sees strictly increasing tokens and never a stale one.
"""

import http.client
import http.server
import json
import os
import shutil
import signal
import subprocess
import threading
import time

from embedtest import (Sandbox, backend_url, check, free_port, log, pid_alive,
                       run_test, skip, sql_backend, unique, wait_until)

LEASE_MS = 3000
RENEW_MS = 1000
FAILOVER_BOUND_S = (LEASE_MS + RENEW_MS) / 1000 + 2.0
HANDOVER_BOUND_S = RENEW_MS / 1000 + 1.5


class Upstream:
    """The protected resource: accepts only non-decreasing fencing tokens."""

    def __init__(self):
        self.lock = threading.Lock()
        self.max_token = 0
        self.accepted = []  # (time, instance, token) in arrival order
        self.stale = []
        self.missing = 0
        self.slow_workers = []  # X-Worker of /slow requests in flight or done
        up = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                if self.path.startswith("/slow"):
                    with up.lock:
                        up.slow_workers.append(int(self.headers.get("X-Worker", "0")))
                    time.sleep(2.5)
                    self.send_response(200)
                    self.send_header("Content-Length", "5")
                    self.end_headers()
                    self.wfile.write(b"slow\n")
                    return
                tok = self.headers.get("X-Fencing-Token")
                inst = self.headers.get("X-Instance", "?")
                with up.lock:
                    if not tok:
                        up.missing += 1
                        code = 400
                    elif int(tok) < up.max_token:
                        up.stale.append((time.monotonic(), inst, int(tok), up.max_token))
                        code = 409
                    else:
                        up.max_token = int(tok)
                        up.accepted.append((time.monotonic(), inst, int(tok)))
                        code = 200
                body = f"{code} {tok}\n".encode()
                self.send_response(code)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address):
                pass  # a client that gave up (timeout) while the handler answered

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()


def http_get(port, path, timeout=2.0):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", path, headers={"Connection": "close"})
        r = c.getresponse()
        return r.status, r.read().decode()
    finally:
        c.close()


def main():
    nginx = os.environ.get("SIMBA_NGINX") or shutil.which("nginx") or "/usr/sbin/nginx"
    module = os.environ.get("SIMBA_NGINX_MODULE", "")
    if os.environ.get("SIMBA_NGINX_SKIP"):
        skip(os.environ["SIMBA_NGINX_SKIP"])
    if not os.path.exists(nginx):
        skip("nginx not installed (Debian package nginx)")
    check(os.path.exists(module), f"SIMBA_NGINX_MODULE={module!r}: module not built")

    sb = Sandbox("nginx")
    redis_server = shutil.which("redis-server")
    if os.environ.get("SIMBA_TEST_REDIS_URL") or redis_server:
        backend = backend_url(sb, redis_server)
    else:
        backend = sql_backend(sb)
    name = unique("nginx")
    upstream = Upstream()

    def conf_text(tag, port, extra_http="", lease=name, backend_url_=backend, port2=None):
        d = sb.path(tag)
        os.makedirs(d, exist_ok=True)
        user = "user root;\n" if os.geteuid() == 0 else ""
        return f"""
load_module {module};
{user}worker_processes 2;
pid {d}/nginx.pid;
error_log {d}/error.log info;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    simba_backend {backend_url_};
    simba_lease {lease};
    simba_option session.lease-duration {LEASE_MS}ms;
    simba_option session.renew-interval {RENEW_MS}ms;
    simba_option client.name nginx-{tag};
    {extra_http}
    upstream app {{ server 127.0.0.1:{upstream.port}; }}
    server {{
        listen 127.0.0.1:{port} reuseport;
        location /work {{
            simba_leader_only on;
            proxy_set_header X-Fencing-Token $simba_token;
            proxy_set_header X-Instance {tag};
            proxy_pass http://app;
        }}
        location /slow {{
            proxy_set_header X-Worker $pid;
            proxy_pass http://app;
        }}
        location = /simba {{ simba_status; }}
        location = /vars {{ return 200 "$pid $simba_leader $simba_token\\n"; }}
        location = /ret {{ simba_leader_only on; return 200 "leader\\n"; }}
    }}
    server {{
        listen 127.0.0.1:{port2 or free_port()} reuseport;
        simba_leader_only on;
        location = /simba {{ simba_status; }}
        location = /simba-leader {{ simba_status; simba_leader_only on; }}
        location / {{ return 200 "leader\\n"; }}
    }}
}}
"""

    def write_conf(tag, text):
        path = sb.path(tag, "nginx.conf")
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        return path

    # --- nginx -t rejects bad directives with a clear message --------------------------
    bad = [
        ("bad-lease", dict(lease="'no spaces'"), "character ' ' at index 2"),
        # A NUL byte in the file: refused, never read as the string's end.
        ("bad-lease-nul", dict(lease=f"{name}\0junk"), f"NUL byte at index {len(name)}"),
        ("bad-backend-nul", dict(backend_url_=f"{backend}\0junk"),
         f"\"simba_backend\": an argument has a NUL byte at index {len(backend)}"),
        ("bad-option-nul", dict(extra_http="simba_option client.name web\0junk;"),
         "\"simba_option\": an argument has a NUL byte at index 3"),
        ("bad-scheme", dict(backend_url_="ftp://x"), "unsupported URL"),
        ("bad-option", dict(extra_http="simba_option session.drift 2;"), "session.drift"),
        ("bad-rule", dict(extra_http="simba_option session.renew-interval 5s;"), "renew"),
        ("bad-key", dict(extra_http="simba_option loop.mode thread;"), "set by the module"),
        ("bad-dup", dict(extra_http="simba_lease other;"), "is duplicate"),
    ]
    for tag, kw, words in bad:
        path = write_conf(tag, conf_text(tag, free_port(), **kw))
        r = subprocess.run([nginx, "-t", "-q", "-p", sb.path(tag), "-c", path],
                           capture_output=True, text=True, timeout=20)
        out = (r.stdout + r.stderr).replace("\0", "\\0")
        check(r.returncode != 0, f"{tag}: nginx -t accepted it:\n{out}")
        check(words in out, f"{tag}: nginx -t does not say {words!r}:\n{out}")
    # simba_leader_only without a lease is an error too
    tag = "bad-noleased"
    text = conf_text(tag, free_port()).replace(f"simba_lease {name};", "").replace(
        f"simba_backend {backend};", "")
    r = subprocess.run([nginx, "-t", "-q", "-p", sb.path(tag), "-c", write_conf(tag, text)],
                       capture_output=True, text=True, timeout=20)
    check(r.returncode != 0 and "needs \"simba_backend\" and \"simba_lease\"" in r.stderr,
          f"leader_only without a lease: {r.stderr}")
    log("nginx -t rejects bad directives with a message")

    # --- two instances ---------------------------------------------------------------------
    inst = {}

    def start(tag):
        port, port2 = free_port(), free_port()
        path = write_conf(tag, conf_text(tag, port, port2=port2))
        r = subprocess.run([nginx, "-t", "-q", "-p", sb.path(tag), "-c", path],
                           capture_output=True, text=True, timeout=20)
        check(r.returncode == 0, f"{tag}: nginx -t: {r.stderr}")
        p = sb.spawn([nginx, "-p", sb.path(tag), "-c", path, "-g", "daemon off;"], f"{tag}-nginx")
        p.port = port
        p.port2 = port2  # a server with "simba_leader_only on" at server level
        p.tag = tag
        wait_until(f"nginx {tag} on {port}", lambda: http_get(port, "/simba")[0] == 200, 10)
        inst[tag] = p
        return p

    def status(tag, timeout=2.0):
        code, body = http_get(inst[tag].port, "/simba", timeout=timeout)
        check(code == 200, f"/simba on {tag}: {code}")
        return json.loads(body)

    def leading(tag, timeout=2.0):
        try:
            return status(tag, timeout)["leader"]
        except (OSError, ValueError):
            return False  # no answer (a stopped worker's listening socket)

    def leaders():
        return sorted(t for t in inst if inst[t].poll() is None and leading(t))

    def check_not_two(a, b, timeout=2.0):
        """a, b, a: if a leads at both ends and b in between, two leaders overlapped."""
        if inst[a].poll() is not None or inst[b].poll() is not None:
            return
        x = leading(a, timeout)
        y = leading(b, timeout) if x else False
        z = leading(a, timeout) if y else False
        check(not (x and y and z), f"{a} and {b} both lead")

    for tag in ("a", "b"):
        start(tag)

    # Traffic: /work on both instances, all along.
    traffic = []
    stop_traffic = threading.Event()

    def drive():
        while not stop_traffic.is_set():
            for tag in list(inst):
                p = inst[tag]
                if p.poll() is not None:
                    continue
                try:
                    code, body = http_get(p.port, "/work", timeout=1.0)
                except OSError:
                    code, body = None, ""
                traffic.append((time.monotonic(), tag, code, body.strip()))
            time.sleep(0.02)

    th = threading.Thread(target=drive, daemon=True)
    th.start()

    ls = wait_until("one leader", lambda: leaders() if len(leaders()) == 1 else None, 15)
    leader = ls[0]
    follower = "b" if leader == "a" else "a"
    tok1 = status(leader)["token"]
    log(f"nginx {leader} leads with token {tok1}")

    # Stable: exactly one leader, every worker of each instance agrees.
    seen = {"a": {}, "b": {}}
    end = time.monotonic() + 2.0
    while time.monotonic() < end:
        check_not_two(leader, follower)
        for tag in ("a", "b"):
            code, body = http_get(inst[tag].port, "/vars")
            pid, is_leader, *tok = body.split()
            seen[tag][pid] = (is_leader, tok[0] if tok else "")
        time.sleep(0.02)
    check(all(v == ("1", str(tok1)) for v in seen[leader].values()), f"leader workers: {seen[leader]}")
    check(all(v == ("0", "") for v in seen[follower].values()), f"follower workers: {seen[follower]}")
    check(len(seen[leader]) == 2 and len(seen[follower]) == 2,
          f"not every worker answered (reuseport): {seen}")
    st = status(leader)
    check(len(st["contenders"]) == 1 and st["contenders"][0]["session"] == "live"
          and st["contenders"][0]["snapshot"] is not None, f"/simba: {st}")
    code, _ = http_get(inst[follower].port, "/work")
    check(code == 503, f"follower /work answered {code}, not 503")
    code, _ = http_get(inst[follower].port, "/ret")
    check(code == 503, f"follower /ret (a return in a leader-only location) answered {code}")
    code, _ = http_get(inst[leader].port, "/ret")
    check(code == 200, f"leader /ret answered {code}")
    code, body = http_get(inst[leader].port, "/work")
    check(code == 200 and body.strip() == f"200 {tok1}", f"leader /work: {code} {body!r}")
    log("one leader; all workers agree; the follower answers 503")

    # "simba_leader_only on" at server level: its status location answers on followers
    # too, unless the location says so itself.
    for tag in (leader, follower):
        code, body = http_get(inst[tag].port2, "/simba")
        check(code == 200 and json.loads(body)["leader"] == (tag == leader),
              f"{tag}: /simba under a server-level leader_only: {code} {body!r}")
        code, _ = http_get(inst[tag].port2, "/simba-leader")
        check(code == (200 if tag == leader else 503), f"{tag}: /simba-leader answered {code}")
        code, _ = http_get(inst[tag].port2, "/other")
        check(code == (200 if tag == leader else 503), f"{tag}: /other answered {code}")
    log("under a server-level simba_leader_only on, the status location answers on followers")

    # --- kill -9 the follower's worker 0: the master respawns it, it contends again ------------
    owner = status(follower)["contenders"][0]["pid"]
    os.kill(owner, signal.SIGKILL)

    def respawned():
        cs = status(follower)["contenders"]
        return [c for c in cs if c["pid"] != owner and c["alive"] and c["session"] == "live"]

    wait_until("a respawned worker 0 with a live session", respawned, 10)
    check(not pid_alive(owner), "worker 0 survived SIGKILL")
    check(leaders() == [leader] and status(leader)["token"] == tok1,
          f"leadership changed when the follower's worker 0 died: {leaders()}")
    log("the follower's worker 0 killed: respawned, contends again with a new session")

    # --- kill -9 the leader's master and workers ----------------------------------------------
    victim = inst[leader]
    pids = [int(p) for p in seen[leader]] + [victim.pid]
    t0 = time.monotonic()
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait(5)
    wait_until("the killed workers to be gone", lambda: not any(pid_alive(p) for p in pids), 5)
    wait_until(f"nginx {follower} to lead", lambda: leading(follower), FAILOVER_BOUND_S + 3)
    took = time.monotonic() - t0
    tok2 = status(follower)["token"]
    log(f"kill -9 nginx {leader}: nginx {follower} leads with token {tok2} after {took:.2f}s")
    check(took <= FAILOVER_BOUND_S, f"failover took {took:.2f}s > {FAILOVER_BOUND_S}s")
    check(tok2 > tok1, f"token did not increase: {tok1} then {tok2}")
    dead = leader
    leader, follower = follower, dead
    start(dead)  # back, as a follower
    time.sleep(1.0)
    check(leaders() == [leader], f"after the restart: {leaders()}")

    # --- reload the leader: it keeps leadership or hands over cleanly --------------------------
    p = inst[leader]
    old_workers = worker_pids(p.pid)
    check(len(old_workers) == 2, f"workers of {leader}: {old_workers}")
    t0 = time.monotonic()
    os.kill(p.pid, signal.SIGHUP)
    end = time.monotonic() + 4.0
    while time.monotonic() < end:
        check_not_two(leader, follower)
        check_not_two(follower, leader)
        time.sleep(0.02)
    wait_until("the old workers to exit after the reload",
               lambda: not any(pid_alive(w) for w in old_workers), 10)
    ls = wait_until("a leader after the reload", lambda: leaders() if len(leaders()) == 1 else None,
                    FAILOVER_BOUND_S)
    tok3 = status(ls[0])["token"]
    new_workers = worker_pids(p.pid)
    check(len(new_workers) == 2 and not set(new_workers) & set(old_workers),
          f"workers after the reload: {new_workers} (before {old_workers})")
    kept = "kept leadership" if ls[0] == leader else f"handed over to nginx {ls[0]}"
    log(f"reload of nginx {leader}: {kept}, token {tok3} ({time.monotonic() - t0:.2f}s)")
    check(tok3 >= tok2, f"token went back: {tok2} then {tok3}")
    st = status(leader)
    check(len(st["contenders"]) == 1, f"the old generation's slot is still there: {st}")
    leader = ls[0]
    follower = "b" if leader == "a" else "a"

    # --- SIGSTOP the leader's worker 0: its slot stops claiming leadership at the deadline -------
    # The other worker of the paused instance reads the slot alone; past the term's
    # deadline it must answer "not leader", before the backend lets the other
    # instance in.
    owner = status(leader)["contenders"][0]["pid"]
    others = [w for w in worker_pids(inst[leader].pid) if w != owner]
    before = status(leader)
    check(before["leader"], f"before SIGSTOP: {before}")
    deadline = time.monotonic() + before["remaining_ms"] / 1000
    samples = []  # (time asked, pid, $simba_leader) from the paused instance
    sampling = threading.Event()

    def sample():
        while not sampling.is_set():
            asked = time.monotonic()  # the answer is computed after this
            try:
                body = http_get(inst[leader].port, "/vars", timeout=0.15)[1].split()
                samples.append((asked, body[0], body[1]))
            except (OSError, IndexError):
                pass  # the stopped worker's socket

    samplers = [threading.Thread(target=sample, daemon=True) for _ in range(8)]
    os.kill(owner, signal.SIGSTOP)
    try:
        for t in samplers:
            t.start()
        t0 = time.monotonic()
        while not leading(follower, 0.3):
            check(time.monotonic() - t0 < FAILOVER_BOUND_S + 2, "no failover while worker 0 is stopped")
            check_not_two(leader, follower, 0.3)
            time.sleep(0.02)
        took = time.monotonic() - t0
        time.sleep(0.7)  # go on sampling the paused instance after the failover
        sampling.set()
        for t in samplers:
            t.join(5)
        late = [x for x in samples if x[0] > deadline + 0.05]
        late_claims = [x for x in late if x[2] == "1"]
        late_answers = len(late)
        check(not late_claims, f"a worker claimed leadership past the term's deadline: {late_claims}")
        check(late_answers >= 3, f"only {late_answers} answers after the deadline: nothing checked")
        check(any(x[2] == "1" for x in samples if x[0] < deadline - 0.2),
              "the paused instance's other worker never answered as leader before the deadline")
        # After the failover, every answering worker of the paused instance says "not leader".
        answers = []
        for _ in range(20):
            try:
                answers.append(http_get(inst[leader].port, "/vars", timeout=0.3)[1].split()[1])
            except (OSError, IndexError):
                pass
        check(answers and set(answers) == {"0"}, f"the paused instance after the failover: {answers}")
        tok_paused = status(follower)["token"]
        log(f"SIGSTOP of nginx {leader}'s worker 0: its other worker {others} stopped claiming at the "
            f"deadline ({late_answers} answers after it); nginx {follower} leads with token "
            f"{tok_paused} after {took:.2f}s")
    finally:
        sampling.set()
        os.kill(owner, signal.SIGCONT)
    check(tok_paused > tok3, f"token did not increase: {tok3} then {tok_paused}")
    # Resumed, the old worker 0 finds its term gone and stays a follower.
    time.sleep(1.5)
    check(leaders() == [follower], f"after SIGCONT: {leaders()}")
    tok3 = tok_paused
    leader, follower = follower, leader

    # --- QUIT the leader: the lease is released, the other leads at once -------------------------
    # Slow requests in flight keep the old workers alive after QUIT (graceful
    # shutdown): the contender must release when QUIT arrives, not when it exits.
    p = inst[leader]
    owner = status(leader)["contenders"][0]["pid"]
    slow = []

    def slow_request():
        try:
            slow.append(http_get(p.port, "/slow", timeout=10)[0])
        except OSError as e:
            slow.append(str(e))

    slow_threads = [threading.Thread(target=slow_request) for _ in range(8)]
    for t in slow_threads:
        t.start()
    wait_until("the slow requests to reach the upstream", lambda: len(upstream.slow_workers) == 8, 5)
    t0 = time.monotonic()
    os.kill(p.pid, signal.SIGQUIT)
    wait_until(f"nginx {follower} to lead after QUIT", lambda: leading(follower),
               HANDOVER_BOUND_S + 3)
    took = time.monotonic() - t0
    busy_owner = owner in upstream.slow_workers
    check(not busy_owner or pid_alive(owner),
          "the contending worker exited before the handover: it did not release on QUIT")
    for t in slow_threads:
        t.join(10)
    check(slow == [200] * 8, f"slow requests across the QUIT: {slow}")
    log(f"QUIT with requests in flight (contending worker busy: {busy_owner}): released at once")
    tok4 = status(follower)["token"]
    log(f"QUIT nginx {leader}: nginx {follower} leads with token {tok4} after {took:.2f}s")
    check(took <= HANDOVER_BOUND_S, f"handover after QUIT took {took:.2f}s (was the lease released?)")
    check(tok4 > tok3, f"token did not increase: {tok3} then {tok4}")
    p.wait(10)
    check(p.returncode == 0, f"nginx {leader} exited with {p.returncode} after QUIT")
    time.sleep(0.5)

    # --- what the upstream saw -----------------------------------------------------------------
    stop_traffic.set()
    th.join(5)
    upstream.close()
    with upstream.lock:
        accepted = list(upstream.accepted)
        stale = list(upstream.stale)
    check(not stale, f"the upstream got stale tokens: {stale[:5]}")
    toks = [t for _, _, t in accepted]
    check(toks == sorted(toks), "tokens at the upstream went back")
    distinct = []
    for t in toks:
        if not distinct or distinct[-1] != t:
            distinct.append(t)
    check(len(distinct) == len(set(distinct)), f"a token came back: {distinct}")
    check(len(distinct) >= 3 and distinct[-1] == tok4, f"tokens seen upstream: {distinct}")
    ok = sum(1 for _, _, c, _ in traffic if c == 200)
    unavailable = sum(1 for _, _, c, _ in traffic if c == 503)
    log(f"upstream: {len(accepted)} requests accepted, tokens {distinct}, strictly increasing; "
        f"{unavailable} answered 503 by followers; {upstream.missing} without a token")
    check(ok > 20 and unavailable > 20, f"too little traffic: {ok} ok, {unavailable} 503")

    # --- logs: no alert, no socket left open, the release on QUIT ---------------------------------
    for tag in ("a", "b"):
        for line in open(sb.path(tag, "error.log"), errors="replace"):
            if "exited on signal 9" in line:
                continue  # the worker 0 this test killed
            check(not any(w in line for w in ("[alert]", "[crit]", "[emerg]", "open socket")),
                  f"{tag}/error.log: {line.strip()}")
    quit_log = open(sb.path(leader, "error.log"), errors="replace").read()
    check("releasing the lease" in quit_log or "session closed" in quit_log,
          "no release in the QUIT instance's log")


def worker_pids(master):
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(master)], capture_output=True,
                         text=True).stdout
    return sorted(int(x) for x in out.split())


if __name__ == "__main__":
    run_test(main)
