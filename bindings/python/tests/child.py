"""The other process of test_process.py: elect URL NAME LEASE, print ELECTED
<token>, then on a line of stdin: "stop" closes the client, "crash" exits
without closing."""

import os
import sys
import threading

import simba

url, name, lease = sys.argv[1], sys.argv[2], float(sys.argv[3])
c = simba.Client(url, lease_duration=lease)
elected = threading.Event()


def on_elected(term):
    print(f"ELECTED {term.token}", flush=True)
    elected.set()


e = c.elect(name, on_elected)
cmd = sys.stdin.readline().strip()
if cmd == "crash":
    os._exit(3)
c.close()
print("CLOSED", flush=True)
