"""Unit tests of harness/tsung-check: tsung's configuration, its per-request dump read into
latencies, the percentile, and the section it writes into results/loadgen.md from a made-up run.
Nothing is started and nothing measured (the real run is in results/loadgen.md).

    cd harness/tests && /usr/bin/python3 -m unittest test_tsung_check -v
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import unittest  # noqa: E402
import xml.etree.ElementTree as ET  # noqa: E402

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


class TheSection(unittest.TestCase):
    def test_medians_and_within_round_ratios_per_model_and_rate(self):
        runs = {"tsung": [tc.Run("tsung", 1000, 1000, 1.0, 4.0, 4000, 0, "tsung ...")] * 6,
                "cm-load": [tc.Run("cm-load", 1000, 1000, 0.5, 6.0, 4000, 0, "cm-load ...")] * 6}
        lines = tc.table({"asio_coro": {1000.0: runs}})
        self.assertIn("| asio_coro | 1,000 | tsung | 1,000 [1,000 1,000] | 1.000 [1.000 1.000] "
                      "| 4.000 [4.000 4.000] | 0 |  |  |", lines)
        self.assertIn("| 0.50 [0.50 0.50] | 1.50 [1.50 1.50] |", lines[-1])


if __name__ == "__main__":
    unittest.main()
