"""cmharness.timeline: harness/burst's --timeline CSV written and read back, the answer times, and
the answers per delay a model's idea predicts."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tempfile  # noqa: E402
import unittest  # noqa: E402

from cmharness import timeline  # noqa: E402


class WriteAndRead(unittest.TestCase):
    def test_a_round_trip(self):
        requests = [timeline.Request(0, "/delay/500", 0.000012, 0.512345, 0.512333, 200, True),
                    timeline.Request(1, "/delay/500", 0.00002)]
        path = os.path.join(tempfile.mkdtemp(), "t.csv")
        timeline.write(path, requests)
        with open(path) as f:
            self.assertEqual(f.read(), "index,path,sent_s,answered_s,latency_s,status,ok\n"
                                       "0,/delay/500,0.000012,0.512345,0.512333,200,1\n"
                                       "1,/delay/500,0.000020,,,,0\n")
        self.assertEqual(timeline.read(path), requests)

    def test_an_answer_that_failed_its_check(self):
        [r] = timeline.parse(["index,path,sent_s,answered_s,latency_s,status,ok",
                              "3,/delay/9,0.1,0.105,0.005,200,0"])
        self.assertEqual((r.index, r.answered_s, r.status, r.ok), (3, 0.105, 200, False))

    def test_another_csv_is_refused(self):
        with self.assertRaises(ValueError):
            timeline.parse(["a,b", "1,2"])

    def test_answer_times_sorted_unanswered_left_out(self):
        requests = [timeline.Request(0, "/", 0.0, 0.7, 0.7, 200, True), timeline.Request(1, "/", 0.0),
                    timeline.Request(2, "/", 0.0, 0.5, 0.5, 500, False)]
        self.assertEqual(timeline.answer_times(requests), [0.5, 0.7])


class StepsOf(unittest.TestCase):
    def test_a_silence_longer_than_the_gap_starts_a_step(self):
        steps = timeline.steps_of([0.5, 0.51, 0.52, 1.0, 1.02], gap=0.25)
        self.assertEqual(steps, [[0.5, 0.51, 0.52], [1.0, 1.02]])

    def test_a_silence_of_exactly_the_gap_stays_in_the_step(self):
        self.assertEqual(len(timeline.steps_of([0.0, 0.25], gap=0.25)), 1)

    def test_the_times_are_sorted_first(self):
        self.assertEqual(timeline.steps_of([1.0, 0.5, 0.52], gap=0.1), [[0.5, 0.52], [1.0]])

    def test_no_answers_no_steps(self):
        self.assertEqual(timeline.steps_of([], gap=0.25), [])


class AnswersPerStep(unittest.TestCase):
    def test_the_blocking_pool_its_workers(self):
        self.assertEqual(timeline.answers_per_step("blocking", [], 2000), 64)
        self.assertEqual(timeline.answers_per_step("blocking", [], 2000, workers=8), 8)

    def test_an_async_model_all_of_them(self):
        self.assertEqual(timeline.answers_per_step("asio_coro", [], 2000), 2000)

    def test_a_loop_that_sleeps_one(self):
        self.assertEqual(timeline.answers_per_step("libuv_callbacks", ["--wait-mode", "sleep"], 2000), 1)


if __name__ == "__main__":
    unittest.main()
