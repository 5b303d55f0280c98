#!/usr/bin/env python3
"""Unit tests of checker.py on hand-made logs: a clean history passes, and each
kind of violation is flagged by its own minimal history (label chaos)."""
import json
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import checker  # noqa: E402

MS = 1_000_000
LEASE = 1000


class Run:
    """Builds a run directory: nemesis.jsonl, workers/*.log, register/*."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="simba-chaos-checker.")
        os.makedirs(os.path.join(self.dir, "workers"))
        os.makedirs(os.path.join(self.dir, "register"))
        self.events = [{"ev": "begin", "t": 0, "backend": "test", "seed": 0, "lease_ms": LEASE,
                        "workers": 2, "names": ["a"], "faults": "", "no_aof": False, "slow_clock": 0}]
        self.workers = {}
        self.reg = []

    def w(self, wid, *lines):
        self.workers.setdefault(wid, []).extend(lines)

    def term(self, wid, token, start_ms, end_ms, revoked=True, writes=True):
        self.w(wid, f"{start_ms * MS} elected a {token} 1")
        t = start_ms
        seq = 0
        while t <= end_ms:
            self.w(wid, f"{t * MS} valid a {token}")
            if writes:
                seq += 1
                self.w(wid, f"{t * MS + 1} write a {token} {seq} accepted {t * MS}")
                self.reg.append(f"{t * MS + 1} {token} {wid} {seq} 0")
            t += 100
        if revoked:
            self.w(wid, f"{end_ms * MS + 5} revoked a {token} 3")

    def write(self, end_ms, faults=()):
        for f in faults:
            self.events.append({"ev": "fault", **f})
        self.events += [{"ev": "heal", "t": (end_ms - 5000) * MS}, {"ev": "end", "t": end_ms * MS}]
        with open(os.path.join(self.dir, "nemesis.jsonl"), "w") as f:
            f.write("".join(json.dumps(e) + "\n" for e in self.events))
        for wid, lines in self.workers.items():
            with open(os.path.join(self.dir, "workers", wid + ".log"), "w") as f:
                f.write("".join(line + "\n" for line in lines))
        with open(os.path.join(self.dir, "register", "a.log"), "w") as f:
            f.write("".join(line + "\n" for line in self.reg))
        hi = max([int(r.split()[1]) for r in self.reg] or [0])
        with open(os.path.join(self.dir, "register", "a.reg"), "w") as f:
            f.write(f"{hi:020d}\n")
        r = checker.check(self.dir)
        shutil.rmtree(self.dir)
        return sorted({v["kind"] for v in r["violations"]})


class CheckerTest(unittest.TestCase):
    def test_clean_history_passes(self):
        r = Run()
        r.term("w0.1", 1, 0, 3000)
        r.term("w1.1", 2, 3900, 10000, revoked=False)
        r.w("w0.1", f"{10001 * MS} exit w0.1")
        self.assertEqual(r.write(10000), [])

    def test_overlap(self):
        r = Run()
        r.term("w0.1", 1, 0, 3000)
        r.term("w1.1", 2, 2900, 10000, revoked=False)
        self.assertIn("overlap", r.write(10000))

    def test_token_handed_out_again(self):
        r = Run()
        r.term("w0.1", 1, 0, 3000)
        r.term("w0.1", 1, 3500, 10000, revoked=False)
        self.assertEqual(r.write(10000), ["token_order"])

    def test_register_accepting_a_lower_token(self):
        r = Run()
        r.term("w0.1", 2, 0, 3000)
        r.term("w1.1", 3, 3500, 10000, revoked=False)
        r.reg.insert(len(r.reg) - 1, f"{9999 * MS} 1 w9.1 1 3")
        r.w("w9.1", f"{9999 * MS} write a 1 1 accepted {9990 * MS}")
        self.assertIn("register_order", r.write(10000))

    def test_acknowledged_write_lost(self):
        r = Run()
        r.term("w0.1", 1, 0, 10000, revoked=False)
        r.w("w0.1", f"{10000 * MS} write a 1 999 accepted {10000 * MS}")
        self.assertEqual(r.write(10000), ["write_lost"])

    def test_clean_exit_without_revoked(self):
        r = Run()
        r.term("w0.1", 1, 0, 10000, revoked=False)
        r.w("w0.1", f"{10001 * MS} exit w0.1")
        self.assertEqual(r.write(10000), ["pairing"])

    def test_stuck_after_heal(self):
        r = Run()
        r.term("w0.1", 1, 0, 3000)
        self.assertIn("stuck", r.write(10000))

    def test_failover_too_slow(self):
        r = Run()
        r.term("w0.1", 1, 0, 1000)
        r.term("w1.1", 2, 7000, 20000, revoked=False)
        self.assertEqual(r.write(20000), ["failover"])

    def test_failover_counted_from_the_end_of_a_backend_fault(self):
        r = Run()
        r.term("w0.1", 1, 0, 1000)
        r.term("w1.1", 2, 7000, 20000, revoked=False)
        fault = {"kind": "backend_kill", "target": "x", "start": 1000 * MS, "end": 6000 * MS}
        self.assertEqual(r.write(20000, [fault]), [])


if __name__ == "__main__":
    unittest.main()
