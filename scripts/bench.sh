#!/usr/bin/env bash
# Simba's benchmarks (docs/benchmarks.md): installs what is missing, builds a
# Release tree with -DSIMBA_BUILD_BENCH=ON, starts a throwaway redis-server on a
# free port (AOF with appendfsync always, as we recommend), runs bench/simba_bench
# against it, and stops the server whatever happened.
#
#   bash scripts/bench.sh                 the whole bench (about 1-2 minutes)
#   bash scripts/bench.sh -- --handovers 500 --lease-counts 1,1000
#                                         extra arguments go to simba_bench
#                                         (simba_bench --help lists them)
#
# Options: --build-dir DIR (default build-bench), --jobs N (default 2),
# --json FILE (default bench/results/redis-latest.json), --no-install, -h.
# The table goes to stdout and to FILE's .txt sibling; the JSON to FILE.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

SIMBA_APT_PACKAGES=(
  build-essential cmake pkg-config
  libuv1-dev libhiredis-dev
  redis-server redis-tools
)

# shellcheck source=scripts/lib/packages.sh
source "$ROOT/scripts/lib/packages.sh"
# shellcheck source=scripts/lib/servers.sh
source "$ROOT/scripts/lib/servers.sh"

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; }

BUILD_DIR="build-bench"
JOBS=2
JSON="bench/results/redis-latest.json"
INSTALL=1
BENCH_ARGS=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) [[ $# -ge 2 ]] || { echo "bench.sh: --build-dir needs a path" >&2; exit 2; }
                 BUILD_DIR=$2; shift ;;
    --jobs|-j) [[ $# -ge 2 ]] || { echo "bench.sh: --jobs needs a number" >&2; exit 2; }
               JOBS=$2; shift ;;
    --json) [[ $# -ge 2 ]] || { echo "bench.sh: --json needs a path" >&2; exit 2; }
            JSON=$2; shift ;;
    --no-install) INSTALL=0 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; BENCH_ARGS=("$@"); break ;;
    *) echo "bench.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
  shift
done

log() { printf '\n==== %s\n' "$*"; }

[[ $INSTALL -eq 1 ]] || export SIMBA_NO_INSTALL=1
ensure_packages "${SIMBA_APT_PACKAGES[@]}"

log "configure $BUILD_DIR (Release, SIMBA_BUILD_BENCH=ON)"
cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DSIMBA_BUILD_BENCH=ON \
  -DSIMBA_BUILD_TESTS=OFF -DSIMBA_BUILD_EXAMPLES=OFF -DSIMBA_BUILD_TOOLS=OFF -DSIMBA_SANITIZE= >/dev/null
log "build simba_bench (-j$JOBS)"
cmake --build "$BUILD_DIR" -j "$JOBS" --target simba_bench

# The server: the same flags as the test suite's (scripts/lib/servers.sh), with
# its files in a temp dir that stop_servers removes. Only this pid is stopped.
trap 'stop_servers' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
log "starting a throwaway redis-server (appendonly yes, appendfsync always)"
start_servers

mkdir -p "$(dirname "$JSON")"
TXT="${JSON%.json}.txt"
log "simba_bench --url $SIMBA_TEST_REDIS_URL ${BENCH_ARGS[*]:-}"
# --also-durability everysec: the raw round trip and the lock cycle once more
# without an fsync per write, to show what the fsync costs (the server is set
# back to always afterwards).
set +e
"$BUILD_DIR/bench/simba_bench" --url "$SIMBA_TEST_REDIS_URL" --json "$JSON" \
  --also-durability everysec "${BENCH_ARGS[@]}" | tee "$TXT"
status=${PIPESTATUS[0]}
set -e
log "results: $JSON and $TXT"
exit "$status"
