# Sourced by the tests on a 3-member etcd cluster of their own
# (etcd_ha_test.sh, etcd_cluster_test.sh), with ROOT set: exits 77 without
# etcd, else starts members m0..m2 on loopback ports (client[i], peer[i],
# pid[i]; start_member I starts one again), waits until each is healthy, and
# defines leader_index ENDPOINTS (the raft leader's index among the members
# up). Servers are stopped on exit (a trap of the caller's must call
# stop_servers).
command -v etcd >/dev/null && command -v etcdctl >/dev/null || {
  echo "SKIP: etcd-server and etcd-client are not installed"
  exit 77
}
# shellcheck source=../../scripts/lib/servers.sh
source "$ROOT/scripts/lib/servers.sh"
SIMBA_SERVERS_DIR=$(mktemp -d "${TMPDIR:-/tmp}/simba-etcd-cluster.XXXXXX")
export SIMBA_SERVERS_DIR
trap stop_servers EXIT

client=() peer=() pid=()
for i in 0 1 2; do
  client[$i]=$(simba_free_port) && peer[$i]=$(simba_free_port) || exit 1
done
cluster="m0=http://127.0.0.1:${peer[0]},m1=http://127.0.0.1:${peer[1]},m2=http://127.0.0.1:${peer[2]}"
start_member() {
  simba_etcd_member "$SIMBA_SERVERS_DIR" "m$1" "${client[$1]}" "${peer[$1]}" "$cluster" &
  pid[$1]=$!
  simba_track_pid $!
}
for i in 0 1 2; do start_member $i; done
for i in 0 1 2; do simba_wait_until 30 "etcd member m$i" simba_etcd_healthy "${client[$i]}" || exit 1; done

leader_index() {
  etcdctl --endpoints "$1" endpoint status -w json 2>/dev/null | /usr/bin/python3 -c '
import json, sys
ports = sys.argv[1:]
for s in json.load(sys.stdin):
    if s["Status"]["header"]["member_id"] == s["Status"]["leader"]:
        print(ports.index(s["Endpoint"].rsplit(":", 1)[1]))
        break' "${client[@]}"
}
