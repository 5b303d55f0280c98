"""free_port(): a TCP port on 127.0.0.1 for a test's own server, picked as
simba_free_port picks one (scripts/lib/servers.sh), for the Python harnesses
(tests/chaos, contrib/tests).

Below the kernel's ephemeral range: a port in that range can be the local end
of any outgoing connection at any moment. Never one handed out before in this
process: a harness may pick several servers' ports before the first binds
(a ZooKeeper ensemble picks all of them; seen once in CI, zk1's client port
was also zk3's election port, so zk1 could not restart after its kill).
"""
import random
import socket

_given = set()


def free_port():
    lo = 32768
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    base = 20000 if lo - 20000 >= 2000 else 10000
    pick = random.SystemRandom()
    for _ in range(200):
        port = pick.randrange(base, lo)
        if port in _given:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _given.add(port)
        return port
    raise RuntimeError("no free port on 127.0.0.1")
