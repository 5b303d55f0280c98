#!/usr/bin/python3
"""Python binding benchmark (issue 39), in one run:

1. the lock cycle (acquire + release of a free name) of C (bench/simba_cycle_bench
   --mode pool) against the Python binding's, on memory:// and Redis, in
   alternating rounds (C, Python, C): ratio = Python / mean of the two C figures;
2. side by side on the same servers: Simba's Python cycle and handover against
   redis-py's ``Lock`` (Redis) and kazoo's ``Lock`` (ZooKeeper).

    SIMBA_LIBRARY=build/libsimba.so.1 PYTHONPATH=bindings/python \\
      /usr/bin/python3 bindings/python/bench/bench.py --cycle-bench build/bench/simba_cycle_bench \\
      --redis redis://127.0.0.1:6379 --zookeeper zookeeper://127.0.0.1:2181

Handover: one client holds the name, another is blocked acquiring it; the time
from the holder's release call to the waiter's acquire returning.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from typing import Callable, List

import simba

RUN = uuid.uuid4().hex[:8]


def c_cycle(bench: str, url: str, n: int) -> float:
    out = subprocess.run([bench, "--url", url, "--mode", "pool", "--cycles", str(n),
                          "--warmup", str(n // 10)], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        if line.startswith("RESULT"):
            kv = dict(f.split("=", 1) for f in line.split()[1:])
            return float(kv["round_mean_us"])
    raise RuntimeError(f"no RESULT from {bench}: {out}")


def timed_loop(cycle: Callable[[], None], n: int) -> float:
    for _ in range(max(n // 10, 1)):
        cycle()
    t0 = time.perf_counter()
    for _ in range(n):
        cycle()
    return (time.perf_counter() - t0) / n * 1e6


def py_cycle(url: str, n: int, rounds: int = 3) -> float:
    """µs per cycle: the median of ``rounds`` timed loops (as the C bench). The
    cycle is written in the loop, not called through a function: the C bench's
    loop calls its cycle directly too."""
    with simba.Client(url) as c:
        c.wait_live(10)
        name = f"pybench.{RUN}"
        lock = c.lock
        for _ in range(max(n // 10, 1)):
            lock(name).release()
        times = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            for _ in range(n):
                lock(name).release()
            times.append((time.perf_counter() - t0) / n * 1e6)
        return statistics.median(times)


def handover(acquire_a: Callable[[], object], release_a: Callable[[object], None],
             acquire_b: Callable[[], object], release_b: Callable[[object], None],
             n: int) -> List[float]:
    """Two holders take turns: the holder releases once the other is blocked
    acquiring (it announced it, then 5 ms passed); µs from release to acquired."""
    sides = [(acquire_a, release_a), (acquire_b, release_b)]
    times: List[float] = []
    held = sides[0][0]()
    holder = 0
    for _ in range(n):
        waiter = 1 - holder
        got: List[object] = []
        t_acq = [0.0]
        ready = threading.Event()

        def wait_side() -> None:
            ready.set()
            got.append(sides[waiter][0]())
            t_acq[0] = time.perf_counter()
        th = threading.Thread(target=wait_side)
        th.start()
        ready.wait()
        time.sleep(0.005)
        t_rel = time.perf_counter()
        sides[holder][1](held)
        th.join()
        times.append((t_acq[0] - t_rel) * 1e6)
        held, holder = got[0], waiter
    sides[holder][1](held)
    return times


class SimbaSide:
    """Simba's Python lock: one client for the cycle, two for the handover."""

    label = "simba"

    def __init__(self, url: str) -> None:
        self.a, self.b = simba.Client(url), simba.Client(url)
        self.a.wait_live(10)
        self.b.wait_live(10)
        self.name = f"pyside.{RUN}"

    def cycle(self, n: int) -> float:
        a, name = self.a, self.name
        return timed_loop(lambda: a.lock(name).release(), n)

    def handover(self, n: int) -> List[float]:
        a, b, name = self.a, self.b, self.name + ".h"
        return handover(lambda: a.lock(name), lambda t: t.release(),  # type: ignore[attr-defined]
                        lambda: b.lock(name), lambda t: t.release(), n)  # type: ignore[attr-defined]

    def close(self) -> None:
        self.a.close()
        self.b.close()


class RedisPySide:
    """redis-py's Lock (Debian's python3-redis): SET NX PX, a script to release;
    a blocked acquire polls every ``sleep`` seconds (0.1 by default)."""

    def __init__(self, url: str, sleep: float) -> None:
        import redis
        self.label = f"redis-py Lock (sleep={sleep:g})"
        self.r1, self.r2 = redis.Redis.from_url(url), redis.Redis.from_url(url)
        name = f"redispy.{RUN}"
        self.lk = self.r1.lock(name, timeout=15)
        self.la = self.r1.lock(name + ".h", timeout=15, sleep=sleep, thread_local=False)
        self.lb = self.r2.lock(name + ".h", timeout=15, sleep=sleep, thread_local=False)

    def cycle(self, n: int) -> float:
        lk = self.lk

        def one() -> None:
            lk.acquire(blocking=True)
            lk.release()
        return timed_loop(one, n)

    def handover(self, n: int) -> List[float]:
        la, lb = self.la, self.lb
        return handover(lambda: la.acquire(blocking=True) and la, lambda l: l.release(),  # type: ignore
                        lambda: lb.acquire(blocking=True) and lb, lambda l: l.release(), n)  # type: ignore

    def close(self) -> None:
        self.r1.close()
        self.r2.close()


class KazooSide:
    """kazoo's Lock (Debian's python3-kazoo): a sequential ephemeral znode, a
    watch on the predecessor."""

    label = "kazoo Lock"

    def __init__(self, hosts: str) -> None:
        from kazoo.client import KazooClient
        self.z1, self.z2 = KazooClient(hosts=hosts), KazooClient(hosts=hosts)
        self.z1.start(10)
        self.z2.start(10)
        path = f"/kazoo-bench/{RUN}"
        self.lk = self.z1.Lock(path)
        self.la, self.lb = self.z1.Lock(path + "h"), self.z2.Lock(path + "h")

    def cycle(self, n: int) -> float:
        lk = self.lk

        def one() -> None:
            lk.acquire()
            lk.release()
        return timed_loop(one, n)

    def handover(self, n: int) -> List[float]:
        la, lb = self.la, self.lb
        return handover(lambda: la.acquire() and la, lambda l: l.release(),  # type: ignore
                        lambda: lb.acquire() and lb, lambda l: l.release(), n)  # type: ignore

    def close(self) -> None:
        self.z1.stop()
        self.z2.stop()


def side_by_side(label: str, sides: list, n: int, n_handover: int, rounds: int) -> List[str]:
    """Rounds alternate the sides (so that load hits them alike): per round
    each side's cycle (a timed loop of n) and n_handover handovers."""
    cyc: dict = {sd.label: [] for sd in sides}
    ho: dict = {sd.label: [] for sd in sides}
    for r in range(rounds):
        order = sides if r % 2 == 0 else list(reversed(sides))
        for sd in order:
            cyc[sd.label].append(sd.cycle(n))
            ho[sd.label].extend(sd.handover(n_handover))
        print(f"{label:7} round {r + 1}: cycle us " +
              ", ".join(f"{sd.label} {cyc[sd.label][-1]:.0f}" for sd in sides))
    for sd in sides:
        sd.close()
    out = []
    base = sides[0].label
    for sd in sides:
        ratios = [a / b for a, b in zip(cyc[sd.label], cyc[base])]
        out.append(f"{label:7} {sd.label:28} cycle p50 {statistics.median(cyc[sd.label]):8.0f} us "
                   f"(x simba per round: median {statistics.median(ratios):.2f}), handover p50/p90 "
                   f"{p50(ho[sd.label]):7.0f}/{p90(ho[sd.label]):7.0f} us ({len(ho[sd.label])})")
    return out


def p50(v: List[float]) -> float:
    return statistics.median(v)


def p90(v: List[float]) -> float:
    s = sorted(v)
    return s[min(len(s) - 1, int(len(s) * 0.9))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cycle-bench", default="build/bench/simba_cycle_bench")
    ap.add_argument("--redis", default=os.environ.get("SIMBA_TEST_REDIS_URL", ""))
    ap.add_argument("--zookeeper", default=os.environ.get("SIMBA_TEST_ZOOKEEPER_URL", ""))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--handovers", type=int, default=100)
    ap.add_argument("--cycle-only", nargs=2, metavar=("URL", "CYCLES"),
                    help="only the Python lock cycle (for scripts/bench-bindings.sh)")
    args = ap.parse_args()
    if args.cycle_only:
        url, n = args.cycle_only[0], int(args.cycle_only[1])
        print(f"python binding: {py_cycle(url, n, rounds=5):.2f} us/cycle (median of 5 rounds of {n})")
        return 0
    print(f"python-bench: {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}, load "
          f"{' '.join(open('/proc/loadavg').read().split()[:3])}, libsimba {simba.version_string()}, "
          f"Python {sys.version.split()[0]}")
    summary = []
    backends = [("memory", "memory://py-bench", 20000, 1.3)]
    if args.redis:
        backends.append(("redis", args.redis, 1000, 1.1))
    for label, url, n, target in backends:
        ratios = []
        for r in range(1, args.rounds + 1):
            c1 = c_cycle(args.cycle_bench, url, n)
            py = py_cycle(url, n)
            c2 = c_cycle(args.cycle_bench, url, n)
            ratio = py / ((c1 + c2) / 2)
            ratios.append(ratio)
            print(f"{label:7} round {r}: python {py:9.2f} us, C {c1:9.2f} / {c2:9.2f} us, ratio {ratio:.3f}")
        med = statistics.median(ratios)
        summary.append(f"{label:7} python / C lock cycle: median {med:.3f} (range {min(ratios):.3f}-"
                       f"{max(ratios):.3f}, {len(ratios)} rounds; target <= {target}: "
                       f"{'met' if med <= target else 'MISSED'})")
    if args.redis:
        summary += side_by_side("redis", [SimbaSide(args.redis), RedisPySide(args.redis, 0.1),
                                          RedisPySide(args.redis, 0.001)],
                                300, args.handovers // args.rounds, args.rounds)
    if args.zookeeper:
        hosts = args.zookeeper.split("://", 1)[1].split("/", 1)[0]
        summary += side_by_side("zk", [SimbaSide(args.zookeeper), KazooSide(hosts)],
                                200, args.handovers // args.rounds, args.rounds)
    print("\n== summary")
    print("\n".join(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
