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




class KeptAndOpenLoop(unittest.TestCase):
    DOC = ResponsesTotalAndStopWhen.DOC

    def test_a_results_file_keeps_cm_loads_figures_not_its_merge_data(self):
        doc = dict(self.DOC, histograms={"latency_us": {"buckets": [[1, 2]] * 1000}},
                   slot_answers=[3] * 1000)
        kept = load.LoadResult.from_json(doc).kept
        self.assertEqual(kept, self.DOC)
        self.assertIn("histograms", doc)  # the run's own document is left whole

    def test_a_closed_loop_run_has_no_open_loop_record(self):
        self.assertIsNone(load.LoadResult.from_json(self.DOC).open_loop)

    def test_an_open_loop_run_is_read_into_its_typed_record(self):
        ol = {"rate": 500.0, "rate_ratio": 0.99, "valid": True, "late": 3, "offered": 1000,
              "backlog_max": 2, "pace_lag_us": {"p99": 40}, "unsent": 0, "arrival": "poisson"}
        r = load.LoadResult.from_json(dict(self.DOC, open_loop=ol))
        self.assertEqual(r.open_loop, load.OpenLoop(rate=500.0, rate_ratio=0.99, valid=True, late=3,
                                                    offered=1000, backlog_max=2,
                                                    pace_lag_us={"p99": 40}, unsent=0,
                                                    arrival="poisson"))

    def test_the_stagger_counts_only_when_cm_load_staggered(self):
        self.assertEqual(load.LoadResult.from_json(dict(self.DOC, stagger_ms=250)).stagger_s, 0.0)
        self.assertEqual(load.LoadResult.from_json(dict(self.DOC, stagger=True, stagger_ms=250))
                         .stagger_s, 0.25)


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
