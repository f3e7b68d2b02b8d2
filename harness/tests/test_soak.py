"""harness/soak: the second minute against the last, the table, the sampler (cm-load's progress
beside the server's readings) and its reaction to a server that died. No server is started here.
cm-load's progress lines are read in test_longrun."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import contextlib  # noqa: E402
import io  # noqa: E402
import math  # noqa: E402
import tempfile  # noqa: E402
import unittest  # noqa: E402

from cmharness import load, soak_report  # noqa: E402
from cmharness.servers import Readings  # noqa: E402

from cmharness.tools import soak  # noqa: E402


def samples(seconds, rss_of, fds=100):
    """One Sample a second for t = 1 .. seconds, RSS from rss_of(t)."""
    return [soak.Sample(float(t), rss_of(t), fds, 2, 0.0, 0, 0, 0, "run")
            for t in range(1, seconds + 1)]


class Trend(unittest.TestCase):
    def test_flat_when_within_five_percent(self):
        t = soak_report.trend(samples(600, lambda t: 1000 if t < 120 else 1040))
        self.assertAlmostEqual(t.rss_second, 1000)
        self.assertAlmostEqual(t.rss_last, 1040)
        self.assertAlmostEqual(t.change, 0.04)
        self.assertTrue(t.flat)
        self.assertFalse(t.same_minute)
        self.assertEqual(t.verdict, "flat")

    def test_grew(self):
        t = soak_report.trend(samples(600, lambda t: 1000 if t < 300 else 1100))
        self.assertFalse(t.flat)
        self.assertEqual(t.verdict, "NOT flat (it grew)")

    def test_fell(self):
        t = soak_report.trend(samples(600, lambda t: 1000 if t < 300 else 900))
        self.assertEqual(t.verdict, "NOT flat (it fell)")

    def test_the_first_minute_is_left_out(self):
        t = soak_report.trend(samples(600, lambda t: 5000 if t < 60 else 1000))
        self.assertEqual((t.rss_second, t.change, t.verdict), (1000, 0.0, "flat"))

    def test_two_minutes_compare_a_minute_with_itself(self):
        t = soak_report.trend(samples(150, lambda t: 1000))
        self.assertTrue(t.same_minute)
        self.assertEqual(t.verdict, "flat (the second minute is the last: nothing compared)")

    def test_shorter_than_two_minutes_gives_no_verdict(self):
        t = soak_report.trend(samples(50, lambda t: 1000))
        self.assertTrue(math.isnan(t.change))
        self.assertFalse(t.flat)
        self.assertEqual(t.verdict, "no verdict: the run was shorter than two minutes")
        self.assertIsNone(soak_report.whole(t.rss_second))
        self.assertEqual(soak_report.whole(t.rss_last), 1000)

    def test_no_samples(self):
        t = soak_report.trend([])
        self.assertEqual(t.verdict, "no verdict: the run was shorter than two minutes")

    def test_descriptors(self):
        t = soak_report.trend(samples(600, lambda t: 1000, fds=10006))
        self.assertEqual((t.fds_second, t.fds_last), (10006, 10006))


def result():
    pct = {"mean": 100500, "p50": 100400, "p90": 101000, "p99": 103900, "p999": 105000,
           "max": 106500}
    return load.LoadResult.from_json({
        "tool": "cm-load", "url": "http://127.0.0.1:1/delay/100", "connections_requested": 50,
        "connections_open": 50, "connect_failures": {}, "delay_ms": None, "warmup_s": 5,
        "duration_s": 1, "requests": 489, "rps": 489.2, "errors": {"body": 0, "reset": 2},
        "errors_total": 2, "connections_in_window": 50, "starved_connections": 0,
        "fairness_jain": 1.0, "max_gap_ms": 1.0, "latency_us": pct, "overshoot_us": pct,
        "client_cpu_s": 0.1, "responses_total": 2981})


class TableRows(unittest.TestCase):
    def test_rows_from_a_result(self):
        t = soak_report.trend(samples(600, lambda t: 43220, fds=10006))
        rows = dict(soak_report.table_rows(result(), t, 50, True))
        self.assertEqual(rows["connections held (cm-load, end of window)"], "50 of 50")
        self.assertEqual(rows["rps (measured window)"], "489")
        self.assertEqual(rows["requests answered (whole run)"], "2,981")
        self.assertEqual(rows["errors"], "2 (body 0, reset 2)")
        self.assertEqual(rows["latency p50 / p99 / max"], "100.4 / 103.9 / 106.5 ms")
        self.assertEqual(rows["RSS, mean of the second minute"], "42.2 MiB")
        self.assertEqual(rows["RSS change"], "+0.0%: flat")
        self.assertEqual(rows["open descriptors, second / last minute"], "10,006 / 10,006")
        self.assertEqual(rows["server alive at the end"], "yes")

    def test_without_a_result(self):
        t = soak_report.trend([])
        rows = dict(soak_report.table_rows(None, t, 10000, False))
        self.assertEqual(rows["rps (measured window)"], "?")
        self.assertEqual(rows["errors"], "?")
        self.assertEqual(rows["server alive at the end"], "NO")


class FakeServer:
    pid = os.getpid()  # open_fds() reads this process's descriptors

    def __init__(self):
        self.alive = True

    def readings(self):
        if not self.alive:
            raise RuntimeError("asio_coro exited (killed by signal 9)")
        return Readings(1.5, 4096, 4096, 3, 0, 0)


class Sampler(unittest.TestCase):
    def test_samples_once_a_second_with_the_latest_progress(self):
        with tempfile.TemporaryDirectory() as d:
            log = os.path.join(d, "load.log")
            with open(log, "w") as f:
                f.write("cm-load   1s warmup   rps       449  open 50/50  errors 0\n")
            sampler = soak.Sampler(FakeServer(), log, t0=100.0)
            sampler(100.5)  # before the first second: nothing
            sampler(101.0)
            sampler(101.2)  # the same second: nothing more
            sampler.close()
        self.assertEqual(len(sampler.samples), 1)
        s = sampler.samples[0]
        self.assertEqual((s.t_s, s.rss_kib, s.threads, s.cpu_s), (1.0, 4096, 3, 1.5))
        self.assertEqual((s.phase, s.rps, s.open, s.errors), ("warmup", 449, 50, 0))

    def test_a_partial_line_waits_for_its_end(self):
        with tempfile.TemporaryDirectory() as d:
            log = os.path.join(d, "load.log")
            with open(log, "w") as f:
                f.write("cm-load   2s run      rps  ")
            sampler = soak.Sampler(FakeServer(), log, t0=0.0)
            sampler.log.follow()
            self.assertEqual(sampler.log.latest.phase, "")
            with open(log, "a") as f:
                f.write("     500  open 50/50  errors 1\n")
            sampler.log.follow()
            sampler.close()
        self.assertEqual((sampler.log.latest.phase, sampler.log.latest.rps), ("run", 500))

    def test_a_dead_server_stops_the_sampling(self):
        server = FakeServer()
        sampler = soak.Sampler(server, "/nonexistent/load.log", t0=0.0)
        sampler(1.0)
        server.alive = False
        with contextlib.redirect_stderr(io.StringIO()) as said:
            sampler(2.0)
            sampler(3.0)
        self.assertEqual(said.getvalue(), "soak: cm-server died\n")
        self.assertTrue(sampler.died)
        self.assertEqual(len(sampler.samples), 1)


if __name__ == "__main__":
    unittest.main()
