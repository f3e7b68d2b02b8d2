"""Unit tests of harness/micro/timers: cm-micro's timer benchmarks read into figures per model,
operation and size, and the table it writes. Nothing is run (results/timers/ is the real run)."""
import os
import sys
import unittest

HARNESS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, HARNESS)
from cmharness.tools import micro_timers as timers  # noqa: E402


def bench(name, cpu, unit="ns", **more):
    return dict({"name": name, "run_name": name, "run_type": "iteration", "cpu_time": cpu,
                 "real_time": cpu, "time_unit": unit}, **more)


DATA = {"benchmarks": [
    *[bench("BM_uv_timers_arm_cancel/pending:1000", 50 + k) for k in range(6)],
    bench("BM_uv_timers_arm_cancel/pending:1000", 0, run_type="aggregate"),
    *[bench("BM_uring_timers_arm_cancel/pending:100000", 10 + k, unit="ms") for k in range(6)],
    *[bench("BM_asio_uring_timers_expire/pending:1000", 1600 + k) for k in range(6)],
    bench("BM_blocking_timers_expire/pending:1000", 0, error_occurred=True,
          error_message="could not start thread 7: Resource temporarily unavailable"),
]}


class ReadingCmMicro(unittest.TestCase):
    def test_each_repetition_lands_under_its_model_operation_and_size_in_ns(self):
        found, errors = timers.parse(DATA)
        self.assertEqual(found[("uv", "arm_cancel", 1000)], [50, 51, 52, 53, 54, 55])
        self.assertEqual(found[("uring", "arm_cancel", 100000)][0], 10e6)
        self.assertIn(("asio_uring", "expire", 1000), found)  # not confused with "asio"
        self.assertNotIn(("asio", "expire", 1000), found)
        self.assertEqual(errors, {"BM_blocking_timers_expire/pending:1000":
                                  "could not start thread 7: Resource temporarily unavailable"})

    def test_the_table_has_a_row_per_model_measured_and_says_what_was_not_run(self):
        found, _ = timers.parse(DATA)
        lines = timers.table(timers.estimates(found), [1000, 100000])
        rows = {line.split(" | ")[0].lstrip("| "): line for line in lines[2:]}
        self.assertEqual(set(rows), {"asio_coro_uring", "libuv_callbacks", "uring_coro"})
        self.assertIn("| 52.5 [50.0 55.0] | not run |", rows["libuv_callbacks"])
        self.assertIn("12,500,000 [10,000,000 15,000,000]", rows["uring_coro"])


if __name__ == "__main__":
    unittest.main()
