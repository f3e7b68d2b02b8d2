"""cmharness.load: LoadResult, the one reader of cm-load's JSON, and load.run."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tempfile  # noqa: E402
import unittest  # noqa: E402

from cmharness import load  # noqa: E402



class ResponsesTotalAndStopWhen(unittest.TestCase):
    """LoadResult.responses_total, and load.run(stop_when=...) stopping cm-load early."""

    DOC = {"tool": "cm-load", "url": "http://127.0.0.1:1/plaintext", "connections_requested": 1,
           "connections_open": 1, "connect_failures": {}, "delay_ms": None, "warmup_s": 0,
           "duration_s": 1, "requests": 10, "rps": 10, "errors": {}, "errors_total": 0,
           "connections_in_window": 1, "starved_connections": 0, "fairness_jain": 1,
           "max_gap_ms": 0, "client_cpu_s": 0,
           "latency_us": {"mean": 1, "p50": 1, "p90": 1, "p99": 1, "p999": 1, "max": 1},
           "overshoot_us": {"mean": 0, "p50": 0, "p90": 0, "p99": 0, "p999": 0, "max": 0}}

    def test_responses_total(self):
        self.assertEqual(load.LoadResult.from_json(dict(self.DOC, responses_total=42))
                         .responses_total, 42)
        self.assertIsNone(load.LoadResult.from_json(self.DOC).responses_total)

    def test_stop_when_stops_the_run(self):
        with tempfile.TemporaryDirectory() as d:
            asked = []

            def stop_when():
                asked.append(1)
                return len(asked) >= 3

            run = load.run(["sleep", "60"], os.path.join(d, "out.json"),
                           log_path=os.path.join(d, "log"), limit_s=60, stop_when=stop_when)
        self.assertEqual(run.status, "stopped early")
        self.assertIsNone(run.result)
        self.assertEqual(len(asked), 3)


class Threads(unittest.TestCase):
    """LoadResult.threads: cm-load's --threads, 1 when its JSON has none."""

    def test_threads(self):
        doc = ResponsesTotalAndStopWhen.DOC
        self.assertEqual(load.LoadResult.from_json(dict(doc, threads=4)).threads, 4)
        self.assertEqual(load.LoadResult.from_json(doc).threads, 1)




class Parts(unittest.TestCase):
    """A row too big for one cm-load process: how it is split, and the addresses each part uses."""

    def test_as_few_processes_as_hold_the_row_as_even_as_can_be(self):
        self.assertEqual(load.parts_of(18_000), [18_000])
        self.assertEqual(load.parts_of(30_000), [15_000, 15_000])
        self.assertEqual(load.parts_of(40_001, 19_000), [13_334, 13_334, 13_333])
        self.assertEqual(load.parts_of(30, 12), [10, 10, 10])

    def test_each_part_gets_apart_source_addresses_enough_for_its_connections(self):
        self.assertEqual(load.source_ranges([15_000, 15_000], 7_000), [(1, 3), (4, 6)])
        self.assertEqual(load.source_ranges([10, 10], 7_000), [(1, 1), (2, 2)])
        with self.assertRaisesRegex(ValueError, "254 source addresses"):
            load.source_ranges([200_000, 200_000], 1_000)

    def test_connections_per_source_is_a_quarter_of_the_port_range(self):
        with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
            f.write("32768\t60999\n")
            f.flush()
            self.assertEqual(load.connections_per_source(f.name), 7_058)
        self.assertEqual(load.connections_per_source("/nonexistent"), 7_058)


if __name__ == "__main__":
    unittest.main()
