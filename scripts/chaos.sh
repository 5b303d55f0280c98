#!/usr/bin/env bash
# The chaos suite's long runs (tests/chaos, docs/testing.md, ADR 0020): builds
# the worker in its own tree, then runs the nemesis against BACKEND for MINUTES,
# in rounds of about one minute, each round a new seed on new servers (the
# nemesis starts and stops them itself, whatever happens), and prints one line
# per round and a total: fault windows run and violations found.
#
#   bash scripts/chaos.sh BACKEND MINUTES [-- extra nemesis.py arguments]
#   bash scripts/chaos.sh --windows N BACKEND [-- extra nemesis.py arguments]
#
# --windows N: a campaign: rounds until N fault windows have passed (graceful
# stops, which measure handovers, are not counted). Both forms run the
# campaign's faults (nemesis.py --campaign: every fault of the backend, the
# reply-only proxy hold, graceful stops) and write a summary to OUT (default
# BUILD/chaos-campaign/BACKEND-SEED): summary.txt and summary.json (windows by
# kind, violations, failover and handover p50/p99, the longest stretch without
# a leader, terms and sessions lost), terms.png (the first round's terms over
# time, faults shaded; needs gnuplot) and rounds/ (each round's result.json;
# the first round's and any failing round's logs too).
#
# BACKEND: redis | postgres | zookeeper | etcd (one server each, every fault),
# zookeeper3 (the 3-server ensemble: leader and follower kills),
# etcd3 (a 3-member etcd cluster, clients on etcd://h1:p1,h2:p2,h3:p3/… through
# one proxy per member: leader and follower kills, a member stopped or cut off),
# postgres_ha_sync (primary + synchronous standby: failovers),
# redis_sentinel (primary + replica under 3 Sentinels, clients on
# redis+sentinel:// with wait_replicas=1: failovers),
# postgres_ha_async (asynchronous standby), redis_replica (a replica promoted
# without WAIT) and redis_sentinel_no_wait (Sentinel without WAIT): the
# regression each causes, which must be flagged; or all (each of redis,
# postgres, zookeeper, zookeeper3, postgres_ha_sync, redis_sentinel, etcd and
# etcd3 for MINUTES).
# Options (environment): SIMBA_CHAOS_BUILD_DIR (default build-chaos),
# SIMBA_CHAOS_LEASE_MS (default 1000), SIMBA_CHAOS_SEED (first seed; default
# random), SIMBA_CHAOS_KEEP (a directory: every round's logs are kept under it),
# SIMBA_CHAOS_OUT (the summary's directory; with all, one per backend under it),
# SIMBA_CHAOS_JOBS (build parallelism, default 2).
# Exit status 1 when a round found a violation (the three regressions: when a
# round did NOT flag it); its logs are kept and named.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
WINDOWS=0 MINUTES=0
if [[ "${1:-}" == --windows ]]; then
  [[ $# -ge 3 ]] || { usage; exit 2; }
  WINDOWS=$2 BACKEND=$3
  shift 3
else
  [[ $# -ge 2 ]] || { usage; exit 2; }
  BACKEND=$1 MINUTES=$2
  shift 2
fi
[[ "${1:-}" == -- ]] && shift
BUILD=${SIMBA_CHAOS_BUILD_DIR:-build-chaos}
LEASE=${SIMBA_CHAOS_LEASE_MS:-1000}
SEED=${SIMBA_CHAOS_SEED:-$((RANDOM * 32768 + RANDOM))}
PY=python3
[[ -x /usr/bin/python3 ]] && PY=/usr/bin/python3  # not a wrapper: signals reach the interpreter

if [[ ! -x "$BUILD/tests/chaos/chaos_worker" ]]; then
  cmake -S "$ROOT" -B "$BUILD" -DSIMBA_BUILD_TESTS=ON -DSIMBA_BUILD_BINDINGS=OFF >/dev/null
fi
cmake --build "$BUILD" -j "${SIMBA_CHAOS_JOBS:-2}" --target chaos_worker chaos_slowclock >/dev/null

backends=("$BACKEND")
[[ "$BACKEND" == all ]] && backends=(redis postgres zookeeper zookeeper3 postgres_ha_sync redis_sentinel etcd etcd3)

status=0
total_windows=0 total_violations=0
for b in "${backends[@]}"; do
  extra=()
  [[ $b == postgres_ha_async || $b == redis_replica || $b == redis_sentinel_no_wait ]] &&
    extra=(--expect token_order --round-robin)  # round-robin: the failover comes first
  end=$((SECONDS + MINUTES * 60)) began=$SECONDS
  out=${SIMBA_CHAOS_OUT:-$BUILD/chaos-campaign}/$b-$SEED
  [[ -n "${SIMBA_CHAOS_OUT:-}" && ${#backends[@]} -eq 1 ]] && out=$SIMBA_CHAOS_OUT
  rm -rf "$out/rounds" && mkdir -p "$out/rounds"
  windows=0 violations=0 rounds=0 first=
  while if ((WINDOWS > 0)); then ((windows < WINDOWS)); else ((SECONDS < end)); fi; do
    if ((WINDOWS > 0)); then
      # about 4 leases a window (quiet time and the fault); rounds of at most a minute
      round=$(((WINDOWS - windows) * 4 * LEASE / 1000))
    else
      round=$((end - SECONDS))
    fi
    ((round <= 60)) || round=60
    ((round >= 10)) || round=10
    keep=$out/rounds/$SEED
    [[ -n "${SIMBA_CHAOS_KEEP:-}" ]] && keep=$SIMBA_CHAOS_KEEP/$b-$SEED
    line=$("$PY" tests/chaos/nemesis.py --backend "$b" --seconds "$round" --seed "$SEED" --campaign \
      --lease "$LEASE" --worker "$BUILD/tests/chaos/chaos_worker" --keep "$keep" "${extra[@]}" "$@" \
      2> >(grep -E '^(checker|nemesis: (logs|negative|SKIP|error))' >&2) | grep '^CHAOS ' || true)
    echo "chaos: $b round $((rounds + 1)) seed $SEED: ${line#CHAOS }"
    ok=1
    if [[ -z "$line" || "$line" != *'"ok": true'* ]]; then status=1 ok=0; fi
    if [[ -f "$keep/result.json" ]]; then
      if [[ "$keep" != "$out/rounds/$SEED" ]]; then
        mkdir -p "$out/rounds/$SEED" && cp "$keep/result.json" "$out/rounds/$SEED/"
      fi
      # the first round's logs stay for the picture, a failing round's for its replay
      if [[ -n "$first" && $ok -eq 1 && "$keep" == "$out/rounds/$SEED" ]]; then
        find "$keep" -mindepth 1 ! -name result.json -delete
      fi
      first=${first:-$keep}
    fi
    w=$(sed -n 's/.*"fault_windows": \([0-9]*\).*/\1/p' <<<"$line")
    v=$(sed -n 's/.*"violations": \([0-9]*\).*/\1/p' <<<"$line")
    windows=$((windows + ${w:-0})) violations=$((violations + ${v:-0}))
    rounds=$((rounds + 1)) SEED=$((SEED + 1))
    # a round that failed without a window (an error, a skip) must not loop forever
    if ((WINDOWS > 0 && ${w:-0} == 0 && ok == 0)); then
      echo "chaos: $b: a round failed without a fault window: stopping" >&2
      status=1
      break
    fi
  done
  elapsed=$((SECONDS - began))
  echo "chaos: $b: $rounds rounds, $windows fault windows, $violations violations, ${elapsed}s" \
    "($(awk -v w="$windows" -v s="$elapsed" 'BEGIN { printf "%.1f", s ? w * 60 / s : 0 }') windows/min)"
  results=("$out"/rounds/*/result.json)
  if [[ -f "${results[0]}" ]]; then
    SIMBA_CHAOS_TITLE="$b, lease ${LEASE} ms, ${elapsed} s" "$PY" tests/chaos/checker.py --summary "$out" \
      "${results[@]}" | sed "s/^/chaos: $b: /"
    if command -v gnuplot >/dev/null && [[ -n "$first" && -f "$first/nemesis.jsonl" ]]; then
      "$PY" tests/chaos/checker.py --plot "$first" "$out/terms.png" >/dev/null &&
        echo "chaos: $b: terms over time: $out/terms.png"
    else
      echo "chaos: $b: no picture (gnuplot not installed: apt-get install gnuplot-nox)"
    fi
    echo "chaos: $b: summary in $out"
  fi
  total_windows=$((total_windows + windows)) total_violations=$((total_violations + violations))
done
echo "chaos: total: $total_windows fault windows, $total_violations violations"
exit $status
