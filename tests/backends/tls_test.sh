#!/usr/bin/env bash
# TLS on the wire, end to end through the simba tool and libsimba (issue 23):
# servers of this test's own, presenting certificates of a PKI generated here
# with openssl (scripts/lib/servers.sh: simba_make_pki).
#
#   tls_test.sh PATH/TO/simba postgres
#     PostgreSQL with ssl=on: sslmode=verify-full with the test CA goes live
#     over TLS (both connections, pg_stat_ssl); a wrong CA, a certificate for
#     another host name, an expired certificate and a missing root certificate
#     are refused with libpq's words in the log; a role with cert auth gets in
#     with a client certificate (also an encrypted key with sslpassword=) and
#     not without one; no sslpassword in anything printed.
#
#   tls_test.sh PATH/TO/simba redis
#     redis-server with --tls-port only (no plain port): rediss:// with tls_ca
#     goes live and leads (by IP address and by host name), with AUTH inside
#     TLS; a wrong CA, a certificate for another name (or tls_server_name=
#     another name), an expired certificate are refused with OpenSSL's reason;
#     with --tls-auth-clients yes, no client certificate is refused, tls_cert +
#     tls_key (also an encrypted key with tls_key_password=) get in; bad TLS
#     files are refused at open (exit 125); no password in anything printed.
#     With a third argument (PATH/TO/test_backends), the conformance suite
#     (Backends/Conformance.*/redis) also runs over rediss://.
#
#   tls_test.sh PATH/TO/simba etcd
#     etcd with https client URLs only: etcds:// with tls_ca goes live and
#     leads (by IP address and by host name; ALPN h2); a wrong CA, a
#     certificate for another name (or tls_server_name= another name), an
#     expired certificate are refused with OpenSSL's reason; with
#     --client-cert-auth, no client certificate is refused, tls_cert + tls_key
#     (also an encrypted key) get in; bad TLS files are refused at open; with
#     auth enabled (root user), user:password@ works over TLS, a wrong password
#     is refused by name, a token invalidated while a lock is held is renewed;
#     no password in anything printed. With a third argument (PATH/TO/
#     test_backends), the conformance suite (Backends/Conformance.*/etcd) also
#     runs over etcds:// with auth.
#
# Exit 0 when every case passed, 1 otherwise, 77 (skipped) without the server.
set -uo pipefail

SIMBA=${1:?usage: tls_test.sh PATH/TO/simba postgres|redis|etcd}
WHICH=${2:?usage: tls_test.sh PATH/TO/simba postgres|redis|etcd}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=../../scripts/lib/servers.sh
source "$ROOT/scripts/lib/servers.sh"
# shellcheck source=../support/cases.sh
source "$ROOT/tests/support/cases.sh"
command -v openssl >/dev/null || { echo "SKIP: openssl not installed"; exit 77; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/simba-tls-test.XXXXXX")
chmod 711 "$WORK"
export SIMBA_PKI_KEY_PASSWORD='Tls-KeyPw-4Rt9pZ2'
cleanup() { stop_servers; rm -rf "$WORK"; }
trap cleanup EXIT
simba_make_pki "$WORK/pki" || exit 1
# libpq insists that a client key be private to the user that reads it.
chmod 600 "$WORK/pki/"*.key

export SIMBA_SESSION_LEASE_DURATION=3000ms SIMBA_SESSION_RENEW_INTERVAL=1000ms
unset SIMBA_BACKEND
# out FILE ARGS...: simba -v ARGS with everything it printed in FILE; prints the status.
out() {
  local f=$1; shift
  timeout -k 5 $((30 * SLOW)) "$SIMBA" -v "$@" >"$f" 2>&1 </dev/null
  echo $?
}
expect_refused() {  # expect_refused WHAT PATTERN ARGS...: exit 125 and PATTERN in the log
  [[ -n "${SIMBA_TLS_TEST_VERBOSE:-}" ]] && echo "    [$1]"
  local what=$1 pattern=$2 rc; shift 2
  rc=$(out "$WORK/refused.log" "$@")
  [[ $rc == 125 ]] || fail "$what: exit $rc, expected 125"
  [[ -n "${SIMBA_TLS_TEST_VERBOSE:-}" ]] && grep -iE -- "$pattern" "$WORK/refused.log" | head -n 2
  grep -qiE -- "$pattern" "$WORK/refused.log" || {
    fail "$what: no /$pattern/ in what simba printed:"
    sed 's/^/      /' "$WORK/refused.log" | tail -n 8
  }
}

# --- PostgreSQL ---------------------------------------------------------------------

pg_setup() {
  simba_pg_bindir >/dev/null || { echo "SKIP: PostgreSQL server binaries not found"; exit 77; }
  SIMBA_SERVERS_DIR="$WORK/servers"  # stop_servers ends what is tracked and removes it
  mkdir -p "$SIMBA_SERVERS_DIR"
  simba_start_postgres_tls "$SIMBA_SERVERS_DIR/pg" "$WORK/pki" server || exit 1
  PG="postgresql://postgres@127.0.0.1:$SIMBA_TLS_PG_PORT/postgres"
  PSQL=("$(simba_pg_bindir)/psql" -h 127.0.0.1 -p "$SIMBA_TLS_PG_PORT" -U postgres -d postgres
        -qAt -c)
}

# pg_present CERT: the server presents PKI/CERT.crt from now on (ssl_* files
# are reread on SIGHUP).
pg_present() {
  local d="$SIMBA_SERVERS_DIR/pg"
  cp "$WORK/pki/$1.crt" "$d/server.crt" && cp "$WORK/pki/$1.key" "$d/server.key"
  [[ $(id -u) -eq 0 ]] && chown postgres: "$d/server.crt" "$d/server.key"
  chmod 600 "$d/server.key"
  kill -HUP "$SIMBA_TLS_PG_PID"
  sleep 0.5
}

case_pg_verify_full_goes_live_over_tls() {
  local url="$PG?sslmode=verify-full&sslrootcert=$WORK/pki/ca.crt" rc n
  rc=$(out "$WORK/ok.log" --backend "$url" status --timeout 10s)
  [[ $rc == 0 ]] || { fail "status exited $rc"; tail -n 5 "$WORK/ok.log"; }
  # While it holds a lock, its sessions' connections are TLS ones.
  rc=$(out "$WORK/lock.log" --backend "$url" --client-name tls-check lock tls.pg -- \
    "${PSQL[@]}" "SELECT count(*) FROM pg_stat_ssl JOIN pg_stat_activity USING (pid)
                  WHERE ssl AND application_name = 'simba/tls-check'")
  [[ $rc == 0 ]] || { fail "lock exited $rc"; tail -n 5 "$WORK/lock.log"; }
  n=$(grep -E '^[0-9]+$' "$WORK/lock.log" | tail -n 1)
  [[ -n "${SIMBA_TLS_TEST_VERBOSE:-}" ]] && echo "    TLS connections of simba/tls-check: $n"
  [[ "$n" -ge 1 ]] || fail "no TLS connection of simba in pg_stat_ssl (got '$n')"
}

case_pg_wrong_ca_is_refused() {
  expect_refused "other CA" "certificate verify failed" \
    --backend "$PG?sslmode=verify-full&sslrootcert=$WORK/pki/other-ca.crt" status --timeout 2s
}

case_pg_missing_root_certificate_is_refused() {
  HOME="$WORK/nohome" expect_refused "no root certificate" "root certificate file" \
    --backend "$PG?sslmode=verify-full" status --timeout 2s
}

case_pg_wrong_host_name_is_refused() {
  pg_present wronghost
  expect_refused "certificate for wrong.example" "does not match host name" \
    --backend "$PG?sslmode=verify-full&sslrootcert=$WORK/pki/ca.crt" status --timeout 2s
  # verify-ca checks the chain only: the same certificate is accepted.
  local rc
  rc=$(out "$WORK/ca.log" --backend "$PG?sslmode=verify-ca&sslrootcert=$WORK/pki/ca.crt" \
    status --timeout 10s)
  [[ $rc == 0 ]] || { fail "verify-ca exited $rc"; tail -n 5 "$WORK/ca.log"; }
  pg_present server
}

case_pg_expired_certificate_is_refused() {
  pg_present expired
  expect_refused "expired certificate" "certificate has expired|certificate verify failed" \
    --backend "$PG?sslmode=verify-full&sslrootcert=$WORK/pki/ca.crt" status --timeout 2s
  pg_present server
}

case_pg_client_certificate() {
  local base="postgresql://simba_cert@127.0.0.1:$SIMBA_TLS_PG_PORT/postgres"
  local tls="sslmode=verify-full&sslrootcert=$WORK/pki/ca.crt" rc
  rc=$(out "$WORK/cc.log" --backend \
    "$base?$tls&sslcert=$WORK/pki/client.crt&sslkey=$WORK/pki/client.key" status --timeout 10s)
  [[ $rc == 0 ]] || { fail "with the client certificate: exit $rc"; tail -n 5 "$WORK/cc.log"; }
  rc=$(out "$WORK/enc.log" --backend \
    "$base?$tls&sslcert=$WORK/pki/client.crt&sslkey=$WORK/pki/client-enc.key&sslpassword=$SIMBA_PKI_KEY_PASSWORD" \
    status --timeout 10s)
  [[ $rc == 0 ]] || { fail "with the encrypted key: exit $rc"; tail -n 5 "$WORK/enc.log"; }
  if grep -q -F -- "$SIMBA_PKI_KEY_PASSWORD" "$WORK/enc.log"; then
    fail "the key's passphrase (sslpassword) was printed"
  fi
  grep -q -F 'sslpassword=***' "$WORK/enc.log" || fail "no redacted sslpassword in the log"
  # The cert role without a certificate: the server refuses it.
  HOME="$WORK/nohome" expect_refused "no client certificate" "certificate" \
    --backend "$base?$tls" status --timeout 2s
}


# --- Redis (rediss://) ----------------------------------------------------------------

REDIS_PW='Tls-RedisPw-8Kd3sW1'
# redis_tls NAME CERT [ARGS...]: a redis-server presenting PKI/CERT.crt on a TLS
# port only; sets PORT_<NAME>.
redis_tls() {
  local name=$1 cert=$2 port; shift 2
  port=$(simba_free_port) || exit 1
  mkdir -p "$WORK/redis-$name"
  redis-server --port 0 --tls-port "$port" --bind 127.0.0.1 --save '' --appendonly no \
    --dir "$WORK/redis-$name" --requirepass "$REDIS_PW" \
    --tls-cert-file "$WORK/pki/$cert.crt" --tls-key-file "$WORK/pki/$cert.key" \
    --tls-ca-cert-file "$WORK/pki/ca.crt" "$@" --daemonize no >"$WORK/redis-$name/log" 2>&1 &
  simba_track_pid $!
  simba_wait_until 10 "redis-server (TLS) on $port" redis-cli --tls --insecure \
    --cert "$WORK/pki/client.crt" --key "$WORK/pki/client.key" -h 127.0.0.1 -p "$port" \
    --no-auth-warning -a "$REDIS_PW" ping || { cat "$WORK/redis-$name/log"; exit 1; }
  printf -v "PORT_$name" '%s' "$port"
}

redis_setup() {
  command -v redis-server >/dev/null || { echo "SKIP: redis-server not installed"; exit 77; }
  local libs
  libs=$(ldd "$(command -v redis-server)" 2>/dev/null)  # (not piped into grep -q: pipefail)
  [[ "$libs" == *libssl* ]] || { echo "SKIP: this redis-server is built without TLS"; exit 77; }
  SIMBA_SERVERS_DIR="$WORK/servers"
  mkdir -p "$SIMBA_SERVERS_DIR"
  redis_tls ok server --tls-auth-clients no
  redis_tls wronghost wronghost --tls-auth-clients no
  redis_tls expired expired --tls-auth-clients no
  redis_tls clientauth server --tls-auth-clients yes
  CA="tls_ca=$WORK/pki/ca.crt"
}

case_redis_verified_tls_goes_live_and_leads() {
  local rc
  for host in 127.0.0.1 localhost; do
    rc=$(out "$WORK/r.log" --backend "rediss://:$REDIS_PW@$host:$PORT_ok/0?$CA" \
      lock "tls.redis.$host" -- true)
    [[ $rc == 0 ]] || { fail "lock via $host exited $rc"; tail -n 5 "$WORK/r.log"; }
    grep -q "certificate verified for $host" "$WORK/r.log" ||
      fail "no verified handshake for $host in the log"
    if grep -q -F -- "$REDIS_PW" "$WORK/r.log"; then fail "the password was printed"; fi
  done
  rc=$(out "$WORK/r.log" --backend "rediss://:$REDIS_PW@127.0.0.1:$PORT_ok?$CA" status --json)
  [[ $rc == 0 ]] || fail "status exited $rc"
  grep -q -F "rediss://:***@127.0.0.1:$PORT_ok" "$WORK/r.log" || fail "no redacted URL in status"
  # The plain scheme against the TLS port never goes live.
  expect_refused "redis:// on a TLS port" "connection lost|unreachable|no answer" \
    --backend "redis://:$REDIS_PW@127.0.0.1:$PORT_ok" status --timeout 2s
}

case_redis_wrong_ca_is_refused() {
  expect_refused "other CA" "certificate was refused: (self-signed certificate in certificate chain|unable to get local issuer)" \
    --backend "rediss://:$REDIS_PW@127.0.0.1:$PORT_ok?tls_ca=$WORK/pki/other-ca.crt" \
    status --timeout 2s
}

case_redis_wrong_host_name_is_refused() {
  expect_refused "certificate for wrong.example" "certificate was refused: (IP address|hostname) mismatch" \
    --backend "rediss://:$REDIS_PW@127.0.0.1:$PORT_wronghost?$CA" status --timeout 2s
  expect_refused "tls_server_name=other.example" "certificate was refused: hostname mismatch \(verifying other.example\)" \
    --backend "rediss://:$REDIS_PW@127.0.0.1:$PORT_ok?$CA&tls_server_name=other.example" \
    status --timeout 2s
  # tls_server_name names what the certificate says when the URL holds an address.
  local rc
  rc=$(out "$WORK/sn.log" --backend \
    "rediss://:$REDIS_PW@127.0.0.1:$PORT_wronghost?$CA&tls_server_name=wrong.example" status)
  [[ $rc == 0 ]] || { fail "tls_server_name=wrong.example exited $rc"; tail -n 5 "$WORK/sn.log"; }
}

case_redis_expired_certificate_is_refused() {
  expect_refused "expired" "certificate was refused: certificate has expired" \
    --backend "rediss://:$REDIS_PW@127.0.0.1:$PORT_expired?$CA" status --timeout 2s
}

# tls_client_certificate_cases URL NAME: URL (with tls_ca, to a server that
# wants a client certificate) is refused without one, gets in with tls_cert +
# tls_key (lock NAME), also with an encrypted key; no passphrase printed.
tls_client_certificate_cases() {
  local u=$1 name=$2 rc
  expect_refused "no client certificate" "alert (certificate required|bad certificate)|TLS: (handshake|read|write) failed" \
    --backend "$u" status --timeout 2s
  rc=$(out "$WORK/cc.log" --backend "$u&tls_cert=$WORK/pki/client.crt&tls_key=$WORK/pki/client.key" \
    lock "$name" -- true)
  [[ $rc == 0 ]] || { fail "with a client certificate: exit $rc"; tail -n 5 "$WORK/cc.log"; }
  rc=$(out "$WORK/enc.log" --backend \
    "$u&tls_cert=$WORK/pki/client.crt&tls_key=$WORK/pki/client-enc.key&tls_key_password=$SIMBA_PKI_KEY_PASSWORD" \
    status)
  [[ $rc == 0 ]] || { fail "with an encrypted key: exit $rc"; tail -n 5 "$WORK/enc.log"; }
  if grep -q -F -- "$SIMBA_PKI_KEY_PASSWORD" "$WORK/enc.log"; then
    fail "the key's passphrase was printed"
  fi
  grep -q -F 'tls_key_password=***' "$WORK/enc.log" || fail "no redacted tls_key_password"
}

# tls_bad_files_cases TLS_BASE PLAIN_BASE: TLS files that cannot be used are
# refused at open (TLS_BASE: scheme://host:port of the TLS scheme), and tls_ca
# on PLAIN_BASE (the plain scheme) too; no passphrase printed.
tls_bad_files_cases() {
  local base=$1 plain=$2 scheme=${1%%://*}
  expect_refused "missing CA file" "$scheme URL: cannot load the CA certificates of tls_ca" \
    --backend "$base?tls_ca=$WORK/nope.pem" status
  expect_refused "wrong key passphrase" "cannot load the client key" \
    --backend "$base?$CA&tls_cert=$WORK/pki/client.crt&tls_key=$WORK/pki/client-enc.key&tls_key_password=Wrong-KeyPw-1" \
    status
  expect_refused "key of another certificate" "key values mismatch|does not match" \
    --backend "$base?$CA&tls_cert=$WORK/pki/client.crt&tls_key=$WORK/pki/server.key" \
    status
  expect_refused "tls_ca on ${plain%%:*}://" "needs an? $scheme:// URL" --backend "$plain?$CA" status
  if grep -q -F -- "Wrong-KeyPw-1" "$WORK/refused.log"; then fail "a passphrase was printed"; fi
}

case_redis_client_certificate() {
  tls_client_certificate_cases "rediss://:$REDIS_PW@127.0.0.1:$PORT_clientauth?$CA" tls.redis.cc
}

case_redis_bad_tls_files_are_refused_at_open() {
  tls_bad_files_cases "rediss://127.0.0.1:$PORT_ok" "redis://127.0.0.1:$PORT_ok"
}

case_redis_conformance_suite_over_tls() {
  # The whole conformance suite (elections, locks, failover, release
  # broadcasts on the subscriber connection, EXTERNAL mode) through the pump.
  SIMBA_TEST_REDIS_URL="rediss://:$REDIS_PW@127.0.0.1:$PORT_ok?$CA" timeout $((300 * SLOW)) \
    "$TEST_BACKENDS" --gtest_filter='Backends/Conformance.*/redis' --gtest_brief=1 \
    >"$WORK/conformance.log" 2>&1 || { fail "conformance suite:"; tail -n 20 "$WORK/conformance.log"; }
  grep -q "PASSED" "$WORK/conformance.log" || fail "the conformance suite ran no test"
}

# --- etcd ---------------------------------------------------------------------------

etcd_setup() {
  command -v etcd >/dev/null && command -v etcdctl >/dev/null ||
    { echo "SKIP: etcd-server and etcd-client are not installed"; exit 77; }
  SIMBA_SERVERS_DIR="$WORK/servers"
  mkdir -p "$SIMBA_SERVERS_DIR"
  local which cert
  for which in ok wronghost expired clientauth; do
    case $which in ok | clientauth) cert=server ;; *) cert=$which ;; esac
    if [[ $which == clientauth ]]; then
      simba_start_etcd_tls "$SIMBA_SERVERS_DIR/etcd-$which" "$WORK/pki" "$cert" \
        --client-cert-auth --trusted-ca-file "$WORK/pki/ca.crt" || exit 1
    else
      simba_start_etcd_tls "$SIMBA_SERVERS_DIR/etcd-$which" "$WORK/pki" "$cert" || exit 1
    fi
    printf -v "EPORT_$which" %s "$SIMBA_TLS_ETCD_PORT"
  done
  CA="tls_ca=$WORK/pki/ca.crt"
  ETCDCTL=(etcdctl --endpoints "https://127.0.0.1:$EPORT_ok" --cacert "$WORK/pki/ca.crt"
           --command-timeout 5s)
}

case_etcd_verified_tls_goes_live_and_leads() {
  local rc host
  for host in 127.0.0.1 localhost; do
    rc=$(out "$WORK/e.log" --backend "etcds://$host:$EPORT_ok/tls?$CA" lock "tls.etcd.$host" -- true)
    [[ $rc == 0 ]] || { fail "lock via $host exited $rc"; tail -n 5 "$WORK/e.log"; }
    grep -q "certificate verified for $host" "$WORK/e.log" ||
      fail "no verified handshake for $host in the log"
  done
  # The lock went through etcd: its token key is there.
  local keys
  keys=$("${ETCDCTL[@]}" get --prefix /tls/t/ --keys-only)
  [[ $keys == *tls.etcd.localhost* ]] || fail "no token key of the lock in etcd"
  expect_refused "etcd:// on a TLS port" "connection lost|closed the connection|no answer|HTTP/2" \
    --backend "etcd://127.0.0.1:$EPORT_ok" status --timeout 2s
}

case_etcd_wrong_ca_is_refused() {
  expect_refused "other CA" "certificate was refused: (self-signed certificate in certificate chain|unable to get local issuer)" \
    --backend "etcds://127.0.0.1:$EPORT_ok?tls_ca=$WORK/pki/other-ca.crt" status --timeout 2s
}

case_etcd_wrong_host_name_is_refused() {
  expect_refused "certificate for wrong.example" "certificate was refused: (IP address|hostname) mismatch" \
    --backend "etcds://127.0.0.1:$EPORT_wronghost?$CA" status --timeout 2s
  expect_refused "tls_server_name=other.example" "certificate was refused: hostname mismatch \(verifying other.example\)" \
    --backend "etcds://127.0.0.1:$EPORT_ok?$CA&tls_server_name=other.example" status --timeout 2s
  local rc
  rc=$(out "$WORK/sn.log" --backend \
    "etcds://127.0.0.1:$EPORT_wronghost?$CA&tls_server_name=wrong.example" status)
  [[ $rc == 0 ]] || { fail "tls_server_name=wrong.example exited $rc"; tail -n 5 "$WORK/sn.log"; }
}

case_etcd_expired_certificate_is_refused() {
  expect_refused "expired" "certificate was refused: certificate has expired" \
    --backend "etcds://127.0.0.1:$EPORT_expired?$CA" status --timeout 2s
  # A member whose certificate is refused is left for the next one in the URL.
  local rc
  rc=$(out "$WORK/next.log" --backend "etcds://127.0.0.1:$EPORT_expired,127.0.0.1:$EPORT_ok/next?$CA" \
    lock tls.etcd.next -- true)
  [[ $rc == 0 ]] || { fail "expired member then a good one: exit $rc"; tail -n 5 "$WORK/next.log"; }
}

case_etcd_client_certificate() {
  tls_client_certificate_cases "etcds://127.0.0.1:$EPORT_clientauth/cc?$CA" tls.etcd.cc
}

case_etcd_bad_tls_files_are_refused_at_open() {
  tls_bad_files_cases "etcds://127.0.0.1:$EPORT_ok" "etcd://127.0.0.1:$EPORT_ok"
}

# Last but the conformance suite: it turns auth on for the ok server.
ETCD_ROOT_PW='Etcd-RootPw-7Qx2'

case_etcd_user_password_auth() {
  local pw=$ETCD_ROOT_PW rc
  "${ETCDCTL[@]}" user add "root:$pw" >/dev/null &&
    "${ETCDCTL[@]}" user grant-role root root >/dev/null &&
    "${ETCDCTL[@]}" auth enable >/dev/null ||
    { fail "cannot enable auth"; return; }
  local u="etcds://root:$pw@127.0.0.1:$EPORT_ok/auth?$CA"
  rc=$(out "$WORK/auth.log" --backend "$u" lock tls.etcd.auth -- true)
  [[ $rc == 0 ]] || { fail "lock as root exited $rc"; tail -n 5 "$WORK/auth.log"; }
  rc=$(out "$WORK/auth-status.log" --backend "$u" status --json)
  [[ $rc == 0 ]] || { fail "status as root exited $rc"; tail -n 5 "$WORK/auth-status.log"; }
  grep -q -F "etcds://root:***@127.0.0.1:$EPORT_ok" "$WORK/auth-status.log" ||
    fail "no redacted URL in status"
  expect_refused "no password" "user name is empty" \
    --backend "etcds://127.0.0.1:$EPORT_ok/auth?$CA" status --timeout 2s
  expect_refused "wrong password" "authentication as \"root\" refused: .*authentication failed" \
    --backend "etcds://root:Wrong-RootPw-1@127.0.0.1:$EPORT_ok/auth?$CA" status --timeout 2s
  # Changing the password (to the same one) invalidates root's tokens while
  # the lock is held: the release takes a new one.
  rc=$(out "$WORK/reauth.log" --backend "$u" lock tls.etcd.reauth -- sh -c \
    "echo '$pw' | ${ETCDCTL[*]} --user 'root:$pw' user passwd root --interactive=false >/dev/null && sleep 1")
  [[ $rc == 0 ]] || { fail "lock across a token change exited $rc"; tail -n 8 "$WORK/reauth.log"; }
  grep -q "authenticating again" "$WORK/reauth.log" || fail "no new token after the change"
  if [[ -n $("${ETCDCTL[@]}" --user "root:$pw" get /auth/l/tls.etcd.reauth) ]]; then
    fail "the lock was not released after the token change"
  fi
  local f
  for f in auth auth-status reauth refused; do
    if grep -q -F -e "$pw" -e "Wrong-RootPw-1" "$WORK/$f.log"; then fail "a password was printed ($f)"; fi
  done
}

# The least-privilege role of docs/backends.md (etcd, "Access control"):
# readwrite on the prefix's keys and nothing else is enough (the conformance
# suite below runs as this user); read-only, or rights on another prefix,
# are refused with etcd's reason at the first write.
ETCD_APP_PW='Etcd-AppPw-4Kd9'

case_etcd_least_privilege_role() {
  local r=("${ETCDCTL[@]}" --user "root:$ETCD_ROOT_PW") rc
  "${r[@]}" role add simba-app >/dev/null &&
    "${r[@]}" role grant-permission simba-app --prefix=true readwrite /app/ >/dev/null &&
    "${r[@]}" role grant-permission simba-app --prefix=true readwrite /conf/ >/dev/null &&
    "${r[@]}" user add "app:$ETCD_APP_PW" >/dev/null &&
    "${r[@]}" user grant-role app simba-app >/dev/null &&
    "${r[@]}" role add simba-reader >/dev/null &&
    "${r[@]}" role grant-permission simba-reader --prefix=true read /app/ >/dev/null &&
    "${r[@]}" user add "reader:$ETCD_APP_PW" >/dev/null &&
    "${r[@]}" user grant-role reader simba-reader >/dev/null ||
    { fail "cannot create the roles"; return; }
  local u="etcds://app:$ETCD_APP_PW@127.0.0.1:$EPORT_ok/app?$CA"
  rc=$(out "$WORK/app.log" --backend "$u" lock tls.etcd.app -- true)
  [[ $rc == 0 ]] || { fail "lock as the app role exited $rc"; tail -n 5 "$WORK/app.log"; }
  rc=$(out "$WORK/app-status.log" --backend "$u" status --json)
  [[ $rc == 0 ]] || { fail "status as the app role exited $rc"; tail -n 5 "$WORK/app-status.log"; }
  rc=$(out "$WORK/reader-status.log" --backend "etcds://reader:$ETCD_APP_PW@127.0.0.1:$EPORT_ok/app?$CA" status --json)
  [[ $rc == 0 ]] || { fail "status as the read-only role exited $rc"; tail -n 5 "$WORK/reader-status.log"; }
  # The session cannot open (its marker is a write): every attempt logs etcd's
  # reason and is retried, as on every backend, until the lock's timeout.
  local who
  for who in reader:/app app:/other; do
    rc=$(out "$WORK/denied.log" --backend "etcds://${who%%:*}:$ETCD_APP_PW@127.0.0.1:$EPORT_ok${who#*:}?$CA" \
      lock tls.etcd.denied --timeout 2s -- true)
    [[ $rc == 124 ]] || fail "$who: exit $rc, expected 124 (the lock's timeout)"
    grep -q "opening a session failed (error: etcd: grpc-status 7: etcdserver: permission denied)" \
      "$WORK/denied.log" || { fail "$who: no permission denied in the log"; tail -n 5 "$WORK/denied.log"; }
  done
}

# After the auth case: the whole conformance suite over TLS with a token.
case_etcd_conformance_suite_over_tls_with_auth() {
  SIMBA_TEST_ETCD_URL="etcds://app:$ETCD_APP_PW@127.0.0.1:$EPORT_ok/conf?$CA" \
    timeout $((300 * SLOW)) "$TEST_BACKENDS" --gtest_filter='Backends/Conformance.*/etcd' \
    --gtest_brief=1 >"$WORK/conformance.log" 2>&1 ||
    { fail "conformance suite:"; tail -n 20 "$WORK/conformance.log"; }
  grep -q "PASSED" "$WORK/conformance.log" || fail "the conformance suite ran no test"
}

TEST_BACKENDS=${3:-}

case "$WHICH" in
  redis)
    redis_setup
    run_case redis_verified_tls_goes_live_and_leads
    run_case redis_wrong_ca_is_refused
    run_case redis_wrong_host_name_is_refused
    run_case redis_expired_certificate_is_refused
    run_case redis_client_certificate
    run_case redis_bad_tls_files_are_refused_at_open
    [[ -n "$TEST_BACKENDS" ]] && run_case redis_conformance_suite_over_tls
    ;;
  etcd)
    etcd_setup
    run_case etcd_verified_tls_goes_live_and_leads
    run_case etcd_wrong_ca_is_refused
    run_case etcd_wrong_host_name_is_refused
    run_case etcd_expired_certificate_is_refused
    run_case etcd_client_certificate
    run_case etcd_bad_tls_files_are_refused_at_open
    run_case etcd_user_password_auth
    run_case etcd_least_privilege_role
    [[ -n "$TEST_BACKENDS" ]] && run_case etcd_conformance_suite_over_tls_with_auth
    ;;
  postgres)
    pg_setup
    run_case pg_verify_full_goes_live_over_tls
    run_case pg_wrong_ca_is_refused
    run_case pg_missing_root_certificate_is_refused
    run_case pg_wrong_host_name_is_refused
    run_case pg_expired_certificate_is_refused
    run_case pg_client_certificate
    ;;
  *) echo "tls_test.sh: unknown backend '$WHICH' (postgres, redis or etcd)" >&2; exit 2 ;;
esac
finish
