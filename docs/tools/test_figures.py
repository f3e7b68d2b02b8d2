#!/usr/bin/python3
"""Tests of figures.py: it passes figures that agree with results/, fails the others, and --update
rewrites them. Each case builds a small repository in a temporary folder and runs the tool as ctest
does (a child python with --root). Run: /usr/bin/python3 docs/tools/test_figures.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import unittest

TOOLS = os.path.dirname(os.path.abspath(__file__))
PYTHON = sys.executable or "/usr/bin/python3"


def stat(median: float, low: float | None = None, high: float | None = None) -> dict:
    low = median if low is None else low
    high = median if high is None else high
    return {"median": median, "min": low, "max": high, "rounds": 3, "spread": (high - low) / median}


def row(row_id: str, connections: int, rps: float, efficiency: float | None, bound: str,
        delay: str | None = None) -> dict:
    return {
        "id": row_id,
        "delay": delay,
        "connections_requested": connections,
        "bound": bound,
        "rounds_measured": 3,
        "summary": {
            "rps": stat(rps, rps * 0.9, rps * 1.1),
            "efficiency": None if efficiency is None else stat(efficiency),
            "overshoot_p99_ms": stat(6.694),
            "server_cpu_ms_per_1k": stat(7.04),
            "errors_total": 0,
        },
    }


RESULTS = {
    "meta": {},
    "skipped": [],
    "targets": [
        {"server": "uring_coro", "variant": "standard",
         "rows": [row("plaintext", 128, 91046.0, None, "(this row)"),
                  row("delay", 2000, 19656.4, 0.983, "connections")]},
        {"server": "libuv_callbacks", "variant": "standard",
         "rows": [row("delay", 2000, 19758.0, 0.988, "connections"),
                  row("delay", 4000, 39198.0, 0.98, "connections")]},
        {"server": "asio_coro", "variant": "pool 16",
         "rows": [row("db-sleep", 2000, 1480.0, 0.925, "database", delay="10"),
                  row("db-sleep", 2000, 5000.0, 0.3125, "cpu", delay="1")]},
    ],
}

GOOD = (
    "In [quick](../results/quick/results.md) uring_coro answers "
    "19,656<!--fig quick uring_coro delay 2000 rps--> rps "
    "(98%<!--fig quick uring_coro delay 2000 efficiency-->, bound by "
    "connections<!--fig quick uring_coro delay 2000 bound-->), "
    "99%<!--fig quick percent uring_coro libuv_callbacks delay 2000--> of libuv_callbacks' rate, "
    "p99 overshoot 6.69<!--fig quick uring_coro delay 2000 overshoot--> ms.\n"
)


class FiguresTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name
        os.makedirs(os.path.join(self.root, "docs"))
        os.makedirs(os.path.join(self.root, "results", "quick"))
        open(os.path.join(self.root, "CMakeLists.txt"), "w").close()
        with open(os.path.join(self.root, "results", "quick", "results.json"), "w") as f:
            json.dump(RESULTS, f)

    def tearDown(self):
        self.tmp.cleanup()

    def page(self, text: str) -> str:
        path = os.path.join(self.root, "docs", "page.md")
        with open(path, "w") as f:
            f.write(text)
        return path

    def run_tool(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([PYTHON, os.path.join(TOOLS, "figures.py"), "--root", self.root, *args],
                              capture_output=True, text=True, check=False)

    def test_figures_that_agree_pass(self):
        self.page(GOOD)
        done = self.run_tool()
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("5 figures agree", done.stdout)

    def test_a_stale_figure_fails_with_where_and_what(self):
        self.page(GOOD.replace("19,656<!--", "17,764<!--"))
        done = self.run_tool()
        self.assertEqual(done.returncode, 1)
        self.assertIn("docs/page.md:1: shows '17,764', results say '19,656'", done.stderr)

    def test_update_rewrites_the_figure_and_nothing_else(self):
        path = self.page(GOOD.replace("98%<!--", "89%<!--").replace("6.69<!--", "<!--"))
        done = self.run_tool("--update")
        self.assertEqual(done.returncode, 0, done.stderr)
        with open(path) as f:
            self.assertEqual(f.read(), GOOD)
        self.assertIn("89% -> 98%", done.stdout)
        self.assertEqual(self.run_tool().returncode, 0)

    def test_a_row_that_is_not_there_fails(self):
        self.page(GOOD.replace("uring_coro delay 2000 rps", "uring_coro delay 3000 rps"))
        done = self.run_tool("--update")
        self.assertEqual(done.returncode, 1)
        self.assertIn("no row for uring_coro delay 3000", done.stderr)

    def test_an_ambiguous_row_fails(self):
        self.page(GOOD.replace("uring_coro delay 2000 rps", "libuv_callbacks delay - rps"))
        done = self.run_tool()
        self.assertEqual(done.returncode, 1)
        self.assertIn("2 rows for libuv_callbacks delay -", done.stderr)

    def test_one_id_at_several_delays_is_named_by_its_delay(self):
        self.page(GOOD + "[db](../results/quick/) 1,480<!--fig quick asio_coro/pool-16 db-sleep:10 2000 rps-->"
                  " and 5,000<!--fig quick asio_coro db-sleep:1 - rps-->\n")
        done = self.run_tool()
        self.assertEqual(done.returncode, 0, done.stderr)
        self.page(GOOD + "1,480<!--fig quick asio_coro db-sleep 2000 rps-->\n")
        done = self.run_tool()
        self.assertEqual(done.returncode, 1)
        self.assertIn("2 rows for asio_coro db-sleep 2000", done.stderr)

    def test_an_unknown_field_fails(self):
        self.page(GOOD.replace("2000 overshoot", "2000 speed"))
        done = self.run_tool()
        self.assertEqual(done.returncode, 1)
        self.assertIn("unknown field 'speed'", done.stderr)

    def test_a_field_the_row_did_not_measure_fails(self):
        self.page(GOOD + "x<!--fig quick uring_coro plaintext 128 efficiency-->\n")
        done = self.run_tool()
        self.assertEqual(done.returncode, 1)
        self.assertIn("efficiency was not measured", done.stderr)

    def test_whole_ratios_and_slashes(self):
        self.page(GOOD + "a factor of 1<!--fig quick times libuv_callbacks uring_coro delay 2000-->, "
                  "bound cpu/x<!--fig quick uring_coro delay 2000 bound-->\n")
        done = self.run_tool("--update")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("cpu/x -> connections", done.stdout)
        self.assertNotIn("1 ->", done.stdout)

    def test_a_link_counts_relative_to_the_page(self):
        os.makedirs(os.path.join(self.root, "results", "sub"))
        with open(os.path.join(self.root, "results", "README.md"), "w") as f:
            f.write(GOOD.replace("../results/quick/results.md", "quick/results.md"))
        self.page("nothing quoted here\n")
        done = self.run_tool()
        self.assertEqual(done.returncode, 0, done.stderr)

    def test_a_page_that_quotes_a_profile_must_link_to_it(self):
        self.page(GOOD.replace("../results/quick/results.md", "https://example.com"))
        done = self.run_tool()
        self.assertEqual(done.returncode, 1)
        self.assertIn("never links to it", done.stderr)


if __name__ == "__main__":
    unittest.main()
