# The harness of the shell tests (tests/cli/*.sh, tests/backends/tls_test.sh),
# sourced by each. A case is a function that calls `fail` for what it finds
# wrong; `run_case` runs it and counts it, `finish` prints the totals and exits
# with 0 when every case passed, 1 otherwise.

# Sanitizer builds run slower: scale the generous bounds (never what is proven).
SLOW=1
case "${SIMBA_SANITIZER:-}" in thread) SLOW=4 ;; address) SLOW=2 ;; esac

FAILED=0 PASSED=0 CASE="" CASE_FAILED=0
fail() { echo "    FAIL [$CASE]: $*"; CASE_FAILED=1; }
expect_eq() { [[ "$2" == "$3" ]] || fail "$1: expected '$3', got '$2'"; }
expect_match() { [[ "$2" =~ $3 ]] || fail "$1: '$2' does not match /$3/"; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# wait_for SECONDS COMMAND...: polls COMMAND every 50 ms for SECONDS x SLOW;
# the status of its last try.
wait_for() {
  local until=$(( $(now_ms) + $1 * 1000 * SLOW )); shift
  while (( $(now_ms) < until )); do "$@" && return 0; sleep 0.05; done
  "$@"
}

# run_case NAME [COMMAND ARGS...]: runs COMMAND (case_NAME when not given) as
# the case NAME, and prints its verdict and time.
run_case() {
  CASE=$1 CASE_FAILED=0
  local t0; t0=$(now_ms)
  if (($# > 1)); then "${@:2}"; else "case_$1"; fi
  if ((CASE_FAILED)); then
    FAILED=$((FAILED + 1)); echo "FAIL $1 ($(( $(now_ms) - t0 )) ms)"
  else
    PASSED=$((PASSED + 1)); echo "ok   $1 ($(( $(now_ms) - t0 )) ms)"
  fi
}

# run_every_case: every case_* function defined, in name order.
run_every_case() {
  local c
  for c in $(declare -F | sed -n 's/^declare -f case_//p'); do run_case "$c"; done
}

# finish [DETAIL]: the totals line (DETAIL in parentheses after it), then exits.
finish() {
  echo "$PASSED passed, $FAILED failed${1:+ ($1)}"
  ((FAILED == 0)) && exit 0
  exit 1
}

# start_own_redis DIR [ARGS...]: a redis-server of the test's own on a free
# port of 127.0.0.1, without persistence, logging to DIR/redis.log; sets
# REDIS_PORT and REDIS_PID, and fails when it does not answer PING within 10 s.
# Needs scripts/lib/servers.sh; the caller's EXIT trap stops it.
start_own_redis() {
  local dir=$1; shift
  REDIS_PORT=$(simba_free_port)
  redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
    --daemonize no "$@" >"$dir/redis.log" 2>&1 &
  REDIS_PID=$!
  simba_wait_until 10 "redis-server on $REDIS_PORT" simba_redis_pong "$REDIS_PORT"
}
