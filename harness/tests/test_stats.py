"""The statistics of every comparative figure: the interval of a median, paired ratios, verdicts."""

import math
import os
import random
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from cmharness import stats  # noqa: E402


class MedianInterval(unittest.TestCase):
    def test_too_few_rounds_for_a_95_percent_interval(self):
        # With 5 values even [min, max] covers the median only 1 - 2/32 = 93.75% of the time.
        self.assertIsNone(stats.median_ci_ranks(5))
        e = stats.estimate([1, 2, 3, 4, 5])
        self.assertEqual(e.estimate, 3)
        self.assertFalse(e.has_interval)
        self.assertEqual(e.format("{:.0f}"), "3 [n=5]")

    def test_six_rounds_give_min_and_max(self):
        j, k, coverage = stats.median_ci_ranks(6)
        self.assertEqual((j, k), (1, 6))
        self.assertAlmostEqual(coverage, 1 - 2 / 64)
        e = stats.estimate([6, 1, 5, 2, 4, 3])
        self.assertEqual((e.low, e.estimate, e.high), (1, 3.5, 6))

    def test_larger_samples_drop_the_extremes(self):
        self.assertEqual(stats.median_ci_ranks(9)[:2], (2, 8))
        self.assertEqual(stats.median_ci_ranks(10)[:2], (2, 9))
        self.assertEqual(stats.median_ci_ranks(15)[:2], (4, 12))
        e = stats.estimate(list(range(1, 16)))
        self.assertEqual((e.low, e.estimate, e.high), (4, 8, 12))

    def test_coverage_is_at_least_the_level_and_the_next_rank_is_not(self):
        for n in range(6, 60):
            j, k, coverage = stats.median_ci_ranks(n)
            self.assertGreaterEqual(coverage, 0.95)
            self.assertEqual(k, n + 1 - j)
            narrower = 1 - 2 * sum(math.comb(n, i) for i in range(j + 1)) / 2 ** n
            self.assertLess(narrower, 0.95, n)

    def test_the_interval_covers_the_true_median_about_95_percent_of_the_time(self):
        rng = random.Random(7)
        hits, trials = 0, 2000
        for _ in range(trials):
            xs = [rng.expovariate(1.0) for _ in range(12)]  # median ln 2, skewed
            e = stats.estimate(xs)
            hits += e.low <= math.log(2) <= e.high
        self.assertGreater(hits / trials, 0.95)

    def test_missing_and_non_finite_values_are_left_out(self):
        e = stats.estimate([None, 1.0, float("nan"), 2.0, 3.0])
        self.assertEqual((e.estimate, e.n), (2.0, 3))
        self.assertIsNone(stats.estimate([None]))


class PairedRatio(unittest.TestCase):
    def test_ratios_are_taken_within_a_round(self):
        a = [100, 50, None, 80]
        b = [50, 50, 10, 0]
        self.assertEqual(stats.paired_ratios(a, b), [2.0, 1.0])

    def test_a_drifting_machine_cancels_in_the_ratio(self):
        # Both servers slow down together by a third over the rounds: the absolute figures'
        # intervals are wide, the within-round ratio is exactly 1.2 in every round.
        speed = [1.0, 0.9, 0.8, 0.7, 0.67, 0.95, 1.0, 0.75]
        a = [120 * s for s in speed]
        b = [100 * s for s in speed]
        e = stats.paired_ratio(a, b)
        self.assertAlmostEqual(e.low, 1.2)
        self.assertAlmostEqual(e.high, 1.2)
        self.assertGreater(stats.estimate(a).relative_width(), 0.3)


class Comparisons(unittest.TestCase):
    def est(self, mid, lo, hi):
        return stats.Estimate(mid, lo, hi, 8)

    def test_overlapping_intervals_are_no_difference(self):
        self.assertEqual(stats.compare(self.est(1.0, 0.9, 1.1), self.est(1.05, 1.0, 1.2)),
                         "no difference measured here")
        self.assertEqual(stats.compare(self.est(1.5, 1.4, 1.6), self.est(1.0, 0.9, 1.1)), "higher")
        self.assertEqual(stats.compare(self.est(1.0, 0.9, 1.1), self.est(1.5, 1.4, 1.6)), "lower")

    def test_verdict_holds_changed_noise(self):
        committed = self.est(1.00, 0.97, 1.03)
        self.assertEqual(stats.verdict(committed, self.est(1.02, 1.00, 1.05))[0], "holds")
        verdict, change = stats.verdict(committed, self.est(1.20, 1.15, 1.25))
        self.assertEqual(verdict, "changed")
        self.assertAlmostEqual(change, 0.20)
        self.assertEqual(stats.verdict(committed, self.est(1.0, 0.5, 1.6))[0], "noise")
        self.assertEqual(stats.verdict(committed, stats.Estimate(1.0, None, None, 3))[0], "noise")
        self.assertEqual(stats.verdict(stats.Estimate(1.0, None, None, 3), committed)[0], "noise")

    def test_a_wide_claim_is_judged_by_a_rerun_no_wider_than_it(self):
        """Runs of one code that disagree make a wide claim: a rerun inside it holds, one outside it
        changed, and a rerun wider than both the claim and the noise width cannot tell."""
        wide = self.est(0.60, 0.45, 1.30)
        self.assertEqual(stats.verdict(wide, self.est(1.22, 1.15, 1.28))[0], "holds")
        self.assertEqual(stats.verdict(wide, self.est(0.9, 0.5, 1.25))[0], "holds")
        self.assertEqual(stats.verdict(wide, self.est(0.30, 0.28, 0.33))[0], "changed")
        self.assertEqual(stats.verdict(wide, self.est(1.0, 0.2, 2.0))[0], "noise")

    def test_the_hull_of_runs_covers_every_run_and_keeps_the_first_value(self):
        first, second = self.est(0.60, 0.55, 0.69), self.est(1.22, 1.15, 1.28)
        h = stats.hull([first, second])
        self.assertEqual((h.estimate, h.low, h.high, h.n), (0.60, 0.55, 1.28, 16))
        self.assertIs(stats.hull([first]), first)
        self.assertIsNone(stats.hull([]))
        self.assertEqual(stats.hull([first, stats.Estimate(0.4, None, None, 3)]).low, 0.4)

    def test_an_efficiency_whose_interval_reaches_past_its_ceiling_is_flagged(self):
        self.assertTrue(stats.above_ceiling(self.est(1.05, 1.02, 1.07)))
        self.assertTrue(stats.above_ceiling(self.est(0.97, 0.90, 1.04)))  # one end is enough
        self.assertFalse(stats.above_ceiling(self.est(0.99, 0.98, 1.005)))  # a window's edges
        self.assertFalse(stats.above_ceiling(self.est(0.99, 0.98, 1.0)))
        self.assertTrue(stats.above_ceiling(stats.Estimate(1.05, None, None, 3)))
        self.assertFalse(stats.above_ceiling(None))

    def test_json_round_trip(self):
        e = stats.estimate([1, 2, 3, 4, 5, 6, 7])
        self.assertEqual(stats.Estimate.from_json(e.to_json()), e)


if __name__ == "__main__":
    unittest.main()
