"""The regression gate: is a consensus strategy worse than the single model, paired question by question?

For each strategy × dataset, over the same sampled questions:

- exact one-sided McNemar against the single baseline answer (sample 0): ``scipy.stats.binomtest`` on the
  discordant pairs, b = baseline right and strategy wrong, c = the reverse, H1: b > c;
- a one-sided paired t-test (``scipy.stats.ttest_rel``) of the strategy's per-question correctness
  against the mean correctness of the N samples of that question;
- beside them, for comparison only, the unpaired one-sided Fisher exact test on the 2×2 table of right
  and wrong answers, which ignores the pairing and so misses more regressions;
- the accuracy difference with a 95 % t-interval over the paired per-question differences.

**One family, one verdict.** The family is a model's whole configuration in the baseline file: both tests
of every configured strategy × dataset, m = 2 × strategies × datasets tests, at the file's α (or
``--significance``). A CI job checks a slice of it (``check --strategy S``) and cannot see the other
jobs' p-values, so α is split among the jobs in proportion to their tests (Bonferroni across jobs) and
Holm's step-down (``statsmodels`` ``multipletests(method="holm")``) runs within each job at its share.
The family-wise error over the whole configuration (the chance that any regression declared in any job is
false) stays at most α however it is sliced, each job's verdict needs nothing but its own p-values, and
``report`` re-derives the same verdicts from the result files (each records its α and its family's size)
instead of re-adjusting across files. Only when the configuration is checked whole, in one job, is this
plain Holm over the configuration; split into jobs it is Bonferroni-then-Holm, which rejects some
regressions plain Holm does not and misses others it finds (``report`` shows both when it has every job's
file; the verdicts, and the exit codes, are the jobs'). A family-adjusted p-value is the Holm-adjusted p
within the job scaled by m ÷ the job's tests, so every verdict reads "adjusted p ≤ α".

**Power that matches the test.** A lone regression is caught when its McNemar p-value is the smallest of
the family and below α ÷ m (Holm's first step): the detectable regression is the drop in accuracy that
the exact one-sided McNemar test at level α ÷ m detects with 80 % power, computed exactly (``power``:
the binomial number of discordant questions at the observed discordance, the exact critical count for
each, summed; no simulation), holding the discordance (the share of questions where the two answers
differ in correctness) at the observed value, or at that of two independent answers at the baseline's
accuracy when none differ (a baseline always right: every discordant question a loss).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["ALPHA", "POWER", "Comparison", "compare", "detectable", "gate", "power"]

ALPHA = 0.10
POWER = 0.80


@dataclass
class Comparison:
    dataset: str
    strategy: str
    n: int
    baseline: float  # accuracy of the single answer (sample 0)
    samples_mean: float  # mean accuracy of the N samples
    accuracy: float  # of the strategy
    difference: float  # strategy − baseline
    ci_low: float
    ci_high: float
    worse: int  # b: baseline right, strategy wrong
    better: int  # c: baseline wrong, strategy right
    p_mcnemar: float
    p_ttest: float
    p_fisher: float
    mde: float  # smallest regression (a fraction) the family's McNemar detects with 80 % power; inf: none
    p_mcnemar_holm: float | None = None  # family-adjusted (see the module's docstring)
    p_ttest_holm: float | None = None
    regression: bool | None = None
    excluded: int = 0  # questions left out: no readable grade for the baseline, the strategy or every sample

    @property
    def discordance(self) -> float:
        """The share of questions where the baseline and the strategy differ in correctness."""
        return (self.worse + self.better) / self.n


def power(n: int, discordance: float, regression: float, level: float) -> float:
    """Exact power of the one-sided exact McNemar test at ``level`` on ``n`` paired questions, when a share
    ``discordance`` of them differ and the strategy is ``regression`` (a fraction) less accurate."""
    import numpy as np
    from scipy import stats

    if not 0 < discordance <= 1 or not 0 <= regression <= discordance:
        return 0.0 if regression <= 0 else math.nan
    low, high = stats.binom.ppf([1e-12, 1 - 1e-12], n, discordance)  # the rest weighs nothing
    d = np.arange(int(low), int(high) + 1)
    weight = stats.binom.pmf(d, n, discordance)
    # smallest b with P(B ≥ b | d, ½) ≤ level: binom.isf gives the largest k with P(B > k) > level, plus one
    critical = stats.binom.isf(level, d, 0.5) + 1
    worse = (discordance + regression) / (2 * discordance)  # P(a discordant question is a loss)
    return float(np.sum(weight * stats.binom.sf(critical - 1, d, worse)))


def detectable(n: int, discordance: float, level: float, target: float = POWER) -> float:
    """The smallest regression (a fraction) detected with power ``target``; inf when none is at this n."""
    from scipy.optimize import brentq

    if n < 1 or discordance <= 0 or power(n, discordance, discordance, level) < target:
        return math.inf
    return float(brentq(lambda r: power(n, discordance, r, level) - target, 0.0, discordance, xtol=1e-6))


def compare(dataset: str, strategy: str, baseline: list[int], correct: list[int], samples_mean: list[float],
            level: float = ALPHA / 2) -> Comparison:
    """One strategy against the baseline; ``level``: the per-test level its detectable regression is computed
    at (α ÷ m of its family; ``gate`` decides the verdict)."""
    from scipy import stats

    n = len(correct)
    if n == 0 or len(baseline) != n or len(samples_mean) != n:
        raise ValueError(f"{dataset}/{strategy}: paired vectors of different lengths or none")
    worse = sum(1 for b, s in zip(baseline, correct, strict=True) if b and not s)
    better = sum(1 for b, s in zip(baseline, correct, strict=True) if s and not b)
    p_mcnemar = float(stats.binomtest(worse, worse + better, 0.5, alternative="greater").pvalue) if worse + better \
        else 1.0
    diffs = [s - m for s, m in zip(correct, samples_mean, strict=True)]
    # without variance the t statistic is ±∞ (or undefined at 0): a constant loss is certain, anything else not
    p_ttest = float(stats.ttest_rel(correct, samples_mean, alternative="less").pvalue) if _varies(diffs) else \
        (0.0 if diffs[0] < 0 else 1.0)
    right, right_base = sum(correct), sum(baseline)
    p_fisher = float(stats.fisher_exact([[right, n - right], [right_base, n - right_base]], alternative="less")[1])
    paired = [s - b for s, b in zip(correct, baseline, strict=True)]
    mean = sum(paired) / n
    if n > 1 and _varies(paired):
        low, high = stats.t.interval(0.95, n - 1, loc=mean, scale=stats.sem(paired))
    else:
        low = high = mean
    p = right_base / n
    discordance = (worse + better) / n or 2 * p * (1 - p)
    mde = detectable(n, discordance, level) if discordance else _all_lost(n, level)
    return Comparison(dataset, strategy, n, p, sum(samples_mean) / n, right / n, mean, float(low), float(high),
                      worse, better, p_mcnemar, p_ttest, p_fisher, mde)


def _all_lost(n: int, level: float, target: float = POWER) -> float:
    """The detectable regression when the baseline is always right (or always wrong) and nothing differs: every
    discordant question is then a loss, so the regression is the discordance itself."""
    from scipy.optimize import brentq

    if power(n, 1.0, 1.0, level) < target:
        return math.inf
    return float(brentq(lambda d: power(n, d, d, level) - target, 1e-9, 1.0, xtol=1e-6))


def gate(comparisons: list[Comparison], alpha: float = ALPHA, family_tests: int | None = None) -> list[Comparison]:
    """Holm within this job's comparisons at its share of α (its tests ÷ ``family_tests``, the family's; default:
    this job is the whole family), adjusted p-values on the family's scale, and which regress."""
    from statsmodels.stats.multitest import multipletests

    if not comparisons:
        return comparisons
    pvalues = [c.p_mcnemar for c in comparisons] + [c.p_ttest for c in comparisons]
    scale = max(1.0, (family_tests or len(pvalues)) / len(pvalues))
    adjusted = [min(1.0, float(p) * scale) for p in multipletests(pvalues, method="holm")[1]]
    k = len(comparisons)
    for i, c in enumerate(comparisons):
        c.p_mcnemar_holm, c.p_ttest_holm = adjusted[i], adjusted[k + i]
        c.regression = adjusted[i] <= alpha or adjusted[k + i] <= alpha
    return comparisons


def _varies(values: Sequence[float]) -> bool:
    return any(v != values[0] for v in values)
