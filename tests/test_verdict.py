"""The verdict rule (shaberi.reports.verdict, through compare's table): its error rate at benchmark sizes, measured
by a small simulation the old rule (a BCa bootstrap interval) fails, and its Overall against scipy's Welch test."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from shaberi.reports.compare import _statistics
from shaberi.reports.verdict import overall, paired

BENCHMARKS = ("elyza", "tengu", "mt_bench", "rakuda")


def judged(rng: np.random.Generator, quality: np.ndarray) -> np.ndarray:
    """A side's per-question score: the mean of two judges' integer 1–10 scores (one lenient, one strict)."""
    return np.mean([np.clip(np.rint(quality + bias + rng.normal(0, 1.2, quality.shape)), 1, 10)
                    for bias in (0.3, -0.4)], axis=0)


def null_tables(sims: int, n: int, seed: int) -> list[list[tuple]]:
    """``sims`` comparisons of two sides with no true difference: four benchmarks of ``n`` questions each, as the
    rows ``compare`` tests."""
    rng = np.random.default_rng(seed)
    tables = []
    for _ in range(sims):
        rows = []
        for bench in BENCHMARKS:
            quality = rng.uniform(1.5, 9.5, n)
            rows.append((bench, bench, judged(rng, quality).tolist(), judged(rng, quality).tolist(), {}, {}, 0, True))
        tables.append(rows)
    return tables


def test_no_difference_gives_a_false_verdict_no_more_often_than_claimed_at_twelve_questions():
    """Twelve questions a benchmark (a ``--runs 3`` family's sample size), two judges, integer scores, no true
    difference: over the table (four benchmarks and the Overall, one family at 0.05) a false "better" or "worse"
    comes in at most 5 % of comparisons, within three Monte Carlo errors; the interval printed beside each verdict
    covers the true difference (0) at its stated level and excludes it exactly where the verdict is given. The BCa
    interval the verdict used to be read off fails the same bound (about three times the claimed rate)."""
    sims, alpha = 1000, 0.05
    tables = null_tables(sims, 12, seed=11)
    family_errors = row_errors = disagree = covered = 0
    for rows in tables:
        results, m = _statistics(rows)
        assert m == 5 and [c.title for c in results][-1] == "Overall"
        wrong = [c.verdict in ("B better", "B worse") for c in results]
        family_errors += any(wrong)
        row_errors += sum(wrong[:4])
        for c in results:
            excludes = c.ci_low is not None and (c.ci_low > 0 or c.ci_high < 0)
            disagree += excludes != (c.p is not None and c.p < alpha / m)
            covered += c.ci_low is not None and c.ci_low <= 0 <= c.ci_high
    mc = 3 * (alpha * (1 - alpha) / sims) ** 0.5
    assert family_errors / sims <= alpha + mc, family_errors
    assert row_errors / (4 * sims) <= alpha / 5 + 3 * (alpha / 5 / (4 * sims)) ** 0.5, row_errors
    assert disagree == 0
    assert covered / (5 * sims) >= 1 - alpha / 5 - 3 * (alpha / 5 / (5 * sims)) ** 0.5

    # The old rule on the same comparisons: each benchmark's BCa interval at 1 − 0.05/4, a verdict where it
    # excludes 0 (scipy's bootstrap, all comparisons of a benchmark at once).
    d = np.array([[np.subtract(r[3], r[2]) for r in rows] for rows in tables])  # sims × benchmarks × questions
    flat = d.reshape(-1, d.shape[-1])
    moves = np.ptp(flat, axis=1) > 0
    boot = stats.bootstrap((flat[moves],), np.mean, axis=-1, confidence_level=1 - alpha / 4, n_resamples=1999,
                           method="BCa", random_state=0)
    low, high = np.zeros(len(flat)), np.zeros(len(flat))
    low[moves], high[moves] = boot.confidence_interval
    bca_errors = ((low > 0) | (high < 0)).reshape(sims, 4).any(axis=1).mean()
    assert bca_errors > alpha + mc, bca_errors


def test_the_overall_of_two_benchmarks_is_welchs_t_test():
    """The Overall of two benchmarks is (m₁ + m₂) / 2; with the second's differences negated that is Welch's
    unequal-variance t test of two means (scipy), degrees of freedom and all."""
    rng = np.random.default_rng(5)
    d1, d2 = rng.integers(-4, 5, 40) / 2, rng.integers(-6, 7, 12) / 2 + 0.5
    got = overall([d1, d2], 0.01)
    welch = stats.ttest_ind(d1, -d2, equal_var=False)
    ci = welch.confidence_interval(0.99)
    assert got.diff == pytest.approx((d1.mean() + d2.mean()) / 2, abs=1e-12)
    assert (got.p, got.df) == (pytest.approx(welch.pvalue, rel=1e-9), pytest.approx(welch.df, rel=1e-9))
    assert (got.low, got.high) == pytest.approx((ci.low / 2, ci.high / 2), rel=1e-9)
    # One benchmark's own test is scipy's paired t test, its interval the test's.
    a, b = rng.integers(1, 11, 30), rng.integers(1, 11, 30)
    t = stats.ttest_rel(b, a)
    one = paired(b - a, 0.0125)
    assert one.p == pytest.approx(t.pvalue, abs=1e-12) and one.df == 29
    assert (one.low, one.high) == pytest.approx(tuple(t.confidence_interval(1 - 0.0125)), abs=1e-12)


def test_no_spread_is_decided_by_the_exact_sign_flip_test():
    """Every question moved alike: the t test is undefined (None, never 0), the sign-flip test (scipy, exact) decides;
    where it rejects, its interval is the point; mixed shifts in an Overall with no spread are not called."""
    got = paired(np.full(9, 2.0), 0.01)
    exact = stats.permutation_test((np.full(9, 2.0),), np.mean, permutation_type="samples", n_resamples=10 ** 4)
    assert (got.test, got.p_t, got.low, got.high, got.rejects) == ("sign-flip", None, 2.0, 2.0, True)
    assert got.p == pytest.approx(exact.pvalue) == 2 / 2 ** 9
    mixed = overall([np.full(8, 2.0), np.full(9, -1.0)], 0.01)
    assert (mixed.test, mixed.low, mixed.high, mixed.rejects) == ("sign-flip", None, None, False)
    assert paired(np.zeros(12), 0.01).p == 1.0


def test_an_overall_of_benchmarks_moved_by_different_constants_has_the_sign_flip_tests_interval():
    """Rakuda +1 on every question, ELYZA 0: no spread within a benchmark, but the Overall's differences are not one
    shift. Its interval is the shifts the sign-flip test (scipy) does not reject, not the point 0.5."""
    ds = [np.ones(8), np.zeros(8)]
    got = overall(ds, 0.05 / 3)
    assert got.test == "sign-flip" and got.diff == 0.5 and got.rejects
    assert 0 < got.low < 0.5 < got.high < 1

    def p(delta: float) -> float:  # scipy's test of the Overall's statistic, every question shifted by delta
        d = np.concatenate(ds) - delta
        return stats.permutation_test((d,), lambda x, axis: np.mean(x, axis=axis), permutation_type="samples",
                                      vectorized=True, n_resamples=9999, random_state=0).pvalue

    assert p(got.low + 0.01) >= 0.05 / 3 > p(got.low - 0.02)
    assert p(got.high - 0.01) >= 0.05 / 3 > p(got.high + 0.02)


def test_an_overall_no_test_could_be_run_on_is_too_few_not_not_significant():
    rows = [("rakuda", "Rakuda", [3.0] * 6 + [4.0] * 6, [5.0] * 6 + [7.0] * 6, {}, {}, 0, True),
            ("elyza", "ELYZA", [4.0], [8.0], {}, {}, 0, True)]
    results, m = _statistics(rows)
    assert m == 3 and [c.verdict for c in results] == ["B better", "too few", "too few"]
    assert (results[-1].test, results[-1].p, results[-1].ci_low) == ("", None, None)
