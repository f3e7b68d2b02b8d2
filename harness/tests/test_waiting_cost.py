"""harness/waiting-cost: the bytes per waiting request, and the line it prints (docs/exercises/10
reads it). No server is started here."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import importlib.machinery  # noqa: E402
import unittest  # noqa: E402

HARNESS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
waiting_cost = importlib.machinery.SourceFileLoader(
    "waiting_cost", os.path.join(HARNESS, "waiting-cost")).load_module()


class PerRequestBytes(unittest.TestCase):
    def test_the_growth_in_bytes_shared_by_the_requests(self):
        self.assertEqual(waiting_cost.per_request_bytes(6164, 6304, 20), 7168)

    def test_whole_bytes_rounded_down(self):
        self.assertEqual(waiting_cost.per_request_bytes(0, 1, 3), 341)

    def test_a_shrinking_rss_is_negative(self):
        self.assertEqual(waiting_cost.per_request_bytes(100, 99, 1), -1024)


class FiguresLine(unittest.TestCase):
    def test_the_line_the_exercise_reads(self):
        figures = {"model": "blocking", "threads": 98, "waiting": 96, "rss_before_kib": 1000,
                   "rss_after_kib": 2000, "rss_per_waiting_request_bytes": 10666, "vm_size_kib": 900000}
        self.assertEqual(waiting_cost.figures_line(figures),
                         "model=blocking threads=98 waiting=96 rss_before=1000KiB rss_after=2000KiB "
                         "rss_per_waiting_request=10666B vm_size=900000KiB")


class Arguments(unittest.TestCase):
    def test_defaults(self):
        args = waiting_cost.parse_args(["--model", "asio_coro"])
        self.assertEqual((args.waiting, args.threads, args.warmup, args.json), (1000, None, 0, None))
        self.assertTrue(args.server.endswith("cm-server"))

    def test_threads_is_a_number(self):
        self.assertEqual(waiting_cost.parse_args(["--model", "blocking", "--threads", "512"]).threads, 512)


if __name__ == "__main__":
    unittest.main()
