"""harness/burst: the delays it spreads, what each path must answer, how it judges the answers and
writes its timeline, and one burst against a small in-process asyncio server on loopback (no
cm-server is started here)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import asyncio  # noqa: E402
import contextlib  # noqa: E402
import io  # noqa: E402
import re  # noqa: E402
import unittest  # noqa: E402

from cmharness.tools import burst  # noqa: E402


class DelaysFor(unittest.TestCase):
    def test_spread_evenly_and_all_different(self):
        values = burst.delays_for(32, "10:250")
        self.assertEqual(len(values), 32)
        self.assertEqual(len(set(values)), 32)
        self.assertEqual((min(values), max(values)), (10, 250))

    def test_shuffled_the_same_way_every_time(self):
        self.assertEqual(burst.delays_for(10, "0:100"), burst.delays_for(10, "0:100"))
        self.assertNotEqual(burst.delays_for(10, "0:100"), sorted(burst.delays_for(10, "0:100")))

    def test_one_connection_gets_the_low_end(self):
        self.assertEqual(burst.delays_for(1, "7:9"), [7])

    def test_a_range_too_small_or_malformed_is_refused(self):
        for spec in ("10:12", "12:10", "a:b", "10"):
            with self.subTest(spec=spec), contextlib.redirect_stderr(io.StringIO()):
                with self.assertRaises(SystemExit):
                    burst.delays_for(5, spec)


class Expectation(unittest.TestCase):
    def test_a_delay_answers_its_number_not_before_it(self):
        self.assertEqual(burst.expectation("/delay/500"), (b"500", 0.5))
        self.assertEqual(burst.expectation("/block/0250"), (b"250", 0.25))

    def test_cpu_answers_its_number_at_any_time(self):
        self.assertEqual(burst.expectation("/cpu/50000"), (b"50000", 0.0))

    def test_another_path_is_not_checked(self):
        self.assertEqual(burst.expectation("/plaintext"), (None, 0.0))


def record(path, sent, done, status=200, body=None, error=""):
    return dict(burst.new_record(path), sent=sent, done=done, status=status, body=body, error=error)


class Judge(unittest.TestCase):
    def test_every_kind_of_answer(self):
        records = [
            record("/delay/100", 10.0, 10.15, body=b"100"),              # good
            record("/delay/200", 10.0, 10.25, body=b"100"),              # another request's value
            record("/delay/300", 10.0, 10.35, body=b"7"),                # a wrong body
            record("/delay/100", 10.0, 10.05, body=b"100"),              # early
            record("/delay/100", 10.0, 10.15, status=503, body=b"100"),  # a status
            record("/delay/100", 10.0, None, status=None),               # never answered
            record("/delay/100", 10.0, 10.1, status=None, error="ConnectionResetError"),
        ]
        counts = burst.judge(records)
        self.assertEqual({k: counts[k] for k in ("good", "wrong_body", "others_value", "early", "failed")},
                         {"good": 1, "wrong_body": 2, "others_value": 1, "early": 1, "failed": 3})
        self.assertEqual(counts["example"], "/delay/200 answered 100")
        self.assertEqual([r["ok"] for r in records], [True] + [False] * 6)

    def test_report_prints_the_lines_the_exercises_read(self):
        args = burst.parse_args(["--port", "1", "--connections", "2", "--path", "/delay/100"])
        records = [record("/delay/100", 10.0, 10.15, body=b"100"), record("/delay/100", 10.0, 10.2, body=b"100")]
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            burst.report(args, records, 10.0, burst.judge(records))
        self.assertEqual(out.getvalue(),
                         "burst: 2/2 correct responses to /delay/100; last answered 0.200 s after the first send\n"
                         "burst: answers came in 1 step(s) of 2 to 2 (a new step after a silence of more than "
                         "half the delay)\n")

    def test_report_counts_the_steps_of_a_pool_answering_in_turns(self):
        args = burst.parse_args(["--port", "1", "--connections", "5", "--path", "/delay/100"])
        done = [10.1, 10.101, 10.2, 10.203, 10.3]  # two, two, then one: a pool of two
        records = [record("/delay/100", 10.0, t, body=b"100") for t in done]
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            burst.report(args, records, 10.0, burst.judge(records))
        self.assertIn("burst: answers came in 3 step(s) of 1 to 2", out.getvalue())


class TimelineOf(unittest.TestCase):
    def test_times_after_the_first_send(self):
        records = [record("/delay/100", 10.5, 10.75, body=b"100"), record("/delay/100", 10.5, None, status=None)]
        burst.judge(records)
        first, second = burst.timeline_of(records, 10.0)
        self.assertEqual(first.line(), "0,/delay/100,0.500000,0.750000,0.250000,200,1")
        self.assertEqual(second.line(), "1,/delay/100,0.500000,,,,0")


class Arguments(unittest.TestCase):
    def refused(self, argv):
        with contextlib.redirect_stderr(io.StringIO()), self.assertRaises(SystemExit):
            burst.parse_args(argv)

    def test_loopback_only(self):
        self.refused(["--port", "1", "--host", "10.0.0.1"])

    def test_delays_and_a_template_go_together(self):
        self.refused(["--port", "1", "--delays", "1:10"])
        self.refused(["--port", "1", "--path", "/delay/{ms}"])

    def test_paths_for_fills_the_template(self):
        args = burst.parse_args(["--port", "1", "--connections", "3", "--path", "/delay/{ms}", "--delays", "1:3"])
        self.assertEqual(sorted(burst.paths_for(args)), ["/delay/1", "/delay/2", "/delay/3"])


async def delay_server(reader, writer):
    """Answers one GET /delay/N with N after N ms; /delay/7 answers "8" (a wrong body)."""
    head = await reader.readuntil(b"\r\n\r\n")
    ms = int(re.search(rb"/delay/(\d+)", head).group(1))
    await asyncio.sleep(ms / 1000)
    body = str(ms + 1 if ms == 7 else ms).encode()
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    await writer.drain()
    writer.close()


class SendAll(unittest.TestCase):
    def burst_against(self, argv_tail):
        async def run():
            server = await asyncio.start_server(delay_server, "127.0.0.1", 0)
            port = server.sockets[0].getsockname()[1]
            args = burst.parse_args(["--port", str(port), "--timeout", "10", *argv_tail])
            async with server:
                return await burst.send_all(args, burst.paths_for(args))
        return asyncio.run(run())

    def test_every_request_answered_and_checked(self):
        records, first = self.burst_against(["--connections", "8", "--path", "/delay/{ms}", "--delays", "1:30"])
        counts = burst.judge(records)
        self.assertEqual(counts["good"], 8)
        self.assertTrue(all(r["done"] - r["sent"] >= int(r["path"].rsplit("/", 1)[1]) / 1000 for r in records))
        self.assertTrue(all(r["sent"] >= first for r in records))

    def test_a_wrong_body_is_caught(self):
        records, _ = self.burst_against(["--connections", "2", "--path", "/delay/7"])
        counts = burst.judge(records)
        self.assertEqual((counts["good"], counts["wrong_body"]), (0, 2))


if __name__ == "__main__":
    unittest.main()
