"""harness/abuse and cmharness.slowhttptest: slowhttptest's CSV read and summarized, its exit
status, its arguments, the verdict per model and attack, and the table. No server or slowhttptest
is started here."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import argparse  # noqa: E402
import unittest  # noqa: E402

from cmharness import slowhttptest  # noqa: E402
from cmharness.tools import abuse  # noqa: E402

HEAD = "Seconds,Closed,Pending,Connected,Service Available\n"


def rows(available, connected=500, closed=0):
    """Rows of slowhttptest's CSV, one a second, available as the string says ("1" / "0")."""
    text = HEAD + "".join(f"{s},{closed},0,{connected},{500 if a == '1' else 0}\n"
                          for s, a in enumerate(available))
    return slowhttptest.parse_csv(text.splitlines(keepends=True))


def result(available, **more):
    r = slowhttptest.summarize(rows(available))
    r["rows"] = rows(available)
    r.update(more)
    return r


class ParseCsv(unittest.TestCase):
    def test_fields(self):
        r = slowhttptest.parse_csv([HEAD, "0,0,1,0,500\n", "1,3,0,497,0\n"])
        self.assertEqual(r, [
            {"s": 0, "closed": 0, "pending": 1, "connected": 0, "available": True},
            {"s": 1, "closed": 3, "pending": 0, "connected": 497, "available": False}])


class Summarize(unittest.TestCase):
    def test_available_throughout(self):
        s = slowhttptest.summarize(rows("1111"))
        self.assertEqual((s["seconds"], s["available_s"], s["longest_outage_s"]), (4, 4, 0))
        self.assertIsNone(s["first_unavailable_s"])
        self.assertTrue(s["available_at_end"])

    def test_the_longest_outage_and_the_first_second_down(self):
        s = slowhttptest.summarize(rows("1100111000"))
        self.assertEqual(s["available_s"], 5)
        self.assertEqual(s["first_unavailable_s"], 2)
        self.assertEqual(s["longest_outage_s"], 3)
        self.assertFalse(s["available_at_end"])

    def test_connections_held_and_closed(self):
        r = slowhttptest.parse_csv([HEAD, "0,0,0,100,500\n", "1,0,0,500,500\n", "2,192,0,308,500\n"])
        s = slowhttptest.summarize(r)
        self.assertEqual((s["max_connected"], s["closed_at_end"]), (500, 192))

    def test_no_rows(self):
        s = slowhttptest.summarize([])
        self.assertEqual((s["seconds"], s["max_connected"], s["closed_at_end"]), (0, 0, 0))
        self.assertIsNone(s["available_at_end"])


class Verdict(unittest.TestCase):
    def test_each_verdict(self):
        self.assertEqual(abuse.verdict(result("1111")), "available throughout")
        self.assertEqual(abuse.verdict(result("0000")), "unavailable throughout")
        self.assertEqual(abuse.verdict(result("1100")), "unavailable from 2 s")
        self.assertEqual(abuse.verdict(result("1011")), "outages")
        self.assertEqual(abuse.verdict({"rows": []}), "no data")


class ExitStatus(unittest.TestCase):
    def test_coloured(self):
        out = "Test ended on 31th second\nExit status: \x1b[1;33mHit test time limit\x1b[0m\n"
        self.assertEqual(slowhttptest.exit_status(out), "Hit test time limit")

    def test_plain_and_missing(self):
        self.assertEqual(slowhttptest.exit_status("Exit status: No open connections left\n"),
                         "No open connections left")
        self.assertEqual(slowhttptest.exit_status("killed"), "unknown")


class Table(unittest.TestCase):
    def test_a_row(self):
        r = result("111111000000", model="blocking", attack="slowloris", ended="Hit test time limit",
                   server_fds_max=68, server_fds_end=55, server_alive_after=True)
        lines = abuse.table_lines([r])
        self.assertEqual(len(lines), 3)
        self.assertEqual(lines[2], "| blocking | slowloris | unavailable from 6 s | 6 of 12 s | 6 s | "
                                   "500 | 0 | Hit test time limit at 11 s | 68 / 55 | yes |")


class AttackArgs(unittest.TestCase):
    def test_both_attacks(self):
        a = argparse.Namespace(connections=500, rate=100, duration=30, probe_timeout=3, interval=2,
                               pipeline=10)
        self.assertEqual(slowhttptest.attack_args("slowloris", a, "http://x/plaintext"),
                         ["-H", "-i", "2", "-x", "24", "-c", "500", "-r", "100", "-l", "30",
                          "-p", "3", "-u", "http://x/plaintext"])
        self.assertEqual(slowhttptest.attack_args("slowread", a, "u")[:11],
                         ["-X", "-k", "10", "-n", "1", "-w", "1", "-y", "32", "-z", "16"])


if __name__ == "__main__":
    unittest.main()
