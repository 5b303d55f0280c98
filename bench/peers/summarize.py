#!/usr/bin/env python3
"""The side-by-side table of scripts/bench.sh --backend etcd (issue 38).

Input: the JSON lines of bench/simba_lock_bench and the peer
(bench/peers/etcd_concurrency), one per run, each with an added "round" and
"case" (cycle, handover, handover-25ms, failover), as bench.sh writes them.
Per case and library: the median over rounds of each round's p50; the ratio
Simba / peer is the median of the per-round ratios. Failover also gives the
mean of every sample (rounds have equal n) and the max, and is judged against
lease + one round trip (--rtt-us: simba_bench's raw Txn p50 of the same run).

usage: summarize.py FILE.jsonl [--rtt-us X]
"""
import json
import statistics
import sys


def main() -> int:
    args = sys.argv[1:]
    if not args:
        print(__doc__, file=sys.stderr)
        return 2
    rtt = float(args[args.index("--rtt-us") + 1]) if "--rtt-us" in args else None
    rows = [json.loads(line) for line in open(args[0]) if line.strip().startswith("{")]
    cases = []
    for r in rows:
        if r["case"] not in cases:
            cases.append(r["case"])
    targets = {"cycle": "Simba <= peer", "handover": "Simba <= peer"}
    print(f"{'case':14} {'library':17} {'p50 of rounds':>14} {'rounds p50 range':>22} "
          f"{'Simba/peer':>11}  target")
    failed = 0
    for case in cases:
        by_lib: dict = {}
        for r in rows:
            if r["case"] == case:
                by_lib.setdefault(r["library"], {})[r["round"]] = r
        simba, peer = by_lib.get("simba", {}), by_lib.get("etcd-concurrency", {})
        common = sorted(set(simba) & set(peer))
        ratios = [simba[k]["p50_us"] / peer[k]["p50_us"] for k in common if peer[k]["p50_us"]]
        ratio = statistics.median(ratios) if ratios else float("nan")
        for lib, runs in (("simba", simba), ("etcd-concurrency", peer)):
            if not runs:
                continue
            p50s = [v["p50_us"] for v in runs.values()]
            unit, div = ("ms", 1000.0) if case.startswith("failover") else ("us", 1.0)
            line = (f"{case:14} {lib:17} {statistics.median(p50s) / div:11.1f} {unit} "
                    f"{min(p50s) / div:10.1f}-{max(p50s) / div:.1f} {unit:>3}")
            if lib == "simba":
                verdict = ""
                if case in targets:
                    ok = ratio <= 1.0
                    failed += not ok
                    verdict = f"{targets[case]}: {'met' if ok else 'MISSED'}"
                elif case.startswith("failover"):
                    lease = max(v["lease_ms"] for v in runs.values())
                    worst = max(v["max_us"] for v in runs.values()) / 1000.0
                    bound = lease + (rtt / 1000.0 if rtt else 0.0)
                    ok = statistics.median(p50s) / 1000.0 <= bound
                    failed += not ok
                    mean = statistics.mean(v["mean_us"] for v in runs.values()) / 1000.0
                    verdict = (f"p50 <= lease {lease} ms + RTT = {bound:.1f} ms: "
                               f"{'met' if ok else 'MISSED'} (mean {mean:.0f}, max {worst:.1f} ms)")
                line += f" {ratio:11.2f}  {verdict}"
            else:
                if case.startswith("failover"):
                    mean = statistics.mean(v["mean_us"] for v in runs.values()) / div
                    line += (f" {'':11}  mean {mean:.0f}, max "
                             f"{max(v['max_us'] for v in runs.values()) / div:.1f} {unit}")
            print(line)
    print(f"rounds: {len(set(r['round'] for r in rows))}; "
          f"ratio = median over rounds of Simba's p50 / the peer's p50")
    if failed:
        print(f"{failed} target(s) missed (reported, as simba_bench does: not an error)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
