#!/usr/bin/env python3
"""The chaos suite's checker: rebuilds every term from the logs of one run.

  checker.py RUN_DIR      prints the report; exit 1 when a violation is found

RUN_DIR holds nemesis.jsonl (begin, fault windows, heal, end), workers/*.log
(chaos_worker's lines, CLOCK_MONOTONIC ns) and register/NAME.log (the fenced
register's accepted writes, in the order it applied them) and NAME.reg.

A term is (worker, name, token). Its validity interval is [first, last] of the
times at which the worker saw it valid (each time read before asking, and a term
is valid from its grant until it first reads invalid, so it was valid over the
whole interval). Violation kinds:

  overlap          two terms of one name valid at the same instant
  token_order      a term that began after another ended has a token <= it,
                   or two terms of a name have one token
                   (the backend handed a token out again: e.g. a Redis without
                   persistence restarted, or an asynchronous standby promoted)
  register_order   the register accepted a lower token after a higher one
  write_lost       a write the worker saw acknowledged is not in the register
  register_state   the register's recorded token is not the highest it accepted
  pairing          a term of a worker that exited cleanly without exactly one
                   revoked, or a revoked without its elected
  stuck            a name without a valid holder at the end of the quiet window
  failover         a gap between two terms longer than the bound (2 x lease +
                   3 s, counted from the end of any backend or network fault
                   in the gap)
"""
import json
import os
import sys
from collections import defaultdict


def _lines(path):
    with open(path) as f:
        return f.read().splitlines()


def load(run_dir):
    events = [json.loads(line) for line in _lines(os.path.join(run_dir, "nemesis.jsonl")) if line.strip()]
    begin = next(e for e in events if e["ev"] == "begin")
    faults = [e for e in events if e["ev"] == "fault"]
    heal = next((e["t"] for e in events if e["ev"] == "heal"), None)
    end = next((e["t"] for e in events if e["ev"] == "end"), None)
    workers = {}
    wdir = os.path.join(run_dir, "workers")
    for fn in sorted(os.listdir(wdir)):
        if fn.endswith(".log"):
            lines = []
            for line in _lines(os.path.join(wdir, fn)):
                f = line.split()
                if len(f) >= 2 and f[0].isdigit():
                    lines.append(f)
            workers[fn[:-4]] = lines
    register = {}
    rdir = os.path.join(run_dir, "register")
    for fn in sorted(os.listdir(rdir)) if os.path.isdir(rdir) else []:
        if fn.endswith(".log"):
            rows = []
            for line in _lines(os.path.join(rdir, fn)):
                f = line.split()
                if len(f) == 5:
                    rows.append({"t": int(f[0]), "token": int(f[1]), "worker": f[2], "seq": int(f[3]),
                                 "prev": int(f[4])})
            reg = os.path.join(rdir, fn[:-4] + ".reg")
            recorded = int(("".join(_lines(reg))).strip() or 0) if os.path.exists(reg) else 0
            register[fn[:-4]] = {"rows": rows, "recorded": recorded}
    return begin, faults, heal, end, workers, register


def ms(ns):
    return round(ns / 1e6, 1)


def check(run_dir):
    begin, faults, heal, end, workers, register = load(run_dir)
    lease_ns = begin["lease_ms"] * 1_000_000
    names = begin["names"]
    violations = []

    def flag(kind, detail, **kv):
        violations.append({"kind": kind, "detail": detail, **kv})

    # A term instance begins at each "elected" line; "valid" and "revoked" lines
    # belong to the worker's latest instance of that name and token (a backend
    # that hands a token out twice makes two instances with one token).
    terms = []
    acked = []
    for wid, lines in workers.items():
        exited = any(f[1] == "exit" for f in lines)
        latest = {}  # (name, token) -> instance
        for f in lines:
            t, what = int(f[0]), f[1]
            if what in ("elected", "valid", "revoked") and len(f) >= 4:
                key = (f[2], int(f[3]))
                tm = latest.get(key)
                if what == "elected" or tm is None:
                    tm = {"worker": wid, "name": f[2], "token": int(f[3]), "first": None, "last": None,
                          "elected": 0, "revoked": 0, "reasons": [], "exited": exited}
                    latest[key] = tm
                    terms.append(tm)
                if what == "elected":
                    tm["elected"] += 1
                    if len(f) >= 5 and f[4] == "1":
                        tm["first"] = t if tm["first"] is None else min(tm["first"], t)
                        tm["last"] = t if tm["last"] is None else max(tm["last"], t)
                elif what == "valid":
                    tm["first"] = t if tm["first"] is None else min(tm["first"], t)
                    tm["last"] = t if tm["last"] is None else max(tm["last"], t)
                else:
                    tm["revoked"] += 1
                    tm["reasons"].append(int(f[4]) if len(f) >= 5 else -1)
            elif what == "write" and len(f) >= 6 and f[5] == "accepted":
                acked.append((f[2], int(f[3]), wid, int(f[4])))

    by_name = defaultdict(list)
    for tm in terms:
        if tm["first"] is not None:
            by_name[tm["name"]].append(tm)
    for n in by_name:
        by_name[n].sort(key=lambda x: x["first"])

    def term_s(tm):
        return f"{tm['worker']} token {tm['token']} valid [{ms(tm['first'])}, {ms(tm['last'])}] ms"

    # 1. overlap, 2. token order
    for n, ts in by_name.items():
        for i, a in enumerate(ts):
            for b in ts[i + 1:]:
                if b["first"] > a["last"]:
                    if b["token"] <= a["token"]:
                        flag("token_order", f"name {n}: {term_s(b)} began after {term_s(a)} ended, "
                                            f"with a token not above it", name=n)
                    continue
                if a["token"] == b["token"]:
                    flag("token_order", f"name {n}: token {a['token']} granted to two terms: {term_s(a)} "
                                        f"and {term_s(b)}", name=n)
                if a is not b:
                    flag("overlap", f"name {n}: {term_s(a)} and {term_s(b)} both valid for "
                                    f"{ms(min(a['last'], b['last']) - b['first'])} ms", name=n)

    # 3-5. the register
    acked_in_reg = set()
    for n, reg in register.items():
        hi = 0
        for r in reg["rows"]:
            if r["token"] < hi:
                flag("register_order", f"register {n} accepted token {r['token']} from {r['worker']} "
                                       f"after {hi}", name=n)
            hi = max(hi, r["token"])
            acked_in_reg.add((n, r["token"], r["worker"], r["seq"]))
        if reg["rows"] and reg["recorded"] != hi:
            flag("register_state", f"register {n} records {reg['recorded']}, accepted up to {hi}", name=n)
    for w in acked:
        if w not in acked_in_reg:
            flag("write_lost", f"{w[2]} saw write seq {w[3]} of {w[0]} token {w[1]} accepted; the "
                               f"register has no such write", name=w[0])

    # 6. pairing
    for tm in terms:
        if tm["revoked"] > 1 or tm["revoked"] > tm["elected"] or tm["elected"] > 1:
            flag("pairing", f"{tm['worker']} {tm['name']} token {tm['token']}: elected {tm['elected']}, "
                            f"revoked {tm['revoked']}", name=tm["name"])
        elif tm["exited"] and tm["elected"] != tm["revoked"]:
            flag("pairing", f"{tm['worker']} exited cleanly; {tm['name']} token {tm['token']} elected "
                            f"without revoked", name=tm["name"])

    # 7. stuck after heal: the quiet window after the last fault is longer than
    # the failover bound by two leases; its last lease must see a valid holder.
    bound = 2 * lease_ns + 3_000_000_000
    if heal is not None and end is not None:
        for n in names:
            if not any(tm["last"] >= end - lease_ns for tm in by_name.get(n, [])):
                flag("stuck", f"name {n}: no valid holder in the last lease of the quiet window "
                              f"({ms(end - heal)} ms after the last fault healed)", name=n)

    # 8. failover bound
    slow = {"backend_kill", "backend_stop", "proxy_delay", "proxy_blackhole", "zk_kill_leader",
            "zk_kill_follower", "pg_failover", "redis_failover", "sentinel_failover"}
    worst = 0
    for n, ts in by_name.items():
        # the union of validity: gaps where nobody held n
        cur_end = None
        for tm in ts:
            if cur_end is not None and tm["first"] > cur_end:
                start = cur_end
                for fw in faults:
                    if fw["kind"] in slow and fw["start"] <= tm["first"] and fw["end"] >= start:
                        start = max(start, fw["end"])
                gap = tm["first"] - start
                worst = max(worst, gap)
                if gap > bound:
                    flag("failover", f"name {n}: no holder for {ms(gap)} ms before {term_s(tm)} "
                                     f"(bound {ms(bound)} ms)", name=n)
            cur_end = tm["last"] if cur_end is None else max(cur_end, tm["last"])

    # Terms that outlived a fault window (valid before it began and after it
    # ended, one instance): per kind, [terms, windows].
    survived = {}
    for fw in faults:
        n_alive = sum(1 for ts in by_name.values() for tm in ts if tm["first"] < fw["start"] and tm["last"] > fw["end"])
        s = survived.setdefault(fw["kind"], [0, 0])
        s[0] += n_alive
        s[1] += 1

    writes = sum(len(r["rows"]) for r in register.values())
    return {
        "backend": begin["backend"], "seed": begin["seed"], "lease_ms": begin["lease_ms"],
        "fault_windows": len(faults),
        "faults_by_kind": {k: sum(1 for f in faults if f["kind"] == k) for k in sorted({f["kind"] for f in faults})},
        "terms": sum(len(v) for v in by_name.values()), "writes_accepted": writes,
        "writes_acked": len(acked),
        "stale_writes_rejected": sum(1 for lines in workers.values() for f in lines
                                     if f[1] == "write" and len(f) >= 6 and f[5] == "rejected"),
        "worst_failover_ms": ms(worst), "survived": survived, "violations": violations,
    }


def report(r, out):
    print(f"checker: {r['backend']} seed {r['seed']}: {r['fault_windows']} fault windows "
          f"{r['faults_by_kind']}, {r['terms']} terms, {r['writes_accepted']} writes accepted, "
          f"{r['stale_writes_rejected']} stale writes rejected, worst failover {r['worst_failover_ms']} ms, "
          f"terms outliving windows {r['survived']}, "
          f"{len(r['violations'])} violations", file=out)
    shown = defaultdict(int)
    for v in r["violations"]:
        shown[v["kind"]] += 1
        if shown[v["kind"]] <= 5:
            print(f"checker: VIOLATION {v['kind']}: {v['detail']}", file=out)
    for k, c in shown.items():
        if c > 5:
            print(f"checker: ... {c - 5} more {k}", file=out)


if __name__ == "__main__":
    res = check(sys.argv[1])
    report(res, sys.stdout)
    sys.exit(1 if res["violations"] else 0)
