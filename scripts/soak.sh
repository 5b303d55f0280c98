#!/usr/bin/env bash
# Soak (issue 44, docs/testing.md "Soak and load"): one client holding N leases
# for M minutes on a throwaway server (scripts/lib/servers.sh). The client is
# tests/chaos/chaos_hold (the public ABI only), which samples itself every
# --sample seconds: RSS, open fds, CPU time, the keep-alive counters of
# simba_client_snapshot_json(), terms held and lost. Prints each sample, then
# the slope of RSS, fds and CPU use (least squares over the samples after the
# first fifth, the warm-up), keep-alives per renew interval (over the run, and
# the worst sample interval's difference from its expected count) and terms lost.
#
#   bash scripts/soak.sh BACKEND [--leases N] [--minutes M] [--lease MS] [--sample S]
#
# BACKEND: memory | redis | postgres | zookeeper. Defaults: 10000 leases, 60
# minutes, the library's lease (15 s; renew every 5 s), a sample every 10 s.
# Options: --build-dir DIR (default build-chaos), --hold PATH (a chaos_hold
# already built: nothing is built), --log FILE (the samples; default a temp
# file, removed). Environment: SIMBA_CHAOS_JOBS (build
# parallelism, default 2). Exit status 1 when a term was lost, a lease was not
# held at the end, the fds grew, or a sample interval's keep-alives differ
# from one per renew interval by more than 1.5.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
[[ $# -ge 1 && $1 != -* ]] || { usage; exit 2; }
BACKEND=$1
shift
LEASES=10000 MINUTES=60 LEASE='' SAMPLE=10 BUILD=build-chaos LOG='' HOLD=''
while [[ $# -gt 0 ]]; do
  case "$1" in
    --leases) LEASES=$2; shift ;;
    --minutes) MINUTES=$2; shift ;;
    --lease) LEASE=$2; shift ;;
    --sample) SAMPLE=$2; shift ;;
    --build-dir) BUILD=$2; shift ;;
    --log) LOG=$2; shift ;;
    --hold) HOLD=$2; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "soak.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
  shift
done

# shellcheck source=scripts/lib/servers.sh
source "$ROOT/scripts/lib/servers.sh"
if [[ -z $HOLD ]]; then
  [[ -x "$BUILD/tests/chaos/chaos_hold" ]] ||
    cmake -S "$ROOT" -B "$BUILD" -DSIMBA_BUILD_TESTS=ON -DSIMBA_BUILD_BINDINGS=OFF >/dev/null
  cmake --build "$BUILD" -j "${SIMBA_CHAOS_JOBS:-2}" --target chaos_hold >/dev/null
  HOLD=$BUILD/tests/chaos/chaos_hold
fi

pid=
tmp_log=
cleanup() {
  [[ -z $pid ]] || kill -TERM "$pid" 2>/dev/null || true
  [[ $BACKEND == memory ]] || stop_servers  # servers of our own only
  [[ -z $tmp_log ]] || rm -f "$tmp_log"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
[[ $LEASES -le 1000 ]] || export SIMBA_ZOOKEEPER_HEAP=${SIMBA_ZOOKEEPER_HEAP:-384m}
case "$BACKEND" in
  memory) URL=memory://soak ;;
  redis) start_servers redis; URL=$SIMBA_TEST_REDIS_URL ;;
  postgres) start_servers postgres; URL=$SIMBA_TEST_POSTGRES_URL ;;
  zookeeper) start_servers zookeeper; URL=$SIMBA_TEST_ZOOKEEPER_URL ;;
  *) echo "soak.sh: BACKEND: memory, redis, postgres or zookeeper" >&2; exit 2 ;;
esac
if [[ -z $LOG ]]; then
  tmp_log=$(mktemp "${TMPDIR:-/tmp}/simba-soak.XXXXXX")
  LOG=$tmp_log
fi
: >"$LOG"
args=(--url "$URL" --id soak --count "$LEASES" --prefix "soak-$$-" --sample "$SAMPLE" --log "$LOG")
[[ -z $LEASE ]] || args+=(--lease "$LEASE")
echo "soak: $BACKEND, $LEASES leases, $MINUTES min, a sample every $SAMPLE s, $(nproc) cpus," \
  "load $(cut -d' ' -f1-3 /proc/loadavg)"
"$HOLD" "${args[@]}" &
pid=$!
end=$((SECONDS + $(awk -v m="$MINUTES" 'BEGIN { printf "%d", m * 60 }')))
printf 'soak: %8s %9s %5s %8s %7s %6s %7s %5s\n' t_s rss_kb fds cpu_ms keepal ka_fail held lost
shown=0
while ((SECONDS < end)) && kill -0 "$pid" 2>/dev/null; do
  sleep 1
  n=$(grep -c ' stats ' "$LOG" || true)
  if ((n > shown)); then
    grep ' stats ' "$LOG" | sed -n "$((shown + 1)),${n}p" | awk -v t0="$(grep -m1 ' stats ' "$LOG" | cut -d' ' -f1)" \
      '{ printf "soak: %8.1f %9s %5s %8s %7s %6s %7s %5s\n", ($1 - t0) / 1e9, $4, $5, $6, $7, $8, $9, $11 }'
    shown=$n
  fi
done
kill -TERM "$pid" 2>/dev/null || true
rc=0
wait "$pid" || rc=$?
pid=
[[ $rc -eq 0 ]] || { echo "soak: chaos_hold exited $rc" >&2; exit 1; }

# The figures, from the stats lines: T stats PHASE RSS FDS CPU_MS KA KA_FAIL HELD ELECTED LOST RENEW_MS
grep ' stats ' "$LOG" | awk -v leases="$LEASES" '
  { t[NR] = $1 / 1e9; ph[NR] = $3; rss[NR] = $4; fd[NR] = $5; cpu[NR] = $6; ka[NR] = $7
    kaf[NR] = $8; held[NR] = $9; lost[NR] = $11; renew = $12 / 1000; n = NR }
  function slope(a, lo, hi,   i, sx, sy, sxx, sxy, m, x) {
    m = 0; sx = sy = sxx = sxy = 0
    for (i = lo; i <= hi; i++) { x = t[i] - t[lo]; sx += x; sy += a[i]; sxx += x * x; sxy += x * a[i]; m++ }
    return (m < 2 || m * sxx - sx * sx == 0) ? 0 : (m * sxy - sx * sy) / (m * sxx - sx * sx)
  }
  END {
    last = n; if (ph[last] == "end") last--   # the end line: the same instant as the last sample
    lo = 2 + int((last - 1) / 5); if (lo > last - 1) lo = 2   # after the warm-up (the first fifth)
    for (i = 2; i <= last; i++) use[i] = (cpu[i] - cpu[i - 1]) / 1000 / (t[i] - t[i - 1]) * 100
    use[1] = use[2]
    dur = t[last] - t[lo]
    printf "soak: %d samples over %.0f s, slopes over the last %.0f s (%d samples)\n", n, t[n] - t[1], dur, last - lo + 1
    printf "soak: RSS %d -> %d KB, slope %+.1f KB/hour\n", rss[lo], rss[last], slope(rss, lo, last) * 3600
    printf "soak: open fds %d -> %d, slope %+.2f /hour\n", fd[lo], fd[last], slope(fd, lo, last) * 3600
    for (i = lo; i <= last; i++) su += use[i]
    printf "soak: CPU %.2f %% of a core on average, slope %+.3f %%/hour\n", su / (last - lo + 1), slope(use, lo, last) * 3600
    worst = 0
    for (i = lo + 1; i <= last; i++) {
      d = (ka[i] - ka[i - 1]) - (t[i] - t[i - 1]) / renew; if (d < 0) d = -d; if (d > worst) worst = d
    }
    exp_ = (t[last] - t[lo]) / renew
    printf "soak: keep-alives: %d in %.0f s = %.3f per renew interval (%.0f ms); worst sample interval off by %.2f; %d failed\n",
      ka[last] - ka[lo], dur, (exp_ > 0 ? (ka[last] - ka[lo]) / exp_ : 0), renew * 1000, worst, kaf[n]
    printf "soak: terms held at the end %d of %d, lost %d\n", held[n], leases, lost[n]
    bad = lost[n] > 0 || held[n] != leases || fd[last] > fd[lo] || worst > 1.5
    printf "soak: %s\n", bad ? "FAILED" : "ok"
    exit bad
  }'
