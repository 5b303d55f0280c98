#!/usr/bin/env bash
# What redis+sentinel:// and wait_replicas=1 cost (docs/benchmarks.md, "Redis
# Sentinel"): installs what is missing, builds bench/simba_sentinel_bench in a
# Release tree, starts a Redis primary + replica (AOF, appendfsync always)
# under three Sentinels (scripts/lib/servers.sh), runs the bench, and stops
# the servers whatever happened.
#
#   bash scripts/bench_sentinel.sh [--cycles N] [--build-dir DIR] [--no-install]
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# shellcheck source=scripts/lib/packages.sh
source "$ROOT/scripts/lib/packages.sh"
# shellcheck source=scripts/lib/servers.sh
source "$ROOT/scripts/lib/servers.sh"

BUILD_DIR=build-bench CYCLES=1000
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cycles) CYCLES=${2:?--cycles needs a number}; shift ;;
    --build-dir) BUILD_DIR=${2:?--build-dir needs a path}; shift ;;
    --no-install) export SIMBA_NO_INSTALL=1 ;;
    -h|--help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_sentinel.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done

ensure_packages "${SIMBA_BENCH_PACKAGES[@]}"
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DSIMBA_BUILD_BENCH=ON \
  -DSIMBA_BUILD_TESTS=OFF -DSIMBA_BUILD_BINDINGS=OFF >/dev/null
cmake --build "$BUILD_DIR" -j 2 --target simba_sentinel_bench >/dev/null
trap stop_servers EXIT
start_servers sentinel
"$BUILD_DIR/bench/simba_sentinel_bench" --primary-port "$SIMBA_TEST_REDIS_SENTINEL_PRIMARY_PORT" \
  --sentinel-url "${SIMBA_TEST_REDIS_SENTINEL_URL%%\?*}" --cycles "$CYCLES"
