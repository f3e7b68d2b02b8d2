"""The statistics of every comparative figure, in one place (as Criterion.rs and pyperf keep
theirs).

A figure is an Estimate: the median over rounds of a quantity taken *within* a round (a ratio to
a reference server measured in the same round, an efficiency against a ceiling measured back to
back with the row), with a distribution-free 95% confidence interval for that median from the
order statistics (no assumption on the shape of the noise; the machine's noise is not normal).

Two estimates whose intervals overlap show "no difference measured here"; disjoint ones show an
ordering. verdict() compares a rerun with a committed claim: holds, changed, or noise.
Pure functions: no I/O, no clock.
"""

import dataclasses
import math

LEVEL = 0.95
#: An interval wider than this, relative to its estimate, cannot tell a change from the noise.
NOISE_WIDTH = 0.5


def median(xs):
    s = sorted(xs)
    n = len(s)
    if n == 0:
        raise ValueError("the median of no values")
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def _binomial_cdf(k, n):
    """P(X <= k) for X ~ Binomial(n, 1/2)."""
    return sum(math.comb(n, i) for i in range(0, k + 1)) / 2 ** n


def median_ci_ranks(n, level=LEVEL):
    """The ranks (1-based) (j, n + 1 - j) of the narrowest order-statistic interval that covers
    the median with probability >= level, and that probability; None when n is too small (a 95%
    interval needs n >= 6: with 5 values even [min, max] covers the median only 93.75% of the time).
    Coverage of [x_(j), x_(n+1-j)] is 1 - 2 P(Binomial(n, 1/2) <= j - 1)."""
    best = None
    for j in range(1, n // 2 + 1):
        coverage = 1 - 2 * _binomial_cdf(j - 1, n)
        if coverage >= level:
            best = (j, n + 1 - j, coverage)
        else:
            break
    return best


@dataclasses.dataclass(frozen=True)
class Estimate:
    """A median with its confidence interval over n rounds (low/high None: too few rounds)."""

    estimate: float
    low: "float | None"
    high: "float | None"
    n: int
    coverage: "float | None" = None

    @property
    def has_interval(self):
        return self.low is not None

    def overlaps(self, other):
        if not (self.has_interval and other.has_interval):
            return True  # nothing can be told apart without an interval
        return self.low <= other.high and other.low <= self.high

    def above(self, other):
        """This one's whole interval lies above the other's."""
        return self.has_interval and other.has_interval and self.low > other.high

    def relative_width(self):
        if not self.has_interval:
            return math.inf
        return (self.high - self.low) / abs(self.estimate) if self.estimate else math.inf

    def format(self, fmt="{:.2f}"):
        """"1.03 [0.98 1.07]", or "1.03 [n=3]" when there are too few rounds for an interval."""
        if not self.has_interval:
            return f"{fmt.format(self.estimate)} [n={self.n}]"
        return f"{fmt.format(self.estimate)} [{fmt.format(self.low)} {fmt.format(self.high)}]"

    def to_json(self):
        return {"estimate": self.estimate, "low": self.low, "high": self.high, "n": self.n,
                "coverage": self.coverage}

    @classmethod
    def from_json(cls, d):
        return cls(d["estimate"], d["low"], d["high"], d["n"], d.get("coverage"))


def estimate(xs, level=LEVEL):
    """The median of xs with its distribution-free interval; None when xs is empty."""
    xs = [x for x in xs if x is not None and math.isfinite(x)]
    if not xs:
        return None
    s = sorted(xs)
    ranks = median_ci_ranks(len(s), level)
    if ranks is None:
        return Estimate(median(s), None, None, len(s))
    j, k, coverage = ranks
    return Estimate(median(s), s[j - 1], s[k - 1], len(s), coverage)


def paired_ratios(a, b):
    """a[k] / b[k] for every round k where both were measured and b[k] > 0: a ratio taken within a
    round, under the conditions of that round."""
    return [x / y for x, y in zip(a, b) if x is not None and y is not None and y > 0]


def paired_ratio(a, b, level=LEVEL):
    """The median of the within-round ratios a / b, with its interval."""
    return estimate(paired_ratios(a, b), level)


def compare(a, b):
    """"higher", "lower" or "no difference measured here" for estimate a against b."""
    if a.above(b):
        return "higher"
    if b.above(a):
        return "lower"
    return "no difference measured here"


def verdict(committed, rerun, noise_width=NOISE_WIDTH):
    """A rerun against the committed claim: ("holds" | "changed" | "noise", relative change of the
    estimate). noise: either has no interval, or the rerun's is wider than noise_width of its estimate and
    wider than the committed one (a rerun no sharper than the claim cannot judge it); otherwise
    holds when the intervals overlap, changed when they are disjoint. A wide committed interval
    (rounds or runs on the same code that disagree) is a weak claim, and a rerun inside it holds."""
    change = (rerun.estimate / committed.estimate - 1) if committed.estimate else math.inf
    if not (committed.has_interval and rerun.has_interval) or \
            rerun.relative_width() > max(noise_width, committed.relative_width()):
        return "noise", change
    return ("holds" if committed.overlaps(rerun) else "changed"), change


def hull(estimates):
    """The first estimate's value with the interval that covers every one of them: the range that
    runs of the same code have given (rounds inside one run share the machine's state of those
    minutes; two runs need not). None for no estimates."""
    if not estimates:
        return None
    lows = [e.low if e.has_interval else e.estimate for e in estimates]
    highs = [e.high if e.has_interval else e.estimate for e in estimates]
    first = estimates[0]
    if len(estimates) == 1:
        return first
    return Estimate(first.estimate, min(lows), max(highs), sum(e.n for e in estimates))


#: An efficiency above 1 by more than this share is past what a window's edges explain.
ABOVE_TOLERANCE = 0.005


def above_ceiling(efficiency, tolerance=ABOVE_TOLERANCE):
    """An efficiency whose interval reaches above 1 + tolerance: a defect of the measurement (a
    window too short, a ceiling mismeasured), never a finding -- not even at one end of an
    interval. Without an interval, its estimate."""
    if efficiency is None:
        return False
    top = efficiency.high if efficiency.has_interval else efficiency.estimate
    return top > 1.0 + tolerance
