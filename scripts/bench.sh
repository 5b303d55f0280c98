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
# backend only: its JSON there instead), --peer-rounds N (etcd), --no-install, -h.
# Each backend writes DIR/<backend>-latest.json (redis-latest.json,
# postgres-latest.json, zookeeper-latest.json, etcd-latest.json) and the table, also on stdout,
# to its .txt sibling. The bindings' lock cycles against C's:
# scripts/bench-bindings.sh (it builds nothing; it uses this build's
# simba_cycle_bench).
# With --backend etcd, and Go with Debian's golang-etcd-server-dev installed,
# also the side-by-side with etcd's own Go concurrency package (issue 38):
# bench/simba_lock_bench against bench/peers/etcd_concurrency (built in GOPATH
# mode, offline), --peer-rounds N rounds (default 3) alternating the two, into
# DIR/etcd-peer-latest.jsonl and its table in etcd-peer-latest.txt.
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
PEER_ROUNDS=3
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
    --peer-rounds) [[ $# -ge 2 ]] || { echo "bench.sh: --peer-rounds needs a number" >&2; exit 2; }
                   PEER_ROUNDS=$2; shift ;;
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
log "build simba_bench, simba_cycle_bench and simba_lock_bench (-j$JOBS)"
# simba_cycle_bench: the C figure of scripts/bench-bindings.sh; simba_lock_bench:
# Simba's side of the etcd side-by-side below.
cmake --build "$BUILD_DIR" -j "$JOBS" --target simba_bench simba_cycle_bench simba_lock_bench

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

# Simba against etcd's own Go concurrency package on the same server, rounds
# alternating which goes first (docs/benchmarks.md, "etcd": "Side by side").
# Not installed by this script (about 145 Go source packages): skipped with a
# note. Cases: the lock cycle; the handover with the waiter blocked 250 ms
# (settled) and 25 ms (simba_bench's gap) before the release; the crash
# failover with a 2 s lease (the peer's session TTL 2), with Simba's default
# renew interval (lease / 3) and with 1 s (the Go client's, at TTL 2).
etcd_peer_rounds() {
  local conc=/usr/share/gocode/src/go.etcd.io/etcd/clientv3/concurrency
  if ! command -v go >/dev/null || [[ ! -d $conc ]]; then
    log "etcd: the rows against etcd's Go concurrency package are skipped (needs Go and the package: apt-get install golang-go golang-etcd-server-dev)"
    return 0
  fi
  local peer="$BUILD_DIR/bench/etcd_concurrency_peer" side="$BUILD_DIR/bench/simba_lock_bench"
  log "build the peer in GOPATH mode, offline: $peer"
  GO111MODULE=off GOPATH=/usr/share/gocode GOFLAGS='' GOCACHE="$(cd "$BUILD_DIR" && pwd)/go-cache" \
    go build -o "$peer" ./bench/peers/etcd_concurrency
  local jsonl="$OUT/etcd-peer-latest.jsonl" ep=${SIMBA_TEST_ETCD_URL#etcd://}
  local url="$SIMBA_TEST_ETCD_URL/simba-peer-bench-$$"
  : >"$jsonl"
  log "etcd: $PEER_ROUNDS rounds of Simba and etcd's concurrency package (load: $(cat /proc/loadavg))"
  local r c args lib renew
  for ((r = 1; r <= PEER_ROUNDS; r++)); do
    for c in cycle handover handover-25ms failover failover-renew-1s; do
      renew=()
      case $c in
        cycle) args=(cycle --n 500 --warmup 100) ;;
        handover) args=(handover --n 30 --gap-ms 250) ;;
        handover-25ms) args=(handover --n 30 --gap-ms 25 --name handover25) ;;
        failover) args=(failover --n 5 --lease-ms 2000) ;;
        # Simba renewing every 1 s, as the Go client does at TTL 2.
        failover-renew-1s) args=(failover --n 5 --lease-ms 2000 --name failover1s)
                           renew=(--renew-ms 1000) ;;
      esac
      for lib in $( ((r % 2)) && echo "simba peer" || echo "peer simba"); do
        if [[ $lib == simba ]]; then
          "$side" "${args[@]}" "${renew[@]}" --url "$url"
        else
          "$peer" "${args[@]}" --endpoint "$ep"
        fi | sed "s/^{/{\"round\":$r,\"case\":\"$c\",/" | tee -a "$jsonl"
      done
    done
  done
  log "etcd: rounds done (load: $(cat /proc/loadavg))"
  local rtt
  rtt=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["raw"]["write"]["latency"]["p50_us"])' \
    "${JSON:-$OUT/etcd-latest.json}" 2>/dev/null || true)
  /usr/bin/python3 bench/peers/summarize.py "$jsonl" ${rtt:+--rtt-us "$rtt"} | tee "${jsonl%.jsonl}.txt"
}
for b in "${BACKENDS[@]}"; do
  if [[ $b == etcd ]]; then etcd_peer_rounds || status=1; fi
done
exit "$status"
