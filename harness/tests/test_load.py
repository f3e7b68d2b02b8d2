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


if __name__ == "__main__":
    unittest.main()
