"""The regression gate: is a consensus strategy worse than the single model, paired question by question?

For each strategy × dataset, over the same sampled questions:

- exact one-sided McNemar against the single baseline answer (sample 0): ``scipy.stats.binomtest`` on the
  discordant pairs, b = baseline right and strategy wrong, c = the reverse, H1: b > c;
- a one-sided paired t-test (``scipy.stats.ttest_rel``) of the strategy's per-question correctness
  against the mean correctness of the N samples of that question;
- Holm's correction (``statsmodels`` ``multipletests(method="holm")``; its default is another method)
  over every p-value of both tests across all comparisons, at α = 0.10: a comparison with an adjusted
  p-value below α is a regression;
- beside them, for comparison only, the unpaired one-sided Fisher exact test on the 2×2 table of right
  and wrong answers, which ignores the pairing and so misses more regressions;
- the accuracy difference with a 95 % t-interval over the paired per-question differences, and the
  smallest regression detectable with 80 % power at this many questions (statsmodels ``TTestPower`` on
  the paired differences; their standard deviation as observed, or as two independent answers at the
  baseline accuracy when no question differs).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["ALPHA", "Comparison", "compare", "gate"]

ALPHA = 0.10


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
    mde: float  # smallest regression (accuracy points, as a fraction) detectable with 80 % power
    p_mcnemar_holm: float | None = None
    p_ttest_holm: float | None = None
    regression: bool | None = None
    excluded: int = 0  # questions left out: no readable grade for the baseline, the strategy or every sample


def compare(dataset: str, strategy: str, baseline: list[int], correct: list[int], samples_mean: list[float],
            alpha: float = ALPHA) -> Comparison:
    from scipy import stats
    from statsmodels.stats.power import TTestPower

    n = len(correct)
    if n == 0 or len(baseline) != n or len(samples_mean) != n:
        raise ValueError(f"{dataset}/{strategy}: paired vectors of different lengths or none")
    worse = sum(1 for b, s in zip(baseline, correct, strict=True) if b and not s)
    better = sum(1 for b, s in zip(baseline, correct, strict=True) if s and not b)
    p_mcnemar = float(stats.binomtest(worse, worse + better, 0.5, alternative="greater").pvalue) if worse + better \
        else 1.0
    diffs = [s - m for s, m in zip(correct, samples_mean, strict=True)]
    p_ttest = float(stats.ttest_rel(correct, samples_mean, alternative="less").pvalue) if _varies(diffs) else 1.0
    right, right_base = sum(correct), sum(baseline)
    p_fisher = float(stats.fisher_exact([[right, n - right], [right_base, n - right_base]], alternative="less")[1])
    paired = [s - b for s, b in zip(correct, baseline, strict=True)]
    mean = sum(paired) / n
    if n > 1 and _varies(paired):
        low, high = stats.t.interval(0.95, n - 1, loc=mean, scale=stats.sem(paired))
        sd = float(stats.tstd(paired))
    else:
        low = high = mean
        p = right_base / n
        sd = math.sqrt(2 * p * (1 - p))
    d = TTestPower().solve_power(nobs=n, alpha=alpha, power=0.8, alternative="larger") if n > 1 else math.inf
    return Comparison(dataset, strategy, n, right_base / n, sum(samples_mean) / n, right / n, mean, float(low),
                      float(high), worse, better, p_mcnemar, p_ttest, p_fisher, float(d * sd))


def gate(comparisons: list[Comparison], alpha: float = ALPHA) -> list[Comparison]:
    """Holm-adjust every p-value of both paired tests across all comparisons, and say which regress."""
    from statsmodels.stats.multitest import multipletests

    if not comparisons:
        return comparisons
    pvalues = [c.p_mcnemar for c in comparisons] + [c.p_ttest for c in comparisons]
    reject, adjusted, _, _ = multipletests(pvalues, alpha=alpha, method="holm")
    k = len(comparisons)
    for i, c in enumerate(comparisons):
        c.p_mcnemar_holm, c.p_ttest_holm = float(adjusted[i]), float(adjusted[k + i])
        c.regression = bool(reject[i] or reject[k + i])
    return comparisons


def _varies(values: Sequence[float]) -> bool:
    return any(v != values[0] for v in values)
