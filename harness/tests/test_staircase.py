"""harness/staircase: a run's figures from its timeline, the steps a
model predicts, the runs it plans, and its README from a runs.json. No server is started here."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import argparse  # noqa: E402
import tempfile  # noqa: E402
import unittest  # noqa: E402

from cmharness import staircase_report, timeline  # noqa: E402

from cmharness.tools import staircase  # noqa: E402


class Summarise(unittest.TestCase):
    def write(self, requests):
        path = os.path.join(tempfile.mkdtemp(), "run.csv")
        timeline.write(path, requests)
        return path

    def test_two_steps_and_an_unanswered_request(self):
        requests = [
            timeline.Request(0, "/delay/500", 0.0, 0.5, 0.5, 200, True),
            timeline.Request(1, "/delay/500", 0.0, 0.51, 0.51, 200, True),
            timeline.Request(2, "/delay/500", 0.0, 1.0, 1.0, 200, False),
            timeline.Request(3, "/delay/500", 0.0),
        ]
        s = staircase.summarise(self.write(requests), delay_s=0.5)
        self.assertEqual(s["requests"], 4)
        self.assertEqual(s["answered"], 3)
        self.assertEqual(s["correct"], 2)
        self.assertEqual(s["first_s"], 0.5)
        self.assertEqual(s["last_s"], 1.0)
        self.assertEqual(s["steps"], 2)
        self.assertEqual(s["largest_step"], 2)
        self.assertEqual(s["median_step"], 2)

    def test_nothing_answered(self):
        s = staircase.summarise(self.write([timeline.Request(0, "/delay/500", 0.0)]), delay_s=0.5)
        self.assertEqual((s["answered"], s["first_s"], s["last_s"], s["steps"]), (0, None, None, 0))
        self.assertEqual((s["largest_step"], s["median_step"]), (0, 0))


class PredictedSteps(unittest.TestCase):
    def test_the_blocking_pool_answers_in_rounds_of_its_size(self):
        run = {"model": "blocking", "flags": []}
        self.assertEqual(staircase_report.predicted_steps(run, 2000), 32)
        self.assertEqual(staircase_report.predicted_steps(run, 64), 1)
        self.assertEqual(staircase_report.predicted_steps(run, 65, workers=64), 2)

    def test_an_async_model_answers_in_one_step(self):
        self.assertEqual(staircase_report.predicted_steps({"model": "uring_coro", "flags": []}, 2000), 1)

    def test_a_sleeping_loop_answers_one_per_delay(self):
        run = {"model": "libuv_callbacks", "flags": ["--wait-mode", "sleep"]}
        self.assertEqual(staircase_report.predicted_steps(run, 2000), 2000)

    def test_the_control_is_one_step_whatever_the_model(self):
        run = {"model": "blocking", "flags": [], "control": True}
        self.assertEqual(staircase_report.predicted_steps(run, 2000), 1)


def options(**kw):
    defaults = {"delay": 500, "sleep_model": "libuv_callbacks", "control_model": "libuv_callbacks"}
    return argparse.Namespace(**dict(defaults, **kw))


class PlanRuns(unittest.TestCase):
    def test_every_model_then_the_sleep_run_then_the_control(self):
        runs = staircase.plan_runs(options(), ["blocking", "asio_coro"])
        self.assertEqual([r["name"] for r in runs],
                         ["blocking", "asio_coro", "libuv_callbacks-sleep", "libuv_callbacks-delay0"])
        self.assertEqual(runs[2]["flags"], ["--wait-mode", "sleep"])
        self.assertEqual(runs[3]["path"], "/delay/0")
        self.assertTrue(runs[3]["control"])
        self.assertEqual(runs[0]["path"], "/delay/500")

    def test_none_leaves_the_extra_runs_out(self):
        runs = staircase.plan_runs(options(sleep_model="none", control_model="none", delay=100), ["blocking"])
        self.assertEqual([(r["name"], r["path"]) for r in runs], [("blocking", "/delay/100")])


class BlockingSteps(unittest.TestCase):
    def test_the_three_readings(self):
        self.assertIn("sees the 32 steps", staircase_report.blocking_steps(32, 32))
        self.assertIn("run into each other", staircase_report.blocking_steps(30, 32))
        self.assertIn("splits it in two", staircase_report.blocking_steps(33, 32))


def a_doc():
    """A runs.json of two runs and a control, as staircase writes it."""
    run = {"flags": [], "path": "/delay/500", "burst_command": "harness/burst ...",
           "burst_output": "burst: fine\nburst: timeline of 2000 requests written to x.csv",
           "requests": 2000, "answered": 2000, "correct": 2000, "first_s": 0.5, "steps": 1,
           "largest_step": 2000, "cut_at_s": None}
    return {
        "connections": 2000, "delay_ms": 500, "path": "/delay/500", "started_utc": "2026-01-01 00:00:00",
        "server_cpu": 0, "load_cpu": 1, "load_average_before": [1.0, 2.0, 3.0],
        "load_average_after": [1.5, 2.0, 3.0], "command": "harness/staircase", "note": "",
        "ended_utc": "2026-01-01 00:05:00 UTC",
        "provenance": {"machine": {"cpu_model": "CPU", "logical_cpus": 2, "memory": "8.0 GiB",
                                   "os": "Debian", "kernel": "Linux 6.1 #1 SMP"},
                       "commit": {"head": "abc", "dirty": False, "changed_paths": 0},
                       "load_average": [1.0, 2.0, 3.0], "recorded_utc": "2026-01-01 00:00:00 UTC"},
        "runs": [
            dict(run, name="blocking", model="blocking", server_command="cm-server --model blocking",
                 last_s=18.0, steps=32, largest_step=64, csv="blocking.csv"),
            dict(run, name="uring_coro", model="uring_coro", server_command="cm-server --model uring_coro",
                 last_s=1.2, csv="uring_coro.csv"),
            dict(run, name="libuv_callbacks-delay0", model="libuv_callbacks", control=True,
                 path="/delay/0", server_command="cm-server --model libuv_callbacks", first_s=0.0,
                 last_s=0.4, csv="c.csv"),
            {"name": "asio_coro", "model": "asio_coro", "flags": [], "path": "/delay/500",
             "server_command": "cm-server --model asio_coro", "error": "cm-server did not start: x"},
        ],
    }


class Readme(unittest.TestCase):
    def setUp(self):
        out = tempfile.mkdtemp()
        staircase_report.write_readme(a_doc(), out, chart_ok=True)
        with open(os.path.join(out, "README.md")) as f:
            self.text = f.read()

    def test_the_table_has_every_run_with_its_prediction(self):
        self.assertIn("| blocking | `cm-server --model blocking` | `/delay/500` | 2,000 of 2,000 (2,000) "
                      "| 0.500 s | 18.000 s | 32 (32) | 64 | [blocking.csv](blocking.csv) |", self.text)
        self.assertIn("| libuv_callbacks-delay0 (control) |", self.text)
        self.assertIn("| asio_coro | `cm-server --model asio_coro` | `/delay/500` | failed: cm-server did "
                      "not start: x |", self.text)

    def test_the_findings_read_the_async_runs_against_the_control(self):
        self.assertIn("the last between 1.20 and 1.20 s", self.text)
        self.assertIn("one delay plus that is 0.90 s", self.text)
        self.assertIn("2,000 answers at 111 a second, against 64 / 0.5 s = 128", self.text)

    def test_the_conditions_come_from_the_provenance(self):
        self.assertIn("- When: 2026-01-01 00:00:00 UTC to 2026-01-01 00:05:00 UTC", self.text)
        self.assertIn("- Load average (1, 5, 15 min): 1.00 2.00 3.00 before, 1.50 2.00 3.00 after",
                      self.text)
        self.assertIn("- Machine: CPU, 2 CPUs, 8.0 GiB, Linux 6.1", self.text)
        self.assertIn("- Commit: abc", self.text)
        self.assertIn("- Pinning: cm-server on CPU 0, harness/burst on CPU 1", self.text)

    def test_the_commands_and_what_burst_printed(self):
        self.assertIn("    taskset -c 0 cm-server --model blocking --port 0 &    # blocking", self.text)
        self.assertIn("    blocking: burst: fine", self.text)
        self.assertNotIn("timeline of", self.text)
        self.assertIn("![each request's answer time, every model](staircase.png)", self.text)


if __name__ == "__main__":
    unittest.main()
