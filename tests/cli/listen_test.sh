#!/usr/bin/env bash
# `simba run --listen` end to end, with curl, against a redis-server of this
# test's own (one case SIGSTOPs it): /healthz, /leader on a leader and a follower
# and across a handover, /metrics between two scrapes, and requests that are
# wrong, too big, garbage or never finished, after which the server still answers.
#
# Usage: listen_test.sh PATH/TO/simba
# SIMBA_CLI_HAVE_MICROHTTPD=0 (set by tests/CMakeLists.txt when libmicrohttpd was
# not found) checks only the "built without libmicrohttpd" answer.
# Exit 0 when every case passed, 1 otherwise, 77 (skipped) without redis-server or curl.
set -uo pipefail

SIMBA=${1:?usage: listen_test.sh PATH/TO/simba}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=../../scripts/lib/servers.sh
source "$ROOT/scripts/lib/servers.sh"
# shellcheck source=../support/cases.sh
source "$ROOT/tests/support/cases.sh"

if [[ "${SIMBA_CLI_HAVE_MICROHTTPD:-1}" == 0 ]]; then
  "$SIMBA" run --backend memory://x --listen 127.0.0.1:0 --once x -- true 2>/tmp/simba-listen-$$.err
  rc=$? err=$(cat /tmp/simba-listen-$$.err); rm -f /tmp/simba-listen-$$.err
  if [[ $rc == 125 && "$err" == *"built without libmicrohttpd"* ]]; then
    echo "ok   built_without_libmicrohttpd"
    echo "SKIP: the rest needs libmicrohttpd (apt-get install libmicrohttpd-dev, then rebuild)"
    echo "1 passed, 0 failed"
    exit 0
  fi
  echo "FAIL built_without_libmicrohttpd: exit $rc, stderr: $err"
  echo "0 passed, 1 failed"
  exit 1
fi
command -v redis-server >/dev/null || { echo "SKIP: redis-server not installed"; exit 77; }
command -v curl >/dev/null || { echo "SKIP: curl not installed"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 not installed"; exit 77; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/simba-listen-test.XXXXXX")
cleanup() {
  kill -CONT "$REDIS_PID" 2>/dev/null
  kill "$REDIS_PID" 2>/dev/null
  jobs -p | grep -v -x "$REDIS_PID" | xargs -r kill -KILL 2>/dev/null
  wait 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
start_own_redis "$WORK" || exit 1
PORT=$REDIS_PORT

export SIMBA_BACKEND="redis://127.0.0.1:$PORT"
export SIMBA_SESSION_LEASE_DURATION=2000ms SIMBA_SESSION_RENEW_INTERVAL=500ms
LEASE_MS=2000

name() { echo "listen.$CASE.$RANDOM"; }

# start_run VAR CLIENT NAME [ARGS...]: `simba run --listen 127.0.0.1:0 NAME -- sleep 60`
# in the background; VAR gets its pid, VAR_PORT the port it printed.
start_run() {
  local var=$1 client=$2 lease=$3; shift 3
  "$SIMBA" --client-name "$client" run --listen 127.0.0.1:0 "$@" "$lease" -- sleep 60 \
    2>"$WORK/$client.err" &
  local pid=$!
  printf -v "$var" %s "$pid"
  local port=""
  wait_for 5 grep -q "listening on 127.0.0.1:" "$WORK/$client.err" &&
    port=$(sed -n -E 's/.* listening on 127\.0\.0\.1:([0-9]+) .*/\1/p' "$WORK/$client.err")
  printf -v "${var}_PORT" %s "$port"
  [[ -n "$port" ]] || fail "$client printed no port: $(cat "$WORK/$client.err")"
}
# http PORT PATH [CURL ARGS...]: prints "CODE BODY"; the headers go to $WORK/headers.
http() {
  local port=$1 path=$2; shift 2
  curl -s -m 5 -D "$WORK/headers" -o "$WORK/body" -w '%{http_code}' "$@" \
    "http://127.0.0.1:$port$path"
  printf ' %s' "$(cat "$WORK/body" 2>/dev/null)"
}
code_is() { [[ "$(http "$1" "$2")" == "$3 "* ]]; }
# json_get JSON KEY: the member as Python prints it (None, True, 7, text).
json_get() { python3 -c 'import json, sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
# A metric's value in the text exposition: metric NAME < text.
metric() { awk -v m="$1" '$1 == m || index($1, m "{") == 1 { print $2; exit }'; }

# --- cases -----------------------------------------------------------------------

case_listen_errors() {
  local busy rc
  "$SIMBA" -q run --listen nonsense x -- true 2>"$WORK/err"; rc=$?
  expect_eq "bad address" $rc 125
  expect_match "bad address message" "$(cat "$WORK/err")" "expected HOST:PORT"
  "$SIMBA" -q run --listen 127.0.0.1:99999 x -- true 2>/dev/null; expect_eq "port > 65535" $? 125
  "$SIMBA" -q run --listen x -- true 2>/dev/null; expect_eq "no name after --listen ADDR" $? 125
  busy=$(simba_free_port)
  python3 -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(); time.sleep(10)' "$busy" &
  local holder=$!
  wait_for 3 eval "ss -ltn | grep -q ':$busy '" || fail "the test's own listener did not start"
  "$SIMBA" -q run --listen "127.0.0.1:$busy" "$(name)" -- true 2>"$WORK/err"; rc=$?
  kill "$holder"; wait "$holder" 2>/dev/null
  expect_eq "port in use" $rc 125
  expect_match "port in use message" "$(cat "$WORK/err")" "--listen 127.0.0.1:$busy: Address already in use"
  expect_match "help" "$("$SIMBA" run --help)" "--listen ADDR"
}

# The leader answers /leader 200 with its token, the follower 503 naming the
# leader; when the leader stops, the follower's /leader turns 200 with a larger
# token and /healthz stays 200 on it throughout.
case_leader_and_follower_switch() {
  local n out; n=$(name)
  start_run A first "$n"
  wait_for 5 code_is "$A_PORT" /leader 200 || fail "first never answered /leader 200"
  start_run B second "$n"
  wait_for 5 code_is "$B_PORT" /healthz 200 || fail "second's /healthz never 200"
  out=$(http "$A_PORT" /leader)
  expect_match "leader answer" "$out" '^200 \{"leader":true,'
  local body=${out#* } token
  expect_eq "leader name" "$(json_get "$body" name)" "$n"
  expect_eq "leader client" "$(json_get "$body" holder_client)" first
  token=$(json_get "$body" token)
  local remaining; remaining=$(json_get "$body" remaining_ms)
  ((remaining > 0 && remaining <= LEASE_MS)) || fail "remaining_ms $remaining not in (0, $LEASE_MS]"
  expect_match "content type" "$(cat "$WORK/headers")" $'Content-Type: application/json\r'
  # The follower names the leader once its observer read it (within a poll).
  wait_for 3 eval '[[ "$(http "$B_PORT" /leader)" == *"\"holder_client\":\"first\""* ]]' ||
    fail "the follower does not name the leader: $(http "$B_PORT" /leader)"
  out=$(http "$B_PORT" /leader); body=${out#* }
  expect_match "follower answer" "$out" '^503 \{"leader":false,'
  expect_eq "follower sees the leader's token" "$(json_get "$body" token)" "$token"
  local t0; t0=$(now_ms)
  kill -TERM "$A"; wait "$A"; expect_eq "first's exit" $? 143
  wait_for 5 code_is "$B_PORT" /leader 200 || fail "the follower never took over"
  local took=$(( $(now_ms) - t0 ))
  ((took <= 1500 * SLOW)) || fail "took over ${took} ms after the leader stopped (it releases)"
  out=$(http "$B_PORT" /leader); body=${out#* }
  (( $(json_get "$body" token) > token )) || fail "the new term's token is not above $token"
  expect_eq "new leader's client" "$(json_get "$body" holder_client)" second
  expect_match "healthz on the new leader" "$(http "$B_PORT" /healthz)" '^200 \{"healthy":true,"session":"LIVE"'
  kill -TERM "$B"; wait "$B"; expect_eq "second's exit" $? 143
  # Gone with its process: nothing listens there any more.
  ! curl -s -m 2 -o /dev/null "http://127.0.0.1:$B_PORT/healthz" || fail "still answering after exit"
}

# /metrics: the text exposition, with # TYPE lines, and a keep-alive counter
# that rises between two scrapes (a keep-alive every 500 ms).
case_metrics_rise_between_scrapes() {
  local n out first second; n=$(name)
  start_run M metrics "$n"
  wait_for 5 code_is "$M_PORT" /leader 200 || fail "never led"
  out=$(http "$M_PORT" /metrics)
  expect_match "status" "$out" '^200 '
  expect_match "content type" "$(cat "$WORK/headers")" $'Content-Type: text/plain; version=0.0.4'
  expect_match "TYPE line" "$out" $'\n# TYPE simba_keep_alives_total counter\n'
  expect_match "HELP line" "$out" $'# HELP simba_keep_alives_total '
  expect_match "client label" "$out" $'\nsimba_keep_alives_total\\{client="metrics"\\} [0-9]+'
  first=$(metric simba_keep_alives_total <"$WORK/body")
  local types; types=$(grep -c '^# TYPE simba_' "$WORK/body")
  ((types >= 5)) || fail "only $types # TYPE lines"
  grep -q -E '^# TYPE simba_[a-z_]+ histogram$' "$WORK/body" || fail "no histogram"
  sleep 1.2
  http "$M_PORT" /metrics >/dev/null
  second=$(metric simba_keep_alives_total <"$WORK/body")
  [[ -n "$first" && -n "$second" ]] && ((second > first)) ||
    fail "simba_keep_alives_total did not rise: '$first' then '$second'"
  kill -TERM "$M"; wait "$M"
}

# Wrong paths and methods, a 100 KB header, a garbage request line, a request
# never finished and an idle connection: each answered or dropped by
# libmicrohttpd, and the server answers the next request at once.
case_bad_requests_do_no_harm() {
  local n out; n=$(name)
  start_run H bad "$n"
  wait_for 5 code_is "$H_PORT" /healthz 200 || fail "never healthy"
  expect_match "404" "$(http "$H_PORT" /nope)" '^404 \{"error":'
  expect_match "404 for a prefix" "$(http "$H_PORT" /leader/x)" '^404 '
  expect_match "405" "$(http "$H_PORT" /leader -X POST -d x=1)" '^405 '
  expect_match "Allow" "$(cat "$WORK/headers")" $'Allow: GET, HEAD\r'
  expect_match "405 DELETE" "$(http "$H_PORT" /metrics -X DELETE)" '^405 '
  expect_match "HEAD" "$(curl -s -m 5 -o /dev/null -w '%{http_code}' -I "http://127.0.0.1:$H_PORT/healthz")" '^200$'
  expect_match "query ignored" "$(http "$H_PORT" '/healthz?verbose=1')" '^200 '
  local big; big=$(head -c 100000 /dev/zero | tr '\0' a)
  out=$(http "$H_PORT" /healthz -H "X-Big: $big")
  expect_match "100 KB header refused" "$out" '^4[0-9][0-9] '
  expect_match "answers after the big header" "$(http "$H_PORT" /healthz)" '^200 '
  # A garbage request line, on a raw connection.
  local reply=""
  if exec 3<>"/dev/tcp/127.0.0.1/$H_PORT"; then
    printf 'GARBAGE \x01\x02\x7f %%%% nonsense\r\n\r\n' >&3
    reply=$(timeout 5 head -c 200 <&3)
    exec 3<&- 3>&-
  fi
  expect_match "garbage answered 400" "$reply" '^HTTP/1\.[01] 400'
  expect_match "answers after garbage" "$(http "$H_PORT" /healthz)" '^200 '
  # A client that stalls mid-request, and one that never sends: neither stalls others.
  exec 4<>"/dev/tcp/127.0.0.1/$H_PORT" 5<>"/dev/tcp/127.0.0.1/$H_PORT"
  printf 'GET /leader HTTP/1.1\r\nHost: x\r\n' >&4
  local t0; t0=$(now_ms)
  expect_match "answers beside stalled clients" "$(http "$H_PORT" /leader)" '^200 '
  (( $(now_ms) - t0 < 1000 * SLOW )) || fail "a request beside stalled clients took $(( $(now_ms) - t0 )) ms"
  (for _ in $(seq 40); do curl -s -m 3 -o /dev/null "http://127.0.0.1:$H_PORT/leader" & done; wait)
  expect_match "answers after 40 at once" "$(http "$H_PORT" /healthz)" '^200 '
  # It stops at once even with stalled clients connected.
  t0=$(now_ms)
  kill -TERM "$H"; wait "$H"; expect_eq "exit" $? 143
  (( $(now_ms) - t0 < 3000 * SLOW )) || fail "stopping took $(( $(now_ms) - t0 )) ms with stalled clients"
  exec 4<&- 4>&- 5<&- 5>&-
}

# /healthz turns 503 with a reason when the backend stops answering (the
# keep-alives fail: SUSPENDED), and 200 again when it answers; /leader turns
# 503 once the term can no longer be valid.
case_healthz_follows_the_session() {
  local n out; n=$(name)
  start_run S health "$n"
  wait_for 5 code_is "$S_PORT" /leader 200 || fail "never led"
  out=$(http "$S_PORT" /healthz)
  expect_match "healthy" "$out" '^200 \{"healthy":true,"session":"LIVE","loop_answered_ms_ago":[0-9]+\}'
  kill -STOP "$REDIS_PID"
  wait_for 4 code_is "$S_PORT" /healthz 503 || fail "/healthz still 200 with the backend stopped"
  out=$(http "$S_PORT" /healthz)
  expect_match "reason" "$out" '^503 \{"healthy":false,"session":"(SUSPENDED|OPENING)",.*"reason":"[^"]+'
  wait_for 4 code_is "$S_PORT" /leader 503 || fail "/leader still 200 past the lease"
  kill -CONT "$REDIS_PID"
  wait_for 8 code_is "$S_PORT" /healthz 200 || fail "/healthz not 200 again once the backend answers"
  kill -TERM "$S"; wait "$S"
}

run_every_case
finish
