#!/usr/bin/env bash
# Each binding's lock cycle against C's, in one run (issue 36; docs/benchmarks.md,
# "Host executor and bindings"). Builds nothing: it runs what a build tree has.
#
#   bash scripts/bench-bindings.sh [--build-dir build] [--cycle-bench PATH]
#        [--lib DIR] [--backend memory|redis|all] [--bindings go,rust,java,lua,python]
#        [--rounds N]
#
# For each backend (memory://, and Redis: $SIMBA_TEST_REDIS_URL, else a
# throwaway redis-server from scripts/lib/servers.sh) and each binding, it runs
# N rounds of: the C cycle (simba_cycle_bench --mode pool: a C client with the
# default pool), the binding's own lock-cycle bench, the C cycle again. A
# round's ratio is the binding's µs per cycle over the mean of the two C
# figures around it; the script prints each round and the median. It also runs
# simba_cycle_bench --mode both (a host executor against the default pool).
# Every figure is a mean per cycle over a timed loop, the median of rounds
# (the bindings' benches time loops), so the C one is too. Lua's is pooled over
# its rounds.
#
# Targets: binding / C <= 1.3 on memory://, <= 1.1 on Redis; host executor /
# default pool <= 1.3 on memory://, <= 1.05 on Redis.
#
# What it runs from the build tree (a binding that is not built is skipped):
#   go    bindings/go/simba_go.test   -test.bench '^BenchmarkLockCycle$'
#   rust  bindings/rust/target/release/examples/bench URL CYCLES 5
#   java  bindings/java/{simba.jar,test-classes,libsimba_jni.so}: io.simba.LockBench URL CYCLES 3
#   lua   bindings/lua/simba.so: lua5.4 bindings/lua/bench/lock_bench.lua URL CYCLES
#   python  libsimba.so.1: /usr/bin/python3 bindings/python/bench/bench.py --cycle-only URL CYCLES
# --lib DIR puts DIR first in LD_LIBRARY_PATH, so that binaries linked with a
# RUNPATH to the build tree load the libsimba.so.1 of DIR instead (the same ABI).
# --cycle-bench defaults to build-bench/bench/simba_cycle_bench, then
# BUILD_DIR/bench/simba_cycle_bench (bash scripts/bench.sh builds the first).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; }

BUILD_DIR=build
CYCLE_BENCH=""
LIB=""
BACKEND=all
BINDINGS=go,rust,java,lua,python
ROUNDS=5
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) BUILD_DIR=${2:?--build-dir needs a path}; shift ;;
    --cycle-bench) CYCLE_BENCH=${2:?--cycle-bench needs a path}; shift ;;
    --lib) LIB=${2:?--lib needs a directory}; shift ;;
    --backend) BACKEND=${2:?--backend needs memory, redis or all}; shift ;;
    --bindings) BINDINGS=${2:?--bindings needs a list}; shift ;;
    --rounds) ROUNDS=${2:?--rounds needs a number}; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "bench-bindings.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
  shift
done
BUILD_DIR=$(cd "$BUILD_DIR" && pwd)
if [[ -z "$CYCLE_BENCH" ]]; then
  for c in build-bench/bench/simba_cycle_bench "$BUILD_DIR/bench/simba_cycle_bench"; do
    [[ -x "$c" ]] && { CYCLE_BENCH=$c; break; }
  done
fi
[[ -n "$CYCLE_BENCH" && -x "$CYCLE_BENCH" ]] ||
  { echo "bench-bindings.sh: no simba_cycle_bench (bash scripts/bench.sh builds it)" >&2; exit 2; }
if [[ -n "$LIB" ]]; then
  LIB=$(cd "$LIB" && pwd)
  export LD_LIBRARY_PATH="$LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
case "$BACKEND" in
  memory) BACKENDS=(memory) ;;
  redis) BACKENDS=(redis) ;;
  all) BACKENDS=(memory redis) ;;
  *) echo "bench-bindings.sh: --backend: memory, redis or all" >&2; exit 2 ;;
esac

# Cycles per run: memory:// cycles cost microseconds, Redis ones (an fsync
# each) about a millisecond.
cycles_for() { [[ $1 == memory://* ]] && echo 20000 || echo 1000; }

# The C figure: µs per cycle, the median of five rounds' means (as the
# bindings' benches measure: the median over rounds of a timed loop).
c_cycle() {
  "$CYCLE_BENCH" --url "$1" --mode pool --cycles "$2" --warmup $(($2 / 10)) |
    awk '/^RESULT/ { for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "round_mean_us") print kv[2] } }'
}

# A binding's µs per cycle on URL with CYCLES; empty when it failed.
binding_cycle() {
  local b=$1 url=$2 n=$3
  case "$b" in
    go)
      # The Go bench reads its URL from SIMBA_TEST_REDIS_URL (memory:// without).
      if [[ $url == memory://* ]]; then u=""; else u=$url; fi
      (cd "$ROOT/bindings/go" && SIMBA_TEST_REDIS_URL="$u" "$BUILD_DIR/bindings/go/simba_go.test" \
        -test.run '^$' -test.bench '^BenchmarkLockCycle$' -test.benchtime "${n}x" -test.count 1) |
        awk '/^BenchmarkLockCycle/ { for (i = 1; i <= NF; i++) if ($(i + 1) == "ns/op") printf "%.2f\n", $i / 1000 }' ;;
    rust)
      "$BUILD_DIR/bindings/rust/target/release/examples/bench" "$url" $((n / 5)) 5 |
        awk '/^rust binding/ { print $3 }' ;;
    java)
      local J=$BUILD_DIR/bindings/java
      java -Dsimba.jni.library="$J/libsimba_jni.so" -cp "$J/simba.jar:$J/test-classes" \
        io.simba.LockBench "$url" "$n" 3 |
        sed -n 's/.*median java \([0-9.]*\) us\/cycle.*/\1/p' ;;
    lua)
      LUA_CPATH="$BUILD_DIR/bindings/lua/?.so;;" lua5.4 "$ROOT/bindings/lua/bench/lock_bench.lua" "$url" "$n" |
        awk -F: '/^lua binding/ { split($2, a, " "); print a[1] }' ;;
    python)
      SIMBA_LIBRARY="$BUILD_DIR/libsimba.so.1" PYTHONPATH="$ROOT/bindings/python" \
        /usr/bin/python3 "$ROOT/bindings/python/bench/bench.py" --cycle-only "$url" "$n" |
        awk -F: '/^python binding/ { split($2, a, " "); print a[1] }' ;;
  esac
}

built() {
  case "$1" in
    go) [[ -x "$BUILD_DIR/bindings/go/simba_go.test" ]] ;;
    rust) [[ -x "$BUILD_DIR/bindings/rust/target/release/examples/bench" ]] ;;
    java) [[ -f "$BUILD_DIR/bindings/java/libsimba_jni.so" && -f "$BUILD_DIR/bindings/java/test-classes/io/simba/LockBench.class" ]] && command -v java >/dev/null ;;
    lua) [[ -f "$BUILD_DIR/bindings/lua/simba.so" ]] && command -v lua5.4 >/dev/null ;;
    python) [[ -e "$BUILD_DIR/libsimba.so.1" && -x /usr/bin/python3 ]] ;;
  esac
}

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

if [[ " ${BACKENDS[*]} " == *" redis "* && -z "${SIMBA_TEST_REDIS_URL:-}" ]]; then
  # shellcheck source=scripts/lib/servers.sh
  source "$ROOT/scripts/lib/servers.sh"
  trap 'stop_servers' EXIT
  start_servers redis
fi

printf 'bench-bindings: %s, load %s, libsimba from %s\n' "$(date -u +%FT%TZ)" \
  "$(cut -d' ' -f1-3 /proc/loadavg)" "${LIB:-the RUNPATH of each binary}"
summary=()
for backend in "${BACKENDS[@]}"; do
  if [[ $backend == memory ]]; then url="memory://bench-bindings"; target=1.3; else url=$SIMBA_TEST_REDIS_URL; target=1.1; fi
  n=$(cycles_for "$url")
  printf '\n== %s (%d cycles per run)\n' "$url" "$n"
  out=$("$CYCLE_BENCH" --url "$url" --cycles "$n" --warmup $((n / 10)))
  grep -v '^RESULT' <<<"$out"
  host_ratio=$(awk '/^RESULT/ { for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "ratio") print kv[2] } }' <<<"$out")
  summary+=("$(printf '%-8s %-6s %s (p50 of alternating blocks; target <= %s)' "$backend" "C host" \
    "$host_ratio" "$([[ $backend == memory ]] && echo 1.30 || echo 1.05)")")
  IFS=, read -r -a list <<<"$BINDINGS"
  for b in "${list[@]}"; do
    if ! built "$b"; then
      printf '%-5s not built in %s: skipped\n' "$b" "$BUILD_DIR"
      continue
    fi
    ratios=()
    for ((r = 1; r <= ROUNDS; r++)); do
      c1=$(c_cycle "$url" "$n")
      x=$(binding_cycle "$b" "$url" "$n" || true)
      c2=$(c_cycle "$url" "$n")
      if [[ -z "$x" || -z "$c1" || -z "$c2" ]]; then
        printf '%-5s round %d: failed (binding %s, C %s %s)\n' "$b" "$r" "${x:-?}" "${c1:-?}" "${c2:-?}"
        continue
      fi
      ratio=$(awk -v x="$x" -v a="$c1" -v b="$c2" 'BEGIN { printf "%.3f", x / ((a + b) / 2) }')
      ratios+=("$ratio")
      printf '%-5s round %d: binding %9.2f us, C %9.2f / %9.2f us, ratio %s\n' "$b" "$r" "$x" "$c1" "$c2" "$ratio"
    done
    med=$(printf '%s\n' "${ratios[@]:-}" | grep . | median)
    lo=$(printf '%s\n' "${ratios[@]:-}" | grep . | sort -g | head -1)
    hi=$(printf '%s\n' "${ratios[@]:-}" | grep . | sort -g | tail -1)
    verdict=$(awk -v m="$med" -v t="$target" 'BEGIN { print (m != "nan" && m <= t) ? "met" : "MISSED" }')
    summary+=("$(printf '%-8s %-6s median %s (range %s-%s, %d rounds; target <= %s: %s)' \
      "$backend" "$b" "$med" "${lo:-?}" "${hi:-?}" "${#ratios[@]}" "$target" "$verdict")")
  done
done
printf '\n== summary (binding / C lock cycle; C host executor / default pool)\n'
printf '%s\n' "${summary[@]}"
