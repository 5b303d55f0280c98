#!/usr/bin/env python3
"""The chaos suite's runner (tests/chaos, label chaos): servers, workers, faults.

Starts the backend on loopback in a temp dir (redis, postgres, zookeeper, or
the 3-server ZooKeeper ensemble zookeeper3, or a PostgreSQL primary with a
synchronous or asynchronous standby, postgres_ha_sync / postgres_ha_async,
or a Redis primary with a replica, redis_replica, or the same under three
Sentinels, redis_sentinel (clients with wait_replicas=1) / redis_sentinel_no_wait,
or etcd: one member, etcd, or a 3-member cluster, etcd3, clients on the
multi-endpoint URL through one proxy per member),
one TCP proxy per worker slot (single servers; HA clients use the multi-host URL),
N chaos_worker processes contending for a few names and writing to the fenced
register, and a nemesis that draws faults from a seeded random generator:

  pause_holder     SIGSTOP of a holder for 0.5-3 x lease, then SIGCONT
  kill_worker      kill -9 of a worker (a holder when there is one); restarted
  backend_kill     kill -9 of the backend (its process tree), restart after 0.5-2 x lease
  backend_stop     SIGSTOP of the backend (its process tree) for 0.5-2 x lease
  proxy_delay      one client's proxy holds every chunk 0.2-1 x lease, for 1-3 x lease
  proxy_blackhole  one client's proxy forwards nothing for 0.5-3 x lease
  proxy_reply_blackhole  one client's proxy forwards its requests but holds every
                   reply for 0.5-3 x lease (the server sees keep-alives the client
                   never hears answered)
  graceful_stop    SIGTERM of a holder (its terms released), restarted: a handover,
                   not a fault (campaigns use it to measure handovers)
  zk_kill_leader   (zookeeper3) kill -9 of the ensemble leader, restart later
  zk_kill_follower (zookeeper3) kill -9 of one follower, restart later
  etcd_kill_leader (etcd3) kill -9 of the raft leader, restart after 1-3 x lease
  etcd_kill_follower (etcd3) kill -9 of a member that is not the leader, restart later
  etcd_stop_member (etcd3) SIGSTOP of one member that is not the leader for 0.5-3 x lease
  etcd_stop_leader (etcd3, not in the campaign's list) SIGSTOP of the raft leader: etcd
                   before 3.4.31 / 3.5.13 (Debian 12 ships 3.4.23) revokes, once resumed,
                   the leases it saw expire while stopped, though clients renewed them
                   with the new leader (etcd issue 15247, fixed by PR 17465 / 17425): an
                   overlap the checker flags is then the server's
  etcd_partition   (etcd3) one member's client and peer proxies cut for 0.5-3 x lease
                   (nothing reaches it, nobody hears it; see Etcd)
  redis_failover   (redis_replica) replication cut, a holder killed, primary
                   kill -9, replica promoted, clients moved to it (what Sentinel does)
  sentinel_failover (redis_sentinel*) kill -9 of the primary the Sentinels name (the
                   first time with the replication cut and a holder killed); the
                   Sentinels promote the replica, clients follow them; the old
                   primary restarts and Sentinel makes it a replica
  pg_failover      (postgres_ha_sync/_async) replication cut, a holder killed,
                   primary kill -9, standby promoted, old primary rebuilt as standby
  partition        (root, network namespaces) each worker in a namespace of its own,
                   joined by a veth pair; the host end goes down for 0.5-3 x lease

Every fault window is logged with CLOCK_MONOTONIC times (time.monotonic_ns()), the
clock the workers log with, then checker.py rebuilds the terms from the logs.
Servers, proxies and workers are always stopped, whatever happens (finally, and
PR_SET_PDEATHSIG for the children; SIGTERM and SIGINT run the finally too:
PostgreSQL, started through setpriv, loses PR_SET_PDEATHSIG with its uid).

  nemesis.py --backend redis --seconds 30 --worker build/tests/chaos/chaos_worker
             [--seed N] [--lease MS] [--workers 3] [--names a,b] [--faults k1,k2]
             [--no-aof] [--wipe] [--slow-clock RATE --shim slowclock.so] [--expect KIND,...]
             [--no-permits] [--keep DIR]
Every worker also holds permits of semaphore s (size 2) and read/write lock rw
(one write in 4) unless --no-permits (chaos_worker --sem/--rw; ADR 0046).
Exit status: the checker's (0 no violation; with --expect, 0 iff each KIND was flagged).
"""
import argparse
import ctypes
import json
import os
import random
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.request
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "support"))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import checker  # noqa: E402
from free_port import free_port  # noqa: E402

_libc = ctypes.CDLL(None, use_errno=True)
PR_SET_PDEATHSIG = 1
# etcd's HTTP gateway on loopback: never through an http_proxy of the environment
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _die_with_parent():
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def now():
    return time.monotonic_ns()


def wait_until(limit, what, fn):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        try:
            if fn():
                return
        except Exception:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{what} not ready after {limit}s")


def tcp_ask(port, msg, timeout=2.0):
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(msg)
        out = b""
        while True:
            b = s.recv(4096)
            if not b:
                return out
            out += b


def pg_bindir():
    try:
        d = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True).stdout.strip()
        if os.access(os.path.join(d, "postgres"), os.X_OK):
            return d
    except OSError:
        pass
    for v in sorted(os.listdir("/usr/lib/postgresql"), reverse=True) if os.path.isdir("/usr/lib/postgresql") else []:
        d = f"/usr/lib/postgresql/{v}/bin"
        if os.access(os.path.join(d, "postgres"), os.X_OK):
            return d
    raise RuntimeError("PostgreSQL server binaries not found")


class Proc:
    """A server process in its own process group; kill and stop reach it and
    every descendant."""

    def __init__(self, argv, log, cwd=None):
        self.argv, self.log, self.cwd = argv, log, cwd
        self.p = None

    def start(self):
        out = open(self.log, "ab")
        self.p = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, cwd=self.cwd,
                                  start_new_session=True, preexec_fn=_die_with_parent)
        out.close()

    def tree(self):
        """The server's pid and its descendants' (PostgreSQL's children call
        setsid(): the process group alone does not reach them)."""
        kids = defaultdict(list)
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    with open(f"/proc/{d}/stat") as f:
                        ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                    kids[ppid].append(int(d))
                except (OSError, ValueError, IndexError):
                    pass
        out, todo = [], [self.p.pid]
        while todo:
            pid = todo.pop()
            out.append(pid)
            todo += kids.get(pid, [])
        return out

    def signal(self, sig):
        if self.p and self.p.poll() is None:
            for pid in self.tree():
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass

    def kill9(self):
        if self.p:
            self.signal(signal.SIGCONT)
            self.signal(signal.SIGKILL)  # the whole tree: a crash of the host, not of the postmaster alone
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                pass
            # children of the group that outlived the leader
            try:
                os.killpg(self.p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def stop(self):
        if self.p and self.p.poll() is None:
            self.signal(signal.SIGCONT)
            self.signal(signal.SIGTERM)
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                pass
        self.kill9()


# --- backends ---------------------------------------------------------------------


class Redis:
    name = "redis"

    def __init__(self, d, aof=True):
        self.dir = os.path.join(d, "redis")
        os.makedirs(self.dir)
        self.port = free_port()
        persist = ["--appendonly", "yes", "--appendfsync", "always"] if aof else ["--appendonly", "no"]
        self.proc = Proc(["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                          *persist, "--dir", self.dir, "--daemonize", "no"],
                         os.path.join(self.dir, "redis.log"))

    def start(self):
        self.proc.start()
        wait_until(20, f"redis on {self.port}",
                   lambda: b"PONG" in tcp_ask_once(self.port, b"PING\r\n"))

    def url(self, host, port):
        return f"redis://{host}:{port}"

    def ports(self):
        return [self.port]

    def stop(self):
        self.proc.stop()


class RedisReplica:
    """A Redis primary (AOF, appendfsync always) and a replica (REPLICAOF
    through a replication proxy of ours), clients through the per-worker
    proxies. The fault redis_failover does what Sentinel would: the replication
    cut, a holder killed (a new grant on the primary), the primary killed, the
    replica promoted (REPLICAOF NO ONE), every client proxy moved to it. Without
    WAIT, the promoted replica lacks the grants made after the cut: the negative
    control that the checker flags."""

    name = "redis_replica"

    def __init__(self, d):
        self.nodes = []
        for i in range(2):
            nd = os.path.join(d, f"redis{i}")
            os.makedirs(nd)
            port = free_port()
            # (--repl-diskless-sync-delay 0: a replica's full sync starts at once, not after 5 s.)
            proc = Proc(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                         "--appendonly", "yes", "--appendfsync", "always", "--repl-diskless-sync-delay", "0",
                         "--dir", nd, "--daemonize", "no"],
                        os.path.join(nd, "redis.log"))
            self.nodes.append((port, proc))
        self.port = self.nodes[0][0]
        self.proc = self.nodes[0][1]
        self.repl_proxy = None
        self.client_proxies = []

    def cli(self, port, *args):
        r = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(port), *args],
                           capture_output=True, text=True, timeout=5)
        return r.stdout.strip()

    def start(self):
        for port, proc in self.nodes:
            proc.start()
            wait_until(20, f"redis on {port}", lambda port=port: b"PONG" in tcp_ask_once(port, b"PING\r\n"))
        self.repl_proxy = Proxy([self.nodes[0][0]])
        self.cli(self.nodes[1][0], "REPLICAOF", "127.0.0.1", str(self.repl_proxy.port))
        wait_until(20, "the replica in sync",
                   lambda: "master_link_status:up" in self.cli(self.nodes[1][0], "INFO", "replication"))

    def url(self, host, port):
        return f"redis://{host}:{port}"

    def ports(self):
        return [self.port]

    def failover(self, nem):
        if self.port != self.nodes[0][0]:
            return False  # once per run: the promoted replica has no replica of its own
        self.repl_proxy.mode = "blackhole"
        h = nem.w.holders()
        if h:
            slot = nem.rng.choice(h)
            nem.w.procs[slot].kill()
            nem.w.procs[slot].wait()
            nem.w.start(slot)
        time.sleep(2.5 * nem.lease_s)
        self.nodes[0][1].kill9()
        self.repl_proxy.close()
        self.cli(self.nodes[1][0], "REPLICAOF", "NO", "ONE")
        self.port, self.proc = self.nodes[1]
        for px in nem.proxies:
            px.retarget([self.port])
        return True

    def stop(self):
        if self.repl_proxy:
            self.repl_proxy.close()
        for _, proc in self.nodes:
            proc.stop()


class RedisSentinel(RedisReplica):
    """A Redis primary and a replica (both AOF, appendfsync always) under three
    Sentinels (quorum 2, down after 400 ms), clients on the redis+sentinel://
    URL itself: the client finds and follows the primary. The replica's first
    replication link goes through a proxy of ours, so that the first
    sentinel_failover can cut it (what was in flight is lost, as on a real
    cut) and let a holder's successor be granted on the primary alone. With
    wait_replicas=1 that grant never counts (WAIT finds no replica): no
    violation. Without it, the promoted replica hands the same token out
    again: the negative control the checker must flag (token_order)."""

    MASTER = "chaos"

    def __init__(self, d, wait=True):
        super().__init__(d)  # the two data nodes
        self.name = "redis_sentinel" if wait else "redis_sentinel_no_wait"
        self.n = 2  # several servers: workers use multi_url(), no per-slot proxy
        self.wait = wait
        self.sentinels = []
        for i in range(3):
            sd = os.path.join(d, f"sentinel{i}")
            os.makedirs(sd)
            port = free_port()
            conf = os.path.join(sd, "sentinel.conf")
            with open(conf, "w") as f:
                f.write(f"sentinel monitor {self.MASTER} 127.0.0.1 {self.nodes[0][0]} 2\n"
                        f"sentinel down-after-milliseconds {self.MASTER} 400\n"
                        f"sentinel failover-timeout {self.MASTER} 4000\n")
            self.sentinels.append((port, Proc(["redis-server", conf, "--port", str(port), "--bind", "127.0.0.1",
                                               "--dir", sd, "--daemonize", "no", "--sentinel"],
                                              os.path.join(sd, "sentinel.log"))))
        self.procs = [p for _, p in self.nodes]
        self.proc = None
        self.cut_done = False

    def primary_port(self):
        out = self.cli(self.sentinels[0][0], "SENTINEL", "get-master-addr-by-name", self.MASTER).split()
        return int(out[1]) if len(out) == 2 else None

    def _topology_known(self):
        for port, _ in self.sentinels:
            m = self.cli(port, "SENTINEL", "master", self.MASTER).split("\n")
            kv = dict(zip(m[0::2], m[1::2]))
            if kv.get("num-slaves") != "1" or kv.get("num-other-sentinels") != "2":
                return False
        return True

    def start(self):
        super().start()  # the primary, and the replica through the replication proxy
        for _, proc in self.sentinels:
            proc.start()
        wait_until(30, "the Sentinels knowing the replica and each other", self._topology_known)

    def multi_url(self):
        hosts = ",".join(f"127.0.0.1:{p}" for p, _ in self.sentinels)
        return f"redis+sentinel://{hosts}/{self.MASTER}" + ("?wait_replicas=1" if self.wait else "")

    def ports(self):
        return [p for p, _ in self.nodes]

    def failover(self, nem):
        old = self.primary_port()
        i = [p for p, _ in self.nodes].index(old)
        if not self.cut_done:  # the first time: a grant the replica never hears of
            self.cut_done = True
            self.repl_proxy.mode = "blackhole"
            h = nem.w.holders()
            if h:
                slot = nem.rng.choice(h)
                nem.w.procs[slot].kill()
                nem.w.procs[slot].wait()
                nem.w.start(slot)
            time.sleep(2.5 * nem.lease_s)
        self.nodes[i][1].kill9()
        if self.repl_proxy:
            self.repl_proxy.close()  # what the primary sent since the cut is lost with it
            self.repl_proxy = None
        wait_until(30, "the Sentinels' failover", lambda: self.primary_port() not in (None, old))
        # Every Sentinel must have the new configuration before the old primary
        # is back (it restarts as a primary): one that does not could fail over
        # to it.
        new = self.primary_port()
        wait_until(30, "every Sentinel naming the new primary",
                   lambda: all(self.cli(p, "SENTINEL", "get-master-addr-by-name", self.MASTER).split()[1:] ==
                               [str(new)] for p, _ in self.sentinels))
        time.sleep(1.0)
        self.nodes[i][1].start()  # back as a replica of the new primary (Sentinel reconfigures it)
        wait_until(45, "the old primary replicating",
                   lambda: "master_link_status:up" in self.cli(old, "INFO", "replication"))

    def stop(self):
        for _, proc in self.sentinels:
            proc.stop()
        super().stop()


def tcp_ask_once(port, msg):
    with socket.create_connection(("127.0.0.1", port), timeout=1.0) as s:
        s.sendall(msg)
        return s.recv(100)


class Postgres:
    name = "postgres"

    def __init__(self, d):
        self.dir = os.path.join(d, "postgres")
        self.bindir = pg_bindir()
        os.makedirs(self.dir)
        self.as_ = []
        if os.getuid() == 0:
            if subprocess.run(["id", "-u", "postgres"], capture_output=True).returncode != 0:
                subprocess.run(["useradd", "--system", "--home-dir", "/nonexistent", "--no-create-home",
                                "--shell", "/usr/sbin/nologin", "postgres"], check=True)
            os.chmod(d, 0o711)
            shutil.chown(self.dir, "postgres", "postgres")
            self.as_ = ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "--"]
        os.chmod(self.dir, 0o700)
        r = subprocess.run(self.as_ + [f"{self.bindir}/initdb", "-D", f"{self.dir}/data", "-U", "postgres",
                                       "--auth=trust", "--no-sync", "--no-locale", "-E", "UTF8"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError("initdb: " + r.stdout + r.stderr)
        self.port = free_port()
        # fsync off: a kill -9 of the server loses nothing the OS has; the data dies with the run.
        self.proc = Proc(self.as_ + [f"{self.bindir}/postgres", "-D", f"{self.dir}/data", "-p", str(self.port),
                                     "-k", self.dir, "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off",
                                     "-c", "full_page_writes=off",
                                     *(["-c", f"max_connections={4 * CLIENTS + 20}"] if CLIENTS > 20 else [])],
                         os.path.join(d, "postgres.log"))

    def start(self):
        self.proc.start()
        wait_until(30, f"postgres on {self.port}", lambda: subprocess.run(
            [f"{self.bindir}/pg_isready", "-q", "-h", "127.0.0.1", "-p", str(self.port)]).returncode == 0)

    def url(self, host, port):
        return f"postgresql://postgres@{host}:{port}/postgres?sslmode=disable"

    def ports(self):
        return [self.port]

    def stop(self):
        self.proc.stop()


class PostgresHA:
    """A primary and a streaming standby (pg_basebackup), synchronous
    (synchronous_standby_names = the standby) or asynchronous. Clients use the
    libpq multi-host URL with target_session_attrs=read-write. The fault
    pg_failover: SIGSTOP the standby (it falls behind, or, synchronous, holds
    every commit), kill -9 a holder so that a new term is granted meanwhile if
    commits can go on, kill -9 the primary, SIGCONT and promote the standby, then
    rebuild the old primary as the new standby (roles swap)."""

    n = 2

    def __init__(self, d, sync=True):
        self.name = "postgres_ha_sync" if sync else "postgres_ha_async"
        self.sync = sync
        self.bindir = pg_bindir()
        self.root = d
        self.as_ = []
        if os.getuid() == 0:
            if subprocess.run(["id", "-u", "postgres"], capture_output=True).returncode != 0:
                subprocess.run(["useradd", "--system", "--home-dir", "/nonexistent", "--no-create-home",
                                "--shell", "/usr/sbin/nologin", "postgres"], check=True)
            os.chmod(d, 0o711)
            self.as_ = ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "--"]
        self.ports_ = [free_port(), free_port()]
        self.primary = 0
        self.gen = 0
        self.procs = [None, None]
        self.dirs = [None, None]
        self.repl_proxy = None

    def _mkdir(self, i):
        self.gen += 1
        d = os.path.join(self.root, f"pg{i}.{self.gen}")
        os.makedirs(d)
        if self.as_:
            shutil.chown(d, "postgres", "postgres")
        os.chmod(d, 0o700)
        self.dirs[i] = d
        return d

    def _run(self, argv, what):
        r = subprocess.run(self.as_ + argv, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"{what}: {r.stdout}{r.stderr}")

    def _proc(self, i):
        d = self.dirs[i]
        return Proc(self.as_ + [f"{self.bindir}/postgres", "-D", f"{d}/data", "-p", str(self.ports_[i]), "-k", d,
                                "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off",
                                "-c", "full_page_writes=on", "-c", "wal_level=replica",
                                "-c", "max_wal_senders=5", "-c", "hot_standby=on",
                                "-c", "wal_receiver_status_interval=1s",
                                "-c", "synchronous_standby_names=" + ("standby" if self.sync else "")],
                    os.path.join(self.root, f"pg{i}.log"))

    def sql(self, i, q, timeout=5):
        r = subprocess.run([f"{self.bindir}/psql", "-h", "127.0.0.1", "-p", str(self.ports_[i]), "-U", "postgres",
                            "-d", "postgres", "-XAtc", q], capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(r.stderr)
        return r.stdout.strip()

    def _ready(self, i):
        return subprocess.run([f"{self.bindir}/pg_isready", "-q", "-h", "127.0.0.1", "-p",
                               str(self.ports_[i])]).returncode == 0

    def _start_standby(self, i):
        p = self.primary
        d = self._mkdir(i)
        self._run([f"{self.bindir}/pg_basebackup", "-h", "127.0.0.1", "-p", str(self.ports_[p]), "-U", "postgres",
                   "-D", f"{d}/data", "-X", "stream", "-R", "--no-sync"], "pg_basebackup")
        # Replication goes through a proxy of ours, so that the nemesis can cut
        # it and drop what was in flight (on loopback, a stopped standby would
        # still find every byte in its socket buffer when it resumes).
        if self.repl_proxy:
            self.repl_proxy.close()
        self.repl_proxy = Proxy([self.ports_[p]])
        conf = os.path.join(d, "data", "postgresql.auto.conf")
        with open(conf, "a") as f:
            f.write(f"primary_conninfo = 'host=127.0.0.1 port={self.repl_proxy.port} user=postgres "
                    f"application_name=standby'\n")
        self.procs[i] = self._proc(i)
        self.procs[i].start()
        wait_until(30, f"standby on {self.ports_[i]}", lambda: self._ready(i))
        want = "sync" if self.sync else "async"
        wait_until(30, "the standby streaming", lambda: self.sql(
            p, "select sync_state from pg_stat_replication where application_name = 'standby' "
               "and state = 'streaming'") == want)

    def start(self):
        d = self._mkdir(0)
        self._run([f"{self.bindir}/initdb", "-D", f"{d}/data", "-U", "postgres", "--auth=trust", "--no-sync",
                   "--no-locale", "-E", "UTF8"], "initdb")
        self.procs[0] = self._proc(0)
        self.procs[0].start()
        wait_until(30, f"postgres on {self.ports_[0]}", lambda: self._ready(0))
        self._start_standby(1)

    def multi_url(self):
        hosts = ",".join(f"127.0.0.1:{p}" for p in self.ports_)
        return f"postgresql://postgres@{hosts}/postgres?sslmode=disable&target_session_attrs=read-write"

    def ports(self):
        return list(self.ports_)

    def failover(self, nem):
        p, s = self.primary, 1 - self.primary
        self.repl_proxy.mode = "blackhole"  # the standby hears nothing more
        h = nem.w.holders()
        if h:  # a new term while the standby is behind (asynchronous) or every commit waits (synchronous)
            slot = nem.rng.choice(h)
            nem.w.procs[slot].kill()
            nem.w.procs[slot].wait()
            nem.w.start(slot)
        time.sleep(2.5 * nem.lease_s)
        self.procs[p].kill9()
        self.repl_proxy.close()  # what the primary sent since the cut is lost with it
        self.sql(s, "select pg_promote(true, 30)", timeout=40)
        wait_until(30, "the promoted standby", lambda: self.sql(s, "select pg_is_in_recovery()") == "f")
        self.primary = s
        self._start_standby(p)

    def stop(self):
        if self.repl_proxy:
            self.repl_proxy.close()
        for pr in self.procs:
            if pr:
                pr.stop()


# Client processes of the run (--workers): the load runs (scripts/load.sh) have
# many more than the CI seeds' 3, for which the servers' limits are raised.
CLIENTS = 3

ZK_JAVA = ["java", "-Xmx64m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
           "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"]
ZK_CP = "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar"


class ZooKeeper:
    """One standalone server, or an ensemble of n servers on loopback."""

    def __init__(self, d, n=1):
        self.n = n
        self.name = "zookeeper" if n == 1 else f"zookeeper{n}"
        if not os.access("/usr/share/java/zookeeper.jar", os.R_OK) or not shutil.which("java"):
            raise RuntimeError("zookeeper (or java) not installed")
        self.client = [free_port() for _ in range(n)]
        peers = [(free_port(), free_port()) for _ in range(n)]
        self.procs = []
        for i in range(n):
            sd = os.path.join(d, f"zk{i + 1}")
            os.makedirs(os.path.join(sd, "data"))
            cfg = [
                "tickTime=100", f"dataDir={sd}/data", f"clientPort={self.client[i]}",
                "clientPortAddress=127.0.0.1", "minSessionTimeout=200", "maxSessionTimeout=30000",
                "admin.enableServer=false", "4lw.commands.whitelist=ruok,srvr", "preAllocSize=1024",
            ]
            if CLIENTS > 20:  # every client comes from 127.0.0.1 (the proxies): 60 by default
                cfg += ["maxClientCnxns=0"]
            if n > 1:
                cfg += ["initLimit=50", "syncLimit=20", "electionPortBindRetry=100"]
                cfg += [f"server.{j + 1}=127.0.0.1:{peers[j][0]}:{peers[j][1]}" for j in range(n)]
                with open(os.path.join(sd, "data", "myid"), "w") as f:
                    f.write(f"{i + 1}\n")
            with open(os.path.join(sd, "zoo.cfg"), "w") as f:
                f.write("\n".join(cfg) + "\n")
            java = ZK_JAVA if CLIENTS <= 20 else ["java", "-Xmx256m"] + ZK_JAVA[2:]
            self.procs.append(Proc(java + ["-cp", f"{sd}:{ZK_CP}",
                                              "org.apache.zookeeper.server.quorum.QuorumPeerMain",
                                              f"{sd}/zoo.cfg"], os.path.join(sd, "zookeeper.log")))
        self.proc = self.procs[0] if n == 1 else None

    def mode(self, i):
        try:
            out = tcp_ask(self.client[i], b"srvr").decode(errors="replace")
        except OSError:
            return None
        for line in out.splitlines():
            if line.startswith("Mode:"):
                return line.split(":", 1)[1].strip()
        return None

    def serving(self, i):
        return self.mode(i) in ("standalone", "leader", "follower")

    def start(self, which=None):
        idx = range(self.n) if which is None else [which]
        for i in idx:
            self.procs[i].start()
        for i in idx:
            wait_until(60, f"zookeeper {i + 1} on {self.client[i]}", lambda i=i: self.serving(i))

    def leader(self):
        for i in range(self.n):
            if self.mode(i) == "leader":
                return i
        return None

    def url(self, host, port):
        return f"zookeeper://{host}:{port}/simba-chaos"

    def multi_url(self):
        return "zookeeper://" + ",".join(f"127.0.0.1:{p}" for p in self.client) + "/simba-chaos"

    def ports(self):
        return list(self.client)

    def stop(self):
        for p in self.procs:
            p.stop()


class Etcd:
    """etcd 3.4 (Debian's etcd-server): one member (etcd, clients through the
    per-worker proxies like the other single servers), or a cluster of n
    members (etcd3) on loopback. A cluster's clients use the multi-endpoint URL
    etcd://h1:p1,h2:p2,h3:p3/prefix whose endpoints are one proxy per member,
    and each member advertises a proxy of its peer port to the others: the
    fault etcd_partition cuts both proxies of one member (nothing new connects
    to it, what its connections held is dropped at the end). etcd's rafthttp
    dials one stream each way, so the streams the member dialed to the others
    still carry the others' messages to it: it hears the leader, nobody hears
    it (as a one-way link failure does; a leader so cut is voted out)."""

    def __init__(self, d, n=1, wipe=False):
        if not shutil.which("etcd"):
            raise RuntimeError("etcd (etcd-server) not installed")
        self.n = n
        self.name = "etcd" if n == 1 else f"etcd{n}"
        self.wipe = wipe  # negative control: a killed member restarts with no data
        self.dir = os.path.join(d, "etcd")
        self.client = [free_port() for _ in range(n)]
        self.peer = [free_port() for _ in range(n)]
        # proxies of a cluster: clients and peers reach member i through them
        self.cproxy = [Proxy([p]) for p in self.client] if n > 1 else []
        self.pproxy = [Proxy([p]) for p in self.peer] if n > 1 else []
        adv_peer = [px.port for px in self.pproxy] or self.peer
        adv_client = [px.port for px in self.cproxy] or self.client
        cluster = ",".join(f"m{i}=http://127.0.0.1:{adv_peer[i]}" for i in range(n))
        self.procs = []
        for i in range(n):
            self.procs.append(Proc([
                "etcd", "--name", f"m{i}", "--data-dir", os.path.join(self.dir, f"m{i}"),
                "--listen-client-urls", f"http://127.0.0.1:{self.client[i]}",
                "--advertise-client-urls", f"http://127.0.0.1:{adv_client[i]}",
                "--listen-peer-urls", f"http://127.0.0.1:{self.peer[i]}",
                "--initial-advertise-peer-urls", f"http://127.0.0.1:{adv_peer[i]}",
                "--initial-cluster", cluster, "--initial-cluster-state", "new",
                "--initial-cluster-token", f"simba-chaos-{os.getpid()}",
                # as scripts/lib/servers.sh: a leader elected within a second on loopback
                "--heartbeat-interval", "50", "--election-timeout", "500",
                "--log-level", "warn", "--logger", "zap"], os.path.join(d, f"etcd-m{i}.log")))
        self.proc = self.procs[0] if n == 1 else None

    def status(self, i):
        """Member i's /v3/maintenance/status (its id and the leader's), or None."""
        req = urllib.request.Request(f"http://127.0.0.1:{self.client[i]}/v3/maintenance/status", data=b"{}")
        try:
            with _DIRECT.open(req, timeout=1.0) as r:
                return json.load(r)
        except (OSError, ValueError):
            return None

    def healthy(self, i):
        try:
            with _DIRECT.open(f"http://127.0.0.1:{self.client[i]}/health", timeout=2.0) as r:
                return json.load(r).get("health") == "true"
        except (OSError, ValueError):
            return False

    def start(self, which=None):
        idx = range(self.n) if which is None else [which]
        for i in idx:
            if self.wipe and self.procs[i].p is not None:
                shutil.rmtree(os.path.join(self.dir, f"m{i}"), ignore_errors=True)
            self.procs[i].start()
        for i in idx:
            wait_until(60, f"etcd member m{i} on {self.client[i]}", lambda i=i: self.healthy(i))

    def leader(self):
        """The index of the raft leader, as a member that answers names it."""
        for i in range(self.n):
            st = self.status(i)
            if st and st.get("leader") and st["leader"] == st.get("header", {}).get("member_id"):
                return i
        return None

    def cut(self, i, on):
        for px in (self.cproxy[i], self.pproxy[i]):
            if on:
                px.mode = "cut"
            else:
                px.heal()

    def url(self, host, port):
        return f"etcd://{host}:{port}/simba-chaos"

    def multi_url(self):
        return "etcd://" + ",".join(f"127.0.0.1:{px.port}" for px in self.cproxy) + "/simba-chaos"

    def ports(self):
        return list(self.client)

    def stop(self):
        for px in self.cproxy + self.pproxy:
            px.close()
        for p in self.procs:
            p.stop()


# --- the TCP proxy --------------------------------------------------------------


class Proxy:
    """Forwards 127.0.0.1:listen to one of targets (the first that accepts).

    mode 'pass', 'delay' (each chunk held `delay` s before it is forwarded, in
    order), 'blackhole' (nothing forwarded either way; the bytes wait in the
    kernel and flow, late, when the mode returns to 'pass'), 'reply_blackhole'
    (as blackhole for the server's bytes only: requests still pass), 'cut' (as
    blackhole, and a new connection is closed at once; heal() ends it by
    closing every connection, so what they held is lost, never late)."""

    def __init__(self, targets, bind="127.0.0.1"):
        self.targets = targets
        self.mode, self.delay = "pass", 0.0
        self.bind = bind
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((bind, 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.closed = False
        self.conns = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.closed:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            if self.mode == "cut":
                c.close()
                continue
            up = None
            for t in self.targets:
                try:
                    up = socket.create_connection(("127.0.0.1", t), timeout=1.0)
                    up.settimeout(None)
                    break
                except OSError:
                    up = None
            if up is None:
                c.close()
                continue
            self.conns += [c, up]
            for a, b, reply in ((c, up, False), (up, c, True)):
                threading.Thread(target=self._pump, args=(a, b, reply), daemon=True).start()

    def _held(self, reply):
        return self.mode in ("blackhole", "cut") or (reply and self.mode == "reply_blackhole")

    def _pump(self, a, b, reply):
        try:
            while not self.closed:
                while self._held(reply) and not self.closed:
                    time.sleep(0.01)
                r, _, _ = select.select([a], [], [], 0.05)
                if not r:
                    continue
                if self._held(reply):
                    continue
                data = a.recv(65536)
                if not data:
                    break
                if self.mode == "delay" and self.delay > 0:
                    time.sleep(self.delay)
                b.sendall(data)
        except (OSError, ValueError):  # ValueError: a socket closed under select()
            pass
        finally:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def retarget(self, targets):
        """New connections go to targets; the current ones are cut."""
        self.targets = targets
        conns, self.conns = self.conns, []
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
                c.close()
            except OSError:
                pass

    def heal(self):
        """Ends a cut: the connections it held are closed, new ones pass."""
        self.retarget(self.targets)
        self.mode = "pass"

    def close(self):
        self.closed = True
        try:
            self.sock.close()
        except OSError:
            pass
        for s in self.conns:
            try:
                s.close()
            except OSError:
                pass


# --- network namespaces ---------------------------------------------------------


def _ip(*args, ns=None):
    argv = (["ip", "netns", "exec", ns] if ns else []) + ["ip", *args]
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(" ".join(argv) + ": " + r.stderr.strip())


class Netns:
    """One network namespace per worker slot, joined to the host by a veth
    pair on a /30 of its own; the slot's proxy listens on the host end. The
    fault `partition` takes the host end down (packets dropped, no reset: a
    real partition of that worker from every server), then up again."""

    def __init__(self, slot):
        tag = os.getpid() % 100000
        self.ns = f"simba-chaos-{tag}-{slot}"
        self.host_if, self.ns_if = f"sc{tag}h{slot}", f"sc{tag}n{slot}"
        a, b = (os.getpid() >> 8) & 255, os.getpid() & 255
        b = (b + slot // 64) % 256  # 64 /30s a /24: the load runs have more slots
        q = slot % 64
        self.host_ip, self.ns_ip = f"10.{a}.{b}.{4 * q + 1}", f"10.{a}.{b}.{4 * q + 2}"
        self.made = False
        _ip("netns", "add", self.ns)
        self.made = True
        _ip("link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if)
        _ip("link", "set", self.ns_if, "netns", self.ns)
        _ip("addr", "add", self.host_ip + "/30", "dev", self.host_if)
        _ip("link", "set", self.host_if, "up")
        _ip("addr", "add", self.ns_ip + "/30", "dev", self.ns_if, ns=self.ns)
        _ip("link", "set", self.ns_if, "up", ns=self.ns)
        _ip("link", "set", "lo", "up", ns=self.ns)

    def cut(self, down):
        _ip("link", "set", self.host_if, "down" if down else "up")

    def close(self):
        if self.made:
            subprocess.run(["ip", "link", "del", self.host_if], capture_output=True)
            subprocess.run(["ip", "netns", "del", self.ns], capture_output=True)
            self.made = False


# --- workers ----------------------------------------------------------------------


class Workers:
    def __init__(self, args, run_dir, backend, proxies, netns=None):
        self.args, self.run_dir, self.backend, self.proxies = args, run_dir, backend, proxies
        self.netns = netns
        self.gen = [0] * args.workers
        self.procs = [None] * args.workers
        self.ids = [None] * args.workers
        os.makedirs(os.path.join(run_dir, "workers"))
        os.makedirs(os.path.join(run_dir, "register"))

    def start(self, slot):
        self.gen[slot] += 1
        wid = f"w{slot}.{self.gen[slot]}"
        a = self.args
        # An ensemble (several servers) is reached directly, through the multi-host
        # URL, so that the client itself moves its session; one server through
        # the slot's proxy.
        url = self.backend.multi_url() if getattr(self.backend, "n", 1) > 1 \
            else self.backend.url(self.proxies[slot].bind, self.proxies[slot].port)
        pre = ["ip", "netns", "exec", self.netns[slot].ns] if self.netns else []  # ip execs the worker
        argv = pre + [a.worker, "--url", url, "--id", wid,
                "--names", a.names, "--reg", os.path.join(self.run_dir, "register"),
                "--log", os.path.join(self.run_dir, "workers", wid + ".log"), "--lease", str(a.lease),
                *([] if a.no_permits else ["--sem", "s", "--rw", "rw"]), *a.worker_arg]
        env = dict(os.environ)
        if slot == 0 and a.slow_clock:
            env["LD_PRELOAD"] = a.shim
            if os.environ.get("SIMBA_SANITIZER") == "address":  # ASan wants to come first otherwise
                env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0").lstrip(":")
            env["SIMBA_CHAOS_CLOCK_RATE"] = str(a.slow_clock)
            argv += ["--margin", "0", "--drift", "0"]
        err = open(os.path.join(self.run_dir, "workers", wid + ".stderr"), "ab")
        self.procs[slot] = subprocess.Popen(argv, stdout=err, stderr=subprocess.STDOUT, env=env,
                                            preexec_fn=_die_with_parent)
        err.close()
        self.ids[slot] = wid

    def holders(self):
        """Slots whose worker's log shows a term not yet revoked."""
        out = []
        for s, wid in enumerate(self.ids):
            if wid is None or self.procs[s] is None or self.procs[s].poll() is not None:
                continue
            held = set()
            try:
                for line in open(os.path.join(self.run_dir, "workers", wid + ".log")):
                    f = line.split()
                    if len(f) >= 4 and f[1] == "elected":
                        held.add((f[2], f[3]))
                    elif len(f) >= 4 and f[1] == "revoked":
                        held.discard((f[2], f[3]))
            except OSError:
                continue
            if held:
                out.append(s)
        return out

    def stop_all(self):
        for p in self.procs:
            if p and p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.terminate()
        for p in self.procs:
            if p:
                try:
                    p.wait(15)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


# --- the nemesis ------------------------------------------------------------------


class Nemesis:
    def __init__(self, args, backend, workers, proxies, log):
        self.a, self.b, self.w, self.proxies, self.log = args, backend, workers, proxies, log
        self.rng = random.Random(args.seed)
        self.lease_s = args.lease / 1000.0

    def event(self, **kv):
        self.log.write(json.dumps(kv) + "\n")
        self.log.flush()

    def window(self, kind, target, start, end, **extra):
        self.event(ev="fault", kind=kind, target=target, start=start, end=end, **extra)
        print(f"nemesis: {kind} {target} {(end - start) / 1e9:.2f}s", file=sys.stderr)

    def sleep_lease(self, lo, hi):
        time.sleep(self.rng.uniform(lo, hi) * self.lease_s)

    def pick_slot(self, prefer_holder=True):
        h = self.w.holders() if prefer_holder else []
        return self.rng.choice(h) if h else self.rng.randrange(self.a.workers)

    def run_one(self, kind):
        if kind == "pause_holder":
            s = self.pick_slot()
            p = self.w.procs[s]
            t0 = now()
            p.send_signal(signal.SIGSTOP)
            self.sleep_lease(0.5, 3.0)
            p.send_signal(signal.SIGCONT)
            self.window(kind, self.w.ids[s], t0, now())
        elif kind == "kill_worker":
            s = self.pick_slot()
            t0 = now()
            old = self.w.ids[s]
            self.w.procs[s].kill()
            self.w.procs[s].wait()
            time.sleep(0.2)
            self.w.start(s)
            self.window(kind, old, t0, now(), restarted=self.w.ids[s])
        elif kind == "backend_kill":
            procs = self.b.procs if hasattr(self.b, "procs") else [self.b.proc]
            t0 = now()
            for p in procs:
                p.kill9()
            self.sleep_lease(0.5, 2.0)
            self.b.start()
            self.window(kind, self.b.name, t0, now())
        elif kind == "backend_stop":
            procs = self.b.procs if hasattr(self.b, "procs") else [self.b.proc]
            t0 = now()
            for p in procs:
                p.signal(signal.SIGSTOP)
            self.sleep_lease(0.5, 2.0)
            for p in procs:
                p.signal(signal.SIGCONT)
            self.window(kind, self.b.name, t0, now())
        elif kind == "graceful_stop":
            s = self.pick_slot()
            t0 = now()
            old = self.w.ids[s]
            p = self.w.procs[s]
            p.terminate()
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            self.w.start(s)
            self.window(kind, old, t0, now(), restarted=self.w.ids[s])
        elif kind in ("proxy_delay", "proxy_blackhole", "proxy_reply_blackhole"):
            s = 0 if self.a.slow_clock else self.pick_slot()
            px = self.proxies[s]
            t0 = now()
            if kind == "proxy_delay":
                px.delay = self.rng.uniform(0.2, 1.0) * self.lease_s
                px.mode = "delay"
                self.sleep_lease(1.0, 3.0)
            elif kind == "proxy_reply_blackhole":
                px.mode = "reply_blackhole"
                self.sleep_lease(0.5, 3.0)
            else:
                px.mode = "blackhole"
                self.sleep_lease(0.5, 3.0) if not self.a.slow_clock else time.sleep(2.0 * self.lease_s)
            px.mode = "pass"
            self.window(kind, self.w.ids[s], t0, now(), delay=px.delay if kind == "proxy_delay" else 0)
        elif kind == "partition":
            if not self.w.netns:
                self.event(ev="note", what="partition skipped: no network namespaces", t=now())
                return
            s = self.pick_slot()
            t0 = now()
            self.w.netns[s].cut(True)
            self.sleep_lease(0.5, 3.0)
            self.w.netns[s].cut(False)
            self.window(kind, self.w.ids[s], t0, now())
        elif kind == "redis_failover":
            t0 = now()
            if self.b.failover(self):
                self.window(kind, self.b.name, t0, now())
        elif kind == "sentinel_failover":
            t0 = now()
            self.b.failover(self)
            self.window(kind, self.b.name, t0, now())
        elif kind == "pg_failover":
            t0 = now()
            self.b.failover(self)
            self.window(kind, self.b.name, t0, now(), primary=self.b.primary)
        elif kind in ("zk_kill_leader", "zk_kill_follower"):
            lead = self.b.leader()
            if lead is None:
                self.event(ev="note", what="no ensemble leader found", t=now())
                return
            i = lead if kind == "zk_kill_leader" else self.rng.choice([j for j in range(self.b.n) if j != lead])
            t0 = now()
            self.b.procs[i].kill9()
            self.sleep_lease(1.0, 3.0)
            self.b.start(i)
            self.window(kind, f"zk{i + 1}", t0, now())
        elif kind in ("etcd_kill_leader", "etcd_kill_follower", "etcd_stop_member", "etcd_stop_leader",
                      "etcd_partition"):
            lead = self.b.leader()
            if lead is None:
                self.event(ev="note", what="no etcd leader found", t=now())
                return
            if kind in ("etcd_kill_leader", "etcd_stop_leader"):
                i = lead
            elif kind in ("etcd_kill_follower", "etcd_stop_member"):
                i = self.rng.choice([j for j in range(self.b.n) if j != lead])
            else:
                i = self.rng.randrange(self.b.n)  # the leader or not
            t0 = now()
            if kind.startswith("etcd_kill"):
                self.b.procs[i].kill9()
                self.sleep_lease(1.0, 3.0)
                self.b.start(i)
                t1 = now()
            else:
                stop = kind in ("etcd_stop_member", "etcd_stop_leader")
                self.b.procs[i].signal(signal.SIGSTOP) if stop else self.b.cut(i, True)
                self.sleep_lease(0.5, 3.0)
                self.b.procs[i].signal(signal.SIGCONT) if stop else self.b.cut(i, False)
                t1 = now()
                # one member faulty at a time: the next fault waits for it to rejoin
                wait_until(60, f"etcd member m{i} healthy again", lambda: self.b.healthy(i))
            self.window(kind, f"m{i}", t0, t1, leader=i == lead)
        else:
            raise ValueError(kind)

    def run(self, seconds):
        kinds = self.a.faults.split(",")
        t_end = time.monotonic() + seconds
        n = 0
        # Round-robin runs every kind at least once, however long that takes.
        def more():
            return time.monotonic() < t_end or (self.a.round_robin and n < len(kinds))
        while more():
            self.sleep_lease(1.0, 2.0)  # quiet between faults
            if not more():
                break
            kind = kinds[n % len(kinds)] if self.a.round_robin else self.rng.choice(kinds)
            n += 1
            self.run_one(kind)
        return n


DEFAULT_FAULTS = {
    "redis": "pause_holder,kill_worker,backend_kill,backend_stop,proxy_delay,proxy_blackhole,partition",
    "postgres": "pause_holder,kill_worker,backend_kill,backend_stop,proxy_delay,proxy_blackhole,partition",
    "zookeeper": "pause_holder,kill_worker,backend_kill,backend_stop,proxy_delay,proxy_blackhole,partition",
    "zookeeper3": "zk_kill_leader,zk_kill_follower,pause_holder,kill_worker",
    "postgres_ha_sync": "pg_failover,pause_holder,kill_worker",
    "redis_replica": "redis_failover",
    "redis_sentinel": "sentinel_failover,pause_holder,kill_worker",
    "redis_sentinel_no_wait": "sentinel_failover",
    "postgres_ha_async": "pg_failover,pause_holder,kill_worker",
    "etcd": "pause_holder,kill_worker,backend_kill,backend_stop,proxy_delay,proxy_blackhole,partition",
    "etcd3": "etcd_kill_leader,etcd_kill_follower,etcd_stop_member,etcd_partition,pause_holder,kill_worker",
}

# --campaign (scripts/chaos.sh): every fault of the backend plus the reply-only
# proxy hold on single servers, and graceful stops for handover times. The CI
# seeds keep DEFAULT_FAULTS, so that their draws do not change.
CAMPAIGN_FAULTS = dict(DEFAULT_FAULTS)
for _b in ("redis", "postgres", "zookeeper", "etcd"):
    CAMPAIGN_FAULTS[_b] += ",proxy_reply_blackhole,graceful_stop"
for _b in ("zookeeper3", "postgres_ha_sync", "redis_sentinel", "postgres_ha_async", "etcd3"):
    CAMPAIGN_FAULTS[_b] += ",graceful_stop"


def netns_available():
    if os.getuid() != 0 or not shutil.which("ip"):
        return False
    return subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", required=True, choices=["redis", "postgres", "zookeeper", "zookeeper3",
                                                         "postgres_ha_sync", "postgres_ha_async",
                                                         "redis_replica", "redis_sentinel",
                                                         "redis_sentinel_no_wait", "etcd", "etcd3"])
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--worker", required=True)
    ap.add_argument("--worker-arg", action="append", default=[],
                    help="one more argument for every worker (repeat; --worker-arg=--x for a dash)")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--lease", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--names", default="a,b")
    ap.add_argument("--faults", default=None)
    ap.add_argument("--campaign", action="store_true",
                    help="default faults of a campaign (CAMPAIGN_FAULTS) rather than of the CI seeds")
    ap.add_argument("--round-robin", action="store_true",
                    help="faults in order instead of drawn, each at least once")
    ap.add_argument("--no-aof", action="store_true", help="redis without persistence (negative control)")
    ap.add_argument("--wipe", action="store_true",
                    help="etcd: a killed member restarts with an empty data dir (a lost disk; negative control)")
    ap.add_argument("--slow-clock", type=float, default=0.0, help="worker 0's clock rate (negative control)")
    ap.add_argument("--shim", default=None)
    ap.add_argument("--expect", default=None, help="violation kinds (comma separated) the checker must flag")
    ap.add_argument("--no-permits", action="store_true",
                    help="workers hold no semaphore permit (s, size 2) nor read/write lock (rw)")
    ap.add_argument("--keep", default=None, help="copy the run's logs here")
    ap.add_argument("--require-survival", default="",
                    help="fault kinds (comma separated) that at least one term must outlive")
    a = ap.parse_args()
    if a.seed is None:
        a.seed = random.SystemRandom().randrange(1 << 30)
    if a.faults is None:
        a.faults = (CAMPAIGN_FAULTS if a.campaign else DEFAULT_FAULTS)[a.backend]
    if a.slow_clock and not a.shim:
        ap.error("--slow-clock needs --shim")
    print(f"nemesis: backend {a.backend} seed {a.seed} {a.seconds}s lease {a.lease}ms faults {a.faults}",
          file=sys.stderr)

    missing = {"redis": shutil.which("redis-server"), "redis_replica": shutil.which("redis-server"),
               "redis_sentinel": shutil.which("redis-server"),
               "redis_sentinel_no_wait": shutil.which("redis-server"),
               "zookeeper": shutil.which("java"),
               "zookeeper3": shutil.which("java"),
               "etcd": shutil.which("etcd"), "etcd3": shutil.which("etcd")}
    if a.backend in missing and not missing[a.backend]:
        print(f"nemesis: SKIP: no server for {a.backend} installed", file=sys.stderr)
        return 77
    if a.backend.startswith("postgres"):
        try:
            pg_bindir()
        except RuntimeError as e:
            print(f"nemesis: SKIP: {e}", file=sys.stderr)
            return 77
    if a.slow_clock and os.environ.get("SIMBA_SANITIZER") == "thread":
        print("nemesis: SKIP: the clock shim is not used under TSan (it intercepts clock_gettime itself)",
              file=sys.stderr)
        return 77
    def on_term(sig, _frame):
        print(f"nemesis: signal {sig}: stopping everything", file=sys.stderr)
        raise SystemExit(128 + sig)  # so that the finally below stops everything
    signal.signal(signal.SIGTERM, on_term)
    global CLIENTS
    CLIENTS = a.workers
    run_dir = tempfile.mkdtemp(prefix=f"simba-chaos-{a.backend}.")
    backend = proxies = workers = None
    netns = []
    log = open(os.path.join(run_dir, "nemesis.jsonl"), "w")
    rc = 1
    try:
        if a.backend == "redis":
            backend = Redis(run_dir, aof=not a.no_aof)
        elif a.backend == "postgres":
            backend = Postgres(run_dir)
        elif a.backend == "zookeeper":
            backend = ZooKeeper(run_dir, 1)
        elif a.backend == "redis_replica":
            backend = RedisReplica(run_dir)
        elif a.backend.startswith("redis_sentinel"):
            backend = RedisSentinel(run_dir, wait=a.backend == "redis_sentinel")
        elif a.backend.startswith("postgres_ha"):
            backend = PostgresHA(run_dir, sync=a.backend.endswith("sync") and not a.backend.endswith("async"))
        elif a.backend.startswith("etcd"):
            backend = Etcd(run_dir, 3 if a.backend == "etcd3" else 1, wipe=a.wipe)
        else:
            backend = ZooKeeper(run_dir, 3)
        backend.start()
        if "partition" in a.faults.split(",") and getattr(backend, "n", 1) == 1:
            if netns_available():
                try:
                    for s in range(a.workers):
                        netns.append(Netns(s))
                except RuntimeError as e:
                    print(f"nemesis: network namespaces unusable ({e}): partition skipped", file=sys.stderr)
                    for n_ in netns:
                        n_.close()
                    netns = []
            else:
                print("nemesis: partition skipped: unshare -n / ip netns not available (not root, or the "
                      "container forbids it)", file=sys.stderr)
        proxies = [Proxy(backend.ports(), bind=netns[s].host_ip if netns else "127.0.0.1")
                   for s in range(a.workers)]
        workers = Workers(a, run_dir, backend, proxies, netns)
        nem = Nemesis(a, backend, workers, proxies, log)
        nem.event(ev="begin", t=now(), backend=a.backend, seed=a.seed, lease_ms=a.lease,
                  workers=a.workers, names=a.names.split(","), faults=a.faults,
                  no_aof=a.no_aof, wipe=a.wipe, slow_clock=a.slow_clock)
        workers.start(0)
        time.sleep(1.0 if a.slow_clock else 0.1)  # slot 0 first: the slow worker holds first
        for s in range(1, a.workers):
            workers.start(s)
        time.sleep(2 * nem.lease_s)
        n = nem.run(a.seconds)
        nem.event(ev="heal", t=now())
        # Quiet window: the checker's failover bound (2 x lease + 3 s) plus two
        # leases; every name must have a valid holder in its last lease.
        time.sleep(4 * nem.lease_s + 3.0)
        nem.event(ev="end", t=now(), faults_run=n)
        workers.stop_all()
        nem.event(ev="stopped", t=now())
    except Exception:  # a fault that could not be applied: the run fails, loudly
        for line in traceback.format_exc().splitlines():
            print("nemesis: error: " + line, file=sys.stderr)
        print(f"nemesis: logs kept in {run_dir}", file=sys.stderr)
        print("CHAOS " + json.dumps({"backend": a.backend, "seed": a.seed, "error": True, "ok": False}))
        return 1
    finally:
        if workers:
            workers.stop_all()
        if proxies:
            for p in proxies:
                p.close()
        if backend:
            backend.stop()
        for n_ in netns:
            n_.close()
        log.close()
    result = checker.check(run_dir)
    checker.report(result, sys.stderr)
    with open(os.path.join(run_dir, "result.json"), "w") as f:
        json.dump(result, f, indent=1)
    if a.keep:
        if os.path.exists(a.keep):
            shutil.rmtree(a.keep)
        os.makedirs(a.keep)
        for sub in ("workers", "register"):
            shutil.copytree(os.path.join(run_dir, sub), os.path.join(a.keep, sub))
        for root, _, files in os.walk(run_dir):
            for fn in files:
                if fn.endswith((".log", ".jsonl", ".json")) and "/data" not in root and \
                        os.path.basename(root) not in ("workers", "register"):
                    shutil.copy(os.path.join(root, fn), os.path.join(a.keep, fn))
    kinds = {v["kind"] for v in result["violations"]}
    for k in filter(None, a.require_survival.split(",")):
        got = result["survived"].get(k, [0, 0])
        if got[0] == 0:
            result["violations"].append({"kind": "no_survival", "detail": f"no term outlived a {k} window "
                                         f"({got[1]} windows)"})
            kinds.add("no_survival")
            print(f"checker: VIOLATION no_survival: no term outlived any of {got[1]} {k} windows", file=sys.stderr)
    if a.expect:
        rc = 0 if set(a.expect.split(",")) <= kinds else 1
        print(f"nemesis: negative control: expected '{a.expect}' "
              f"{'flagged' if rc == 0 else 'NOT flagged'} (flagged: {sorted(kinds) or 'nothing'})",
              file=sys.stderr)
    else:
        rc = 0 if not result["violations"] else 1
    if rc != 0 or a.keep:
        print(f"nemesis: logs kept in {a.keep or run_dir}", file=sys.stderr)
    if rc == 0 and not a.keep:
        shutil.rmtree(run_dir, ignore_errors=True)
    elif a.keep:
        shutil.rmtree(run_dir, ignore_errors=True)
    print("CHAOS " + json.dumps({"backend": a.backend, "seed": a.seed, "fault_windows": result["fault_windows"],
                                 "violations": len(result["violations"]), "kinds": sorted(kinds),
                                 "expect": a.expect, "ok": rc == 0}))
    return rc


if __name__ == "__main__":
    sys.exit(main())
