#!/usr/bin/env bash
# Simba's benchmarks (docs/benchmarks.md): installs what is missing, builds a
# Release tree with -DSIMBA_BUILD_BENCH=ON, starts throwaway servers on free ports
# (the test suite's: redis-server with AOF and appendfsync always, as we
# recommend, and a standalone ZooKeeper), runs bench/simba_bench against each
# backend in turn, and stops the servers whatever happened.
#
#   bash scripts/bench.sh                 the whole bench (about 2-4 minutes)
#   bash scripts/bench.sh --backend zookeeper
#                                         one backend only (redis|zookeeper)
#   bash scripts/bench.sh -- --handovers 500 --lease-counts 1,1000
#                                         extra arguments go to simba_bench
#                                         (simba_bench --help lists them)
#
# Options: --backend NAME (repeatable; default every one), --build-dir DIR
# (default build-bench), --jobs N (default 2), --json FILE (with one backend;
# default bench/results/BACKEND-latest.json), --no-install, -h.
# Each table goes to stdout and to its JSON file's .txt sibling.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

SIMBA_APT_PACKAGES=(
  build-essential cmake pkg-config
  libuv1-dev libhiredis-dev
  redis-server redis-tools
  zookeeper libzookeeper-st-dev default-jre-headless
)

# shellcheck source=scripts/lib/packages.sh
source "$ROOT/scripts/lib/packages.sh"
# shellcheck source=scripts/lib/servers.sh
source "$ROOT/scripts/lib/servers.sh"

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; }

BUILD_DIR="build-bench"
JOBS=2
JSON=""
BACKENDS=()
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
    --backend) [[ $# -ge 2 ]] || { echo "bench.sh: --backend needs redis|zookeeper" >&2; exit 2; }
               case "$2" in redis|zookeeper) BACKENDS+=("$2") ;;
                 *) echo "bench.sh: unknown backend '$2'" >&2; exit 2 ;; esac
               shift ;;
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
log "starting throwaway servers (redis-server with appendfsync always, zookeeper)"
start_servers

[[ ${#BACKENDS[@]} -gt 0 ]] || BACKENDS=(redis zookeeper)
if [[ -n "$JSON" && ${#BACKENDS[@]} -gt 1 ]]; then
  echo "bench.sh: --json names one file: use it with one --backend" >&2
  exit 2
fi
status=0
for backend in "${BACKENDS[@]}"; do
  json=${JSON:-bench/results/$backend-latest.json}
  mkdir -p "$(dirname "$json")"
  txt="${json%.json}.txt"
  extra=()
  case "$backend" in
    # --also-durability everysec: the raw round trip and the lock cycle once more
    # without an fsync per write, to show what the fsync costs (the server is set
    # back to always afterwards).
    redis) url=$SIMBA_TEST_REDIS_URL; extra=(--also-durability everysec) ;;
    # A ZooKeeper handover (release, watch, acquire: two fsyncs) takes longer
    # than the default 15 ms cooldown here: space the handovers out so that the
    # old leader does not take the lease straight back.
    zookeeper) url=${SIMBA_TEST_ZOOKEEPER_URL%/*}
               extra=(--handover-gap-ms 100 --handover-cooldown-ms 80) ;;
  esac
  log "simba_bench --url $url ${extra[*]:-} ${BENCH_ARGS[*]:-}"
  set +e
  "$BUILD_DIR/bench/simba_bench" --url "$url" --json "$json" "${extra[@]}" "${BENCH_ARGS[@]}" |
    tee "$txt"
  rc=${PIPESTATUS[0]}
  set -e
  [[ $rc -eq 0 ]] || status=$rc
  log "results: $json and $txt"
done
exit "$status"
