"""The verdict of a paired comparison: is B better or worse than A, with the error rate it claims at the sizes
users have (12–115 questions, integer scores from one or two judges, many ties).

**The rule.** A table of m verdicts (``compare``'s: each benchmark and the Overall) is one family at α = 0.05:
each row is tested at α/m (Bonferroni), so the chance that any "better" or "worse" in the table is false is at
most α whatever the dependence between rows. A row says better or worse only where its test rejects at α/m, and
the interval printed beside it is that test's own at 1 − α/m, so the interval excludes 0 exactly where the test
rejects: interval, p-value and verdict never disagree.

- A benchmark: the paired t test (``scipy.stats.ttest_rel``) and its interval (``confidence_interval``).
- The Overall, the unweighted mean of the benchmarks' mean differences (as ``view``'s Overall is the mean of the
  benchmark means): no question is in two benchmarks, so its variance is the sum of the benchmarks' squared
  standard errors ÷ k², tested with Student's t at Welch–Satterthwaite's degrees of freedom (``satterthwaite``,
  the rule ``reports.intervals`` uses for ``view``'s Overall). Each benchmark counts by its own size.
- No spread (every question moved by the same amount, on every benchmark for the Overall): the t statistic is
  undefined (its p-value is None, printed "–", never 0). The sign-flip permutation test (``scipy.stats.
  permutation_test``, exact up to 2¹³ sign patterns) decides, and its interval is the shifts it does not reject
  (where every question moved alike, that shift alone: any other leaves differences of one sign).
- Too few: with fewer than ``min_pairs(α/m)`` paired questions, or fewer that moved, no exact test (signed-rank or
  sign-flip) could reach α/m whatever the scores, and the t test's reliance on the mean's near-normality cannot be
  trusted: no verdict. So too where no test could run (a benchmark of one question: no spread to measure).

Why not a bootstrap: percentile-type bootstrap intervals (BCa too) are too narrow in small samples. At n = 12 the
98.75 % BCa interval covers about 96 %, so false verdicts came at three times the rate claimed; the paired t holds
its level at every size measured (``bench/verdict_calibration.py``, which runs this module's rule).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["ALPHA", "DIGITS", "Test", "min_pairs", "overall", "paired", "satterthwaite", "verdict"]

ALPHA = 0.05  # the family's: every verdict of one table together
DIGITS = 9  # differences are rounded as scores are (``score_mean``), so float noise is no spread
POWER = 0.8  # of the MDE


@dataclass(frozen=True)
class Test:
    """One row's test at ``level`` (α/m): the difference, its interval, and what decided."""

    diff: float
    low: float | None
    high: float | None
    p: float | None  # the deciding test's p-value (None: no test)
    test: str  # "t", "sign-flip" (no spread), or "" (fewer than two questions)
    p_t: float | None  # the t test's, None where it is undefined (no spread)
    df: float | None
    mde: float | None  # smallest |difference| the t test detects with 80 % power at ``level``
    moved: int  # questions whose score differs between the sides
    level: float

    @property
    def rejects(self) -> bool:
        return self.p is not None and self.p < self.level


def min_pairs(level: float) -> int:
    """The fewest paired questions at which an exact two-sided signed-rank or sign-flip test can reach ``level`` at
    all (its smallest p-value with n pairs is 2 / 2ⁿ)."""
    return max(2, math.ceil(1 + math.log2(1 / level)))


def verdict(t: Test, n: int, level: float) -> str:
    """"B better", "B worse", "n.s." or "too few" (see the module; no test at all is too few too)."""
    fewest = min_pairs(level)
    if not t.test or n < fewest or (t.rejects and t.moved < fewest):
        return "too few"
    if not t.rejects:
        return "n.s."
    return "B better" if t.diff > 0 else "B worse"


def satterthwaite(variances: Sequence[float], dfs: Sequence[float]) -> float:
    """Welch–Satterthwaite's degrees of freedom of a sum of independent terms with these variances, each estimated
    on its own degrees of freedom."""
    total = sum(variances)
    if total <= 0:
        return float(sum(dfs))
    return total ** 2 / sum(v ** 2 / df for v, df in zip(variances, dfs, strict=True) if v > 0)


def paired(d: Sequence[float] | np.ndarray, level: float) -> Test:
    """One benchmark's differences B − A per question, tested at ``level``."""
    return overall([d], level)


def overall(parts: Sequence[Sequence[float] | np.ndarray], level: float) -> Test:
    """The unweighted mean of the parts' mean differences (one part: a benchmark's paired t test), at ``level``."""
    from scipy import stats
    from statsmodels.stats.power import TTestPower

    ds = [np.round(np.asarray(d, dtype=float), DIGITS) for d in parts]
    k = len(ds)
    diff = float(sum(d.mean() for d in ds) / k)
    moved = int(sum(np.count_nonzero(d) for d in ds))
    if any(len(d) < 2 for d in ds):  # a part of one question: no spread can be measured
        return Test(diff, None, None, None, "", None, None, None, moved, level)
    if all(np.ptp(d) == 0 for d in ds):  # every question moved alike: no t test, the sign flips decide
        p = 1.0 if moved == 0 else _sign_flip(ds)
        low, high = _flip_interval(ds, level, diff) if p < level or moved == 0 else (None, None)
        return Test(diff, low, high, p, "sign-flip", None, None, None, moved, level)
    if k == 1:
        d = ds[0]
        res = stats.ttest_1samp(d, 0.0)  # = ttest_rel(b, a) on these differences
        ci = res.confidence_interval(1 - level)
        p_t, low, high, df = float(res.pvalue), float(ci.low), float(ci.high), float(len(d) - 1)
        se = float(d.std(ddof=1) / math.sqrt(len(d)))
    else:
        variances = [float(d.var(ddof=1)) / len(d) / k ** 2 for d in ds]
        se = math.sqrt(sum(variances))
        df = satterthwaite(variances, [len(d) - 1 for d in ds])
        half = float(stats.t.ppf(1 - level / 2, df)) * se
        p_t = float(2 * stats.t.sf(abs(diff) / se, df))
        low, high = diff - half, diff + half
    # The effect a t test on df + 1 observations detects with 80 % power, in units of their sd: × √(df + 1) × SE.
    effect = float(np.asarray(TTestPower().solve_power(nobs=df + 1, alpha=level, power=POWER,
                                                       alternative="two-sided")).squeeze())
    mde = None if math.isnan(effect) else effect * math.sqrt(df + 1) * se
    return Test(diff, low, high, p_t, "t", p_t, df, mde, moved, level)


def _flip_interval(ds: list[np.ndarray], level: float, diff: float) -> tuple[float, float]:
    """The shifts δ the sign-flip test of the differences less δ does not reject at ``level``: one shift alone when
    every question moved alike (any other leaves differences of one sign); else (benchmarks moved by different
    constants) their bounds, found by bisection between ``diff`` and the differences' extremes to a thousandth
    (kept on the side the test does not reject)."""
    values = np.concatenate(ds)
    if np.ptp(values) == 0:
        return diff, diff

    def edge(far: float) -> float:  # to a thousandth: the table prints two decimals
        inside, outside = diff, far
        while abs(outside - inside) > 1e-3:
            middle = (inside + outside) / 2
            if _sign_flip([d - middle for d in ds]) < level:
                outside = middle
            else:
                inside = middle
        return inside

    return edge(float(values.min()) - 1e-9), edge(float(values.max()) + 1e-9)


def _sign_flip(ds: list[np.ndarray]) -> float:
    """The two-sided sign-flip permutation p-value of the Overall's statistic (a benchmark's: its mean difference)
    for differences with no spread: exact up to 2¹³ sign patterns, else 9,999 seeded draws."""
    from scipy import stats

    d = np.concatenate(ds)
    weights = np.concatenate([np.full(len(x), 1 / (len(ds) * len(x))) for x in ds])

    def statistic(x: np.ndarray, axis: int) -> np.ndarray:
        return np.sum(x * weights, axis=axis)

    res = stats.permutation_test((d,), statistic, permutation_type="samples", vectorized=True, n_resamples=9999,
                                 alternative="two-sided", random_state=0)
    return float(res.pvalue)
