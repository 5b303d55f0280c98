#!/usr/bin/env bash
# Secrets never printed (issue 23): runs the simba tool with -v (every library
# log line included) against each backend with passwords in every place a URL
# can carry one, with right and wrong passwords and with malformed URLs, and
# greps everything it printed (stdout, stderr, status tables and JSON) for the
# secrets. Also checks the Redis ACL line of docs/security.md (a user with only
# those commands and keys runs Simba, and is refused the rest) and the grants
# `simba schema` lists for a PostgreSQL role (enough with create=false, no more).
#
# Usage: secrets_test.sh PATH/TO/simba
# Redis: a redis-server of this test's own (with an ACL file). PostgreSQL and
# ZooKeeper: the shared servers of scripts/test.sh (SIMBA_TEST_POSTGRES_URL,
# SIMBA_TEST_ZOOKEEPER_URL); their parts are skipped while unset.
# Exit 0 when every case passed, 1 otherwise, 77 (skipped) without redis-server.
set -uo pipefail

SIMBA=${1:?usage: secrets_test.sh PATH/TO/simba}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=../../scripts/lib/servers.sh
source "$ROOT/scripts/lib/servers.sh"
# shellcheck source=../support/cases.sh
source "$ROOT/tests/support/cases.sh"

command -v redis-server >/dev/null || { echo "SKIP: redis-server not installed"; exit 77; }

# The secrets: distinct, and unlike anything else printed.
REDIS_DEFAULT_PW='Dflt-Pw-7Qx2vK9'
REDIS_SIMBA_PW='Rds-Pw-3Jk8sLm0'
REDIS_WRONG_PW='Wrng-Pw-5Tz1cV4'
PG_PW='Pg-Pw-8Hn4rYw2'
PG_KEY_PW='Pg-KeyPw-2Wq7mX5'
ZK_PW='Zk-Pw-6Bv3nQ8'
BAD_URL_PW='Bad-Pw-9Lc5kR1'
SECRETS=("$REDIS_DEFAULT_PW" "$REDIS_SIMBA_PW" "$REDIS_WRONG_PW" "$PG_PW" "$PG_KEY_PW" "$ZK_PW"
         "$BAD_URL_PW")

WORK=$(mktemp -d "${TMPDIR:-/tmp}/simba-secrets-test.XXXXXX")
PORT=$(simba_free_port)
# The ACL line of docs/security.md, for the default prefix "simba".
cat >"$WORK/users.acl" <<ACL
user default on >$REDIS_DEFAULT_PW ~* &* +@all
user simba on >$REDIS_SIMBA_PW resetkeys ~simba:* resetchannels &simba:released:* -@all +evalsha +eval +script|load +select +subscribe +unsubscribe +config|get +get +set +del +pexpire +pttl +sadd +srem +smembers +hget +hmget +hgetall +hlen +hset +hdel +publish +scan
ACL
redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$WORK" \
  --aclfile "$WORK/users.acl" --daemonize no >"$WORK/redis.log" 2>&1 &
REDIS_PID=$!
cleanup() {
  kill "$REDIS_PID" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
redis_pong() {
  [[ "$(redis-cli -h 127.0.0.1 -p "$PORT" --no-auth-warning -a "$REDIS_DEFAULT_PW" ping 2>/dev/null)" == PONG ]]
}
simba_wait_until 10 "redis-server on $PORT" redis_pong || { cat "$WORK/redis.log"; exit 1; }

export SIMBA_SESSION_LEASE_DURATION=2000ms SIMBA_SESSION_RENEW_INTERVAL=500ms
unset SIMBA_BACKEND
OUT="$WORK/printed"  # everything the tool printed, all cases
: >"$OUT"

# sim EXPECTED_STATUS ARGS...: runs simba -v ARGS, appends what it printed to
# $OUT (never the arguments themselves: they hold the secrets), and checks the
# exit status ("any" accepts every status).
RUNS=0
sim() {
  local want=$1 rc; shift
  RUNS=$((RUNS + 1))
  timeout -k 5 60 "$SIMBA" -v "$@" >"$OUT.case" 2>&1 </dev/null
  rc=$?
  { echo "### run $RUNS (case $CASE): exit $rc"; cat "$OUT.case"; } >>"$OUT"
  if [[ "$want" != any && "$rc" != "$want" ]]; then
    fail "run $RUNS (simba ... ${*: -1}) exited $rc, expected $want; it printed:"
    sed 's/^/      /' "$OUT.case" | tail -n 20
  fi
}

REDIS_URL="redis://simba:$REDIS_SIMBA_PW@127.0.0.1:$PORT/0"

case_redis_acl_user_runs_simba() {
  sim 0 --backend "$REDIS_URL" lock secrets.redis -- true
  sim 0 --backend "$REDIS_URL" run secrets.redis.run --once --grace 300ms -- sh -c 'sleep 0.3; exit 0'
  sim 0 --backend "$REDIS_URL" status
  sim 0 --backend "$REDIS_URL" status --json
  sim 0 --backend "$REDIS_URL" status secrets.redis
  # The same URL from the environment.
  SIMBA_BACKEND="$REDIS_URL" sim 0 status --json
  # The default user's password alone (AUTH password).
  sim 0 --backend "redis://:$REDIS_DEFAULT_PW@127.0.0.1:$PORT" status
}

case_redis_acl_user_is_refused_the_rest() {
  local r
  r=$(redis-cli -h 127.0.0.1 -p "$PORT" --user simba --pass "$REDIS_SIMBA_PW" --no-auth-warning \
    SET other:key 1 2>&1)
  [[ "$r" == *NOPERM* ]] || fail "SET on a key outside the prefix: $r"
  r=$(redis-cli -h 127.0.0.1 -p "$PORT" --user simba --pass "$REDIS_SIMBA_PW" --no-auth-warning \
    FLUSHALL 2>&1)
  [[ "$r" == *NOPERM* ]] || fail "FLUSHALL: $r"
  r=$(redis-cli -h 127.0.0.1 -p "$PORT" --user simba --pass "$REDIS_SIMBA_PW" --no-auth-warning \
    EVAL "return redis.call('SET', KEYS[1], 1)" 1 other:key 2>&1)
  [[ "$r" == *NOPERM* || "$r" == *"No permissions"* || "$r" == *"permission"* ]] ||
    fail "a script writing outside the prefix: $r"
}

case_redis_wrong_password() {
  sim 125 --backend "redis://simba:$REDIS_WRONG_PW@127.0.0.1:$PORT" --timeout 1s status
  sim any --backend "redis://simba:$REDIS_WRONG_PW@127.0.0.1:$PORT" lock secrets.wrong \
    --timeout 1s -- true
  grep -qiE "WRONGPASS|invalid username-password|AUTH" "$OUT" ||
    fail "the AUTH failure is not reported"
}

case_malformed_urls_with_secrets() {
  # Each refused with 125 and a message, none showing the password (the fuzz
  # targets' regression entries, as a user would type them).
  local u
  for u in "redis://u:$BAD_URL_PW@127.0.0.1:$PORT/x" \
           "redis://u:pa/$BAD_URL_PW@127.0.0.1:$PORT" \
           "redis://u:pa?$BAD_URL_PW@127.0.0.1:$PORT" \
           "redis://u:$BAD_URL_PW@127.0.0.1:$PORT?prefix=bad!" \
           "redis://$BAD_URL_PW@127.0.0.1:$PORT" \
           "postgresql://u:$BAD_URL_PW@127.0.0.1:99999/db" \
           "postgresql://u@127.0.0.1/db?password=$BAD_URL_PW&nosuch=1" \
           "postgresql://u@127.0.0.1/db?sslpassword=$BAD_URL_PW&nosuch=1" \
           "postgresql://u:pa?ss=$BAD_URL_PW@127.0.0.1/db?schema=1bad" \
           "zookeeper://127.0.0.1:1/x?auth=digest:alice:$BAD_URL_PW&nosuch=1" \
           "zookeeper://127.0.0.1:70000/x?auth=digest:alice:$BAD_URL_PW" \
           "zookeeper://127.0.0.1:1/x?auth=digest:$BAD_URL_PW"; do
    sim 125 --backend "$u" status
    sim 125 --backend "$u" schema
  done
}

case_postgres_passwords() {
  [[ -n "${SIMBA_TEST_POSTGRES_URL:-}" ]] || { echo "    (skipped: SIMBA_TEST_POSTGRES_URL unset)"; return; }
  # The shared server trusts every local connection, so the passwords are not
  # checked there; they still travel through the library and must never show.
  local base=${SIMBA_TEST_POSTGRES_URL%%\?*}
  local url="${base/postgres@/postgres:$PG_PW@}?sslmode=disable&sslpassword=$PG_KEY_PW&schema=secrets_t"
  sim 0 --backend "$url" lock secrets.pg -- true
  sim 0 --backend "$url" status --json
  sim 0 --backend "$url" status
  sim 0 --backend "${base}?sslmode=disable&password=$PG_PW&schema=secrets_t" status
  sim 0 --backend "$url" schema
}

case_postgres_least_privilege_role() {
  [[ -n "${SIMBA_TEST_POSTGRES_URL:-}" ]] || { echo "    (skipped: SIMBA_TEST_POSTGRES_URL unset)"; return; }
  # The grants `simba schema` lists are enough for a client with create=false,
  # and give no more (no DROP, no TRUNCATE).
  local base=${SIMBA_TEST_POSTGRES_URL%%\?*} psql script grants role="simba_least_$$" rc r
  psql=("$(simba_pg_bindir)/psql" -qAtX)
  script=$("$SIMBA" schema --backend "$base?schema=least_t") || { fail "simba schema"; return; }
  grants=$(sed -n 's/^--   \(GRANT .*;\).*$/\1/p' <<<"$script" | sed "s/simba_client/$role/")
  [[ $(grep -c GRANT <<<"$grants") == 4 ]] || fail "expected 4 GRANT lines, got: $grants"
  "${psql[@]}" "$SIMBA_TEST_POSTGRES_URL" -c "DROP SCHEMA IF EXISTS least_t CASCADE" \
    -c "DROP ROLE IF EXISTS $role" -c "CREATE ROLE $role LOGIN" >/dev/null 2>&1
  "${psql[@]}" "$SIMBA_TEST_POSTGRES_URL" -v ON_ERROR_STOP=1 -f - <<<"$script" >/dev/null ||
    fail "the DDL did not apply"
  "${psql[@]}" "$SIMBA_TEST_POSTGRES_URL" -v ON_ERROR_STOP=1 -f - <<<"$grants" >/dev/null ||
    fail "the grants did not apply"
  local url="${base/postgres@/$role@}?sslmode=disable&schema=least_t&create=false"
  sim 0 --backend "$url" lock secrets.least -- true
  sim 0 --backend "$url" status secrets.least
  r=$("${psql[@]}" "${base/postgres@/$role@}?sslmode=disable" -c "TRUNCATE least_t.simba_lease" 2>&1)
  [[ "$r" == *"permission denied"* ]] || fail "TRUNCATE allowed: $r"
  r=$("${psql[@]}" "${base/postgres@/$role@}?sslmode=disable" -c "DROP TABLE least_t.simba_lease" 2>&1)
  [[ "$r" == *"must be owner"* || "$r" == *"permission denied"* ]] || fail "DROP allowed: $r"
  "${psql[@]}" "$SIMBA_TEST_POSTGRES_URL" -c "DROP SCHEMA least_t CASCADE" \
    -c "DROP OWNED BY $role" -c "DROP ROLE $role" >/dev/null 2>&1
}

case_zookeeper_digest_password() {
  [[ -n "${SIMBA_TEST_ZOOKEEPER_URL:-}" ]] || { echo "    (skipped: SIMBA_TEST_ZOOKEEPER_URL unset)"; return; }
  local url="${SIMBA_TEST_ZOOKEEPER_URL%%\?*}-secrets?auth=digest:alice:$ZK_PW"
  sim 0 --backend "$url" lock secrets.zk -- true
  sim 0 --backend "$url" status --json
  sim 0 --backend "$url" status
  sim 125 --backend "$url" schema
}

case_nothing_printed_holds_a_secret() {
  local s hits
  [[ -s "$OUT" ]] || fail "nothing was printed at all"
  for s in "${SECRETS[@]}"; do
    hits=$(grep -c -F -- "$s" "$OUT")
    if [[ "$hits" != 0 ]]; then
      fail "secret $s printed $hits times:"
      grep -n -F -- "$s" "$OUT" | head -n 5 | sed 's/^/      /'
    fi
  done
  # The redacted forms are what shows instead.
  grep -q -F 'redis://simba:***@127.0.0.1' "$OUT" || fail "no redacted redis URL printed"
}

run_case redis_acl_user_runs_simba
run_case redis_acl_user_is_refused_the_rest
run_case redis_wrong_password
run_case malformed_urls_with_secrets
run_case postgres_passwords
run_case postgres_least_privilege_role
run_case zookeeper_digest_password
run_case nothing_printed_holds_a_secret
finish "$RUNS simba runs, $(wc -l <"$OUT") lines checked"
