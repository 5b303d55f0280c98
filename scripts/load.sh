#!/usr/bin/env bash
# Load under faults (issue 44, docs/testing.md "Soak and load"): P client
# processes, each contending for the same E names (P x E elections), for M
# minutes under the chaos nemesis (tests/chaos/nemesis.py: it starts the
# backend, one proxy per process, and draws the backend's faults). Each process
# is tests/chaos/chaos_hold in a chaos worker's place: it logs its terms for the
# checker (a valid line per held term every lease / 4) and samples its RSS and
# fds. Prints the checker's verdict (overlap, token order, pairing of elected
# and revoked for every process that exited cleanly, stuck, failover bound),
# terms and sessions lost against the fault windows (a loss no fault of the
# backend or of that process explains is counted apart), elected / revoked
# totals, and fds and RSS per process from its first sample to its last.
#
#   bash scripts/load.sh BACKEND [--procs P] [--elections E] [--minutes M] [--lease MS]
#
# BACKEND: redis | postgres | zookeeper. Defaults: 100 processes, 100
# elections, 10 minutes, lease 3000 ms. Options: --seed N, --faults k1,k2 (the
# nemesis's; default every single-server fault), --keep DIR (the run's logs;
# default build-chaos/load/BACKEND-SEED), --build-dir DIR (default build-chaos).
# Exit status 1 when the checker found a violation, a loss is unexplained, or
# a process that exited cleanly ended with more fds than its first sample.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
[[ $# -ge 1 && $1 != -* ]] || { usage; exit 2; }
BACKEND=$1
shift
PROCS=100 ELECTIONS=100 MINUTES=10 LEASE=3000 BUILD=build-chaos KEEP='' FAULTS=''
SEED=$((RANDOM * 32768 + RANDOM))
while [[ $# -gt 0 ]]; do
  case "$1" in
    --procs) PROCS=$2; shift ;;
    --elections) ELECTIONS=$2; shift ;;
    --minutes) MINUTES=$2; shift ;;
    --lease) LEASE=$2; shift ;;
    --seed) SEED=$2; shift ;;
    --faults) FAULTS=$2; shift ;;
    --keep) KEEP=$2; shift ;;
    --build-dir) BUILD=$2; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "load.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
  shift
done
case "$BACKEND" in redis|postgres|zookeeper) ;; *) echo "load.sh: BACKEND: redis, postgres or zookeeper" >&2; exit 2 ;; esac
PY=python3
[[ -x /usr/bin/python3 ]] && PY=/usr/bin/python3
[[ -x "$BUILD/tests/chaos/chaos_hold" ]] ||
  cmake -S "$ROOT" -B "$BUILD" -DSIMBA_BUILD_TESTS=ON -DSIMBA_BUILD_BINDINGS=OFF >/dev/null
cmake --build "$BUILD" -j "${SIMBA_CHAOS_JOBS:-2}" --target chaos_hold >/dev/null
KEEP=${KEEP:-$BUILD/load/$BACKEND-$SEED}
names=$(seq -s, -f 'L%g' 0 $((ELECTIONS - 1)))
seconds=$(awk -v m="$MINUTES" 'BEGIN { printf "%d", m * 60 }')
faults=()
[[ -z $FAULTS ]] || faults=(--faults "$FAULTS")
# Many processes on one server: more open files than the default 1024 may take.
ulimit -n 65536 2>/dev/null || true
echo "load: $BACKEND, $PROCS processes x $ELECTIONS elections (the same $ELECTIONS names), $MINUTES min," \
  "lease $LEASE ms, seed $SEED, $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg)"
rc=0
"$PY" tests/chaos/nemesis.py --backend "$BACKEND" --seconds "$seconds" --seed "$SEED" --lease "$LEASE" \
  --workers "$PROCS" --names "$names" --worker "$BUILD/tests/chaos/chaos_hold" \
  --worker-arg=--valid-every --worker-arg=$((LEASE / 4)) --keep "$KEEP" "${faults[@]}" \
  2> >(grep -E '^(checker|nemesis: (logs|SKIP|error|partition|network))' | cut -c1-400 >&2) |
  grep '^CHAOS ' | sed 's/^CHAOS /load: nemesis: /' || rc=$?

[[ -f "$KEEP/result.json" ]] || { echo "load: no result in $KEEP" >&2; exit 1; }
"$PY" - "$KEEP" "$PROCS" "$ELECTIONS" <<'EOF' || rc=1
import json, os, sys
keep, procs, elections = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
r = json.load(open(os.path.join(keep, "result.json")))
print(f"load: fault windows {r['fault_windows']} {r['faults_by_kind']}")
viol = {}
for v in r["violations"]:
    viol[v["kind"]] = viol.get(v["kind"], 0) + 1
print(f"load: checker: {r['terms']} terms, violations {len(r['violations'])} {viol or ''}")
print(f"load: terms lost {r['terms_lost']} in {r['sessions_lost']} session losses; "
      f"{len(r['losses_unexplained'])} not explained by a fault {r['losses_unexplained'][:5] or ''}")
wdir = os.path.join(keep, "workers")
el = rv = clean = 0
fd_up, rows = [], []
for fn in sorted(os.listdir(wdir)):
    if not fn.endswith(".log"):
        continue
    lines = [ln.split() for ln in open(os.path.join(wdir, fn))]
    e = sum(1 for f in lines if len(f) > 1 and f[1] == "elected")
    v = sum(1 for f in lines if len(f) > 1 and f[1] == "revoked")
    exited = any(len(f) > 1 and f[1] == "exit" for f in lines)
    st = [f for f in lines if len(f) > 1 and f[1] == "stats"]
    el, rv, clean = el + e, rv + v, clean + exited
    # the first sample after start (the connections are open by then) and the last
    first = next((f for f in st if f[2] == "run"), st[0] if st else None)
    if first and st:
        last = st[-1]
        rows.append((fn[:-4], int(first[3]), int(last[3]), int(first[4]), int(last[4]), exited))
        if exited and int(last[4]) > int(first[4]):
            fd_up.append(fn[:-4])
print(f"load: {len(rows)} processes ran ({procs} slots; the rest were restarts after kill -9), "
      f"{clean} exited cleanly; elected {el}, revoked {rv} (the difference: terms of killed processes)")
if rows:
    d_rss = sorted(r_[2] - r_[1] for r_ in rows)
    d_fd = sorted(r_[4] - r_[3] for r_ in rows)
    print(f"load: per process, first sample -> last: fds {min(r_[3] for r_ in rows)}..{max(r_[3] for r_ in rows)} -> "
          f"{min(r_[4] for r_ in rows)}..{max(r_[4] for r_ in rows)} (change {d_fd[0]:+d}..{d_fd[-1]:+d}); "
          f"RSS {min(r_[1] for r_ in rows)}..{max(r_[1] for r_ in rows)} KB -> change "
          f"median {d_rss[len(d_rss) // 2]:+d} KB, max {d_rss[-1]:+d} KB")
bad = bool(r["violations"]) or bool(r["losses_unexplained"]) or bool(fd_up)
if fd_up:
    print(f"load: fds grew in processes that exited cleanly: {fd_up[:10]}")
print("load: " + ("FAILED" if bad else "ok") + f" (logs in {keep})")
sys.exit(1 if bad else 0)
EOF
exit $rc
