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

    def term(self, wid, token, start_ms, end_ms, revoked=True, writes=True, reason=3):
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
            self.w(wid, f"{end_ms * MS + 5} revoked a {token} {reason}")

    def write(self, end_ms, faults=(), result=False):
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
        if result == "dir":
            return self.dir
        r = checker.check(self.dir)
        shutil.rmtree(self.dir)
        return r if result else sorted({v["kind"] for v in r["violations"]})


def permit(run, wid, pid, kind, name, token, size, start_ms, end_ms):
    """One permit term of worker wid (checker.py's permit lines), seen valid
    every 100 ms over [start_ms, end_ms], then revoked."""
    run.w(wid, f"{start_ms * MS} permit {pid} {kind} {name} {token} {size} 1")
    for t in range(start_ms, end_ms + 1, 100):
        run.w(wid, f"{t * MS} pvalid {pid}")
    run.w(wid, f"{end_ms * MS + 5} prevoked {pid} 1")


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


class FiguresTest(unittest.TestCase):
    """The campaign figures (failover and handover times, the longest stretch
    without a leader, terms lost, windows by kind, percentiles, the plot)."""

    def test_failover_time_after_a_term_that_was_not_released(self):
        r = Run()
        r.term("w0.1", 1, 0, 1000, revoked=False)  # killed: no revoked line
        r.term("w1.1", 2, 2500, 10000, revoked=False)
        res = r.write(10000, result=True)
        self.assertEqual(res["failovers_ms"], [1500.0])
        self.assertEqual(res["handovers_ms"], [])

    def test_handover_time_after_a_clean_release(self):
        r = Run()
        r.term("w0.1", 1, 0, 1000, reason=1)  # STOPPED
        r.term("w1.1", 2, 1040, 10000, revoked=False)
        res = r.write(10000, result=True)
        self.assertEqual(res["handovers_ms"], [40.0])
        self.assertEqual(res["failovers_ms"], [])

    def test_recovery_time_counted_from_the_end_of_a_backend_fault(self):
        r = Run()
        r.term("w0.1", 1, 0, 1000)
        r.term("w1.1", 2, 7000, 20000, revoked=False)
        fault = {"kind": "backend_kill", "target": "x", "start": 1000 * MS, "end": 6000 * MS}
        res = r.write(20000, [fault], result=True)
        self.assertEqual((res["failovers_ms"], res["recoveries_ms"]), ([], [1000.0]))
        # the longest stretch without a leader is raw: the fault is not subtracted
        self.assertEqual(res["leaderless"]["ms"], 6000.0)
        self.assertEqual(res["leaderless"]["name"], "a")

    def test_an_etcd_member_fault_is_the_backends(self):
        # a cluster's member faults count like a backend kill: a recovery, and
        # the failover bound runs from their end
        for kind in ("etcd_kill_leader", "etcd_kill_follower", "etcd_stop_member", "etcd_partition"):
            r = Run()
            r.term("w0.1", 1, 0, 1000)
            r.term("w1.1", 2, 7000, 20000, revoked=False)
            fault = {"kind": kind, "target": "m0", "start": 1000 * MS, "end": 6000 * MS}
            res = r.write(20000, [fault], result=True)
            self.assertEqual((res["violations"], res["failovers_ms"], res["recoveries_ms"]), ([], [], [1000.0]),
                             kind)

    def test_recovery_during_a_failover_the_nemesis_still_waits_on_is_raw(self):
        r = Run()
        r.term("w0.1", 1, 0, 1000, revoked=False)
        r.term("w1.1", 2, 4000, 20000, revoked=False)
        fault = {"kind": "sentinel_failover", "target": "x", "start": 500 * MS, "end": 6000 * MS}
        res = r.write(20000, [fault], result=True)
        self.assertEqual((res["failovers_ms"], res["recoveries_ms"]), ([], [3000.0]))

    def test_a_proxy_fault_of_the_holder_is_a_failover(self):
        r = Run()
        r.term("w0.1", 1, 0, 1000)
        r.term("w1.1", 2, 1800, 20000, revoked=False)
        fault = {"kind": "proxy_blackhole", "target": "w0.1", "start": 200 * MS, "end": 2500 * MS}
        res = r.write(20000, [fault], result=True)
        self.assertEqual((res["failovers_ms"], res["recoveries_ms"]), ([800.0], []))

    def test_longest_stretch_without_a_leader(self):
        r = Run()
        r.term("w0.1", 1, 0, 1000)
        r.term("w1.1", 2, 1300, 3000)
        r.term("w0.1", 3, 5000, 10000, revoked=False)
        res = r.write(10000, result=True)
        self.assertEqual(res["leaderless"]["ms"], 2000.0)
        self.assertEqual(res["leaderless"]["at_ms"], 3000.0)

    def test_terms_lost_explained_or_not(self):
        r = Run()
        r.term("w0.1", 1, 0, 1000)  # revoked DEADLINE_PASSED, no fault: unexplained
        r.term("w1.1", 2, 1500, 10000, revoked=False)
        res = r.write(10000, result=True)
        self.assertEqual((res["terms_lost"], res["sessions_lost"], len(res["losses_unexplained"])), (1, 1, 1))
        r = Run()
        r.term("w0.1", 1, 0, 1000)
        r.term("w1.1", 2, 1500, 10000, revoked=False)
        pause = {"kind": "pause_holder", "target": "w0.1", "start": 500 * MS, "end": 900 * MS}
        res = r.write(10000, [pause], result=True)
        self.assertEqual((res["terms_lost"], len(res["losses_unexplained"])), (1, 0))

    def test_windows_by_kind_and_graceful_stops_not_counted_as_faults(self):
        r = Run()
        r.term("w0.1", 1, 0, 10000, revoked=False)
        fs = [{"kind": "pause_holder", "target": "w9.1", "start": 100 * MS, "end": 200 * MS},
              {"kind": "pause_holder", "target": "w9.1", "start": 300 * MS, "end": 400 * MS},
              {"kind": "graceful_stop", "target": "w9.1", "start": 500 * MS, "end": 600 * MS}]
        res = r.write(10000, fs, result=True)
        self.assertEqual(res["fault_windows"], 2)
        s = checker.summarize([res, res])
        self.assertEqual(s["fault_windows"], 4)
        self.assertEqual(s["windows_by_kind"], {"graceful_stop": 2, "pause_holder": 4})

    def test_summary_percentiles_and_longest(self):
        a = {"fault_windows": 3, "faults_by_kind": {"backend_kill": 3}, "violations": [],
             "failovers_ms": [float(x) for x in range(1, 100)], "handovers_ms": [5.0],
             "leaderless": {"ms": 700.0, "name": "a", "at_ms": 1.0}, "seed": 1}
        b = {"fault_windows": 1, "faults_by_kind": {"partition": 1}, "seed": 2,
             "violations": [{"kind": "overlap", "detail": ""}],
             "failovers_ms": [1000.0], "handovers_ms": [7.0, 9.0],
             "leaderless": {"ms": 900.0, "name": "b", "at_ms": 2.0}}
        s = checker.summarize([a, b])
        self.assertEqual(s["failover_ms"], {"n": 100, "p50": 50.0, "p99": 99.0, "max": 1000.0})
        self.assertEqual(s["handover_ms"]["p50"], 7.0)
        self.assertEqual(s["handover_ms"]["p99"], 9.0)
        self.assertEqual((s["violations"], s["violations_by_kind"]), (1, {"overlap": 1}))
        self.assertEqual((s["longest_leaderless"]["ms"], s["longest_leaderless"]["seed"]), (900.0, 2))
        self.assertIn("failover: p50 50.0 ms, p99 99.0 ms", checker.summary_text(s))

    @unittest.skipUnless(shutil.which("gnuplot"), "gnuplot not installed (apt-get install gnuplot-nox)")
    # Semaphores and read/write locks (ADR 0046). Each history keeps the lease
    # "a" clean (one term to the end) so only the permit checks can fire.

    def _permit_run(self):
        r = Run()
        r.term("w0.1", 1, 0, 10000, revoked=False)
        return r

    def test_semaphore_at_its_size_passes(self):
        r = self._permit_run()
        # Two permits of a semaphore of 2 at once, a third after one ended.
        permit(r, "w1.1", 1, "semaphore", "s", 5, 2, 0, 3000)
        permit(r, "w2.1", 1, "semaphore", "s", 6, 2, 1000, 5000)
        permit(r, "w1.1", 2, "semaphore", "s", 7, 2, 3500, 8000)
        res = r.write(10000, result=True)
        self.assertEqual(res["violations"], [])
        self.assertEqual(res["permit_terms"], 3)

    def test_negative_control_n_plus_one_overlapping_permits(self):
        r = self._permit_run()
        # Three permits of a semaphore of 2 valid together over [2000, 3000].
        permit(r, "w1.1", 1, "semaphore", "s", 5, 2, 0, 3000)
        permit(r, "w2.1", 1, "semaphore", "s", 6, 2, 1000, 5000)
        permit(r, "w3.1", 1, "semaphore", "s", 7, 2, 2000, 8000)
        res = r.write(10000, result=True)
        self.assertEqual(sorted({v["kind"] for v in res["violations"]}), ["permit_overflow"])
        self.assertIn("3 valid", res["violations"][0]["detail"])

    def test_permits_that_touch_at_one_instant_overlap(self):
        r = self._permit_run()
        permit(r, "w1.1", 1, "semaphore", "s", 5, 1, 0, 3000)
        permit(r, "w2.1", 1, "semaphore", "s", 6, 1, 3000, 5000)
        self.assertEqual(r.write(10000), ["permit_overflow"])

    def test_readers_together_then_a_writer_alone_pass(self):
        r = self._permit_run()
        permit(r, "w1.1", 1, "read", "rw", 0, 0, 0, 3000)
        permit(r, "w2.1", 1, "read", "rw", 0, 0, 500, 2500)
        permit(r, "w3.1", 1, "write", "rw", 8, 0, 3500, 6000)
        permit(r, "w1.1", 2, "read", "rw", 8, 0, 6500, 9000)
        self.assertEqual(r.write(10000), [])

    def test_write_beside_a_read_or_a_write(self):
        for other in ("read", "write"):
            r = self._permit_run()
            permit(r, "w1.1", 1, other, "rw", 3, 0, 0, 3000)
            permit(r, "w2.1", 1, "write", "rw", 8, 0, 2000, 6000)
            res = r.write(10000, result=True)
            self.assertEqual([v["kind"] for v in res["violations"]], ["rw_overlap"], other)

    def test_permits_of_other_names_and_kinds_do_not_count_together(self):
        r = self._permit_run()
        permit(r, "w1.1", 1, "semaphore", "s", 5, 1, 0, 3000)
        permit(r, "w2.1", 1, "semaphore", "t", 5, 1, 0, 3000)
        permit(r, "w3.1", 1, "write", "s", 9, 0, 0, 3000)
        self.assertEqual(r.write(10000), [])

    def test_plot_writes_a_png(self):
        r = Run()
        r.term("w0.1", 1, 0, 3000)
        r.term("w1.1", 2, 3900, 10000, revoked=False)
        d = r.write(10000, [{"kind": "backend_stop", "target": "x", "start": 3000 * MS, "end": 3500 * MS}],
                    result="dir")
        try:
            png = os.path.join(d, "t.png")
            checker.plot(d, png)
            with open(png, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
            self.assertGreater(os.path.getsize(png), 2000)
        finally:
            shutil.rmtree(d)


if __name__ == "__main__":
    unittest.main()
