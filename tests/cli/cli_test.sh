#!/usr/bin/env bash
# The simba command-line tool, end to end, against a redis-server of this test's
# own (some cases SIGSTOP it). Usage: cli_test.sh PATH/TO/simba
# Exit 0 when every case passed, 1 otherwise, 77 (skipped) without redis-server.
set -uo pipefail

SIMBA=${1:?usage: cli_test.sh PATH/TO/simba}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=../../scripts/lib/servers.sh
source "$ROOT/scripts/lib/servers.sh"
# shellcheck source=../support/cases.sh
source "$ROOT/tests/support/cases.sh"

command -v redis-server >/dev/null || { echo "SKIP: redis-server not installed"; exit 77; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/simba-cli-test.XXXXXX")
cleanup() {
  kill -CONT "$REDIS_PID" 2>/dev/null
  jobs -p | xargs -r kill -KILL 2>/dev/null
  kill "$REDIS_PID" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
start_own_redis "$WORK" || exit 1
PORT=$REDIS_PORT

export SIMBA_BACKEND="redis://127.0.0.1:$PORT"
# Short leases keep the suite fast: 2 s lease, a keep-alive every 500 ms.
export SIMBA_SESSION_LEASE_DURATION=2000ms SIMBA_SESSION_RENEW_INTERVAL=500ms
LEASE_MS=2000
GRACE=(--grace 300ms)

name() { echo "cli.$CASE.$RANDOM"; }

# The holder's client of lease $1 ("" while free), from `simba status --json`.
holder_client() {
  "$SIMBA" -q status "$1" --json | sed -n -E 's/.*"holder_client":"([^"]*)".*/\1/p'
}
# The last token of lease $1.
last_token() { "$SIMBA" -q status "$1" --json | sed -n -E 's/.*"token":([0-9]+).*/\1/p'; }
held_by() { [[ "$(holder_client "$1")" == "$2" ]]; }
is_free() { [[ -z "$(holder_client "$1")" ]]; }
gone() { local s; s=$(ps -o stat= -p "$1" 2>/dev/null); [[ -z "$s" || "$s" == Z* ]]; }

# --- cases -----------------------------------------------------------------------

case_usage_errors() {
  local rc
  SIMBA_BACKEND='' "$SIMBA" -q lock x -- true; expect_eq "no backend" $? 125
  "$SIMBA" -q frobnicate; expect_eq "unknown command" $? 125
  "$SIMBA" -q run x --grace soon -- true; expect_eq "bad duration" $? 125
  "$SIMBA" -q run x --grace 5s -- true 2>"$WORK/err"; rc=$?
  expect_eq "grace too long" $rc 125
  expect_match "grace message" "$(cat "$WORK/err")" "leaves no time to work"
  "$SIMBA" -q lock x; expect_eq "no command" $? 125
  "$SIMBA" -q run -- true; expect_eq "no name" $? 125
  "$SIMBA" -q lock 'bad name!' -- true; expect_eq "bad lease name" $? 125
  "$SIMBA" -q --lease-duration 1s --renew-interval 900ms lock x -- true 2>"$WORK/err"
  expect_eq "config rule" $? 125
  expect_match "config message" "$(cat "$WORK/err")" "configuration: .*renew"
  "$SIMBA" --backend 'redis://:s3cret@127.0.0.1:1/0?x' -q lock x -- true 2>"$WORK/err"
  [[ "$(cat "$WORK/err")" != *s3cret* ]] || fail "a password reached stderr"
  expect_match "help" "$("$SIMBA" run --help)" "usage: simba run NAME"
  expect_match "top help" "$("$SIMBA" --help)" "Exit statuses"
}

case_lock_runs_once_with_the_term_in_its_environment() {
  local n out rc; n=$(name)
  out=$("$SIMBA" -q lock "$n" -- sh -c 'echo "$SIMBA_LEASE $SIMBA_TOKEN $SIMBA_DEADLINE_MS"; exit 7')
  rc=$?
  expect_eq "exit status passes through" $rc 7
  expect_match "environment" "$out" "^$n [1-9][0-9]* [1-9][0-9]*$"
  local deadline=${out##* }
  ((deadline <= LEASE_MS)) || fail "SIMBA_DEADLINE_MS $deadline > the lease"
  is_free "$n" || fail "the lock is still held after simba lock exited"
}

case_lock_timeout_names_the_holder() {
  local n; n=$(name)
  "$SIMBA" -q --client-name holder lock "$n" -- sleep 3 &
  local holder=$!
  wait_for 5 held_by "$n" holder || fail "the first lock never held"
  "$SIMBA" lock "$n" --timeout 200ms -- true 2>"$WORK/err"
  expect_eq "timeout exit" $? 124
  expect_match "holder named" "$(cat "$WORK/err")" 'held by session [0-9a-f]+ \(client "holder"\)'
  kill -TERM "$holder"; wait "$holder"
}

case_command_that_cannot_run() {
  local n; n=$(name)
  "$SIMBA" -q lock "$n" -- /nonexistent/cmd; expect_eq "not found" $? 127
  printf '#!/bin/sh\n' >"$WORK/noexec"; chmod -x "$WORK/noexec"
  "$SIMBA" -q lock "$n" -- "$WORK/noexec"; expect_eq "not executable" $? 126
  "$SIMBA" -q run --once "$n" -- /nonexistent/cmd; expect_eq "run: not found" $? 127
  is_free "$n" || fail "the lease is still held"
}

case_command_killed_by_a_signal() {
  "$SIMBA" -q lock "$(name)" -- sh -c 'kill -KILL $$'; expect_eq "128+9" $? 137
}

case_tokens_increase_across_runs() {
  local n a b; n=$(name)
  a=$("$SIMBA" -q run --once "$n" -- sh -c 'echo $SIMBA_TOKEN')
  b=$("$SIMBA" -q run --once "$n" -- sh -c 'echo $SIMBA_TOKEN')
  ((b > a)) || fail "token $b after $a"
}

# The lease is taken over behind simba's back: the next keep-alive ends the
# term (TAKEN_OVER) and the command gets SIGTERM.
case_taken_over_stops_the_command() {
  local n t0 rc; n=$(name)
  "$SIMBA" run --once "${GRACE[@]}" "$n" -- \
    sh -c "trap 'echo stopped > $WORK/taken; exit 0' TERM; while :; do sleep 0.05; done" \
    2>"$WORK/taken.log" &
  local p=$!
  wait_for 5 held_by "$n" "$(hostname)/$p" || fail "never elected"
  t0=$(now_ms)
  redis-cli -p "$PORT" hset "simba:lease:$n" session someone-else token 999 >/dev/null
  wait "$p"; rc=$?
  expect_eq "exit with the command's status" $rc 0
  # The reason by the library's name (simba_revoke_reason_name).
  grep -q "ended: TAKEN_OVER; stopping the command" "$WORK/taken.log" ||
    fail "no 'ended: TAKEN_OVER' line: $(cat "$WORK/taken.log")"
  [[ -f "$WORK/taken" ]] || fail "the command got no SIGTERM"
  # The TAKEN_OVER line says the keep-alive ended it (the next one comes
  # within 500 ms); the bound only catches a stop that hangs (a 1 s bound
  # failed with 1,334 ms at load 5).
  local took=$(( $(now_ms) - t0 ))
  ((took < LEASE_MS * SLOW)) || fail "stopped ${took} ms after the take-over (renew 500 ms, lease ${LEASE_MS} ms)"
}

# A command that ignores SIGTERM is killed at the term's local deadline, never
# later: the backend stops answering, the remaining time runs out.
case_command_never_outlives_the_term() {
  local n t0 rc; n=$(name)
  "$SIMBA" -q run --once "${GRACE[@]}" "$n" -- sh -c "trap '' TERM; while :; do sleep 0.05; done" &
  local p=$!
  wait_for 5 held_by "$n" "$(hostname)/$p" || fail "never elected"
  local child; child=$(pgrep -P "$p")
  t0=$(now_ms)
  kill -STOP "$REDIS_PID"
  wait "$p"; rc=$?
  local took=$(( $(now_ms) - t0 ))
  kill -CONT "$REDIS_PID"
  expect_eq "killed by SIGKILL" $rc 137
  gone "$child" || fail "the command is still running"
  # The deadline is at most one lease after the last renewal, which was before
  # the SIGSTOP; and it is at least one lease minus a renew interval away.
  ((took <= LEASE_MS + 300 * SLOW)) || fail "killed ${took} ms after the backend stopped: past the lease"
  ((took >= LEASE_MS - 500 - 200)) || fail "killed after only ${took} ms"
}

# While the term is still valid, the command gets SIGTERM once the remaining
# time falls below --grace: the backend stops answering (no revocation: the
# keep-alives only fail), the remaining time runs down, SIGTERM comes about
# --grace before the local deadline, SIGKILL at it (the command ignores TERM).
case_grace_sigterm_comes_before_the_deadline() {
  local n t0 rc grace=800; n=$(name)
  "$SIMBA" run --once --grace ${grace}ms "$n" -- \
    sh -c "trap 'date +%s%N >> $WORK/grace-term' TERM; while :; do sleep 0.05; done" \
    2>"$WORK/grace-err" &
  local p=$!
  wait_for 5 held_by "$n" "$(hostname)/$p" || fail "never elected"
  t0=$(now_ms)
  kill -STOP "$REDIS_PID"
  wait "$p"; rc=$?
  local killed_at; killed_at=$(now_ms)
  kill -CONT "$REDIS_PID"
  expect_eq "killed by SIGKILL at the deadline" $rc 137
  [[ -s "$WORK/grace-term" ]] || { fail "the command got no SIGTERM"; return; }
  expect_eq "exactly one SIGTERM" "$(wc -l <"$WORK/grace-term")" 1
  local term_at=$(( $(head -1 "$WORK/grace-term") / 1000000 ))
  local before=$(( killed_at - term_at )) after=$(( term_at - t0 ))
  # SIGTERM at remaining < grace, so at most grace before the SIGKILL (plus the
  # shell's trap latency); not much less than grace either, or it came late.
  ((before <= grace + 150)) || fail "SIGTERM ${before} ms before the deadline: earlier than --grace ${grace}"
  ((before >= grace - 300 * SLOW)) || fail "SIGTERM only ${before} ms before the deadline (--grace ${grace})"
  # The last renewal was at most one renew interval before the SIGSTOP.
  ((after >= LEASE_MS - 500 - grace - 200)) || fail "SIGTERM ${after} ms after the backend stopped: too early"
  ((after <= LEASE_MS - grace + 300 * SLOW)) || fail "SIGTERM ${after} ms after the backend stopped: too late"
  # It was the grace rule, while the term was valid, not a revocation.
  local err; err=$(cat "$WORK/grace-err")
  expect_match "grace log line" "$err" "has [0-9]+ ms left, less than the grace of ${grace} ms; stopping the command \\(SIGTERM\\)"
  local left; left=$(sed -n -E 's/.* has ([0-9]+) ms left, less than the grace.*/\1/p' <<<"$err")
  [[ -n "$left" ]] && ((left > 0 && left < grace)) || fail "remaining '$left' ms at the SIGTERM, expected in (0, $grace)"
  # Nothing ended before the SIGTERM (the session's DEADLINE_PASSED comes after).
  local before_term; before_term=$(sed -n '/less than the grace/q;p' <<<"$err")
  [[ "$before_term" != *ended* ]] || fail "the term or session ended before the SIGTERM: $before_term"
}

# -v: the tool's and the library's debug lines, every line timestamped;
# without it, no debug lines.
case_verbose_logs_timestamped_lines() {
  local n line; n=$(name)
  "$SIMBA" -v lock "$n" -- true 2>"$WORK/verbose-err"
  expect_eq "exit" $? 0
  local stamp='^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z simba\[[0-9]+\] (debug|info|warn|error) '
  [[ -s "$WORK/verbose-err" ]] || fail "no log lines"
  while IFS= read -r line; do
    expect_match "timestamped line" "$line" "$stamp"
  done <"$WORK/verbose-err"
  expect_match "a debug line" "$(cat "$WORK/verbose-err")" "simba\[[0-9]+\] debug started true as pid [0-9]+"
  expect_match "a library line" "$(cat "$WORK/verbose-err")" "simba\[[0-9]+\] (debug|info) libsimba: "
  "$SIMBA" lock "$n" -- true 2>"$WORK/quiet-err"
  expect_eq "exit without -v" $? 0
  ! grep -q -E '\] debug ' "$WORK/quiet-err" || fail "debug lines without -v: $(cat "$WORK/quiet-err")"
}

case_command_help() {
  local out rc cmd
  for cmd in run lock status schema; do
    out=$("$SIMBA" "$cmd" --help 2>"$WORK/help-err"); rc=$?
    expect_eq "$cmd --help exit" $rc 0
    expect_match "$cmd --help usage" "$out" "^usage: simba $cmd"
    [[ ! -s "$WORK/help-err" ]] || fail "$cmd --help wrote to stderr"
    out=$("$SIMBA" "$cmd" -h); expect_match "$cmd -h" "$out" "^usage: simba $cmd"
  done
}

case_sigterm_stops_the_command_then_releases() {
  local n rc; n=$(name)
  "$SIMBA" -q run "$n" -- sleep 30 &
  local p=$!
  wait_for 5 held_by "$n" "$(hostname)/$p" || fail "never elected"
  kill -TERM "$p"; wait "$p"; rc=$?
  expect_eq "128+15" $rc 143
  is_free "$n" || fail "the lease was not released on exit"
}

# Issue 44 (ADR 0030): SIGTERM right after a keep-alive got no answer. The
# first worker reaches Redis through a proxy that cuts its connections: what
# it sends during the cut is lost, never delivered late. The release and the
# close fail while the cut lasts; the close is sent again until the session's
# local deadline, so the second worker takes over once the cut heals, not when
# the first worker's session expires on the server.
case_sigterm_right_after_a_cut_still_hands_over() {
  local n t0 healed rc lease=6000; n=$(name)
  local timing=(--lease-duration ${lease}ms --renew-interval 500ms)
  python3 "$ROOT/tests/support/cut_proxy.py" "$PORT" >"$WORK/cut-port" &
  local px=$!
  wait_for 5 test -s "$WORK/cut-port" || { fail "the proxy did not start"; return; }
  "$SIMBA" -v --backend "redis://127.0.0.1:$(cat "$WORK/cut-port")" "${timing[@]}" \
    --client-name first run "$n" -- sleep 30 2>"$WORK/cut-first" &
  local a=$!
  wait_for 5 held_by "$n" first || fail "first never elected"
  "$SIMBA" -q "${timing[@]}" --client-name second run "$n" -- sleep 30 &
  local b=$!
  sleep 0.3
  kill -USR1 "$px"; t0=$(now_ms)
  wait_for 3 grep -q "no answer within the call's timeout" "$WORK/cut-first" ||
    fail "no keep-alive timed out"
  kill -TERM "$a"
  sleep 1.5
  kill -USR2 "$px"; healed=$(now_ms)
  wait_for 5 held_by "$n" second || fail "second never took over"
  local took=$(( $(now_ms) - t0 ))
  # The last renewal was at most 500 ms before the cut: the first session
  # could expire on the server 5.5 s after the cut at the earliest.
  ((took < lease - 1000)) ||
    fail "taken over ${took} ms after the cut ($(( $(now_ms) - healed )) ms after it healed): at the first session's expiry"
  echo "    taken over ${took} ms after the cut, $(( $(now_ms) - healed )) ms after it healed"
  wait "$a"; rc=$?
  expect_eq "first exits 128+15" $rc 143
  kill -TERM "$b"; wait "$b"
  kill -TERM "$px"; wait "$px"
}

case_kill_9_takes_the_command_along() {
  local n; n=$(name)
  "$SIMBA" -q run "$n" -- sleep 30 &
  local p=$!
  wait_for 5 held_by "$n" "$(hostname)/$p" || fail "never elected"
  local child; child=$(pgrep -P "$p")
  [[ -n "$child" ]] || fail "no command running"
  kill -KILL "$p"; wait "$p" 2>/dev/null
  wait_for 2 gone "$child" || fail "the command outlived simba"
}

case_failover_after_kill_9() {
  local n; n=$(name)
  "$SIMBA" -q --client-name first run "$n" -- sleep 30 &
  local a=$!
  wait_for 5 held_by "$n" first || fail "first never elected"
  "$SIMBA" -q --client-name second run "$n" -- sleep 30 &
  local b=$!
  sleep 0.3
  local token; token=$(last_token "$n")
  local t0; t0=$(now_ms)
  kill -KILL "$a"; wait "$a" 2>/dev/null
  wait_for 6 held_by "$n" second || fail "no failover"
  local took=$(( $(now_ms) - t0 ))
  ((took <= LEASE_MS + 1000 * SLOW)) || fail "failover took ${took} ms (lease ${LEASE_MS})"
  (( $(last_token "$n") > token )) || fail "the token did not increase"
  kill -TERM "$b"; wait "$b"
}

case_exit_while_leading_hands_over_and_contends_again() {
  local n; n=$(name)
  "$SIMBA" -q run --cooldown 100ms "$n" -- sh -c "echo \$SIMBA_TOKEN >> $WORK/runs" &
  local p=$!
  wait_for 5 eval "[[ \$(wc -l < $WORK/runs 2>/dev/null || echo 0) -ge 3 ]]" || fail "ran fewer than 3 times"
  kill -TERM "$p"; wait "$p"
  local tokens; tokens=$(tr '\n' ' ' <"$WORK/runs")
  sort -n -c "$WORK/runs" 2>/dev/null && [[ "$(sort -u "$WORK/runs" | wc -l)" == "$(wc -l <"$WORK/runs")" ]] ||
    fail "tokens not strictly increasing: $tokens"
}

case_status_shows_sessions_leases_and_json() {
  local n out; n=$(name)
  "$SIMBA" -q --client-name status-holder lock "$n" -- sleep 2 &
  local p=$!
  wait_for 5 held_by "$n" status-holder || fail "never held"
  out=$("$SIMBA" -q status "$n")
  expect_match "table lease row" "$out" "$n +[1-9][0-9]* +[0-9a-f]{32} +status-holder +[0-9.]+s"
  expect_match "table session" "$out" "SESSIONS"
  [[ "$out" != *"simba status"* ]] || fail "status lists its own session"
  out=$("$SIMBA" -q status "$n" --json)
  expect_match "json" "$out" "\"name\":\"$n\",\"token\":[1-9][0-9]*,\"holder\":\"[0-9a-f]{32}\",\"holder_client\":\"status-holder\""
  out=$("$SIMBA" -q status "$n.unknown")
  expect_match "a name never used" "$out" "$n.unknown +0 +\\(free\\)"
  "$SIMBA" -q --backend "redis://127.0.0.1:$(simba_free_port)" status --timeout 300ms
  expect_eq "unreachable backend" $? 125
  wait "$p"
}

# --- semaphores and read/write locks (simba lock --permits N, --read, --write) ---

# The permit rows of name $1 of kind $2 in `simba status --json`, one a line:
# "PERMIT TOKEN CLIENT".
permit_rows() {
  "$SIMBA" -q status "$1" --json | grep -o '{[^{}]*"kind":"'"$2"'"[^{}]*}' |
    sed -E 's/.*"token":([0-9]+).*"permit":([0-9]+),"holder_client":"([^"]*)".*/\2 \1 \3/'
}
permits_held() { [[ "$(permit_rows "$1" "$2" | wc -l)" -ge "$3" ]]; }

case_lock_kind_usage_errors() {
  local n; n=$(name)
  "$SIMBA" -q lock "$n" --permits 0 -- true; expect_eq "permits 0" $? 125
  "$SIMBA" -q lock "$n" --permits two -- true; expect_eq "permits not a number" $? 125
  "$SIMBA" -q lock "$n" --permits=-1 -- true; expect_eq "permits negative" $? 125
  "$SIMBA" -q lock "$n" --permits 4294967296 -- true; expect_eq "permits too big" $? 125
  "$SIMBA" -q lock "$n" --read --write -- true 2>"$WORK/err"; expect_eq "read and write" $? 125
  expect_match "one kind message" "$(cat "$WORK/err")" "one of --permits N, --read and --write"
  "$SIMBA" -q lock "$n" --permits 2 --read -- true; expect_eq "permits and read" $? 125
  "$SIMBA" -q run "$n" --read -- true; expect_eq "run has no --read" $? 125
  expect_match "lock help" "$("$SIMBA" lock --help)" "--permits N"
}

# At most N commands run at once under --permits N; each gets a SEMAPHORE term
# with its own token, the N+1st times out naming the holders, another size is
# refused at once, and status lists each permit.
case_lock_permits_holds_at_most_n() {
  local n out rc p1 p2 rows; n=$(name)
  out=$("$SIMBA" -q lock "$n" --permits=2 -- sh -c 'echo "$SIMBA_TERM_KIND $SIMBA_LEASE $SIMBA_TOKEN"')
  expect_eq "one permit exit" $? 0
  expect_match "semaphore term" "$out" "^SEMAPHORE $n [1-9][0-9]*$"
  "$SIMBA" -q --client-name sem-a lock "$n" --permits 2 -- sleep 3 & p1=$!
  "$SIMBA" -q --client-name sem-b lock "$n" --permits 2 -- sleep 3 & p2=$!
  wait_for 5 permits_held "$n" semaphore 2 || fail "two permits never held at once"
  rows=$(permit_rows "$n" semaphore)
  grep -qxE '[1-9][0-9]* [1-9][0-9]* sem-a' <<<"$rows" || fail "no permit of sem-a: $rows"
  grep -qxE '[1-9][0-9]* [1-9][0-9]* sem-b' <<<"$rows" || fail "no permit of sem-b: $rows"
  # Semaphore tokens are the permit ids: distinct per permit.
  [[ "$(cut -d' ' -f2 <<<"$rows" | sort -u | wc -l)" == 2 ]] || fail "tokens not distinct: $rows"
  "$SIMBA" lock "$n" --permits 2 --timeout 200ms -- true 2>"$WORK/err"; rc=$?
  expect_eq "third permit times out" $rc 124
  expect_match "holders named" "$(cat "$WORK/err")" "$n: semaphore is held by session [0-9a-f]+ \\(client \"sem-a\"\\)"
  "$SIMBA" lock "$n" --permits 3 --timeout 5s -- true 2>"$WORK/err"; rc=$?
  expect_eq "another size refused" $rc 125
  expect_match "size message" "$(cat "$WORK/err")" "semaphore $n has 2 permits, not 3"
  out=$("$SIMBA" -q status "$n")
  expect_match "status permits table" "$out" "PERMITS \\(2\\)"
  expect_match "status permit row" "$out" "$n +semaphore +[1-9][0-9]* +[1-9][0-9]* +[0-9a-f]{32} +sem-a +[0-9.]+s"
  wait "$p1" "$p2"
  [[ -z "$(permit_rows "$n" semaphore)" ]] || fail "permits still held after both exited"
}

# Readers share: two --read commands run at once, with the write epoch as token;
# a writer waits for them, and its token is above every earlier one; the next
# reader carries the writer's token.
case_lock_read_write() {
  local n p1 p2 r0 w r1 w2 rc; n=$(name)
  r0=$("$SIMBA" -q lock "$n" --read -- sh -c 'echo "$SIMBA_TERM_KIND $SIMBA_TOKEN"')
  expect_eq "read before any writer" "$r0" "READ 0"
  "$SIMBA" -q --client-name reader-a lock "$n" --read -- sleep 2 & p1=$!
  "$SIMBA" -q --client-name reader-b lock "$n" --read -- sleep 2 & p2=$!
  wait_for 5 permits_held "$n" read 2 || fail "two readers never held at once"
  "$SIMBA" lock "$n" --write --timeout 200ms -- true 2>"$WORK/err"; rc=$?
  expect_eq "writer waits for readers" $rc 124
  expect_match "readers named" "$(cat "$WORK/err")" "$n: read is held by session"
  w=$("$SIMBA" -q lock "$n" --write --timeout 10s -- sh -c 'echo "$SIMBA_TERM_KIND $SIMBA_TOKEN"')
  expect_eq "writer exit" $? 0
  expect_match "write term" "$w" "^WRITE [1-9][0-9]*$"
  wait "$p1" "$p2"
  r1=$("$SIMBA" -q lock "$n" --read -- sh -c 'echo "$SIMBA_TOKEN"')
  expect_eq "a reader carries the last writer's token" "$r1" "${w#WRITE }"
  w2=$("$SIMBA" -q lock "$n" --write -- sh -c 'echo "$SIMBA_TOKEN"')
  ((w2 > ${w#WRITE })) || fail "write token $w2 after ${w#WRITE }"
  # Separate namespaces: the lock and the semaphore of the same name are free.
  "$SIMBA" -q --client-name rw-writer lock "$n" --write -- sleep 2 & p1=$!
  wait_for 5 permits_held "$n" write 1 || fail "the writer never held"
  "$SIMBA" -q lock "$n" --timeout 1s -- true; expect_eq "lock of the same name" $? 0
  "$SIMBA" -q lock "$n" --permits 1 --timeout 1s -- true; expect_eq "semaphore of the same name" $? 0
  wait "$p1"
}

# The permit's entry is taken behind simba's back: the next keep-alive ends the
# term (TAKEN_OVER) and the command gets SIGTERM, as under a lock.
case_permit_taken_over_stops_the_command() {
  local n row permit token rc; n=$(name)
  "$SIMBA" --client-name sem-victim lock "$n" --permits 1 "${GRACE[@]}" -- \
    sh -c "trap 'echo stopped > $WORK/sem-taken; exit 0' TERM; while :; do sleep 0.05; done" \
    2>"$WORK/sem-taken.log" &
  local p=$!
  wait_for 5 permits_held "$n" semaphore 1 || fail "never held"
  row=$(permit_rows "$n" semaphore); permit=${row%% *}; token=$(cut -d' ' -f2 <<<"$row")
  redis-cli -p "$PORT" hset "simba:sem:$n" "e:$permit" "semaphore someone-else $token" >/dev/null
  wait "$p"; rc=$?
  expect_eq "exit with the command's status" $rc 0
  grep -q "ended: TAKEN_OVER; stopping the command" "$WORK/sem-taken.log" ||
    fail "no 'ended: TAKEN_OVER' line: $(cat "$WORK/sem-taken.log")"
  [[ -f "$WORK/sem-taken" ]] || fail "the command got no SIGTERM"
}

# simba schema prints the DDL of a postgresql:// URL without connecting (port 1
# has no server), in the URL's schema; other backends have none: exit 125.
case_schema_prints_the_postgres_ddl() {
  local out rc
  out=$("$SIMBA" schema --help); rc=$?
  expect_eq "help exit" $rc 0
  expect_match "help" "$out" "usage: simba schema"
  if [[ "${SIMBA_CLI_HAVE_POSTGRES:-1}" == 1 ]]; then
    out=$("$SIMBA" schema --backend 'postgresql://u:s3cret@127.0.0.1:1/db?schema=tenant_cli' \
      2>"$WORK/err"); rc=$?
    expect_eq "postgres exit" $rc 0
    expect_match "first line" "${out%%$'\n'*}" '^-- Simba schema version [0-9]+ in schema "tenant_cli"'
    expect_match "a table in the schema" "$out" 'CREATE TABLE IF NOT EXISTS "tenant_cli"\.simba_lease'
    expect_match "one transaction" "$out" $'\nBEGIN;\n.*\nCOMMIT;$'
    [[ ! -s "$WORK/err" ]] || fail "stderr not empty: $(cat "$WORK/err")"
    [[ "$out" != *s3cret* ]] || fail "the password reached stdout"
    # From SIMBA_BACKEND too, default schema public.
    out=$(SIMBA_BACKEND='postgres://127.0.0.1:1/db' "$SIMBA" schema); rc=$?
    expect_eq "env exit" $rc 0
    expect_match "default schema" "$out" 'CREATE TABLE IF NOT EXISTS "public"\.simba_session'
    "$SIMBA" schema --backend 'postgresql://127.0.0.1:1/db?schema=1bad' 2>"$WORK/err"
    expect_eq "bad schema exit" $? 125
    expect_match "bad schema message" "$(cat "$WORK/err")" "error schema: .*schema must be"
  else
    "$SIMBA" schema --backend 'postgresql://127.0.0.1:1/db' 2>"$WORK/err"
    expect_eq "not built in" $? 125
    expect_match "not built in message" "$(cat "$WORK/err")" "not built into"
  fi
  out=$("$SIMBA" schema 2>"$WORK/err"); rc=$?   # SIMBA_BACKEND is the test's redis://
  expect_eq "redis exit" $rc 125
  expect_eq "nothing on stdout" "$out" ""
  expect_match "redis message" "$(cat "$WORK/err")" "error schema: the redis:// backend has no schema"
  "$SIMBA" schema --backend memory://x 2>"$WORK/err"
  expect_eq "memory exit" $? 125
  expect_match "memory message" "$(cat "$WORK/err")" "memory:// backend has no schema"
  SIMBA_BACKEND='' "$SIMBA" schema 2>"$WORK/err"
  expect_eq "no backend" $? 125
  "$SIMBA" schema extra 2>"$WORK/err"
  expect_eq "stray argument" $? 125
}

run_every_case
finish
