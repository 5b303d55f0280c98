#!/usr/bin/env bash
# etcd:// on a 3-member cluster of its own, driven by test_backends'
# EtcdCluster tests (etcd_cluster_test.cpp):
# 1. acquire through a follower then keep-alive at once, many times, while
#    this script moves the raft leadership every 0.3 s (etcdctl move-leader);
# 2. SIGSTOP of the raft leader (by the test, given its pid) under a client
#    of a follower: a renewal the caller gives up on resets the keep-alive
#    stream, so the next one is answered while the leader is still stopped;
# 3. SIGTERM of the member the client talks to (a follower, the URL's first)
#    while terms are held and calls flow: etcd stops gracefully (GOAWAY).
#
# Usage: etcd_cluster_test.sh PATH/TO/test_backends
# Exit 0 when every check passed, 1 otherwise, 77 (skipped) without etcd.
set -uo pipefail

TESTS=${1:?usage: etcd_cluster_test.sh PATH/TO/test_backends}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=etcd_cluster_lib.sh
source "$ROOT/tests/backends/etcd_cluster_lib.sh"
mover="" stopped=""
cleanup() {
  [[ -n "$mover" ]] && kill "$mover" 2>/dev/null && wait "$mover" 2>/dev/null
  [[ -n "$stopped" ]] && kill -CONT "$stopped" 2>/dev/null
  stop_servers
}
trap cleanup EXIT

endpoints="http://127.0.0.1:${client[0]},http://127.0.0.1:${client[1]},http://127.0.0.1:${client[2]}"

status() { etcdctl --endpoints "$endpoints" endpoint status -w json 2>/dev/null; }
leader() { leader_index "$endpoints"; }
# The raft leader's index once there is one (within 10 s: a move-leader or a
# resumed member may leave an election running); "" after that.
settled_leader() {
  simba_wait_until 10 "a raft leader" has_leader && leader
}
has_leader() { [[ -n "$(leader)" ]]; }
# A member other than the raft leader, as etcdctl move-leader takes it.
non_leader_id() {
  status | /usr/bin/python3 -c '
import json, random, sys
st = [s["Status"] for s in json.load(sys.stdin)]
others = [s["header"]["member_id"] for s in st if s["header"]["member_id"] != s["leader"]]
print("%x" % random.choice(others))'
}

fails=0
l=$(settled_leader)
[[ -n "$l" ]] || { echo "FAIL: no raft leader within 10 s"; exit 1; }
f=$(((l + 1) % 3)) o=$(((l + 2) % 3))
echo "raft leader m$l; the client talks to m$f"

echo "1. acquire + keep-alive through a follower while the leadership moves"
(while :; do
  etcdctl --endpoints "$endpoints" move-leader "$(non_leader_id)" >/dev/null 2>&1
  sleep 0.3
done) &
mover=$!
SIMBA_TEST_ETCD_CLUSTER_URL="etcd://127.0.0.1:${client[$f]}" \
  SIMBA_TEST_ETCD_FOLLOWER_URL="etcd://127.0.0.1:${client[$f]}" \
  "$TESTS" --gtest_filter='EtcdCluster.AKeepAlive*' || fails=$((fails + 1))
kill "$mover" 2>/dev/null
wait "$mover" 2>/dev/null
mover=""

l=$(settled_leader)
[[ -n "$l" ]] || { echo "FAIL: no raft leader within 10 s"; exit 1; }
f=$(((l + 1) % 3))
echo "2. SIGSTOP of the raft leader m$l (the test resumes it); the client talks to m$f"
stopped=${pid[$l]}
SIMBA_TEST_ETCD_CLUSTER_URL="etcd://127.0.0.1:${client[$f]}" \
  SIMBA_TEST_ETCD_FOLLOWER_URL="etcd://127.0.0.1:${client[$f]}" \
  SIMBA_TEST_ETCD_LEADER_PID="$stopped" \
  "$TESTS" --gtest_filter='EtcdCluster.ARenewalGivenUp*' || fails=$((fails + 1))
kill -CONT "$stopped" 2>/dev/null
stopped=""
for i in 0 1 2; do simba_wait_until 30 "etcd member m$i" simba_etcd_healthy "${client[$i]}" || exit 1; done

l=$(settled_leader)
[[ -n "$l" ]] || { echo "FAIL: no raft leader within 10 s"; exit 1; }
f=$(((l + 1) % 3)) o=$(((l + 2) % 3))
echo "3. SIGTERM of m$f, the member the client talks to (raft leader m$l)"
SIMBA_TEST_ETCD_CLUSTER_URL="etcd://127.0.0.1:${client[$f]},127.0.0.1:${client[$o]},127.0.0.1:${client[$l]}" \
  SIMBA_TEST_ETCD_STOP_PID="${pid[$f]}" \
  "$TESTS" --gtest_filter='EtcdCluster.Sigterm*' || fails=$((fails + 1))
simba_wait_pid_gone "${pid[$f]}" 10 || { echo "FAIL: m$f did not stop on SIGTERM"; fails=$((fails + 1)); }

((fails == 0)) && echo "etcd cluster: every check passed"
((fails == 0))
