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
  permit_overflow  more permits of a semaphore valid at one instant than its
                   size (ADR 0046)
  rw_overlap       a write term of a read/write lock valid at an instant when
                   another term (read or write) of its name is valid

Permit terms (semaphores, read/write locks) are logged by a worker as
  T permit ID KIND NAME TOKEN SIZE V  granted; ID numbers the worker's permit
                                     terms (several may share a token: readers),
                                     KIND semaphore|read|write, SIZE the
                                     semaphore's (0 for a read/write lock), V 1
                                     when read valid at the grant
  T pvalid ID                        seen valid, as "valid" for a term
  T prevoked ID REASON               revoked
and their validity intervals are built as a term's.

Figures (check()'s result; summarize() adds them up over a campaign's rounds):

  failovers_ms     per gap after a term that ended without a clean release (its
                   worker killed, paused, cut off; revoked other than STOPPED or
                   STEPPED_DOWN) that no fault of the backend overlaps: the
                   next holder's first valid instant minus the last one of the
                   name's holders
  recoveries_ms    the gaps a fault of the backend (kill, stop, ensemble kill,
                   failover) overlaps: counted from its end when it ended in
                   the gap, as the failover bound is; raw when the next holder
                   came while it lasted (a failover the nemesis still waits on)
  handovers_ms     the other gaps, after a clean release (revoked STOPPED or
                   STEPPED_DOWN)
  leaderless       the longest stretch without a valid holder of a name, raw
                   (faults not subtracted), between its first and last terms
  terms_lost       revocations DEADLINE_PASSED, SESSION_EXPIRED, TAKEN_OVER; and
  sessions_lost    those grouped per worker (one loss episode: revocations less
                   than a lease apart); losses_unexplained: those with no fault
                   window of the backend or of that worker from a lease before
                   to 2 x lease + 3 s after

  checker.py RUN_DIR
  checker.py --summary OUT_DIR RESULT.json...   campaign summary (summary.txt, .json)
  checker.py --plot RUN_DIR PNG                 terms over time (gnuplot)
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


def permit_terms(workers):
    """The permit terms of the workers' logs, each with its validity interval
    [first, last] (None when never seen valid)."""
    terms = []
    for wid, lines in workers.items():
        by_id = {}
        for f in lines:
            what = f[1]
            if what == "permit" and len(f) >= 8:
                tm = {"worker": wid, "id": f[2], "kind": f[3], "name": f[4], "token": int(f[5]),
                      "size": int(f[6]), "first": None, "last": None}
                by_id[f[2]] = tm
                terms.append(tm)
                if f[7] == "1":
                    tm["first"] = tm["last"] = int(f[0])
            elif what == "pvalid" and len(f) >= 3 and f[2] in by_id:
                tm, t = by_id[f[2]], int(f[0])
                tm["first"] = t if tm["first"] is None else min(tm["first"], t)
                tm["last"] = t if tm["last"] is None else max(tm["last"], t)
    return [tm for tm in terms if tm["first"] is not None]


def check_permits(terms, flag):
    """never more than N valid permits of a semaphore; never a valid write term
    beside another valid term of its name (ADR 0046)."""
    def term_s(tm):
        return (f"{tm['worker']} {tm['kind']} {tm['name']} token {tm['token']} valid "
                f"[{ms(tm['first'])}, {ms(tm['last'])}] ms")

    sems, rws = defaultdict(list), defaultdict(list)
    for tm in terms:
        (sems if tm["kind"] == "semaphore" else rws)[tm["name"]].append(tm)
    for n, ts in sems.items():
        # A sweep over the closed intervals: at one instant a start counts
        # before an end, so permits that touch overlap.
        edges = sorted([(tm["first"], 0, tm) for tm in ts] + [(tm["last"], 1, tm) for tm in ts],
                       key=lambda e: (e[0], e[1]))
        size = min(tm["size"] for tm in ts)
        valid, worst = [], None
        for t, is_end, tm in edges:
            if is_end:
                valid.remove(tm)
                continue
            valid.append(tm)
            if len(valid) > size and (worst is None or len(valid) > len(worst[1])):
                worst = (t, list(valid))
        if worst:
            flag("permit_overflow", f"semaphore {n} of {size} permits: {len(worst[1])} valid at "
                                    f"{ms(worst[0])} ms: " + "; ".join(term_s(x) for x in worst[1]),
                 name=n)
    for n, ts in rws.items():
        for i, w in enumerate(ts):
            if w["kind"] != "write":
                continue
            for j, o in enumerate(ts):
                if j == i or (o["kind"] == "write" and j < i):
                    continue  # each pair of writers once
                if o["first"] <= w["last"] and w["first"] <= o["last"]:
                    flag("rw_overlap", f"read/write lock {n}: {term_s(w)} and {term_s(o)} both valid",
                         name=n)


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

    # Semaphores and read/write locks
    permits = permit_terms(workers)
    check_permits(permits, flag)

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

    # 8. failover bound; the failover and handover times; the longest stretch
    # without a holder
    slow = {"backend_kill", "backend_stop", "proxy_delay", "proxy_blackhole", "proxy_reply_blackhole",
            "zk_kill_leader", "zk_kill_follower", "pg_failover", "redis_failover", "sentinel_failover",
            "etcd_kill_leader", "etcd_kill_follower", "etcd_stop_member", "etcd_stop_leader",
            "etcd_partition"}
    wide = slow - {"proxy_delay", "proxy_blackhole", "proxy_reply_blackhole"}  # the backend's own
    worst = 0
    failovers, handovers, recoveries = [], [], []
    leaderless = {"ms": 0.0, "name": None, "at_ms": None}
    for n, ts in by_name.items():
        # the union of validity: gaps where nobody held n
        cur_end = cur = None
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
                # the figures: a fault of the backend over the gap makes it a
                # recovery, timed from the fault's end if that is in the gap
                over = [fw for fw in faults if fw["kind"] in wide and fw["start"] <= tm["first"] and
                        fw["end"] >= cur_end]
                fstart = max([cur_end] + [fw["end"] for fw in over if fw["end"] <= tm["first"]])
                clean = cur["revoked"] > 0 and cur["reasons"][-1] in (1, 2)
                (recoveries if over else handovers if clean else failovers).append(ms(tm["first"] - fstart))
                raw = tm["first"] - cur_end
                if ms(raw) > leaderless["ms"]:
                    leaderless = {"ms": ms(raw), "name": n, "at_ms": ms(cur_end)}
            if cur_end is None or tm["last"] > cur_end:
                cur_end, cur = tm["last"], tm

    # Terms lost (the session's doing, not a clean stop), per worker in episodes,
    # and those no fault window explains.
    lost_at = defaultdict(list)
    for wid, lines in workers.items():
        for f in lines:
            if f[1] == "revoked" and len(f) >= 5 and f[4] in ("3", "4", "5"):
                lost_at[wid].append(int(f[0]))
    terms_lost = sum(len(v) for v in lost_at.values())
    sessions_lost, unexplained = 0, []
    for wid, ts_ in lost_at.items():
        prev = None
        for t in sorted(ts_):
            if prev is None or t - prev > lease_ns:
                sessions_lost += 1
                if not any((fw["kind"] in wide or fw.get("target") == wid) and
                           fw["start"] - lease_ns <= t <= fw["end"] + bound for fw in faults):
                    unexplained.append({"worker": wid, "t_ms": ms(t)})
            prev = t

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
        "fault_windows": sum(1 for f in faults if f["kind"] != "graceful_stop"),
        "faults_by_kind": {k: sum(1 for f in faults if f["kind"] == k) for k in sorted({f["kind"] for f in faults})},
        "terms": sum(len(v) for v in by_name.values()), "permit_terms": len(permits),
        "writes_accepted": writes,
        "writes_acked": len(acked),
        "stale_writes_rejected": sum(1 for lines in workers.values() for f in lines
                                     if f[1] == "write" and len(f) >= 6 and f[5] == "rejected"),
        "worst_failover_ms": ms(worst), "survived": survived, "violations": violations,
        "failovers_ms": failovers, "handovers_ms": handovers, "recoveries_ms": recoveries,
        "leaderless": leaderless,
        "terms_lost": terms_lost, "sessions_lost": sessions_lost, "losses_unexplained": unexplained,
    }


def percentile(xs, p):
    """Nearest rank: the smallest x with at least p % of xs at or below it."""
    if not xs:
        return None
    xs = sorted(xs)
    k = max(1, -(-len(xs) * p // 100))  # ceil
    return xs[int(k) - 1]


def summarize(results):
    """Adds up the rounds of a campaign (check() results)."""
    by_kind, viol = defaultdict(int), defaultdict(int)
    fo, ho, rc = [], [], []
    longest = {"ms": 0.0}
    for r in results:
        for k, c in r.get("faults_by_kind", {}).items():
            by_kind[k] += c
        for v in r.get("violations", []):
            viol[v["kind"]] += 1
        fo += r.get("failovers_ms", [])
        ho += r.get("handovers_ms", [])
        rc += r.get("recoveries_ms", [])
        ll = r.get("leaderless") or {"ms": 0.0}
        if ll["ms"] > longest["ms"]:
            longest = dict(ll, seed=r.get("seed"))
    return {
        "rounds": len(results),
        "fault_windows": sum(r.get("fault_windows", 0) for r in results),
        "windows_by_kind": dict(sorted(by_kind.items())),
        "violations": sum(viol.values()), "violations_by_kind": dict(sorted(viol.items())),
        "failover_ms": {"n": len(fo), "p50": percentile(fo, 50), "p99": percentile(fo, 99),
                        "max": max(fo) if fo else None},
        "handover_ms": {"n": len(ho), "p50": percentile(ho, 50), "p99": percentile(ho, 99),
                        "max": max(ho) if ho else None},
        "recovery_ms": {"n": len(rc), "p50": percentile(rc, 50), "p99": percentile(rc, 99),
                        "max": max(rc) if rc else None},
        "longest_leaderless": longest,
        "terms_lost": sum(r.get("terms_lost", 0) for r in results),
        "sessions_lost": sum(r.get("sessions_lost", 0) for r in results),
        "losses_unexplained": sum(len(r.get("losses_unexplained", [])) for r in results),
    }


def summary_text(s, title=""):
    def q(d):
        return f"p50 {d['p50']} ms, p99 {d['p99']} ms, max {d['max']} ms (n {d['n']})" if d["n"] else "none"
    ll = s["longest_leaderless"]
    return "\n".join([
        f"summary {title}".rstrip(),
        f"rounds: {s['rounds']}, fault windows: {s['fault_windows']}",
        "windows by kind: " + (", ".join(f"{k} {c}" for k, c in s["windows_by_kind"].items()) or "none"),
        f"violations: {s['violations']}" + (" (" + ", ".join(f"{k} {c}" for k, c in
                                                             s["violations_by_kind"].items()) + ")"
                                            if s["violations"] else ""),
        f"failover: {q(s['failover_ms'])}",
        f"handover: {q(s['handover_ms'])}",
        f"recovery (a backend fault over the gap; from its end): {q(s['recovery_ms'])}",
        f"longest without a leader: {ll['ms']} ms" + (f" (name {ll['name']}, seed {ll.get('seed')})"
                                                      if ll.get("name") else ""),
        f"terms lost: {s['terms_lost']} in {s['sessions_lost']} session losses, "
        f"{s['losses_unexplained']} not explained by a fault",
    ]) + "\n"


def plot(run_dir, png, title=None):
    """Terms over time: one row per worker slot and name, a bar per term from its
    first to its last valid instant coloured by token, fault windows shaded."""
    import subprocess
    import tempfile
    begin, faults, heal, end, workers, register = load(run_dir)
    r = check(run_dir)
    t0 = begin["t"]
    terms = []
    for wid, lines in workers.items():
        slot = wid.split(".")[0]
        cur = {}
        for f in lines:
            if f[1] in ("elected", "valid") and len(f) >= 4:
                key = (f[2], int(f[3]))
                t = int(f[0])
                if f[1] == "elected":
                    cur[key] = [t, t] if (len(f) >= 5 and f[4] == "1") else [None, None]
                    terms.append((slot, f[2], int(f[3]), cur[key]))
                elif key in cur:
                    iv = cur[key]
                    iv[0] = t if iv[0] is None else iv[0]
                    iv[1] = t
    rows = sorted({(s, n) for s, n, _, iv in terms if iv[0] is not None},
                  key=lambda x: (int(x[0][1:]) if x[0][1:].isdigit() else 0, x[0], x[1]))
    row = {k: i for i, k in enumerate(rows)}
    tmp = tempfile.mkdtemp(prefix="simba-chaos-plot.")
    with open(os.path.join(tmp, "terms.dat"), "w") as f:
        for s, n, tok, iv in terms:
            if iv[0] is not None:
                f.write(f"{(iv[0] - t0) / 1e9:.3f} {(iv[1] - t0) / 1e9:.3f} {row[(s, n)]} {tok}\n")
    kinds = sorted({fw["kind"] for fw in faults})
    shade = ["#e41a1c", "#ff7f00", "#ffd92f", "#4daf4a", "#17becf", "#377eb8", "#984ea3", "#f781bf",
             "#a65628", "#999999", "#66c2a5", "#8da0cb"]
    color = {k: shade[i % len(shade)] for i, k in enumerate(kinds)}
    gp = [f"set terminal pngcairo size 1200,{220 + 40 * max(1, len(rows))} font ',9'",
          f"set output '{png}'",
          "set termoption noenhanced",
          "set title '" + (title or f"{begin['backend']} seed {begin['seed']}: terms over time "
                           f"({r['fault_windows']} fault windows, {len(r['violations'])} violations)") + "'",
          "set xlabel 'seconds since start'", "set ylabel 'worker / name'",
          f"set yrange [-0.7:{len(rows) - 0.3}]",
          "set ytics (" + ", ".join(f"'{s} {n}' {i}" for (s, n), i in row.items()) + ")",
          "set cblabel 'token'", "set palette rgbformulae 33,13,10", "set key outside right top",
          "set style fill solid 1.0 noborder", "unset grid"]
    end_s = max(((end or heal or t0) - t0) / 1e9, 1.0)
    gp.append(f"set xrange [0:{end_s:.1f}]")
    least = end_s / 250  # an instant's window (a kill) stays visible
    for i, fw in enumerate(faults):
        a_ = (fw["start"] - t0) / 1e9
        gp.append(f"set object {i + 1} rect from {a_:.3f}, graph 0 to "
                  f"{max((fw['end'] - t0) / 1e9, a_ + least):.3f}, graph 1 "
                  f"fc rgb '{color[fw['kind']]}' fs transparent solid 0.3 noborder behind")
    # one invisible point per kind for the key
    keys = ", ".join(f"keyentry with boxes fc rgb '{color[k]}' fs transparent solid 0.3 title '{k}'"
                     for k in kinds)
    gp.append(f"plot '{tmp}/terms.dat' using 1:3:1:2:($3-0.3):($3+0.3):4 with boxxyerror "
              f"fc palette notitle" + (", " + keys if keys else ""))
    with open(os.path.join(tmp, "plot.gp"), "w") as f:
        f.write("\n".join(gp) + "\n")
    try:
        subprocess.run(["gnuplot", os.path.join(tmp, "plot.gp")], check=True, capture_output=True)
    finally:
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)
    return png


def report(r, out):
    print(f"checker: {r['backend']} seed {r['seed']}: {r['fault_windows']} fault windows "
          f"{r['faults_by_kind']}, {r['terms']} terms, {r.get('permit_terms', 0)} permit terms, "
          f"{r['writes_accepted']} writes accepted, "
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
    if sys.argv[1:2] == ["--summary"]:
        out = sys.argv[2]
        rs = []
        for p in sys.argv[3:]:
            with open(p) as f:
                rs.append(json.load(f))
        s = summarize(rs)
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "summary.json"), "w") as f:
            json.dump(s, f, indent=1)
        txt = summary_text(s, os.environ.get("SIMBA_CHAOS_TITLE", ""))
        with open(os.path.join(out, "summary.txt"), "w") as f:
            f.write(txt)
        sys.stdout.write(txt)
        sys.exit(0)
    if sys.argv[1:2] == ["--plot"]:
        print(plot(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else None))
        sys.exit(0)
    res = check(sys.argv[1])
    report(res, sys.stdout)
    sys.exit(1 if res["violations"] else 0)
