"""cmharness.swimlane: a cm-server trace validated, read as "where did each request wait, on which
thread", and drawn through charts.save. The traces here are written by hand in the format
common/src/trace.cpp writes (trace_test.cpp there checks the writer); the real scenes run in
servers/tests/trace_test.cpp and harness/trace-scene."""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from cmharness import swimlane  # noqa: E402


def meta(tid, k):
    return {"ph": "M", "name": "thread_name", "pid": 1, "tid": tid, "args": {"name": f"thread {k}"}}


def ev(ph, name, ts, tid, conn, **more):
    e = {"ph": ph, "name": name, "ts": ts, "pid": 1, "tid": tid, "args": {"conn": conn}}
    if ph in "be":
        e.update(cat="conn", id=conn)
    if "plan" in more:
        e["args"]["plan"] = more.pop("plan")
    e.update(more)
    return e


def request(conn, tid, line, plan, start, end, work_tid=None, away=None):
    """A request's events: accept, plan, its work (on work_tid) or a step away, reply, close."""
    out = [ev("i", "accept", start - 50, tid, conn), ev("b", line, start, tid, conn, plan=plan)]
    if away:
        out += [ev("b", away, start + 1, tid, conn), ev("e", away, end - 1, tid, conn)]
    else:
        out += [ev("X", plan, start + 1, work_tid or tid, conn, dur=end - start - 2)]
    out += [ev("e", line, end, tid, conn), ev("i", "write", end, tid, conn), ev("i", "close", end + 5, tid, conn)]
    return out


def blocking_trace():
    events = [meta(11, 1), meta(12, 2)]
    events += request(1, 11, "GET /delay/100", "wait 100 ms", 1000, 101000)
    events += request(2, 12, "GET /delay/100", "wait 100 ms", 1000, 101000)
    return {"traceEvents": events}


def async_trace():
    events = [meta(21, 1), meta(22, 2)]
    events += request(1, 21, "GET /delay/100", "wait 100 ms", 1000, 101000, away="on a timer (no thread)")
    events += request(2, 21, "GET /delay/100", "wait 100 ms", 1000, 101000, away="on a timer (no thread)")
    events += request(3, 21, "GET /block/100", "block 100 ms", 1000, 101000, work_tid=22)
    return {"traceEvents": events}


def pool_trace():
    events = [meta(21, 1), meta(22, 2)]
    events += request(1, 21, "GET /block/100", "block 100 ms", 1000, 101000, away="on the pool")
    events.append(ev("X", "block 100 ms", 1100, 22, 1, dur=99000))
    return {"traceEvents": events}


class Validate(unittest.TestCase):
    def test_a_trace_perfetto_opens_passes(self):
        self.assertIs(swimlane.validate(async_trace())["traceEvents"][0]["ph"], "M")

    def test_what_an_event_lacks_is_named(self):
        for broken, said in (({"traceEvents": []}, "no traceEvents"),
                             ({"events": [1]}, "no traceEvents"),
                             ({"traceEvents": [{"ph": "i", "pid": 1, "tid": 1, "name": "x"}]}, "no ts"),
                             ({"traceEvents": [ev("X", "w", 1, 1, 1)]}, "without dur"),
                             ({"traceEvents": [{"ph": "b", "name": "r", "ts": 1, "pid": 1, "tid": 1}]},
                              "without id"),
                             ({"traceEvents": [ev("Q", "w", 1, 1, 1)]}, "phase 'Q'")):
            with self.subTest(said=said), self.assertRaisesRegex(swimlane.TraceError, said):
                swimlane.validate(broken)


class Scene(unittest.TestCase):
    def test_blocking_waits_hold_a_thread_each(self):
        s = swimlane.scene(blocking_trace(), "blocking")
        self.assertEqual([r.where for r in s.requests], ["held thread 1", "held thread 2"])
        self.assertEqual(s.roles, {"thread 1": "worker", "thread 2": "worker"})
        self.assertAlmostEqual(s.requests[0].end_ms - s.requests[0].start_ms, 100.0)
        self.assertIn("threads held by the /delay waits: 2 (thread 1, thread 2)", swimlane.summary(s))

    def test_async_waits_hold_none_and_the_block_holds_a_pool_thread(self):
        s = swimlane.scene(async_trace(), "asio_coro")
        self.assertEqual([r.where for r in s.requests],
                         ["on a timer (no thread)", "on a timer (no thread)", "held thread 2"])
        pooled = swimlane.scene(pool_trace(), "asio_coro").requests[0]
        self.assertEqual(pooled.where, "on the pool, held thread 2")
        self.assertEqual(s.roles, {"thread 1": "loop", "thread 2": "pool"})
        self.assertEqual(len(s.away), 2)
        self.assertIn("threads held by the /delay waits: 0 (they waited on timers)", swimlane.summary(s))
        self.assertEqual([label for _, label in swimlane.lanes(s)],
                         ["thread 1\n(loop)", "thread 2\n(pool)", "conn 1: timer\n(no thread)",
                          "conn 2: timer\n(no thread)"])

    def test_a_request_cut_short_still_ends(self):
        t = async_trace()
        t["traceEvents"] = [e for e in t["traceEvents"] if not (e["ph"] == "i" and e["name"] == "write")]
        self.assertEqual(len(swimlane.scene(t, "asio_coro").requests), 3)


class Colours(unittest.TestCase):
    def test_a_route_has_the_same_colour_in_every_model_whatever_the_accept_order(self):
        import matplotlib.pyplot as plt

        def reqs(lines):
            return [swimlane.Request(i, line, "", 0, 0, "", [], "") for i, line in enumerate(lines)]

        first = swimlane.route_colours(reqs(["GET /delay/100", "GET /block/100"]), plt.get_cmap)
        second = swimlane.route_colours(reqs(["GET /block/100", "GET /delay/100"]), plt.get_cmap)
        self.assertEqual(first[0], second[1])  # /delay
        self.assertEqual(first[1], second[0])  # /block
        self.assertNotEqual(first[0], first[1])
        three = swimlane.route_colours(reqs(["GET /delay/1", "GET /delay/2", "GET /plaintext"]),
                                       plt.get_cmap)
        self.assertNotEqual(three[0], three[1])  # two /delay told apart by shade
        blue = plt.get_cmap("Blues")
        self.assertEqual({three[0], three[1]}, {blue(0.85), blue(0.45)})


class Draw(unittest.TestCase):
    def test_the_swimlanes_pass_the_chart_check(self):
        with tempfile.TemporaryDirectory() as d:
            for trace, model in ((blocking_trace(), "blocking"), (async_trace(), "asio_coro")):
                path = os.path.join(d, f"{model}.png")
                swimlane.draw(swimlane.scene(trace, model), path, "what to read first")
                self.assertGreater(os.path.getsize(path), 1000)


if __name__ == "__main__":
    unittest.main()
