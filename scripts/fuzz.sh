#!/usr/bin/env bash
# Simba's fuzzing campaigns: builds tests/fuzz/ with clang-14 and libFuzzer
# (ASan+UBSan) in build-fuzz/, then fuzzes each target (ADR 0018).
#
#   bash scripts/fuzz.sh                     every target, 10 000 000 executions each
#   bash scripts/fuzz.sh --runs N            N executions per target
#   bash scripts/fuzz.sh --time S            S seconds per target instead
#   bash scripts/fuzz.sh --smoke             ctest -L fuzz in build-fuzz/ (a few s per target)
#   bash scripts/fuzz.sh redis_url ...       only these targets
#
# Options: --build-dir DIR (default build-fuzz), --jobs N (build, default 2),
# --nice N (default 19: campaigns share the machine), --no-build, -h.
# New corpus entries go to DIR/corpus/<target>/ (the seed corpus in
# tests/fuzz/corpus/ is read, never written); crashes to DIR/crashes/. A crash
# fixed becomes a regression entry: copy it to tests/fuzz/corpus/<target>/regress-*.
# Prints one line per target: executions, seconds, executions per second (over
# the run, the corpus' replay included), new corpus size, result; then the same
# as a Markdown table (for docs/testing.md) with the minutes 10 M executions
# take at that rate; exits
# nonzero if any target crashed or ran fewer executions than --runs asked.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR="$ROOT/build-fuzz"
RUNS=10000000
TIME=""
JOBS=2
NICE=19
BUILD=1
SMOKE=0
TARGETS=()

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --runs) RUNS=$2; shift ;;
    --time) TIME=$2; shift ;;
    --smoke) SMOKE=1 ;;
    --build-dir) BUILD_DIR=$(realpath -m "$2"); shift ;;
    --jobs|-j) JOBS=$2; shift ;;
    --nice) NICE=$2; shift ;;
    --no-build) BUILD=0 ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "fuzz.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
    *) TARGETS+=("$1") ;;
  esac
  shift
done

CC=${CC:-clang-14}
CXX=${CXX:-clang++-14}
command -v "$CXX" >/dev/null ||
  { echo "fuzz.sh: $CXX not found (apt-get install clang-14 libclang-rt-14-dev)" >&2; exit 2; }

if [[ $BUILD -eq 1 ]]; then
  CC=$CC CXX=$CXX cmake -S "$ROOT" -B "$BUILD_DIR" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DSIMBA_BUILD_FUZZERS=ON -DSIMBA_SANITIZE=address \
    -DSIMBA_BUILD_TESTS=OFF -DSIMBA_BUILD_TOOLS=OFF -DSIMBA_BUILD_EXAMPLES=OFF \
    -DSIMBA_BUILD_BINDINGS=OFF >/dev/null
  nice -n "$NICE" cmake --build "$BUILD_DIR" -j "$JOBS" --target simba_fuzzers >/dev/null
fi

if [[ $SMOKE -eq 1 ]]; then
  exec ctest --test-dir "$BUILD_DIR" -L '^fuzz$' --output-on-failure
fi

if [[ ${#TARGETS[@]} -eq 0 ]]; then
  for exe in "$BUILD_DIR"/tests/fuzz/fuzz_*; do
    [[ -x "$exe" ]] && TARGETS+=("$(basename "$exe" | sed 's/^fuzz_//')")
  done
fi

mkdir -p "$BUILD_DIR/crashes"
failed=0
printf '%-20s %12s %8s %9s %8s  %s\n' target executions seconds exec/s corpus result
table=()
for t in "${TARGETS[@]}"; do
  exe="$BUILD_DIR/tests/fuzz/fuzz_$t"
  [[ -x "$exe" ]] || { echo "fuzz.sh: no target $t in $BUILD_DIR" >&2; failed=1; continue; }
  out="$BUILD_DIR/corpus/$t"
  mkdir -p "$out"
  log="$BUILD_DIR/fuzz-$t.log"
  limit=(-runs="$RUNS")
  [[ -n "$TIME" ]] && limit=(-max_total_time="$TIME")
  start=$EPOCHREALTIME
  set +e
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    nice -n "$NICE" "$exe" "${limit[@]}" -timeout=10 -rss_limit_mb=1024 -max_len=4096 \
    -print_final_stats=1 -artifact_prefix="$BUILD_DIR/crashes/$t-" \
    "$out" "$ROOT/tests/fuzz/corpus/$t" >"$log" 2>&1
  rc=$?
  set -e
  secs=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  execs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+).*/\1/p' "$log" | tail -n 1)
  rate=$(awk -v n="${execs:-0}" -v s="$secs" 'BEGIN { if (s > 0 && n > 0) printf "%d", n / s }')
  result=clean
  if [[ $rc -ne 0 ]]; then result="CRASH (exit $rc, see $log)"; failed=1; fi
  # libFuzzer counts the corpus' own inputs too: at least the runs asked for
  if [[ -z "$TIME" && $rc -eq 0 && ${execs:-0} -lt $RUNS ]]; then result="SHORT ($execs < $RUNS)"; failed=1; fi
  corpus=$(find "$out" -type f | wc -l)
  printf '%-20s %12s %8s %9s %8s  %s\n' "$t" "${execs:-?}" "$secs" "${rate:-?}" "$corpus" "$result"
  table+=("| \`$t\` | ${execs:-?} | $secs | ${rate:-?} | $(awk -v r="${rate:-0}" \
    'BEGIN { if (r > 0) printf "%.1f", 1e7 / r / 60; else printf "?" }') | $result |")
done
echo
echo "| target | executions | seconds | exec/s | minutes for 10 M | result |"
echo "|---|---|---|---|---|---|"
printf '%s\n' "${table[@]}"
exit $failed
