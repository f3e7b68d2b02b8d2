"""cmharness.loadgen: what harness/cross-check and harness/tsung-check share -- the rounds in
alternating order, cm-load run pinned and read, a client's command as the page shows it, the
verdict of a ratio against 1 (their pages are tested in test_cross_check and test_tsung_check).
Nothing is measured (cm-load is stood in for by sh).

    cd harness/tests && /usr/bin/python3 -m unittest test_loadgen -v
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import json  # noqa: E402
import tempfile  # noqa: E402
import unittest  # noqa: E402
from unittest import mock  # noqa: E402

from cmharness import ROOT, loadgen, stats  # noqa: E402
import test_load  # noqa: E402

DOC = test_load.ResponsesTotalAndStopWhen.DOC  # a minimal cm-load JSON


class Rounds(unittest.TestCase):
    def test_every_client_once_a_round_the_order_reversed_every_other_round(self):
        seen = []
        found = loadgen.in_rounds(("a", "b"), 3, lambda c: c.upper(),
                                  lambda c, i, run: seen.append((i, c, run)))
        self.assertEqual(seen, [(1, "a", "A"), (1, "b", "B"), (2, "b", "B"), (2, "a", "A"),
                                (3, "a", "A"), (3, "b", "B")])
        self.assertEqual(found, {"a": ["A"] * 3, "b": ["B"] * 3})


class CmLoad(unittest.TestCase):
    def test_read_from_its_json_and_an_earlier_runs_json_never_read_as_this_one(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "out.json")
            write = f"printf '%s' '{json.dumps(DOC)}' > {path}"
            result, done = loadgen.run_cm_load(["sh", "-c", write], path, (), 10)
            self.assertEqual((result.requests, done.returncode), (10, 0))
            with self.assertRaises(FileNotFoundError):  # this run wrote none: not the last one's
                loadgen.run_cm_load(["true"], path, (), 10)

    def test_shown_with_its_own_port_and_scratch_json_replaced(self):
        argv = [os.path.join(ROOT, "build", "bin", "cm-load"), "http://127.0.0.1:4321/x",
                "--json", "/tmp/run-1/out.json"]
        self.assertEqual(loadgen.shown(argv, 4321, "/tmp/run-1/out.json"),
                         "build/bin/cm-load http://127.0.0.1:PORT/x --json out.json")

    def test_invocation(self):
        with mock.patch.object(sys, "argv", ["x", "--note", "a quiet machine"]):
            self.assertEqual(loadgen.invocation("cross-check"),
                             "harness/cross-check --note 'a quiet machine'")


class AgainstOne(unittest.TestCase):
    def test_where_the_interval_lies(self):
        self.assertEqual(loadgen.against_one(stats.Estimate(1.2, 1.1, 1.3, 6)), "higher")
        self.assertEqual(loadgen.against_one(stats.Estimate(0.8, 0.7, 0.9, 6)), "lower")
        for e in (stats.Estimate(1.0, 0.9, 1.1, 6), stats.Estimate(2.0, None, None, 3)):
            self.assertEqual(loadgen.against_one(e), "no difference measured here")

    def test_median_text(self):
        self.assertEqual(loadgen.median_text([]), "-")
        self.assertEqual(loadgen.median_text([1, 2, 3], "{:.1f}"), "2.0 [n=3]")


if __name__ == "__main__":
    unittest.main()
