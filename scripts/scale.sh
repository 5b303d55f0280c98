#!/usr/bin/env bash
# The scale model (docs/benchmarks.md, "Scale model"): server CPU time per
# keep-alive, per acquire/release and per Held acquire, with N sessions of L
# leases each, on each backend's throwaway test server (scripts/lib/servers.sh),
# measured by bench/scale_load.cpp (libsimba's own backend objects). Writes
# bench/results/scale-latest.jsonl (one line per backend, N and L),
# bench/results/scale-latest.txt (the tables) and docs/img/scale-model.png.
# Not part of the test suite: it takes minutes.
#
#   bash scripts/scale.sh                  every backend, N = 10,100,1000, L = 1,10,100
#   bash scripts/scale.sh --smoke          a few seconds per backend: checks the
#                                          generator works and prints numbers
#   bash scripts/scale.sh --backend redis  one backend: redis | postgresql | zookeeper | all
#
# Options: --sessions LIST (default 10,100,1000), --leases LIST (default 1,10,100),
# --seconds T (measured window per phase, default 5), --rate R (calls/s, default
# 1500), --build-dir DIR (default build-scale), --no-install, --no-plot, -h.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

# shellcheck source=scripts/lib/packages.sh
source "$ROOT/scripts/lib/packages.sh"
# shellcheck source=scripts/lib/servers.sh
source "$ROOT/scripts/lib/servers.sh"

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; }

BUILD_DIR=build-scale BACKEND=all SESSIONS=10,100,1000 LEASES=1,10,100 SECONDS_=5 RATE=1500
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
  SESSIONS=10 LEASES=1,10 SECONDS_=1 RATE=500 PLOT=0 OUT=$(mktemp -d)
  SMOKE_OUT=$OUT
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
JSONL="$OUT/scale-latest.jsonl" TXT="$OUT/scale-latest.txt"
: >"$JSONL"
{
  echo "# scripts/scale.sh $START, $(nproc) cpus, $(uname -srm), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
  echo "# load average at start: $(cat /proc/loadavg)"
} | tee "$TXT"
IFS=, read -r -a NS <<<"$SESSIONS"
for b in "${BACKENDS[@]}"; do
  case "$b" in redis) srv=redis ;; postgresql) srv=postgres ;; zookeeper) srv=zookeeper ;; esac
  start_servers "$srv"
  pid=${SIMBA_SERVER_PIDS[0]}
  # Let the server settle (the JVM compiles for seconds after its start) before
  # the generator measures its background.
  sleep 5
  for n in "${NS[@]}"; do
    args=(--server-pid "$pid" --sessions "$n" --leases "$LEASES" --seconds "$SECONDS_"
          --rate "$RATE" --label "$b" --json "$JSONL")
    case "$b" in
      redis)
        url="$SIMBA_TEST_REDIS_URL?prefix=scale-$n-$$"
        args+=(--lease-ms 20000 --idle-seconds 3) ;;
      postgresql)
        # Two connections per backend object; the test server takes 100.
        url="${SIMBA_TEST_POSTGRES_URL}&schema=scale_${n}_$$"
        args+=(--tree --per-backend $(((n + 39) / 40)) --lease-ms 20000 --idle-seconds 3) ;;
      zookeeper)
        # lease 6 s: the C client pings after 2 s without a request (idle window 6 s).
        port=${SIMBA_TEST_ZOOKEEPER_URL#zookeeper://127.0.0.1:}; port=${port%%/*}
        url="zookeeper://127.0.0.1:$port/scale-$n-$$"
        args+=(--spread-source "$port" --lease-ms 6000 --idle-seconds 6) ;;
    esac
    echo "## $b: simba_scale_load --url $url ${args[*]}" | tee -a "$TXT"
    "$GEN" --url "$url" "${args[@]}" | tee -a "$TXT"
  done
  stop_servers
done
echo "# took $((SECONDS - T0)) s; load average at end: $(cat /proc/loadavg)" | tee -a "$TXT"

if [[ $PLOT -eq 1 ]]; then
  # Server CPU, % of one core, at the default renew interval (5 s: lease 15 s / 3)
  # against the number of sessions, for each backend and lease count, from the
  # measured per-keep-alive cost: N / 5 s x c_ka(L).
  DAT=$(mktemp)
  python3 - "$JSONL" >"$DAT" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
for b in ("redis", "postgresql", "zookeeper"):
    for L in sorted({r["leases_per_session"] for r in rows}):
        pts = sorted((r["sessions"], r["ka_server_us"]) for r in rows
                     if r["label"] == b and r["leases_per_session"] == L)
        if not pts: continue
        print(f'"{b}, {L} lease{"s" if L > 1 else ""}/session"')
        for n, us in pts:
            print(n, max(n / 5.0 * us / 1e6 * 100, 1e-4))
        print(); print()
PY
  nblocks=$(grep -c '^"' "$DAT" || true)
  gnuplot <<GP
set terminal pngcairo size 900,600 noenhanced
set output "$ROOT/docs/img/scale-model.png"
set title "Server CPU for keep-alives at the default renew interval (5 s), measured $START"
set xlabel "sessions (nodes)"; set ylabel "% of one core"
set logscale xy; set grid; set key left top
set yrange [*:*]
plot for [i=0:$((nblocks - 1))] "$DAT" index i using 1:2 with linespoints title columnheader(1), 50 title "50 % of one core" dt 2 lc rgb "red"
GP
  rm -f "$DAT"
  echo "plot: docs/img/scale-model.png"
fi
