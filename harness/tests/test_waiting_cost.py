"""harness/waiting-cost: the bytes per waiting request, and the line it prints (docs/exercises/10
reads it). No server is started here."""
import json
import os
import socket
import sys
import tempfile
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import unittest  # noqa: E402

from cmharness.tools import waiting_cost  # noqa: E402


from cmharness import memory  # noqa: E402


class PerRequestBytes(unittest.TestCase):
    def test_the_growth_in_bytes_shared_by_the_requests(self):
        self.assertEqual(memory.per_request(6164, 6304, 20), 7168)

    def test_whole_bytes_rounded_down(self):
        self.assertEqual(memory.per_request(0, 1, 3), 341)

    def test_a_shrinking_rss_is_negative(self):
        self.assertEqual(memory.per_request(100, 99, 1), -1024)


class StackSize(unittest.TestCase):
    """The stack a thread reserves, read from the mappings N - 1 more threads added."""

    def test_the_mapping_every_added_thread_brought_with_its_guard(self):
        mib8, guard = 8 * 1024 * 1024, 4096
        fewer = {(mib8, "rw-p"): 2, (guard, "---p"): 2, (132 * 1024, "rw-p"): 3,
                 (64 * 1024 * 1024 - 132 * 1024, "---p"): 3}
        more = dict(fewer)
        more[(mib8, "rw-p")] += 63
        more[(guard, "---p")] += 63
        more[(132 * 1024, "rw-p")] += 5  # malloc arenas: a few, not one per thread
        self.assertEqual(memory.stack_size(fewer, more, 63), mib8 + guard)

    def test_none_when_no_mapping_grew_with_every_thread(self):
        self.assertIsNone(memory.stack_size({(4096, "rw-p"): 1}, {(4096, "rw-p"): 3}, 63))

    def test_the_text_says_the_reserved_stack_beside_the_resident_bytes(self):
        c = memory.WaitingCost("blocking", 64, 66, 1, 2, 31_000, 8 * 1024 * 1024 + 4096)
        self.assertEqual(c.text(), "30.3 KiB (+8.0 MiB of stack reserved)")
        self.assertEqual(memory.WaitingCost.from_json(c.to_json()), c)
        self.assertEqual(memory.WaitingCost("asio_coro", 9, 3, 1, 2, 2100).text(), "2.1 KiB")


class FiguresLine(unittest.TestCase):
    def test_the_line_the_exercise_reads(self):
        figures = {"model": "blocking", "threads": 98, "waiting": 96, "rss_before_kib": 1000,
                   "rss_after_kib": 2000, "rss_per_waiting_request_bytes": 10666, "vm_size_kib": 900000,
                   "stack_reserved_bytes": 8392704}
        self.assertEqual(waiting_cost.figures_line(figures),
                         "model=blocking threads=98 waiting=96 rss_before=1000KiB rss_after=2000KiB "
                         "rss_per_waiting_request=10666B vm_size=900000KiB stack_reserved=8392704B")
        del figures["stack_reserved_bytes"]
        self.assertNotIn("stack_reserved", waiting_cost.figures_line(figures))
        figures["standing_cpu_ms_per_s"] = None
        self.assertNotIn("standing_cpu", waiting_cost.figures_line(figures))
        figures["standing_cpu_ms_per_s"] = 2.0
        self.assertTrue(waiting_cost.figures_line(figures).endswith(" standing_cpu=2.0ms/s"))


class StandingCpu(unittest.TestCase):
    """The CPU a server spends a second while it only holds what it holds."""

    class Server:
        def __init__(self, cpu_s):
            self.cpu = iter(cpu_s)

        def readings(self):
            return type("Readings", (), {"cpu_s": next(self.cpu)})()

    def test_the_cpu_over_the_window_in_ms_a_second(self):
        self.assertEqual(memory.standing_cpu(self.Server([1.00, 1.02]), 0.01), 2000.0)

    def test_no_window_reads_nothing(self):
        self.assertIsNone(memory.standing_cpu(self.Server([]), 0))

    def test_the_summary_says_what_was_not_read(self):
        self.assertEqual(waiting_cost.standing_text(None), "-")
        self.assertEqual(waiting_cost.standing_text(0.0), "0")


class IdleConnections(unittest.TestCase):
    """--idle: the connections left open are counted, and said apart from waiting requests."""

    def pair(self):
        a, b = socket.socketpair()
        self.addCleanup(a.close)
        self.addCleanup(b.close)
        return a, b

    def test_still_open_counts_the_connections_the_server_did_not_close(self):
        quiet, _ = self.pair()
        talking, peer = self.pair()
        peer.sendall(b"x")
        closed, gone = self.pair()
        gone.close()
        self.assertEqual(memory.still_open([quiet, talking, closed]), 2)

    def test_the_line_says_idle_connections_and_how_many_stayed_open(self):
        figures = {"model": "nginx", "holding": "idle", "threads": 2, "waiting": 10000,
                   "rss_before_kib": 1000, "rss_after_kib": 3500,
                   "rss_per_waiting_request_bytes": 256, "vm_size_kib": 9000, "still_open": 10000}
        self.assertEqual(waiting_cost.figures_line(figures),
                         "model=nginx holding=idle threads=2 connections=10000 rss_before=1000KiB "
                         "rss_after=3500KiB rss_per_idle_connection=256B vm_size=9000KiB "
                         "still_open=10000")

    def test_the_summary_puts_idle_connections_in_a_table_of_their_own(self):
        def doc(model, holding, per):
            return {"model": model, "holding": holding, "threads": 1, "waiting": 10, "timers": "model",
                    "rss_before_kib": 1, "rss_after_kib": 2, "rss_per_waiting_request_bytes": per,
                    "stack_reserved_bytes": None, "standing_cpu_ms_per_s": 0.0, "still_open": 10,
                    "command": "harness/waiting-cost ...", "provenance": {"commit": {"head": "abc1234"}}}
        with tempfile.TemporaryDirectory() as folder:
            for name, d in {"uring_coro.json": doc("uring_coro", "waiting", 1787),
                            "uring_coro-idle.json": doc("uring_coro", "idle", 3001)}.items():
                with open(os.path.join(folder, name), "w") as f:
                    json.dump(d, f)
            waiting_cost.summary(folder)
            with open(os.path.join(folder, "README.md")) as f:
                page = f.read()
        waiting, idle = page.split("## An idle keep-alive connection")
        self.assertIn("| 1,787 |", waiting)
        self.assertNotIn("3,001", waiting)
        self.assertIn("| bytes per idle connection |", idle)
        self.assertIn("| 3,001 | - | 10 | 0 |", idle)

    def test_nginx_waits_on_no_request_here(self):
        with mock.patch.object(sys, "argv", ["waiting-cost", "--model", "nginx"]):
            with self.assertRaisesRegex(SystemExit, "--idle"):
                waiting_cost.main()


class Arguments(unittest.TestCase):
    def test_defaults(self):
        args = waiting_cost.parse_args(["--model", "asio_coro"])
        self.assertEqual((args.waiting, args.threads, args.json, args.standing_s, args.idle),
                         (1000, None, None, 0.0, False))
        self.assertTrue(args.server.endswith("cm-server"))

    def test_threads_is_a_number(self):
        self.assertEqual(waiting_cost.parse_args(["--model", "blocking", "--threads", "512"]).threads, 512)


if __name__ == "__main__":
    unittest.main()
