"""Unit tests of harness/tsung-check: tsung's configuration, its per-request dump read into
latencies, the percentile, and the section it writes into results/loadgen.md from a made-up run
-- and the committed section, which must be what its committed JSON renders. Nothing is started
and nothing measured (the real run is in results/loadgen.md).

    cd harness/tests && /usr/bin/python3 -m unittest test_tsung_check -v
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import argparse  # noqa: E402
import json  # noqa: E402
import tempfile  # noqa: E402
import unittest  # noqa: E402
import xml.etree.ElementTree as ET  # noqa: E402

from cmharness import ROOT, loadgen, results  # noqa: E402
from cmharness.tools import tsung_check as tc  # noqa: E402

HEADER = "#date;pid;id;http method;host;URL;HTTP status;size;duration;transaction;match;error;tag"


def line(t, ms, status="200", error=""):
    return f"{t};<0.1.0>;1;get;127.0.0.1;/plaintext;{status};13;{ms};-;;{error};"


class TheConfiguration(unittest.TestCase):
    def test_one_request_per_user_at_the_rate_from_several_loopback_addresses(self):
        root = ET.fromstring(tc.config(8080, 1000, 5, sources=3).split("\n", 2)[2])
        self.assertEqual(root.get("dumptraffic"), "protocol")
        self.assertEqual([ip.get("value") for ip in root.iter("ip")],
                         ["127.0.0.2", "127.0.0.3", "127.0.0.4"])
        self.assertEqual(root.find("servers/server").get("port"), "8080")
        phase = root.find("load/arrivalphase")
        self.assertEqual((phase.get("duration"), phase.find("users").get("arrivalrate")),
                         ("5", "1000"))
        self.assertEqual([r.find("http").get("url") for r in root.iter("request")],
                         ["/plaintext"])


class TheDump(unittest.TestCase):
    def test_the_warm_up_and_failures_are_left_out_of_the_latencies(self):
        text = "\n".join([HEADER, line(100.0, 9.0), line(100.5, 8.0), line(101.0, 1.5),
                          line(101.5, 2.5), line(102.0, 0.5, status="503"),
                          line(102.5, 3.5, error="error_connect_econnrefused"), line(103.0, 0.7)])
        durations, span, errors = tc.read_dump(text, skip_s=1.0)
        self.assertEqual(durations, [1.5, 2.5, 0.7])
        self.assertAlmostEqual(span, 2.0)
        self.assertEqual(errors, 2)

    def test_an_empty_dump_has_nothing(self):
        self.assertEqual(tc.read_dump(HEADER + "\n", 1.0), ([], 0.0, 0))

    def test_the_percentile_is_the_nearest_rank(self):
        values = list(range(1, 101))
        self.assertEqual(tc.percentile(values, 0.5), 50)
        self.assertEqual(tc.percentile(values, 0.99), 99)
        self.assertEqual(tc.percentile([7], 0.99), 7)
        self.assertIsNone(tc.percentile([], 0.5))


def made_up_record(runs):
    """loadgen-tsung.json of a made-up run of asio_coro at 1,000 rps, through JSON."""
    settings = argparse.Namespace(models=["asio_coro"], rates=[1000.0], runs=6, duration=4.0,
                                  warmup=1.0, connections=32, path="/plaintext", bin_dir="x",
                                  out="x", render=False)
    prov = {"recorded_utc": "2026-12-01 10:00:00 UTC",
            "commit": {"head": "0123456789abcdef", "dirty": False, "changed_paths": 0}}
    rec = tc.record(settings, prov, "2026-12-01 10:05:00 UTC", "cm-server on CPU 0",
                    "tsung 1.7.0", {"asio_coro": {1000.0: runs}})
    return json.loads(json.dumps(rec))


class TheSection(unittest.TestCase):
    RUNS = {"tsung": [tc.Run("tsung", 1000, 1000, 1.0, 4.0, 4000, 0, "tsung ...")] * 6,
            "cm-load": [tc.Run("cm-load", 1000, 1000, 0.5, 6.0, 4000, 0, "cm-load ...")] * 6}

    def test_medians_and_within_round_ratios_per_model_and_rate(self):
        lines = loadgen.tsung_table(made_up_record(self.RUNS)["runs"])
        self.assertIn("| asio_coro | 1,000 | tsung | 1,000 [1,000 1,000] | 1.000 [1.000 1.000] "
                      "| 4.000 [4.000 4.000] | 0 |  |  |", lines)
        self.assertIn("| 0.50 [0.50 0.50] | 1.50 [1.50 1.50] |", lines[-1])

    def test_the_section_says_what_the_table_does_and_where_it_comes_from(self):
        text = loadgen.tsung_section(made_up_record(self.RUNS))
        for part in ("<!-- tsung-check -->\n## An open loop against tsung's",
                     "(Debian's open-loop generator, tsung 1.7.0)",
                     "- asio_coro at 1,000 rps: cm-load's p50 is 0.50 [0.50 0.50] of tsung's "
                     "(lower than tsung's); cm-load's p99 is 1.50 [1.50 1.50] of tsung's "
                     "(higher than tsung's).",
                     "- When: 2026-12-01 10:00:00 UTC to 2026-12-01 10:05:00 UTC; commit "
                     "0123456789ab; cm-server on CPU 0.",
                     "tsung: 5 s of arrivals", "```\ntsung ...\ncm-load ...\n```"):
            self.assertIn(part, text)
        self.assertTrue(text.endswith("<!-- /tsung-check -->"))

    def test_write_replaces_its_own_block_only(self):
        rec = made_up_record(self.RUNS)
        with tempfile.TemporaryDirectory() as tmp:
            page = os.path.join(tmp, "loadgen.md")
            with open(page, "w") as f:
                f.write("# cm-load against wrk\n\n<!-- tsung-check -->\nold\n"
                        "<!-- /tsung-check -->\n")
            section = tc.write(page, rec)
            with open(page) as f:
                self.assertEqual(f.read(), "# cm-load against wrk\n\n" + section + "\n")

    def test_the_committed_section_is_what_its_record_renders(self):
        folder = os.path.join(ROOT, "results")
        with open(os.path.join(folder, "loadgen-tsung.json")) as f:
            rec = json.load(f)
        with open(os.path.join(folder, "loadgen.md")) as f:
            page = f.read()
        self.assertEqual(results.block_of(page, "tsung-check"), loadgen.tsung_section(rec))


if __name__ == "__main__":
    unittest.main()
