"""The verdict of a paired comparison: is B better or worse than A, with the error rate it claims at the sizes
users have (12–115 questions, integer scores from one or two judges, many ties).

**The rule.** A table of m verdicts (``compare``'s: each benchmark and the Overall) is one family at α = 0.05:
each row is tested at α/m (Bonferroni), so the chance that any "better" or "worse" in the table is false is at
most α whatever the dependence between rows. A row says better or worse only where its test rejects at α/m, and
the interval printed beside it is that test's own at 1 − α/m: the shifts it does not reject. So the interval
excludes 0 exactly where the test rejects: interval, p-value and verdict never disagree.

**The test: sign flips.** With no difference between the sides, which side of a question scored higher is a coin
toss: every pattern of signs on the differences is as likely as the one observed. The two-sided sign-flip
permutation test of the mean difference counts the patterns whose mean is at least as extreme (``scipy.stats.
permutation_test``'s ``permutation_type="samples"`` for one sample, two-sided as twice the smaller tail): exact
over all 2ⁿ patterns up to 13 questions, else over 9,999 seeded draws (the observed pattern counted, so the p-value
stays valid). It is exact under that null whatever the scores' distribution, ties and zeros included — where the
t test is not: on differences of ±1 it rejects at 12 of 40 positive, whose exact p is 0.0166, not below 0.01; and a
benchmark of two questions that moved alike has no spread for it to weigh, which made an Overall "better" at
p < 0.001 on them. The mean difference is the one the table prints; under a difference that is a mean shift the test
of the differences less δ gives the interval, computed from the same patterns (``_FlipTest``), so it is the test's.

- A benchmark: its questions' differences, equally weighted.
- The Overall, the unweighted mean of the benchmarks' mean differences (as ``view``'s Overall is the mean of the
  benchmark means): the same test of that weighted mean (each question 1 / (k × its benchmark's questions)), so a
  benchmark of 40 questions counts by its own size beside one of 115, and one of two questions with all the weight
  of a benchmark cannot decide it alone.
- Too few: with fewer than ``min_pairs(α/m)`` paired questions, or fewer that moved (zeros flip to themselves), no
  pattern is rare enough to reach α/m (the smallest p-value with n moved questions is 2 / 2ⁿ): no verdict. On
  enough questions of which none moved, there is no difference: n.s.

Beside it, for information: the paired t test's p-value (scipy ``ttest_rel``; None where every question moved alike:
undefined, printed "–", never 0) and the smallest difference the t test would detect with 80 % power at α/m
(statsmodels ``TTestPower``). Why not a bootstrap: percentile-type intervals (BCa too) are too narrow in small
samples: at 12 questions the 98.75 % BCa interval covered about 96 %, so false verdicts came at three times the
rate claimed (``bench/verdict_calibration.py`` measures this module's rule beside it).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["ALPHA", "DRAWS", "Test", "min_pairs", "overall", "paired", "satterthwaite", "verdict"]

ALPHA = 0.05  # the family's: every verdict of one table together
DIGITS = 6  # differences are rounded to a millionth: scores stored to 9 decimals (a mean of 3 runs, 6.333333333
# against 6.666666667) leave a residue that would break the tie of +1/3 and -1/3 under a flip
DRAWS = 9999  # sign patterns drawn where there are more than this (exact enumeration up to 2¹³)
POWER = 0.8  # of the MDE
SEED = 0
THRESHOLD_DIGITS = 10  # the shifts at which a sign pattern's tail changes, rounded: float noise is no shift


@dataclass(frozen=True)
class Test:
    """One row's test at ``level`` (α/m): the difference, the test's interval and p-value, and the t test's."""

    diff: float
    low: float | None
    high: float | None
    p: float | None  # the sign-flip test's p-value (None: no question)
    p_t: float | None  # the paired t test's, None where undefined (no spread)
    mde: float | None  # smallest |difference| the t test detects with 80 % power at ``level``
    moved: int  # questions whose score differs between the sides
    level: float
    exact: bool  # every sign pattern counted (else DRAWS seeded ones)

    @property
    def rejects(self) -> bool:
        return self.p is not None and self.p < self.level


def min_pairs(level: float) -> int:
    """The fewest moved questions at which an exact two-sided sign-flip (or signed-rank) test can reach ``level`` at
    all (its smallest p-value with n of them is 2 / 2ⁿ)."""
    return max(2, math.ceil(1 + math.log2(1 / level)))


def verdict(t: Test, n: int, level: float) -> str:
    """"B better", "B worse", "n.s." or "too few" (see the module)."""
    fewest = min_pairs(level)
    if t.p is None or n < fewest or 0 < t.moved < fewest:  # nothing moved: no difference, not too few
        return "too few"
    if not t.rejects:
        return "n.s."
    return "B better" if t.diff > 0 else "B worse"


def paired(d: Sequence[float] | np.ndarray, level: float) -> Test:
    """One benchmark's differences B − A per question, tested at ``level``."""
    return overall([d], level)


def overall(parts: Sequence[Sequence[float] | np.ndarray], level: float) -> Test:
    """The unweighted mean of the parts' mean differences (one part: a benchmark's), tested at ``level``."""
    ds = [np.round(np.asarray(d, dtype=float), DIGITS) for d in parts if len(d)]
    if not ds:
        return Test(0.0, None, None, None, None, None, 0, level, True)
    weights = np.concatenate([np.full(len(d), 1 / (len(ds) * len(d))) for d in ds])
    values = np.concatenate(ds)
    flips = _FlipTest(values, weights)
    moved = int(np.count_nonzero(values))
    # Drawn patterns estimate the p-value; the exact one is never below 2/2ⁿ over the n questions that moved (the
    # others flip to themselves), so the estimate is held there, and the interval then holds 0 where it does not
    # reject: no "too few" row shows a p or an interval that would make it a verdict.
    p = max(flips.p(0.0), min(1.0, 2.0 ** (1 - moved)))
    low, high = flips.interval(level)
    if p >= level and low is not None and high is not None:
        low, high = min(low, 0.0), max(high, 0.0)
    p_t, mde = _t(ds, level)
    return Test(flips.mean, low, high, p, p_t, mde, moved, level, flips.exact)


class _FlipTest:
    """The sign-flip test of a weighted mean of differences, and its inversion. For a shift δ the statistic of a sign
    pattern s is Σ wᵢ sᵢ (dᵢ − δ) = aₛ − δ bₛ, the observed one m − δ (weights summing to 1); the pattern is at least
    as large as the observed exactly where δ ≥ tₛ = (m − aₛ) / (1 − bₛ) (always, for bₛ = 1), and at least as small
    where δ ≤ tₛ. So each tail's count is a step function of δ, and the shifts the test does not reject at a level
    are an interval between two order statistics of the tₛ."""

    def __init__(self, d: np.ndarray, w: np.ndarray) -> None:
        signs = _signs(len(d))
        self.exact = len(signs) == 2 ** len(d)
        mean = float(w @ d)
        self.mean = round(mean, THRESHOLD_DIGITS)
        a, b = signs @ (w * d), signs @ w
        moves = b < 1 - 1e-12  # patterns that are not the observed one (every sign +1)
        self.fixed = int(np.count_nonzero(~moves)) + (0 if self.exact else 1)  # count in both tails at every δ
        self.total = len(signs) + (0 if self.exact else 1)
        # rounded, so that ties (a zero flipped, every question moved alike) are ties, and the p-value at a shift and
        # the interval's ends are read off the same numbers
        self.t = np.sort(np.round((mean - a[moves]) / (1 - b[moves]), THRESHOLD_DIGITS))

    def p(self, delta: float) -> float:
        """Twice the smaller tail (capped at 1): patterns at least as large, or as small, as the observed."""
        upper = self.fixed + int(np.searchsorted(self.t, delta, side="right"))
        lower = self.fixed + len(self.t) - int(np.searchsorted(self.t, delta, side="left"))
        return min(1.0, 2 * min(upper, lower) / self.total)

    def interval(self, level: float) -> tuple[float | None, float | None]:
        """The shifts δ with p(δ) ≥ level: each tail must count at least level / 2 of the patterns. None where even
        the most extreme shift is not rejected (too few questions moved for this level)."""
        need = math.ceil(level / 2 * self.total - 1e-9) - self.fixed  # of the tₛ, on each side of δ
        if need <= 0 or need > len(self.t):
            return None, None
        return float(self.t[need - 1]), float(self.t[len(self.t) - need])


@functools.lru_cache(maxsize=8)
def _signs(n: int) -> np.ndarray:
    """Every sign pattern of n questions (the observed, all +1, among them) up to 2¹³, else DRAWS seeded ones: the
    same for every comparison of that many questions, so drawn once."""
    if 2 ** n <= DRAWS + 1:
        return 1 - 2 * ((np.arange(2 ** n)[:, None] >> np.arange(n)) & 1).astype(np.int8)
    return np.random.default_rng(SEED).choice(np.array([-1, 1], dtype=np.int8), (DRAWS, n))


def _t(ds: list[np.ndarray], level: float) -> tuple[float | None, float | None]:
    """The paired t test's p-value (scipy; the Overall's on Welch–Satterthwaite's degrees of freedom, the rule
    ``reports.intervals`` uses) and the MDE at ``level`` (statsmodels), for information: None where undefined."""
    from scipy import stats

    if any(len(d) < 2 or np.ptp(d) == 0 for d in ds):  # a benchmark with no spread: no variance to weigh it by
        return None, None
    k = len(ds)
    variances = [float(d.var(ddof=1)) / len(d) / k ** 2 for d in ds]
    se = math.sqrt(sum(variances))
    if k == 1:
        p, df = float(stats.ttest_1samp(ds[0], 0.0).pvalue), float(len(ds[0]) - 1)
    else:
        df = satterthwaite(variances, [len(d) - 1 for d in ds])
        p = float(2 * stats.t.sf(abs(sum(d.mean() for d in ds) / k) / se, df))
    effect = _effect(round(df + 1, 2), level)
    return p, None if math.isnan(effect) else effect * math.sqrt(df + 1) * se


@functools.lru_cache(maxsize=1024)
def _effect(nobs: float, level: float) -> float:
    """The effect a two-sided t test on ``nobs`` observations detects with 80 % power at ``level``, in units of their
    sd (statsmodels): × √nobs × SE is the MDE. Cached: a benchmark's size recurs."""
    from statsmodels.stats.power import TTestPower

    return float(np.asarray(TTestPower().solve_power(nobs=nobs, alpha=level, power=POWER,
                                                     alternative="two-sided")).squeeze())


def satterthwaite(variances: Sequence[float], dfs: Sequence[float]) -> float:
    """Welch–Satterthwaite's degrees of freedom of a sum of independent terms with these variances, each estimated
    on its own degrees of freedom."""
    total = sum(variances)
    if total <= 0:
        return float(sum(dfs))
    return total ** 2 / sum(v ** 2 / df for v, df in zip(variances, dfs, strict=True) if v > 0)
