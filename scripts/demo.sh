#!/usr/bin/env bash
# The main job: a live demo of leader election and failover on Redis.
#
# Installs what is missing (Debian 12), builds the `simba` tool into build-demo/,
# starts a throwaway redis-server on a free port, and runs three workers:
#
#     simba run demo.leader -- <a job that appends to a fenced ledger>
#
# Then it SIGKILLs the leader (the next one takes over once the dead session's
# lease runs out), freezes the next leader with SIGSTOP past its lease (as a long
# GC pause or a VM migration would; it is replaced, and on waking it finds its
# term over and stops its job), and finally stops the leader cleanly (handover
# at once). Every failover is timed and every term's token shown. Everything it
# started is stopped on exit. Usage: bash scripts/demo.sh
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# shellcheck source=lib/packages.sh
source "$ROOT/scripts/lib/packages.sh"
# shellcheck source=lib/servers.sh
source "$ROOT/scripts/lib/servers.sh"

LEASE_MS=4000   # session lease: how long a silent leader keeps its term
RENEW_MS=1000   # one keep-alive per second
NAME=demo.leader

ensure_packages build-essential cmake pkg-config libuv1-dev libhiredis-dev \
  redis-server redis-tools procps util-linux

echo "==== building the simba tool (build-demo/)"
cmake -S "$ROOT" -B build-demo -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSIMBA_BUILD_TESTS=OFF \
  >/dev/null
cmake --build build-demo -j2 --target simba_cli >/dev/null
SIMBA="$ROOT/build-demo/tools/simba/simba"

DEMO_DIR=$(mktemp -d "${TMPDIR:-/tmp}/simba-demo.XXXXXX")
WORKER_PIDS=()
cleanup() {
  local pid
  for pid in "${WORKER_PIDS[@]}"; do
    pkill -CONT -s "$pid" 2>/dev/null || true
    pkill -TERM -s "$pid" 2>/dev/null || true
  done
  sleep 0.5
  for pid in "${WORKER_PIDS[@]}"; do pkill -KILL -s "$pid" 2>/dev/null || true; done
  stop_servers
  rm -rf "$DEMO_DIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

T0=$(date +%s%N)
say() { printf '%7.3fs  %s\n' "$(( $(date +%s%N) - T0 ))e-9" "$*"; }
ms_since() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }

# --- the backend ----------------------------------------------------------------
start_servers redis >/dev/null 2>&1 || { echo "cannot start redis-server" >&2; exit 1; }
export SIMBA_BACKEND="$SIMBA_TEST_REDIS_URL"
export SIMBA_SESSION_LEASE_DURATION=${LEASE_MS}ms SIMBA_SESSION_RENEW_INTERVAL=${RENEW_MS}ms

# --- the job each leader runs ------------------------------------------------------
# It appends to a ledger once a second. The ledger is "fenced": it remembers the
# highest token it has seen and refuses a write that carries a lower one, which is
# how a resource stays safe from a leader that does not yet know it lost.
LEDGER="$DEMO_DIR/ledger" FENCE="$DEMO_DIR/fence"
echo 0 >"$FENCE"
: >"$LEDGER"
cat >"$DEMO_DIR/job.sh" <<'JOB'
#!/usr/bin/env bash
# Runs while this worker leads: SIMBA_LEASE and SIMBA_TOKEN come from simba run.
trap 'echo "    $WORKER: job got SIGTERM, exiting"; exit 0' TERM
while :; do
  (
    flock 9
    highest=$(cat "$FENCE")
    if (( SIMBA_TOKEN >= highest )); then
      echo "$SIMBA_TOKEN" >"$FENCE"
      echo "token $SIMBA_TOKEN  $WORKER  $(date +%T.%3N)" >>"$LEDGER"
    else
      echo "REFUSED token $SIMBA_TOKEN < $highest  $WORKER  $(date +%T.%3N)" >>"$LEDGER"
      echo "    $WORKER: the ledger refused a write with the stale token $SIMBA_TOKEN"
    fi
  ) 9>"$FENCE.lock"
  sleep 1 &
  wait $!
done
JOB
chmod +x "$DEMO_DIR/job.sh"
export LEDGER FENCE

# --- the workers -------------------------------------------------------------------
# Each in a session of its own (setsid), so that "the worker" below means simba
# and its job together. simba's log lines are shortened to "time message".
start_worker() {
  local n=$1
  WORKER="worker-$n" setsid "$SIMBA" run "$NAME" --client-name "worker-$n" --grace 1s \
    -- "$DEMO_DIR/job.sh" \
    > >(sed -u "s/^/    /") \
    2> >(sed -u -E "s/^[0-9-]+T([0-9:.]+)Z simba\[[0-9]+\] [a-z]+ /    worker-$n  /" >&2) &
  WORKER_PIDS[n]=$!
  disown "$!"  # no "Killed" notice from bash when the demo kills it
}

# The holder of NAME as "client token" (empty while nobody holds it).
holder() {
  "$SIMBA" -q status "$NAME" --json 2>/dev/null |
    sed -n -E 's/.*"token":([0-9]+),"holder":"[0-9a-f]+","holder_client":"([^"]+)".*/\2 \1/p'
}
wait_new_holder() {  # wait_new_holder OLD-HOLDER: waits until NAME has another holder
  local h
  for _ in $(seq 1 300); do
    h=$(holder)
    if [[ -n "$h" && "$h" != "$1" ]]; then echo "$h"; return 0; fi
    sleep 0.05
  done
  return 1
}
pid_of() { echo "${WORKER_PIDS[${1#worker-}]}"; }

echo
echo "==== Simba demo: three workers contend for the lease \"$NAME\" on $SIMBA_BACKEND"
echo "     session lease ${LEASE_MS} ms, one keep-alive every ${RENEW_MS} ms; the leader runs a"
echo "     job that writes to a ledger, fenced by the term's token."
echo
for n in 1 2 3; do
  say "starting worker-$n"
  start_worker "$n"
  sleep 0.3
done
first=$(wait_new_holder "") || { echo "nobody was elected" >&2; exit 1; }
say "leader: ${first% *} with token ${first#* }"
sleep 3
echo
"$SIMBA" -q status
echo

# --- failover 1: the leader dies ---------------------------------------------------
leader=${first% *}
echo "==== failover 1: kill -9 $leader (simba and its job die at once; nothing releases the lease)"
t=$(date +%s%N)
kill -KILL "$(pid_of "$leader")"
second=$(wait_new_holder "$first") || { echo "no failover" >&2; exit 1; }
say "new leader: ${second% *} with token ${second#* }, $(ms_since "$t") ms after the kill"
echo "     (about the lease: the dead session had to expire before anyone could take over)"
sleep 3
echo

# --- failover 2: the leader freezes --------------------------------------------------
leader=${second% *}
echo "==== failover 2: SIGSTOP $leader for $(( LEASE_MS * 2 / 1000 )) s, twice the lease (a long pause)"
t=$(date +%s%N)
pkill -STOP -s "$(pid_of "$leader")"
third=$(wait_new_holder "$second") || { echo "no failover" >&2; exit 1; }
say "new leader: ${third% *} with token ${third#* }, $(ms_since "$t") ms after the freeze"
left=$(( LEASE_MS * 2 - $(ms_since "$t") ))
(( left > 0 )) && sleep "$(( left / 1000 )).$(printf '%03d' $(( left % 1000 )))"
say "SIGCONT $leader: it wakes, finds its term over (DEADLINE_PASSED), stops its job, contends again"
pkill -CONT -s "$(pid_of "$leader")"
sleep 3
echo

# --- failover 3: the leader stops cleanly --------------------------------------------
leader=${third% *}
echo "==== failover 3: SIGTERM $leader (its job exits, then it releases the lease: handover at once)"
t=$(date +%s%N)
kill -TERM "$(pid_of "$leader")"
fourth=$(wait_new_holder "$third") || { echo "no failover" >&2; exit 1; }
say "new leader: ${fourth% *} with token ${fourth#* }, $(ms_since "$t") ms after the SIGTERM"
sleep 2
echo

echo "==== the ledger (each line a write; tokens only go up, one writer at a time):"
sed 's/^/    /' "$LEDGER"
echo
"$SIMBA" -q status
echo
echo "==== done: stopping the workers and redis-server"
