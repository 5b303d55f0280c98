#!/usr/bin/env bash
# The chaos suite's long runs (tests/chaos, docs/testing.md, ADR 0020): builds
# the worker in its own tree, then runs the nemesis against BACKEND for MINUTES,
# in rounds of about one minute, each round a new seed on new servers (the
# nemesis starts and stops them itself, whatever happens), and prints one line
# per round and a total: fault windows run and violations found.
#
#   bash scripts/chaos.sh BACKEND MINUTES [-- extra nemesis.py arguments]
#
# BACKEND: redis | postgres | zookeeper (one server each, every fault),
# zookeeper3 (the 3-server ensemble: leader and follower kills),
# postgres_ha_sync (primary + synchronous standby: failovers),
# redis_sentinel (primary + replica under 3 Sentinels, clients on
# redis+sentinel:// with wait_replicas=1: failovers),
# postgres_ha_async (asynchronous standby), redis_replica (a replica promoted
# without WAIT) and redis_sentinel_no_wait (Sentinel without WAIT): the
# regression each causes, which must be flagged; or all (each of redis,
# postgres, zookeeper, zookeeper3, postgres_ha_sync and redis_sentinel for MINUTES).
# Options (environment): SIMBA_CHAOS_BUILD_DIR (default build-chaos),
# SIMBA_CHAOS_LEASE_MS (default 1000), SIMBA_CHAOS_SEED (first seed; default
# random), SIMBA_CHAOS_KEEP (a directory: every round's logs are kept under it).
# Exit status 1 when a round found a violation (the three regressions: when a
# round did NOT flag it); its logs are kept and named.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
[[ $# -ge 2 ]] || { sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
BACKEND=$1 MINUTES=$2
shift 2
[[ "${1:-}" == -- ]] && shift
BUILD=${SIMBA_CHAOS_BUILD_DIR:-build-chaos}
LEASE=${SIMBA_CHAOS_LEASE_MS:-1000}
SEED=${SIMBA_CHAOS_SEED:-$((RANDOM * 32768 + RANDOM))}
PY=python3
[[ -x /usr/bin/python3 ]] && PY=/usr/bin/python3  # not a wrapper: signals reach the interpreter

if [[ ! -x "$BUILD/tests/chaos/chaos_worker" ]]; then
  cmake -S "$ROOT" -B "$BUILD" -DSIMBA_BUILD_TESTS=ON -DSIMBA_BUILD_BINDINGS=OFF >/dev/null
fi
cmake --build "$BUILD" -j 2 --target chaos_worker chaos_slowclock >/dev/null

backends=("$BACKEND")
[[ "$BACKEND" == all ]] && backends=(redis postgres zookeeper zookeeper3 postgres_ha_sync redis_sentinel)

status=0
total_windows=0 total_violations=0
for b in "${backends[@]}"; do
  extra=()
  [[ $b == postgres_ha_async || $b == redis_replica || $b == redis_sentinel_no_wait ]] &&
    extra=(--expect token_order)
  end=$((SECONDS + MINUTES * 60))
  windows=0 violations=0 rounds=0
  while ((SECONDS < end)); do
    left=$((end - SECONDS))
    round=$((left < 60 ? left : 60))
    ((round >= 10)) || round=10
    keep=()
    [[ -n "${SIMBA_CHAOS_KEEP:-}" ]] && keep=(--keep "$SIMBA_CHAOS_KEEP/$b-$SEED")
    line=$("$PY" tests/chaos/nemesis.py --backend "$b" --seconds "$round" --seed "$SEED" \
      --lease "$LEASE" --worker "$BUILD/tests/chaos/chaos_worker" "${keep[@]}" "${extra[@]}" "$@" \
      2> >(grep -E '^(checker|nemesis: (logs|negative|SKIP|error))' >&2) | grep '^CHAOS ' || true)
    echo "chaos: $b round $((rounds + 1)) seed $SEED: ${line#CHAOS }"
    if [[ -z "$line" || "$line" != *'"ok": true'* ]]; then status=1; fi
    w=$(sed -n 's/.*"fault_windows": \([0-9]*\).*/\1/p' <<<"$line")
    v=$(sed -n 's/.*"violations": \([0-9]*\).*/\1/p' <<<"$line")
    windows=$((windows + ${w:-0})) violations=$((violations + ${v:-0}))
    rounds=$((rounds + 1)) SEED=$((SEED + 1))
  done
  echo "chaos: $b: $rounds rounds, $windows fault windows, $violations violations"
  total_windows=$((total_windows + windows)) total_violations=$((total_violations + violations))
done
echo "chaos: total: $total_windows fault windows, $total_violations violations"
exit $status
