# shellcheck shell=bash
# Test servers for the backend layer (tests/backends, later tests/tck and
# tests/chaos). Sourced by scripts/test.sh, which calls start_servers once before
# the first stage and stop_servers from its EXIT trap, whatever happened.
#
# ============================ ADD SERVERS HERE ================================
# Contract for each server added to start_servers:
#   - run it on 127.0.0.1, on a port from simba_free_port, with its files under
#     "$SIMBA_SERVERS_DIR" (a temp dir made here, removed by stop_servers);
#   - wait until it answers (simba_wait_until), with a bound;
#   - remember its pid with simba_track_pid, so stop_servers ends it;
#   - export the URL the tests read, e.g.
#       SIMBA_TEST_REDIS_URL=redis://127.0.0.1:PORT
#       SIMBA_TEST_POSTGRES_URL=postgresql://USER@127.0.0.1:PORT/DB
#       SIMBA_TEST_ZOOKEEPER_URL=zookeeper://127.0.0.1:PORT/simba-test
#       SIMBA_TEST_REDIS_SENTINEL_URL=redis+sentinel://127.0.0.1:P1,...,P3/simba?wait_replicas=1
#       SIMBA_TEST_ETCD_URL=etcd://127.0.0.1:PORT
#     ctest passes the environment on to every test; a backend test whose
#     variable is unset should GTEST_SKIP() with a message, so a developer without
#     servers can still run the suite (scripts/test.sh always sets them).
#   - add the server's Debian packages to SIMBA_APT_PACKAGES in scripts/test.sh.
# How to run each server here: /work/shared/design/TESTING.md and PITFALLS.md.
# ==============================================================================

SIMBA_SERVERS_DIR=""
SIMBA_SERVER_PIDS=()

# start_servers [redis] [postgres] [zookeeper] [sentinel] [etcd]: the named
# servers, or all of them.
start_servers() {
  local which=("$@") s
  [[ ${#which[@]} -gt 0 ]] || which=(redis postgres zookeeper sentinel etcd)
  SIMBA_SERVERS_DIR=$(mktemp -d "${TMPDIR:-/tmp}/simba-servers.XXXXXX")
  export SIMBA_SERVERS_DIR
  for s in "${which[@]}"; do
    case "$s" in
      redis) start_redis || return 1 ;;
      postgres) start_postgres || return 1 ;;
      zookeeper) start_zookeeper || return 1 ;;
      sentinel) start_redis_sentinel || return 1 ;;
      etcd) start_etcd || return 1 ;;
      *) echo "servers: unknown server '$s'" >&2; return 1 ;;
    esac
  done
  return 0
}

# redis-server with persistence as we recommend to users (a restart must not
# reset tokens): append-only file, fsync on every write, no RDB snapshots.
start_redis() {
  local port dir="$SIMBA_SERVERS_DIR/redis"
  command -v redis-server >/dev/null || { echo "servers: redis-server not installed" >&2; return 1; }
  mkdir -p "$dir"
  port=$(simba_free_port) || return 1
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly yes \
    --appendfsync always --dir "$dir" --daemonize no \
    >"$dir/redis.log" 2>&1 &
  simba_track_pid $!
  simba_wait_until 10 "redis-server on $port" simba_redis_pong "$port" || {
    cat "$dir/redis.log" >&2
    return 1
  }
  export SIMBA_TEST_REDIS_URL="redis://127.0.0.1:$port"
  echo "servers: redis-server on 127.0.0.1:$port" >&2
}

# Redis as deployed for high availability: a primary and a replica (both AOF,
# appendfsync always) under three Sentinels (quorum 2), all on 127.0.0.1. The
# URL names the Sentinels and asks for one replica's acknowledgement of every
# write that grants or extends a lease (wait_replicas=1, ADR 0025).
start_redis_sentinel() {
  local dir="$SIMBA_SERVERS_DIR/sentinel" primary replica port i hosts=""
  command -v redis-server >/dev/null || { echo "servers: redis-server not installed" >&2; return 1; }
  mkdir -p "$dir/primary" "$dir/replica"
  primary=$(simba_free_port) || return 1
  replica=$(simba_free_port) || return 1
  for i in primary replica; do
    port=$primary
    local extra=()
    [[ $i == replica ]] && port=$replica extra=(--replicaof 127.0.0.1 "$primary")
    # No 5 s wait before the replica's full sync (for more replicas to join).
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly yes \
      --appendfsync always --repl-diskless-sync-delay 0 --dir "$dir/$i" --daemonize no "${extra[@]}" \
      >"$dir/$i/redis.log" 2>&1 &
    simba_track_pid $!
    simba_wait_until 10 "redis-server ($i) on $port" simba_redis_pong "$port" || return 1
  done
  simba_wait_until 20 "the replica in sync" simba_redis_in_sync "$replica" || return 1
  for i in 1 2 3; do
    port=$(simba_free_port) || return 1
    mkdir -p "$dir/sentinel$i"
    printf 'sentinel monitor simba 127.0.0.1 %s 2\nsentinel down-after-milliseconds simba 1000\n' \
      "$primary" >"$dir/sentinel$i/sentinel.conf"
    redis-server "$dir/sentinel$i/sentinel.conf" --port "$port" --bind 127.0.0.1 \
      --dir "$dir/sentinel$i" --daemonize no --sentinel >"$dir/sentinel$i/sentinel.log" 2>&1 &
    simba_track_pid $!
    simba_wait_until 10 "redis-sentinel on $port" simba_redis_pong "$port" || return 1
    hosts+="${hosts:+,}127.0.0.1:$port"
  done
  export SIMBA_TEST_REDIS_SENTINEL_URL="redis+sentinel://$hosts/simba?wait_replicas=1"
  export SIMBA_TEST_REDIS_SENTINEL_PRIMARY_PORT=$primary  # (the bench's raw baseline)
  echo "servers: Redis primary 127.0.0.1:$primary, replica :$replica, Sentinels $hosts" >&2
}

simba_redis_in_sync() {
  redis-cli -h 127.0.0.1 -p "$1" info replication 2>/dev/null | grep -q '^master_link_status:up'
}

simba_redis_pong() { [[ "$(redis-cli -h 127.0.0.1 -p "$1" ping 2>/dev/null)" == PONG ]]; }

# A throwaway PostgreSQL: initdb into the temp dir, 127.0.0.1 only, a free port,
# its unix socket in the temp dir, no fsync (the data dies with the run; a
# process crash loses nothing written to the OS), synchronous_commit=off on
# purpose (Simba turns it on for its own connections; the tests prove it), and
# TLS with a self-signed certificate made here (for the sslmode tests).
# PostgreSQL refuses to run as root: as root, initdb and the server run as the
# `postgres` system user (setpriv replaces itself with the server, so $! is
# the server's pid).
start_postgres() {
  local bindir port dir="$SIMBA_SERVERS_DIR/postgres" as=()
  bindir=$(simba_pg_bindir) || { echo "servers: PostgreSQL server binaries not found" >&2; return 1; }
  command -v openssl >/dev/null || { echo "servers: openssl not installed" >&2; return 1; }
  mkdir -p "$dir"
  if [[ $(id -u) -eq 0 ]]; then
    id -u postgres >/dev/null 2>&1 ||
      useradd --system --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin postgres
    chmod 711 "$SIMBA_SERVERS_DIR"  # postgres must reach its own dir inside
    chown postgres: "$dir"
    as=(setpriv --reuid=postgres --regid=postgres --init-groups --)
  fi
  chmod 700 "$dir"
  "${as[@]}" "$bindir/initdb" -D "$dir/data" -U postgres --auth=trust --no-sync \
    --no-locale -E UTF8 >"$dir/initdb.log" 2>&1 || {
    cat "$dir/initdb.log" >&2
    return 1
  }
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost \
    -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
    -keyout "$dir/server.key" -out "$dir/server.crt" >"$dir/openssl.log" 2>&1 || {
    cat "$dir/openssl.log" >&2
    return 1
  }
  chmod 600 "$dir/server.key"
  [[ ${#as[@]} -gt 0 ]] && chown postgres: "$dir/server.key" "$dir/server.crt"
  port=$(simba_free_port) || return 1
  "${as[@]}" "$bindir/postgres" -D "$dir/data" -p "$port" -k "$dir" \
    -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off \
    -c full_page_writes=off -c ssl=on -c "ssl_cert_file=$dir/server.crt" \
    -c "ssl_key_file=$dir/server.key" >"$dir/postgres.log" 2>&1 &
  simba_track_pid $!
  simba_wait_until 20 "postgres on $port" "$bindir/pg_isready" -q -h 127.0.0.1 -p "$port" || {
    cat "$dir/postgres.log" >&2
    return 1
  }
  # sslmode=disable: the conformance suite runs on plain TCP; the TLS tests ask
  # for TLS themselves, with the certificate below.
  export SIMBA_TEST_POSTGRES_URL="postgresql://postgres@127.0.0.1:$port/postgres?sslmode=disable"
  export SIMBA_TEST_POSTGRES_CA="$dir/server.crt"
  echo "servers: postgres on 127.0.0.1:$port" >&2
}

# The directory of initdb/postgres/pg_isready (Debian keeps them out of PATH).
simba_pg_bindir() {
  local d
  if command -v pg_config >/dev/null; then
    d=$(pg_config --bindir 2>/dev/null)
    [[ -x "$d/initdb" && -x "$d/postgres" ]] && { echo "$d"; return 0; }
  fi
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r) /usr/bin /usr/local/bin; do
    [[ -x "$d/initdb" && -x "$d/postgres" ]] && { echo "$d"; return 0; }
  done
  return 1
}

# ZooKeeper 3.8 (Debian package zookeeper) standalone, started from the jar with
# a temp zoo.cfg: a 100 ms tick so that sub-second sessions are granted
# (minSessionTimeout 200 ms; maxSessionTimeout 30 s, above every lease the
# suites ask for), no admin server (it would take port 8080), a small heap, and
# the ruok/srvr four-letter words for the readiness check.
start_zookeeper() {
  local port dir="$SIMBA_SERVERS_DIR/zookeeper"
  if [[ ! -r /usr/share/java/zookeeper.jar ]] || ! command -v java >/dev/null; then
    echo "servers: zookeeper (or java) not installed" >&2
    return 1
  fi
  mkdir -p "$dir/data"
  port=$(simba_free_port) || return 1
  simba_zookeeper_cfg "$dir" "$port" 200 30000 >"$dir/zoo.cfg"
  simba_zookeeper_java "$dir" >"$dir/zookeeper.log" 2>&1 &
  simba_track_pid $!
  simba_wait_until 30 "zookeeper on $port" simba_zookeeper_ruok "$port" || {
    cat "$dir/zookeeper.log" >&2
    return 1
  }
  export SIMBA_TEST_ZOOKEEPER_URL="zookeeper://127.0.0.1:$port/simba-test"
  echo "servers: zookeeper on 127.0.0.1:$port" >&2
}

# simba_zookeeper_cfg DIR PORT MIN_MS MAX_MS: a standalone zoo.cfg on stdout.
simba_zookeeper_cfg() {
  cat <<CFG
tickTime=100
dataDir=$1/data
clientPort=$2
clientPortAddress=127.0.0.1
minSessionTimeout=$3
maxSessionTimeout=$4
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr
preAllocSize=1024
CFG
}

# simba_zookeeper_java DIR: runs the server of DIR/zoo.cfg in the foreground
# (exec: the caller's $! is the JVM's pid). Warnings and errors go to stderr.
# SIMBA_ZOOKEEPER_HEAP (default 128m) sizes the heap: scripts/scale.sh holds
# 100,000 leases of 10,000 sessions there.
simba_zookeeper_java() {
  exec java "-Xmx${SIMBA_ZOOKEEPER_HEAP:-128m}" -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
    -cp "$1:/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar" \
    org.apache.zookeeper.server.quorum.QuorumPeerMain "$1/zoo.cfg"
}

simba_zookeeper_ruok() {
  local answer
  answer=$(exec 3<>"/dev/tcp/127.0.0.1/$1" && printf ruok >&3 && timeout 2 cat <&3) 2>/dev/null
  [[ "$answer" == imok ]]
}

# etcd 3.4 (Debian package etcd-server), one member on 127.0.0.1 with its data
# under the temp dir. Durable as shipped: it fsyncs its WAL before it answers.
start_etcd() {
  local client peer dir="$SIMBA_SERVERS_DIR/etcd"
  command -v etcd >/dev/null || { echo "servers: etcd (etcd-server) not installed" >&2; return 1; }
  command -v etcdctl >/dev/null || { echo "servers: etcdctl (etcd-client) not installed" >&2; return 1; }
  client=$(simba_free_port) || return 1
  peer=$(simba_free_port) || return 1
  simba_etcd_member "$dir" etcd0 "$client" "$peer" "etcd0=http://127.0.0.1:$peer" &
  simba_track_pid $!
  simba_wait_until 20 "etcd on $client" simba_etcd_healthy "$client" || {
    cat "$dir/etcd0.log" >&2
    return 1
  }
  export SIMBA_TEST_ETCD_URL="etcd://127.0.0.1:$client"
  echo "servers: etcd on 127.0.0.1:$client" >&2
}

# simba_etcd_member DIR NAME CLIENT_PORT PEER_PORT INITIAL_CLUSTER: runs one
# member of a new cluster in the foreground (exec: the caller's $! is etcd's
# pid), data in DIR/NAME, log in DIR/NAME.log. INITIAL_CLUSTER lists every
# member as NAME=http://127.0.0.1:PEER_PORT (one for a single member; three for
# a cluster, each started with the same list). A 50 ms heartbeat and 500 ms
# election timeout: on loopback a leader is elected within a second.
simba_etcd_member() {
  local dir=$1 name=$2 client=$3 peer=$4 cluster=$5
  mkdir -p "$dir"
  exec etcd --name "$name" --data-dir "$dir/$name" \
    --listen-client-urls "http://127.0.0.1:$client" --advertise-client-urls "http://127.0.0.1:$client" \
    --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
    --initial-cluster "$cluster" --initial-cluster-state new --initial-cluster-token "simba-$$" \
    --heartbeat-interval 50 --election-timeout 500 --log-level warn --logger zap \
    >"$dir/$name.log" 2>&1
}

simba_etcd_healthy() {
  etcdctl --endpoints "http://127.0.0.1:$1" --command-timeout 2s endpoint health >/dev/null 2>&1
}

# Safe to call twice, and when start_servers never ran or stopped half-way.
stop_servers() {
  local pid
  for pid in "${SIMBA_SERVER_PIDS[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${SIMBA_SERVER_PIDS[@]}"; do
    simba_wait_pid_gone "$pid" 10 || kill -9 "$pid" 2>/dev/null || true
  done
  SIMBA_SERVER_PIDS=()
  if [[ -n "$SIMBA_SERVERS_DIR" && -d "$SIMBA_SERVERS_DIR" ]]; then
    # PostgreSQL servers a test binary started under this dir and left behind
    # (it died before stopping them): their pid is the first line of postmaster.pid.
    local f
    for f in "$SIMBA_SERVERS_DIR"/*/data/postmaster.pid; do
      [[ -f "$f" ]] || continue
      pid=$(head -n 1 "$f" 2>/dev/null || true)
      [[ "$pid" =~ ^[0-9]+$ ]] || continue
      # A test may have left a child stopped (the WAL writer): a stopped child
      # holds up the shutdown, and outlives a killed postmaster.
      pkill -CONT -P "$pid" 2>/dev/null || true
      kill -INT "$pid" 2>/dev/null || continue
      if ! simba_wait_pid_gone "$pid" 10; then
        pkill -KILL -P "$pid" 2>/dev/null || true
        kill -9 "$pid" 2>/dev/null || true
      fi
    done
    rm -rf "$SIMBA_SERVERS_DIR"
  fi
  SIMBA_SERVERS_DIR=""
}

# --- helpers -------------------------------------------------------------------

simba_track_pid() { SIMBA_SERVER_PIDS+=("$1"); }

# simba_free_port: print a TCP port on 127.0.0.1 that no socket uses now. It
# is picked below the kernel's ephemeral range: a port in that range can be
# the local end of any outgoing connection at any moment (a server once failed
# to bind one with "Address already in use" although nothing listened on it).
# Never one handed out before in this run (listed in the servers' directory:
# callers run it in a subshell): a pair picked before either server binds,
# such as the Sentinel setup's primary and replica, could otherwise be equal.
simba_free_port() {
  local port lo=32768 given=""
  [[ -n "${SIMBA_SERVERS_DIR:-}" ]] && given="$SIMBA_SERVERS_DIR/ports-given"
  read -r lo _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || lo=32768
  local base=20000
  ((lo - base < 2000)) && base=10000
  for _ in $(seq 1 200); do
    port=$((base + RANDOM % (lo - base)))
    [[ -n "$given" ]] && grep -qx "$port" "$given" 2>/dev/null && continue  # ours already
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && continue  # a listener
    if command -v ss >/dev/null && [[ -n "$(ss -Htan "sport = :$port" 2>/dev/null)" ]]; then
      continue  # bound by some other socket
    fi
    [[ -n "$given" ]] && echo "$port" >>"$given"
    echo "$port"
    return 0
  done
  echo "simba_free_port: no free port found" >&2
  return 1
}

# simba_wait_until SECONDS WHAT CMD...: run CMD until it succeeds, at most SECONDS.
simba_wait_until() {
  local limit=$1 what=$2 start=$SECONDS
  shift 2
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS - start >= limit)); then
      echo "servers: $what not ready after ${limit}s" >&2
      return 1
    fi
    sleep 0.1
  done
}

# simba_wait_pid_gone PID SECONDS: wait for PID to exit; a zombie counts as gone.
simba_wait_pid_gone() {
  local pid=$1 limit=$2 start=$SECONDS stat
  while kill -0 "$pid" 2>/dev/null; do
    stat=$(ps -o stat= -p "$pid" 2>/dev/null || true)
    [[ "$stat" == Z* ]] && return 0
    ((SECONDS - start >= limit)) && return 1
    sleep 0.1
  done
  return 0
}

# --- TLS test servers (issue 23): additive helpers; the shared servers above are
# unchanged. Tests that need TLS start their own server with these. -------------

# simba_make_pki DIR: a throwaway PKI made with openssl, for TLS tests:
#   ca.crt/ca.key            the test CA (RSA 2048, 2 days)
#   other-ca.crt             a CA that signed nothing here ("wrong CA")
#   server.crt/server.key    signed by ca, SAN IP:127.0.0.1 and DNS:localhost
#   wronghost.crt/.key       signed by ca, SAN DNS:wrong.example only ("wrong host name")
#   expired.crt/.key         signed by ca, valid 2020-01-01..2020-01-02 ("expired")
#   client.crt/client.key    signed by ca, CN=simba_cert (client certificates)
#   client-enc.key           client.key encrypted (AES-256) with $SIMBA_PKI_KEY_PASSWORD
#                            (default "pki-key-pw")
# Keys are mode 0600. Returns nonzero (with openssl's words on stderr) on failure.
simba_make_pki() {
  local dir=$1 log
  mkdir -p "$dir" && log="$dir/openssl.log"
  (
    set -e
    cd "$dir"
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=Simba Test CA" \
      -keyout ca.key -out ca.crt
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=Simba Other CA" \
      -keyout other-ca.key -out other-ca.crt
    # A minimal `openssl ca` setup: it alone can set a validity in the past.
    mkdir -p ca.db && : >ca.db/index.txt && echo 1000 >ca.db/serial
    cat >ca.cnf <<CNF
[ca]
default_ca = test
[test]
dir = $dir/ca.db
database = \$dir/index.txt
serial = \$dir/serial
new_certs_dir = \$dir
certificate = $dir/ca.crt
private_key = $dir/ca.key
default_md = sha256
policy = any
copy_extensions = copy
unique_subject = no
[any]
commonName = supplied
CNF
    local name cn san
    for name in server wronghost expired client; do
      case $name in
        server) cn=127.0.0.1 san="IP:127.0.0.1,DNS:localhost" ;;
        wronghost) cn=wrong.example san="DNS:wrong.example" ;;
        expired) cn=127.0.0.1 san="IP:127.0.0.1,DNS:localhost" ;;
        client) cn=simba_cert san="DNS:simba_cert" ;;
      esac
      openssl req -newkey rsa:2048 -nodes -subj "/CN=$cn" -addext "subjectAltName=$san" \
        -keyout "$name.key" -out "$name.csr"
      if [[ $name == expired ]]; then
        openssl ca -batch -config ca.cnf -startdate 20200101000000Z -enddate 20200102000000Z \
          -in "$name.csr" -out "$name.crt" -notext
      else
        openssl ca -batch -config ca.cnf -days 2 -in "$name.csr" -out "$name.crt" -notext
      fi
    done
    openssl pkey -in client.key -aes256 -passout "pass:${SIMBA_PKI_KEY_PASSWORD:-pki-key-pw}" \
      -out client-enc.key
    chmod 600 ./*.key
  ) >"$log" 2>&1 || { cat "$log" >&2; return 1; }
}

# simba_start_postgres_tls DIR PKI CERT: a PostgreSQL of its own under DIR with
# TLS on, presenting PKI/CERT.crt (CERT: server, wronghost or expired) and
# trusting PKI/ca.crt for client certificates. pg_hba: role simba_cert must
# come over TLS with a client certificate (cert auth, CN = role); everything
# else over TCP is trusted. Creates role simba_cert (LOGIN SUPERUSER, for the
# schema). Sets SIMBA_TLS_PG_PORT and SIMBA_TLS_PG_PID (tracked: stop_servers
# ends it, or kill it yourself). As root, the server runs as `postgres`.
simba_start_postgres_tls() {
  local dir=$1 pki=$2 cert=$3 bindir port as=()
  bindir=$(simba_pg_bindir) || { echo "servers: PostgreSQL server binaries not found" >&2; return 1; }
  mkdir -p "$dir"
  cp "$pki/$cert.crt" "$dir/server.crt" && cp "$pki/$cert.key" "$dir/server.key" &&
    cp "$pki/ca.crt" "$dir/ca.crt" || return 1
  chmod 600 "$dir/server.key"
  if [[ $(id -u) -eq 0 ]]; then
    id -u postgres >/dev/null 2>&1 ||
      useradd --system --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin postgres
    chmod 711 "$(dirname "$dir")"
    chown -R postgres: "$dir"
    as=(setpriv --reuid=postgres --regid=postgres --init-groups --)
  fi
  chmod 700 "$dir"
  "${as[@]}" "$bindir/initdb" -D "$dir/data" -U postgres --auth=trust --no-sync \
    --no-locale -E UTF8 >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; return 1; }
  cat >"$dir/data/pg_hba.conf" <<HBA
local   all         all                       trust
hostssl all         simba_cert  127.0.0.1/32  cert
host    all         simba_cert  127.0.0.1/32  reject
host    all         all         127.0.0.1/32  trust
HBA
  port=$(simba_free_port) || return 1
  "${as[@]}" "$bindir/postgres" -D "$dir/data" -p "$port" -k "$dir" \
    -c listen_addresses=127.0.0.1 -c fsync=off -c ssl=on \
    -c "ssl_cert_file=$dir/server.crt" -c "ssl_key_file=$dir/server.key" \
    -c "ssl_ca_file=$dir/ca.crt" >"$dir/postgres.log" 2>&1 &
  SIMBA_TLS_PG_PID=$!
  simba_track_pid "$SIMBA_TLS_PG_PID"
  simba_wait_until 20 "postgres (TLS) on $port" "$bindir/pg_isready" -q -h 127.0.0.1 -p "$port" || {
    cat "$dir/postgres.log" >&2
    return 1
  }
  "${as[@]}" "$bindir/psql" -h "$dir" -p "$port" -U postgres -d postgres -qAt \
    -c "CREATE ROLE simba_cert LOGIN SUPERUSER" >/dev/null 2>"$dir/psql.log" ||
    { cat "$dir/psql.log" >&2; return 1; }
  SIMBA_TLS_PG_PORT=$port
}

# simba_start_etcd_tls DIR PKI CERT [ETCD_ARGS...]: an etcd of its own under DIR
# serving clients over TLS only (https), presenting PKI/CERT.crt (server,
# wronghost or expired); ETCD_ARGS are added (e.g. --client-cert-auth
# --trusted-ca-file PKI/ca.crt). Sets SIMBA_TLS_ETCD_PORT (tracked: stop_servers
# ends it). Ready when its client port accepts a connection.
simba_start_etcd_tls() {
  local dir=$1 pki=$2 cert=$3 client peer
  shift 3
  command -v etcd >/dev/null || { echo "servers: etcd (etcd-server) not installed" >&2; return 1; }
  mkdir -p "$dir"
  client=$(simba_free_port) || return 1
  peer=$(simba_free_port) || return 1
  etcd --name tls --data-dir "$dir/data" \
    --listen-client-urls "https://127.0.0.1:$client" --advertise-client-urls "https://127.0.0.1:$client" \
    --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
    --initial-cluster "tls=http://127.0.0.1:$peer" --initial-cluster-state new \
    --cert-file "$pki/$cert.crt" --key-file "$pki/$cert.key" "$@" \
    --log-level warn --logger zap >"$dir/etcd.log" 2>&1 &
  simba_track_pid $!
  simba_wait_until 20 "etcd (TLS) on $client" simba_port_accepts "$client" || {
    cat "$dir/etcd.log" >&2
    return 1
  }
  SIMBA_TLS_ETCD_PORT=$client
}

simba_port_accepts() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
