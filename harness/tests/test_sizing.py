"""harness/size and cmharness.sizing: the ceilings of a service from committed rows, which binds,
the rps and memory to expect, and where each figure comes from. Nothing is measured here."""
import contextlib
import io
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from cmharness import sizing  # noqa: E402

HARNESS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from cmharness.tools import size as size_tool  # noqa: E402


def row(connections, rps, cpu_ceiling, cpu_us, rss_kib, eff, bound, path="/delay/{ms}", ceiling_row=False):
    est = {"estimate": eff[0], "low": eff[1], "high": eff[2], "n": 6, "coverage": 0.97} if eff else None
    return {"path": path, "delay": 100, "mean_delay_ms": 100.0, "connections_requested": connections,
            "cpu_ceiling_row": ceiling_row, "bound": bound,
            "summary": {"rps": {"median": rps}, "cpu_ceiling": {"median": cpu_ceiling},
                        "server_cpu_ms_per_1k": {"median": cpu_us},
                        "rss_per_connection_kib": {"median": rss_kib}, "efficiency_interval": est}}


DOC = {"targets": [
    {"name": "libuv_callbacks", "waiting_cost": {"bytes_per_waiting": 2048}, "rows": [
        row(128, 97000, 97000, 10.0, 0.0, None, "", path="/plaintext", ceiling_row=True),
        row(1000, 9900, 90000, 18.0, 2.0, (0.99, 0.98, 0.995), "connections"),
        row(16000, 67000, 70000, 14.5, 2.0, (0.95, 0.90, 1.06), "cpu")]},
    {"name": "blocking", "waiting_cost": {"bytes_per_waiting": 30720,
                                          "reserved_bytes_per_waiting": 8 * 2**20}, "rows": [
        row(16000, 640, 60000, 60.0, 0.03, (1.0, 0.93, 1.0), "connections = threads")]},
]}


class DelayRows(unittest.TestCase):
    def test_the_priced_delay_rows_with_where_they_come_from(self):
        rows = sizing.delay_rows(DOC, "results/delay-sweep/results.json")
        self.assertEqual([(r.server, r.connections) for r in rows],
                         [("libuv_callbacks", 1000), ("libuv_callbacks", 16000), ("blocking", 16000)])
        self.assertEqual(rows[0].source, "results/delay-sweep/results.json: libuv_callbacks /delay/100 x 1,000")

    def test_the_nearest_row_by_ratio(self):
        rows = sizing.delay_rows(DOC, "x")
        self.assertEqual(sizing.nearest(rows, "libuv_callbacks", 3000).connections, 1000)
        self.assertEqual(sizing.nearest(rows, "libuv_callbacks", 5000).connections, 16000)
        self.assertIsNone(sizing.nearest(rows, "uring_coro", 5000))


class Size(unittest.TestCase):
    def setUp(self):
        self.rows = sizing.delay_rows(DOC, "x")

    def test_few_connections_are_bound_by_connections_over_the_delay(self):
        s = sizing.size(self.rows, "libuv_callbacks", 1000, 100, 1)
        self.assertEqual(s.ceilings["connections"], 10000)
        self.assertEqual(s.binds, "connections")
        self.assertAlmostEqual(s.expected[0], 9800)
        self.assertAlmostEqual(s.expected[1], 9950)
        self.assertAlmostEqual(s.memory_mib, 1000 * 2.0 / 1024)

    def test_many_connections_are_bound_by_the_cpu_and_capped_at_the_ceiling(self):
        s = sizing.size(self.rows, "libuv_callbacks", 16000, 100, 1)
        self.assertEqual(s.binds, "cpu")
        self.assertEqual(s.expected, (70000 * 0.90, 70000.0))

    def test_the_efficiency_comes_from_a_row_bound_by_the_same_ceiling(self):
        # 16,000 connections waiting 5 s: bound by connections; the 16,000 row was bound by the
        # cpu, so the efficiency is the 1,000 row's (bound by connections), the memory the 16,000 row's
        s = sizing.size(self.rows, "libuv_callbacks", 16000, 5000, 1)
        self.assertEqual(s.binds, "connections")
        self.assertEqual(s.row.connections, 16000)
        self.assertEqual(s.efficiency_row.connections, 1000)
        self.assertAlmostEqual(s.expected[0], 3200 * 0.98)

    def test_without_a_row_of_the_same_kind_the_nearest_is_a_guide_and_says_so(self):
        rows = [r for r in self.rows if r.connections != 1000]
        s = sizing.size(rows, "libuv_callbacks", 16000, 5000, 1)
        self.assertIs(s.efficiency_row, s.row)
        self.assertTrue(any("a guide, not a measurement" in n for n in s.notes))

    def test_no_rows_no_sizing(self):
        self.assertIsNone(sizing.size(self.rows, "uring_coro", 100, 10, 1))

    def test_more_cores_multiply_the_cpu_ceiling_and_say_it_is_not_measured(self):
        s = sizing.size(self.rows, "libuv_callbacks", 16000, 100, 4)
        self.assertEqual(s.ceilings["cpu"], 280000)
        self.assertEqual(s.binds, "connections")
        s = sizing.size(self.rows, "libuv_callbacks", 64000, 100, 2)
        self.assertEqual(s.binds, "cpu")
        self.assertTrue(any("not measured here" in n for n in s.notes))

    def test_the_blocking_model_is_bound_by_its_workers_and_says_what_more_would_cost(self):
        s = sizing.size(self.rows, "blocking", 16000, 100, 1, workers=64)
        self.assertEqual(s.ceilings["threads"], 640)
        self.assertEqual(s.binds, "threads")
        self.assertEqual(s.threads_needed, 16000)
        self.assertAlmostEqual(s.memory_mib, 64 * 30 / 1024)  # its workers, each a thread's RSS
        self.assertTrue(any("128,000 MiB of address space" in n and "469 MiB of RSS" in n
                            for n in s.notes), s.notes)

    def test_memory_is_the_bytes_per_waiting_request_the_profile_measured(self):
        s = sizing.size(self.rows, "libuv_callbacks", 10000, 100, 1)
        self.assertAlmostEqual(s.memory_mib, 10000 * 2048 / 2**20)


    def test_a_wait_on_a_database_pool_is_bound_by_the_pool(self):
        db = {"targets": [{"name": "libuv_callbacks", "rows": [
            dict(row(2000, 1560, 60000, 20.0, 1.0, (0.975, 0.96, 0.99), "database",
                     path="/db/sleep/{ms}"), mean_delay_ms=10.0, delay="10")]}]}
        rows = self.rows + sizing.delay_rows(db, "results/db/results.json")
        self.assertEqual([r.route for r in rows[-1:]], ["db"])
        # 2,000 connections, a 10 ms query on 16 database connections: 1,600 a second at most,
        # the efficiency a committed /db/sleep row reached against the same ceiling
        s = sizing.size(rows, "libuv_callbacks", 2000, 10, 1, db_pool=16)
        self.assertEqual((s.ceilings["database"], s.binds), (1600, "database"))
        self.assertEqual(s.efficiency_row.route, "db")
        self.assertAlmostEqual(s.expected[0], 1600 * 0.96)
        self.assertEqual(s.row.route, "delay")  # the CPU ceiling: the nearest /delay row
        self.assertEqual(sizing.size(rows, "libuv_callbacks", 2000, 10, 2, db_pool=16)
                         .ceilings["database"], 3200)  # a pool per loop, a loop per core
        # the blocking model's workers share one pool of 16, whatever the cores
        s = sizing.size(self.rows, "blocking", 2000, 10, 2, db_pool=16)
        self.assertEqual((s.ceilings["database"], s.binds), (1600, "database"))
        self.assertTrue(any("a guide, not a measurement" in n for n in s.notes))  # no db row
        self.assertIsNone(sizing.size(self.rows, "blocking", 2000, 10, 1).ceilings["database"])

    def test_the_db_row_nearest_in_delay_and_never_a_driver_that_blocks(self):
        def sleep_row(ms, eff):
            return dict(row(2000, 1000, 60000, 20.0, 1.0, (eff, eff - 0.01, eff + 0.01),
                            "database", path="/db/sleep/{ms}"), mean_delay_ms=float(ms),
                        delay=str(ms))

        db = {"meta": {"profile_settings": {"variants": [
                  {"name": "pool 16", "server_args": ["--db-pool", "16"]},
                  {"name": "on the loop", "server_args": ["--db-mode", "blocking"]}]}},
              "targets": [
                  {"name": "libuv_callbacks", "variant": "pool 16",
                   "rows": [sleep_row(1, 0.40), sleep_row(10, 0.94)]},
                  {"name": "libuv_callbacks", "variant": "on the loop",
                   "rows": [sleep_row(10, 0.99)]}]}
        rows = sizing.delay_rows(db, "results/db/results.json")
        self.assertEqual([r.delay_ms for r in rows], [1.0, 10.0])  # the driver on the loop: out
        self.assertEqual(sizing.nearest(rows, "libuv_callbacks", 2000, "db", 20).delay_ms, 10.0)
        self.assertEqual(sizing.nearest(rows, "libuv_callbacks", 2000, "db", 1).delay_ms, 1.0)
        s = sizing.size(self.rows + rows, "libuv_callbacks", 200, 20, 1, db_pool=32)
        self.assertEqual(s.efficiency_row.delay_ms, 10.0)


def size_with_doc(argv):
    """What harness/size prints for argv over a results folder holding DOC as delay-sweep's."""
    with tempfile.TemporaryDirectory() as results:
        os.makedirs(os.path.join(results, "delay-sweep"))
        with open(os.path.join(results, "delay-sweep", "results.json"), "w") as f:
            json.dump(DOC, f)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            size_tool.main(argv + ["--results", results])
    return out.getvalue()


class Tool(unittest.TestCase):
    def test_prints_a_row_per_model_and_its_source(self):
        text = size_with_doc(["16000", "100", "--rate", "35000"])
        self.assertIn("| blocking | 160,000 | 640 | 60,000 | threads | 595-640 |", text)
        self.assertIn("| libuv_callbacks | 160,000 | - | 70,000 | cpu | 63,000-70,000 |", text)
        self.assertIn("1.80-2.00 |", text)  # headroom against --rate
        self.assertIn("libuv_callbacks /delay/100 x 16,000", text)

    def test_with_a_database_pool_a_column_and_its_ceiling(self):
        text = size_with_doc(["2000", "10", "--db-pool", "16"])
        self.assertIn("each wait a query on 16 database connections", text)
        self.assertIn("| model | connections / D | threads / D | database / D | cpu |", text)
        self.assertIn("| blocking | 200,000 | 6,400 | 1,600 | 60,000 | database |", text)

    def test_a_peer_without_a_profiles_waiting_cost_takes_the_waiting_cost_files(self):
        with tempfile.TemporaryDirectory() as results:
            os.makedirs(os.path.join(results, "arena"))
            os.makedirs(os.path.join(results, "waiting-cost"))
            peer = {"targets": [{"name": "go", "rows": [
                row(16000, 20000, 27000, 50.0, 15.0, (0.75, 0.6, 0.9), "cpu")]}]}
            with open(os.path.join(results, "arena", "results.json"), "w") as f:
                json.dump(peer, f)
            with open(os.path.join(results, "waiting-cost", "go.json"), "w") as f:
                json.dump({"rss_per_waiting_request_bytes": 15434}, f)
            rows = sizing.load_rows(results)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                size_tool.main(["10000", "100", "--results", results])
        self.assertAlmostEqual(sizing.size(rows, "go", 10000, 100, 1).memory_mib,
                               10000 * 15434 / 2**20)
        self.assertIn("15,434 bytes per waiting request (", out.getvalue())
        self.assertIn("waiting-cost/go.json)", out.getvalue())

    def test_the_committed_results_size_every_model(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            size_tool.main(["10000", "100"])
        for model in ("blocking", "asio_coro", "asio_coro_uring", "libuv_callbacks", "uring_coro",
                      "go", "tokio"):
            self.assertIn(f"| {model} |", out.getvalue())

    def test_the_committed_sizing_page_is_what_the_committed_results_say(self):
        page = os.path.join(os.path.dirname(HARNESS), "results", "sizing.md")
        with open(page) as f:
            committed = f.read()
        self.assertEqual(committed, size_tool.examples(os.path.join(os.path.dirname(HARNESS), "results")),
                         "results/sizing.md is stale: run harness/size --examples results/sizing.md")

    def test_nonsense_is_refused(self):
        with contextlib.redirect_stderr(io.StringIO()), self.assertRaises(SystemExit):
            size_tool.parse_args(["0", "100"])


if __name__ == "__main__":
    unittest.main()
