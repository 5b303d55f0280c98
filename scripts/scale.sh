#!/usr/bin/env bash
# The scale model (docs/benchmarks.md, "Scale model"): the lease server's own CPU
# time with N sessions of L leases each, on each backend's throwaway test server
# (scripts/lib/servers.sh), measured by bench/scale_load.cpp (libsimba's own
# backend objects). Not part of the test suite: it takes many minutes.
#
#   bash scripts/scale.sh                  the measured curve: every session keeps
#                                          alive once per default renew interval
#                                          (lease 15 s, every 5 s), N = 300,1000,
#                                          3000,10000, L = 1,10, 8 s windows; writes
#                                          bench/results/scale-renew.{jsonl,txt} and
#                                          docs/img/scale-model.png
#   bash scripts/scale.sh --rate 1500      the per-call constants at a fixed rate
#                                          (calls/s in all): N = 10,100,1000, L = 1,
#                                          10,100, 5 s windows; writes
#                                          bench/results/scale-fixed.{jsonl,txt}
#   bash scripts/scale.sh --smoke          a few seconds per backend: checks the
#                                          generator works and prints numbers
#   bash scripts/scale.sh --backend redis  one backend: redis | postgresql | zookeeper | all
#
# Options: --sessions LIST, --leases LIST, --seconds T (measured window per
# phase), --build-dir DIR (default build-scale), --no-install, --no-plot, -h.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

# shellcheck source=scripts/lib/packages.sh
source "$ROOT/scripts/lib/packages.sh"
# shellcheck source=scripts/lib/servers.sh
source "$ROOT/scripts/lib/servers.sh"

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; }

BUILD_DIR=build-scale BACKEND=all SESSIONS='' LEASES='' SECONDS_='' RATE=renew
INSTALL=1 PLOT=1 SMOKE=0 OUT=bench/results
while [[ $# -gt 0 ]]; do
  case "$1" in
    --backend) BACKEND=$2; shift ;;
    --sessions) SESSIONS=$2; shift ;;
    --leases) LEASES=$2; shift ;;
    --seconds) SECONDS_=$2; shift ;;
    --rate) RATE=$2; shift ;;
    --build-dir) BUILD_DIR=$2; shift ;;
    --no-install) INSTALL=0 ;;
    --no-plot) PLOT=0 ;;
    --smoke) SMOKE=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "scale.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
  shift
done
if [[ $SMOKE -eq 1 ]]; then
  SESSIONS=10 LEASES=1,10 SECONDS_=1 RATE=500 OUT=$(mktemp -d)
  SMOKE_OUT=$OUT
fi
if [[ $RATE == renew ]]; then
  # The default timing of src/core/config.cpp: lease 15 s, renew every 5 s. A
  # window sends no keep-alive but its own, so it stays under 0.6 x the lease.
  SESSIONS=${SESSIONS:-300,1000,3000,10000} LEASES=${LEASES:-1,10} SECONDS_=${SECONDS_:-8}
  NAME=scale-renew
else
  SESSIONS=${SESSIONS:-10,100,1000} LEASES=${LEASES:-1,10,100} SECONDS_=${SECONDS_:-5}
  NAME=scale-fixed PLOT=0
fi
case "$BACKEND" in
  redis) BACKENDS=(redis) ;;
  postgresql|postgres) BACKENDS=(postgresql) ;;
  zookeeper) BACKENDS=(zookeeper) ;;
  all) BACKENDS=(redis postgresql zookeeper) ;;
  *) echo "scale.sh: --backend: redis, postgresql, zookeeper or all" >&2; exit 2 ;;
esac

[[ $INSTALL -eq 1 ]] || export SIMBA_NO_INSTALL=1
ensure_packages "${SIMBA_BENCH_PACKAGES[@]}" gnuplot-nox

START=$(date -u +%Y-%m-%dT%H:%M:%SZ)
T0=$SECONDS
cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSIMBA_BUILD_BENCH=ON \
  -DSIMBA_BUILD_TESTS=OFF -DSIMBA_BUILD_EXAMPLES=OFF -DSIMBA_BUILD_TOOLS=OFF -DSIMBA_SANITIZE= \
  -DSIMBA_WITH_REDIS=ON -DSIMBA_WITH_POSTGRES=ON -DSIMBA_WITH_ZOOKEEPER=ON >/dev/null
cmake --build "$BUILD_DIR" -j2 --target simba_scale_load
GEN="$BUILD_DIR/bench/simba_scale_load"

SMOKE_OUT=${SMOKE_OUT:-}
trap 'stop_servers; [[ -z $SMOKE_OUT ]] || rm -rf "$SMOKE_OUT"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mkdir -p "$OUT"
JSONL="$OUT/$NAME.jsonl" TXT="$OUT/$NAME.txt"
: >"$JSONL"
{
  echo "# scripts/scale.sh $START, $(nproc) cpus, $(uname -srm), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
  echo "# load average at start: $(cat /proc/loadavg)"
} | tee "$TXT"
IFS=, read -r -a NS <<<"$SESSIONS"
MAX_N=$(printf '%s\n' "${NS[@]}" | sort -n | tail -1)
# Sessions per Redis backend object: one, or two beyond 5,000 sessions, since
# each object keeps two connections (commands and the release subscriber) and
# 20,000 would pass the descriptor limit (ulimit -n, 20,000 here) of either
# process.
redis_per_object() { echo $((($1 + 4999) / 5000)); }
# 100,000 ephemeral lease nodes and 10,000 sessions do not fit the tests' 128 MiB.
[[ $MAX_N -le 1000 ]] || export SIMBA_ZOOKEEPER_HEAP=768m
for b in "${BACKENDS[@]}"; do
  case "$b" in redis) srv=redis ;; postgresql) srv=postgres ;; zookeeper) srv=zookeeper ;; esac
  start_servers "$srv"
  pid=${SIMBA_SERVER_PIDS[0]}
  if [[ $b == redis ]]; then
    # Two connections per backend object; Redis takes 10,000 by default.
    per=$(redis_per_object "$MAX_N")
    port=${SIMBA_TEST_REDIS_URL##*:}
    redis-cli -p "$port" CONFIG SET maxclients $((2 * ((MAX_N + per - 1) / per) + 100)) >/dev/null
  fi
  # Let the server settle (the JVM compiles for seconds after its start) before
  # the generator measures its background.
  sleep 5
  for n in "${NS[@]}"; do
    args=(--server-pid "$pid" --sessions "$n" --leases "$LEASES" --seconds "$SECONDS_"
          --rate "$RATE" --label "$b" --json "$JSONL")
    # The idle window (nothing sent) outlasts a third of ZooKeeper's session
    # timeout, after which its C client pings on its own.
    lease_ms=20000 idle=3
    [[ $RATE == renew ]] && lease_ms=15000
    [[ $b == zookeeper ]] && idle=$((lease_ms / 3000 + 1))
    args+=(--lease-ms "$lease_ms" --idle-seconds "$idle")
    case "$b" in
      redis)
        url="$SIMBA_TEST_REDIS_URL?prefix=scale-$n-$$"
        args+=(--per-backend "$(redis_per_object "$n")") ;;
      postgresql)
        # Two connections per backend object; the test server takes 100.
        url="${SIMBA_TEST_POSTGRES_URL}&schema=scale_${n}_$$"
        args+=(--tree --per-backend $(((n + 39) / 40))) ;;
      zookeeper)
        port=${SIMBA_TEST_ZOOKEEPER_URL#zookeeper://127.0.0.1:}; port=${port%%/*}
        url="zookeeper://127.0.0.1:$port/scale-$n-$$"
        args+=(--spread-source "$port") ;;
    esac
    echo "## $b: simba_scale_load --url $url ${args[*]}" | tee -a "$TXT"
    "$GEN" --url "$url" "${args[@]}" | tee -a "$TXT"
  done
  stop_servers
done
echo "# took $((SECONDS - T0)) s; load average at end: $(cat /proc/loadavg)" | tee -a "$TXT"

if [[ $PLOT -eq 1 ]]; then
  # Server CPU, % of one core, against the number of sessions: the measured
  # points (keep-alives at the default interval, solid) and the model through
  # the largest measured N (N / 5 s x c_ka(L), dashed) out to 100,000 sessions.
  GP=$(mktemp)
  python3 - "$JSONL" "$ROOT/docs/img/scale-model.png" "$START" >"$GP" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
colors = {"redis": "#d62728", "postgresql": "#1f77b4", "zookeeper": "#2ca02c"}
names = {"redis": "Redis", "postgresql": "PostgreSQL", "zookeeper": "ZooKeeper"}
blocks, plots = [], []
for b in ("redis", "postgresql", "zookeeper"):
    for k, L in enumerate(sorted({r["leases_per_session"] for r in rows})):
        pts = sorted((r["sessions"], r["ka_server_cpu_fraction"] * 100, r["ka_server_us"])
                     for r in rows if r["label"] == b and r["leases_per_session"] == L)
        if not pts: continue
        label = f'{names[b]}, {L} lease{"s" if L > 1 else ""}/session'
        blocks.append("\n".join(f"{n} {max(pct, 1e-3)}" for n, pct, _ in pts))
        plots.append(f'"-" with linespoints lw 2 pt {7 + 2 * k} lc rgb "{colors[b]}" title "{label}, measured"')
        us = pts[-1][2]
        model = [n for n in (100, 300, 1000, 3000, 10000, 30000, 100000) if n >= pts[0][0]]
        blocks.append("\n".join(f"{n} {n / 5.0 * us / 1e6 * 100}" for n in model))
        plots.append(f'"-" with lines dt {2 + k} lc rgb "{colors[b]}" title "model, {us:.0f} us per keep-alive"')
print(f"""set terminal pngcairo size 1000,650 noenhanced
set output "{sys.argv[2]}"
set title "Server CPU for keep-alives at the default renew interval (lease 15 s, every 5 s), measured {sys.argv[3]}"
set xlabel "sessions (nodes), one keep-alive each per 5 s"; set ylabel "% of one core"
set logscale xy; set grid; set key left top font ",9"
set xrange [200:100000]; set yrange [0.1:500]
plot """ + ", ".join(plots) + ', 50 with lines lw 2 dt 3 lc rgb "black" title "50 % of one core"')
for blk in blocks:
    print(blk); print("e")
PY
  gnuplot "$GP"
  rm -f "$GP"
  echo "plot: docs/img/scale-model.png"
fi
