#!/usr/bin/env bash
# Simba's benchmarks (docs/benchmarks.md): installs what is missing, builds a
# Release tree with -DSIMBA_BUILD_BENCH=ON, starts the throwaway servers of the
# test suite it needs (scripts/lib/servers.sh: a redis-server with AOF and
# appendfsync always, a PostgreSQL in a temp dir, a standalone ZooKeeper, a
# one-member etcd, each on a free port), runs bench/simba_bench against each
# backend asked for, and
# stops the servers whatever happened.
#
#   bash scripts/bench.sh                 Redis, PostgreSQL, then ZooKeeper (about
#                                         5 minutes)
#   bash scripts/bench.sh --backend zookeeper
#                                         one backend: redis | postgresql |
#                                         zookeeper | etcd | all
#   bash scripts/bench.sh -- --handovers 500 --lease-counts 1,1000
#                                         extra arguments go to every simba_bench
#                                         run (simba_bench --help lists them)
#
# Options: --backend B (default all), --build-dir DIR (default build-bench),
# --jobs N (default 2), --out DIR (default bench/results), --json FILE (with one
# backend only: its JSON there instead), --no-install, -h.
# Each backend writes DIR/<backend>-latest.json (redis-latest.json,
# postgres-latest.json, zookeeper-latest.json, etcd-latest.json) and the table, also on stdout,
# to its .txt sibling. The bindings' lock cycles against C's:
# scripts/bench-bindings.sh (it builds nothing; it uses this build's
# simba_cycle_bench).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

# shellcheck source=scripts/lib/packages.sh
source "$ROOT/scripts/lib/packages.sh"
# shellcheck source=scripts/lib/servers.sh
source "$ROOT/scripts/lib/servers.sh"

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; }

BUILD_DIR="build-bench"
JOBS=2
BACKEND=all
OUT="bench/results"
JSON=""
INSTALL=1
BENCH_ARGS=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --backend) [[ $# -ge 2 ]] || { echo "bench.sh: --backend needs redis|postgresql|zookeeper|etcd|all" >&2; exit 2; }
               BACKEND=$2; shift ;;
    --build-dir) [[ $# -ge 2 ]] || { echo "bench.sh: --build-dir needs a path" >&2; exit 2; }
                 BUILD_DIR=$2; shift ;;
    --jobs|-j) [[ $# -ge 2 ]] || { echo "bench.sh: --jobs needs a number" >&2; exit 2; }
               JOBS=$2; shift ;;
    --out) [[ $# -ge 2 ]] || { echo "bench.sh: --out needs a directory" >&2; exit 2; }
           OUT=$2; shift ;;
    --json) [[ $# -ge 2 ]] || { echo "bench.sh: --json needs a path" >&2; exit 2; }
            JSON=$2; shift ;;
    --no-install) INSTALL=0 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; BENCH_ARGS=("$@"); break ;;
    *) echo "bench.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
  shift
done

case "$BACKEND" in
  redis) BACKENDS=(redis) ;;
  postgresql|postgres) BACKENDS=(postgresql) ;;
  zookeeper) BACKENDS=(zookeeper) ;;
  etcd) BACKENDS=(etcd) ;;
  all) BACKENDS=(redis postgresql zookeeper) ;;
  *) echo "bench.sh: --backend: redis, postgresql, zookeeper, etcd or all, not '$BACKEND'" >&2; exit 2 ;;
esac
if [[ -n "$JSON" && ${#BACKENDS[@]} -ne 1 ]]; then
  echo "bench.sh: --json FILE needs one --backend (use --out DIR for all)" >&2
  exit 2
fi

log() { printf '\n==== %s\n' "$*"; }

[[ $INSTALL -eq 1 ]] || export SIMBA_NO_INSTALL=1
ensure_packages "${SIMBA_BENCH_PACKAGES[@]}"

WITH=() SERVERS=()
for b in "${BACKENDS[@]}"; do
  case "$b" in
    redis) WITH+=(-DSIMBA_WITH_REDIS=ON) SERVERS+=(redis) ;;
    postgresql) WITH+=(-DSIMBA_WITH_POSTGRES=ON) SERVERS+=(postgres) ;;
    zookeeper) WITH+=(-DSIMBA_WITH_ZOOKEEPER=ON) SERVERS+=(zookeeper) ;;
    etcd) WITH+=(-DSIMBA_WITH_ETCD=ON) SERVERS+=(etcd) ;;
  esac
done
log "configure $BUILD_DIR (Release, SIMBA_BUILD_BENCH=ON)"
cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DSIMBA_BUILD_BENCH=ON \
  -DSIMBA_BUILD_TESTS=OFF -DSIMBA_BUILD_EXAMPLES=OFF -DSIMBA_BUILD_TOOLS=OFF -DSIMBA_SANITIZE= \
  "${WITH[@]}" >/dev/null
log "build simba_bench and simba_cycle_bench (-j$JOBS)"
# simba_cycle_bench: the C figure of scripts/bench-bindings.sh.
cmake --build "$BUILD_DIR" -j "$JOBS" --target simba_bench simba_cycle_bench

# The servers: the test suite's (scripts/lib/servers.sh), with their files in a
# temp dir that stop_servers removes. Only their pids are stopped.
trap 'stop_servers' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
log "starting the throwaway servers: ${SERVERS[*]}"
start_servers "${SERVERS[@]}"

mkdir -p "$OUT"
status=0
for b in "${BACKENDS[@]}"; do
  case "$b" in
    redis)
      url=$SIMBA_TEST_REDIS_URL
      json=${JSON:-$OUT/redis-latest.json}
      # --also-durability everysec: the raw round trip and the lock cycle once
      # more without an fsync per write, to show what the fsync costs (the
      # server is set back to always afterwards).
      extra=(--also-durability everysec) ;;
    postgresql)
      url=$SIMBA_TEST_POSTGRES_URL
      json=${JSON:-$OUT/postgres-latest.json}
      # The test server runs with fsync=off on its command line (servers.sh),
      # which a reload cannot change: no durability variant here.
      extra=() ;;
    zookeeper)
      # The test URL without its chroot (/simba-test): the bench adds one of
      # the run's own (/simba-bench-<pid>).
      url=${SIMBA_TEST_ZOOKEEPER_URL%/*}
      json=${JSON:-$OUT/zookeeper-latest.json}
      # A ZooKeeper handover (release, watch event, acquire: two fsyncs) takes
      # longer than the default 15 ms cooldown: handovers 100 ms apart with an
      # 80 ms cooldown, so that the old leader does not take the lease straight
      # back. forceSync is in zoo.cfg: no durability variant here.
      extra=(--handover-gap-ms 100 --handover-cooldown-ms 80) ;;
    etcd)
      # The bench adds a prefix of the run's own (/simba-bench-<pid>). No
      # durability variant: etcd's fsync is only switched off at start.
      url=$SIMBA_TEST_ETCD_URL
      json=${JSON:-$OUT/etcd-latest.json}
      extra=() ;;
  esac
  mkdir -p "$(dirname "$json")"
  txt="${json%.json}.txt"
  log "$b: simba_bench --url $url ${extra[*]:-} ${BENCH_ARGS[*]:-}"
  set +e
  "$BUILD_DIR/bench/simba_bench" --url "$url" --json "$json" "${extra[@]}" "${BENCH_ARGS[@]}" |
    tee "$txt"
  rc=${PIPESTATUS[0]}
  set -e
  [[ $rc -eq 0 ]] || { echo "bench.sh: simba_bench failed on $b (exit $rc)" >&2; status=$rc; }
  log "$b results: $json and $txt"
done
exit "$status"
