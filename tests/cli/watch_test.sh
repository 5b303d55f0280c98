#!/usr/bin/env bash
# `simba watch` end to end, on each real backend: another process's `simba run`
# takes and leaves a name, and the watch prints each change within one poll
# (a release at once: it is broadcast); a holder killed with -9 shows as free
# once its session expired; --json lines parse; --count and signals end it with 0.
# memory:// cannot be watched from another process: the shared servers of
# scripts/test.sh are used (SIMBA_TEST_REDIS_URL, SIMBA_TEST_POSTGRES_URL,
# SIMBA_TEST_ZOOKEEPER_URL, SIMBA_TEST_ETCD_URL), each backend skipped with a
# message while unset.
#
# Usage: watch_test.sh PATH/TO/simba
# Exit 0 when every case passed, 1 otherwise, 77 (skipped) when no server is set.
set -uo pipefail

SIMBA=${1:?usage: watch_test.sh PATH/TO/simba}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=../support/cases.sh
source "$ROOT/tests/support/cases.sh"
command -v python3 >/dev/null || { echo "SKIP: python3 not installed"; exit 77; }

BACKENDS=()
for b in REDIS POSTGRES ZOOKEEPER ETCD; do
  var=SIMBA_TEST_${b}_URL
  if [[ -n "${!var:-}" ]]; then
    BACKENDS+=("${!var}")
  else
    echo "SKIP ${b,,}: $var is not set (scripts/test.sh starts the servers)"
  fi
done
# The usage cases need no server, but a run with none at all says so.
((${#BACKENDS[@]} > 0)) || { echo "SKIP: no test server set"; exit 77; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/simba-watch-test.XXXXXX")
cleanup() {
  jobs -p | xargs -r kill -KILL 2>/dev/null
  wait 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

unset SIMBA_BACKEND
# Short leases keep the suite fast: 2 s lease, a keep-alive every 500 ms.
export SIMBA_SESSION_LEASE_DURATION=2000ms SIMBA_SESSION_RENEW_INTERVAL=500ms
LEASE_MS=2000
POLL_MS=300

lines_at_least() { [[ -f "$1" ]] && (( $(wc -l <"$1") >= $2 )); }
gone() { ! kill -0 "$1" 2>/dev/null; }
# Epoch ms of the first log line of FILE matching REGEX (the line's timestamp).
log_ms() {
  local line; line=$(grep -m1 -E "$2" "$1") || return 1
  date -d "${line%% *}" +%s%3N
}
# The watch's JSON lines as "initial holder holder_client token at_ms", one a
# line ("-" for null); fails (and says why) if a line is not the JSON expected.
json_fields() {
  python3 - "$1" <<'PY'
import json, sys
for n, line in enumerate(open(sys.argv[1]), 1):
    o = json.loads(line)
    assert set(o) == {"name", "holder", "holder_client", "token", "at_ms", "initial"}, o
    assert isinstance(o["name"], str) and isinstance(o["token"], int), o
    assert isinstance(o["at_ms"], int) and isinstance(o["initial"], bool), o
    assert o["holder"] is None or isinstance(o["holder"], str), o
    assert o["holder_client"] is None or isinstance(o["holder_client"], str), o
    print(o["name"], str(o["initial"]).lower(), o["holder"] or "-", o["holder_client"] or "-",
          o["token"], o["at_ms"])
PY
}

# --- cases -----------------------------------------------------------------------

case_usage_errors() {
  local url=$1 out rc
  out=$("$SIMBA" watch --help); rc=$?
  expect_eq "help exit" $rc 0
  expect_match "help" "$out" "^usage: simba watch NAME"
  "$SIMBA" -q watch --backend "$url" 2>>"$WORK/usage-err"; expect_eq "no name" $? 125
  "$SIMBA" -q watch --backend "$url" a a 2>>"$WORK/usage-err"; expect_eq "a name twice" $? 125
  "$SIMBA" -q watch --backend "$url" --poll 5ms a 2>>"$WORK/usage-err"; expect_eq "poll below 10ms" $? 125
  "$SIMBA" -q watch --backend "$url" --poll soon a 2>>"$WORK/usage-err"; expect_eq "bad poll" $? 125
  "$SIMBA" -q watch --backend "$url" --count 0 a 2>>"$WORK/usage-err"; expect_eq "count 0" $? 125
  "$SIMBA" -q watch --backend "$url" --count x a 2>>"$WORK/usage-err"; expect_eq "bad count" $? 125
  "$SIMBA" -q watch --backend "$url" --frobnicate a 2>>"$WORK/usage-err"; expect_eq "unknown option" $? 125
  "$SIMBA" watch --backend "$url" 'bad name!' 2>"$WORK/err"; rc=$?
  expect_eq "bad lease name" $rc 125
  expect_match "bad name message" "$(cat "$WORK/err")" "error cannot watch bad name!: "
  "$SIMBA" -q watch a 2>>"$WORK/usage-err"; expect_eq "no backend" $? 125
  local msgs; msgs=$(cat "$WORK/usage-err")
  local m
  for m in "no lease name" '"a" given twice' "at least 10ms" "positive whole number" \
           "unknown option --frobnicate" "no backend"; do
    [[ "$msgs" == *"$m"* ]] || fail "no message \"$m\" in: $msgs"
  done
}

# The watch prints the state at start, then the take (within one poll of the
# run's "leading" line) and the release (within one poll of the command's exit),
# and exits 0 on its own after --count 2 changes.
case_take_and_release_within_one_poll() {
  local url=$1 n="watch.take.$RANDOM$RANDOM" rc
  "$SIMBA" -q watch --backend "$url" --poll ${POLL_MS}ms --json --count 2 "$n" \
    >"$WORK/take.json" 2>"$WORK/take.err" &
  local w=$!
  wait_for 5 lines_at_least "$WORK/take.json" 1 || { fail "no line at start"; return; }
  "$SIMBA" --backend "$url" --client-name taker run --once "$n" -- sleep 1 2>"$WORK/take-run.err"
  expect_eq "run exit" $? 0
  wait_for 3 gone "$w" || fail "watch --count 2 still running after the release"
  wait "$w"; rc=$?
  expect_eq "watch exit after --count" $rc 0
  ! grep -q -E '\] error ' "$WORK/take.err" || fail "watch logged an error: $(cat "$WORK/take.err")"
  local fields; fields=$(json_fields "$WORK/take.json") || { fail "a line is not the JSON expected: $(cat "$WORK/take.json")"; return; }
  expect_eq "three lines" "$(wc -l <<<"$fields")" 3
  local initial taken freed
  { read -r -a initial; read -r -a taken; read -r -a freed; } <<<"$fields"
  expect_eq "line 1 name" "${initial[0]}" "$n"
  expect_eq "line 1 initial" "${initial[1]}" true
  expect_eq "line 1 free" "${initial[2]}/${initial[3]}/${initial[4]}" "-/-/0"
  expect_eq "line 2 is a change" "${taken[1]}" false
  expect_match "line 2 holder" "${taken[2]}" '^[0-9a-zA-Z_-]{8,}$'
  expect_eq "line 2 client" "${taken[3]}" taker
  local token; token=$(sed -n -E 's/.*leading [^ ]+ with token ([0-9]+) .*/\1/p' "$WORK/take-run.err")
  expect_eq "line 2 token = the run's" "${taken[4]}" "$token"
  expect_eq "line 3 free" "${freed[1]}/${freed[2]}/${freed[3]}" "false/-/-"
  expect_eq "line 3 keeps the last token" "${freed[4]}" "$token"
  local led exited bound=$(( POLL_MS + 400 * SLOW ))
  led=$(log_ms "$WORK/take-run.err" " leading $n with token") || { fail "no leading line"; return; }
  exited=$(log_ms "$WORK/take-run.err" " sleep exited with status") || { fail "no exit line"; return; }
  (( taken[5] - led <= bound )) || fail "the take showed $(( taken[5] - led )) ms after the run led (poll ${POLL_MS} ms)"
  (( freed[5] - exited <= bound )) || fail "the release showed $(( freed[5] - exited )) ms after the command exited (poll ${POLL_MS} ms)"
  (( freed[5] >= exited - 50 )) || fail "free shown before the command exited"
}

# No release: a holder killed with -9 leaves the name to its session's expiry,
# which the watch sees by polling; a new holder then shows with a larger token.
# Human lines; SIGTERM ends the watch with 0.
case_expiry_and_takeover_by_polling() {
  local url=$1 n="watch.expiry.$RANDOM$RANDOM" rc
  "$SIMBA" -q watch --backend "$url" --poll ${POLL_MS}ms "$n" >"$WORK/exp.txt" 2>"$WORK/exp.err" &
  local w=$!
  wait_for 5 lines_at_least "$WORK/exp.txt" 1 || { fail "no line at start"; return; }
  "$SIMBA" -q --backend "$url" --client-name doomed run "$n" -- sleep 30 &
  local a=$!
  wait_for 5 lines_at_least "$WORK/exp.txt" 2 || { fail "the take never showed"; kill -KILL "$a"; return; }
  local t0; t0=$(now_ms)
  kill -KILL "$a"; wait "$a" 2>/dev/null
  wait_for 6 lines_at_least "$WORK/exp.txt" 3 || fail "the expiry never showed"
  local took=$(( $(now_ms) - t0 ))
  ((took <= LEASE_MS + POLL_MS + 1000 * SLOW)) || fail "the expiry showed after ${took} ms (lease ${LEASE_MS} ms)"
  "$SIMBA" -q --backend "$url" --client-name heir run --once "$n" -- sleep 1
  wait_for 3 lines_at_least "$WORK/exp.txt" 5 || fail "the next term did not show"
  kill -TERM "$w"; wait "$w"; rc=$?
  expect_eq "watch exit on SIGTERM" $rc 0
  local -a l; mapfile -t l <"$WORK/exp.txt"
  local ts='^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z '
  expect_match "start" "${l[0]:-}" "${ts}$n free token 0$"
  expect_match "taken" "${l[1]:-}" "${ts}$n doomed \\(session [^ ]+\\) token ([0-9]+)$"
  local t1=${BASH_REMATCH[1]:-0}
  expect_match "expired" "${l[2]:-}" "${ts}$n free token $t1$"
  expect_match "heir" "${l[3]:-}" "${ts}$n heir \\(session [^ ]+\\) token ([0-9]+)$"
  (( ${BASH_REMATCH[1]:-0} > t1 )) || fail "the heir's token is not above $t1"
  expect_match "released" "${l[4]:-}" "${ts}$n free token "
}

# Several names in one watch; SIGINT ends it with 0 and closes its session.
case_two_names_and_sigint() {
  local url=$1 a="watch.two.a.$RANDOM" b="watch.two.b.$RANDOM" rc
  "$SIMBA" -q watch --backend "$url" --json --client-name two-watcher "$a" "$b" \
    >"$WORK/two.json" 2>"$WORK/two.err" &
  local w=$!
  wait_for 5 lines_at_least "$WORK/two.json" 2 || { fail "no lines at start"; return; }
  "$SIMBA" -q --backend "$url" --client-name b-holder run --once "$b" -- sleep 1
  wait_for 3 lines_at_least "$WORK/two.json" 4 || fail "the changes of $b did not show"
  kill -INT "$w"; wait "$w"; rc=$?
  expect_eq "watch exit on SIGINT" $rc 0
  local fields; fields=$(json_fields "$WORK/two.json") || { fail "bad JSON: $(cat "$WORK/two.json")"; return; }
  expect_eq "both names at start" "$(awk '$2 == "true" { print $1 }' <<<"$fields" | sort | tr '\n' ' ')" \
    "$(printf '%s\n' "$a" "$b" | sort | tr '\n' ' ')"
  expect_eq "only $b changed" "$(awk '$2 == "false" { print $1 "/" $4 }' <<<"$fields" | tr '\n' ' ')" \
    "$b/b-holder $b/- "
  # The watch's own session is gone once it exited (closed, not left to expire).
  local status; status=$("$SIMBA" -q --backend "$url" status --json "$a")
  [[ "$status" != *two-watcher* ]] || fail "the watch's session outlived it: $status"
}

run_case usage_errors case_usage_errors "${BACKENDS[0]}"
for url in "${BACKENDS[@]}"; do
  scheme=${url%%://*}
  for c in take_and_release_within_one_poll expiry_and_takeover_by_polling two_names_and_sigint; do
    run_case "$scheme.$c" "case_$c" "$url"
  done
done
finish
