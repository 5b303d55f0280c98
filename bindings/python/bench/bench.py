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
from typing import Callable, List, Optional, Tuple

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
    """µs per cycle: the median of ``rounds`` timed loops (as the C bench)."""
    with simba.Client(url) as c:
        c.wait_live(10)
        name = f"pybench.{RUN}"

        def cycle() -> None:
            c.lock(name).release()
        return statistics.median(timed_loop(cycle, n) for _ in range(rounds))


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


def simba_handover(url: str, n: int) -> List[float]:
    with simba.Client(url) as a, simba.Client(url) as b:
        a.wait_live(10)
        b.wait_live(10)
        name = f"pyhandover.{RUN}"
        return handover(lambda: a.lock(name), lambda t: t.release(),  # type: ignore[attr-defined]
                        lambda: b.lock(name), lambda t: t.release(), n)  # type: ignore[attr-defined]


def redis_py(url: str, n: int, n_handover: int, sleep: float) -> Tuple[float, List[float]]:
    import redis  # Debian's python3-redis
    r1, r2 = redis.Redis.from_url(url), redis.Redis.from_url(url)
    name = f"redispy.{RUN}"
    lk = r1.lock(name, timeout=15)

    def cycle() -> None:
        lk.acquire(blocking=True)
        lk.release()
    cyc = statistics.median(timed_loop(cycle, n) for _ in range(3))
    la = r1.lock(name + ".h", timeout=15, sleep=sleep, thread_local=False)
    lb = r2.lock(name + ".h", timeout=15, sleep=sleep, thread_local=False)
    ho = handover(lambda: la.acquire(blocking=True) and la, lambda l: l.release(),  # type: ignore
                  lambda: lb.acquire(blocking=True) and lb, lambda l: l.release(), n_handover)  # type: ignore
    return cyc, ho


def kazoo_(hosts: str, n: int, n_handover: int) -> Tuple[float, List[float]]:
    from kazoo.client import KazooClient  # Debian's python3-kazoo
    z1, z2 = KazooClient(hosts=hosts), KazooClient(hosts=hosts)
    z1.start(10)
    z2.start(10)
    try:
        path = f"/kazoo-bench/{RUN}"
        lk = z1.Lock(path)

        def cycle() -> None:
            lk.acquire()
            lk.release()
        cyc = statistics.median(timed_loop(cycle, n) for _ in range(3))
        la, lb = z1.Lock(path + "h"), z2.Lock(path + "h")
        ho = handover(lambda: la.acquire() and la, lambda l: l.release(),  # type: ignore
                      lambda: lb.acquire() and lb, lambda l: l.release(), n_handover)  # type: ignore
        return cyc, ho
    finally:
        z1.stop()
        z2.stop()


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
    args = ap.parse_args()
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
        n = 1000
        s_cyc = statistics.median(py_cycle(args.redis, n) for _ in range(3))
        s_ho = simba_handover(args.redis, args.handovers)
        r_cyc, r_ho = redis_py(args.redis, n, args.handovers, 0.1)
        _, r_ho_fast = redis_py(args.redis, 10, args.handovers, 0.001)
        summary.append(f"redis   cycle us: simba {s_cyc:.1f}, redis-py Lock {r_cyc:.1f}")
        summary.append(f"redis   handover us p50/p90: simba {p50(s_ho):.0f}/{p90(s_ho):.0f}, redis-py Lock "
                       f"(sleep=0.1, its default) {p50(r_ho):.0f}/{p90(r_ho):.0f}, "
                       f"(sleep=0.001) {p50(r_ho_fast):.0f}/{p90(r_ho_fast):.0f}")
    if args.zookeeper:
        hosts = args.zookeeper.split("://", 1)[1].split("/", 1)[0]
        n = 500
        s_cyc = statistics.median(py_cycle(args.zookeeper, n) for _ in range(3))
        s_ho = simba_handover(args.zookeeper, args.handovers)
        k_cyc, k_ho = kazoo_(hosts, n, args.handovers)
        summary.append(f"zk      cycle us: simba {s_cyc:.1f}, kazoo Lock {k_cyc:.1f}")
        summary.append(f"zk      handover us p50/p90: simba {p50(s_ho):.0f}/{p90(s_ho):.0f}, kazoo Lock "
                       f"{p50(k_ho):.0f}/{p90(k_ho):.0f}")
    print("\n== summary")
    print("\n".join(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
