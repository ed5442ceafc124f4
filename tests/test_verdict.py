"""The verdict rule (shaberi.reports.verdict, through compare's table): its error rate at benchmark sizes, measured
by a small simulation the old rule (a BCa bootstrap interval) fails, exactly where the t test fails, and its tests
and intervals against scipy's."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from shaberi.reports.compare import comparisons
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
    """600 comparisons of twelve questions a benchmark (a ``--runs 3`` family's sample size), two judges, integer
    scores, no true difference: over the table (four benchmarks and the Overall, one family at 0.05) a false
    "better" or "worse" comes in at most 5 % of comparisons, within three Monte Carlo errors; the interval printed
    beside each verdict covers the true difference (0) at its stated level and excludes it exactly where the verdict
    is given. The BCa interval the verdict used to be read off fails the same bound (about three times the claimed
    rate)."""
    sims, alpha = 600, 0.05
    tables = null_tables(sims, 12, seed=11)
    family_errors = row_errors = disagree = covered = 0
    for rows in tables:
        results, m = comparisons(rows)
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


def scipy_p(parts: list[np.ndarray], delta: float = 0.0) -> float:
    """scipy's two-sided sign-flip permutation test of the Overall's statistic (each question weighted by 1 / (k × its
    benchmark's questions)) on the differences less ``delta``: exact up to 16 questions, else 10⁵ seeded draws."""
    weights = np.concatenate([np.full(len(d), 1 / (len(parts) * len(d))) for d in parts])
    d = np.concatenate(parts) - delta
    return stats.permutation_test((d,), lambda x, axis: np.sum(x * weights, axis=axis), permutation_type="samples",
                                  vectorized=True, n_resamples=10 ** 5, random_state=0).pvalue


def test_the_test_and_its_interval_are_scipys_sign_flip_test():
    """A benchmark's p-value is scipy's exact sign-flip test; its interval is the shifts that test does not reject,
    checked at both ends (a hair inside: not rejected; a hair outside: rejected); so for the Overall of two
    benchmarks of different sizes, and its t p-value is Welch's (scipy ttest_ind, the second's differences
    negated)."""
    rng = np.random.default_rng(5)
    level = 0.05 / 3
    for parts in ([rng.integers(-4, 5, 12) / 2 + 0.25], [rng.integers(-4, 5, 5) / 2, rng.integers(-6, 7, 7) / 2 + 1]):
        got = overall(parts, level)
        assert got.exact and got.p == pytest.approx(scipy_p(parts), abs=1e-12)
        assert got.diff == pytest.approx(np.mean([d.mean() for d in parts]), abs=1e-12)
        assert scipy_p(parts, got.low + 1e-6) >= level > scipy_p(parts, got.low - 1e-6)
        assert scipy_p(parts, got.high - 1e-6) >= level > scipy_p(parts, got.high + 1e-6)
        assert got.rejects == (not got.low <= 0 <= got.high)
    d1, d2 = rng.integers(-4, 5, 40) / 2, rng.integers(-6, 7, 12) / 2 + 0.5
    welch = stats.ttest_ind(d1, -d2, equal_var=False)
    assert overall([d1, d2], 0.01).p_t == pytest.approx(welch.pvalue, rel=1e-9)
    a, b = rng.integers(1, 11, 30), rng.integers(1, 11, 30)
    assert paired(b - a, 0.0125).p_t == pytest.approx(stats.ttest_rel(b, a).pvalue, abs=1e-12)


def test_the_rule_holds_its_level_on_differences_of_one_point_where_the_t_test_does_not():
    """Every question differs by one point either way, at random: exactly, over the binomial number of positive
    differences, the sign-flip rule rejects at 0.01 with probability at most 0.01; the t test at 0.01, 0.0166."""
    from scipy.stats import binom

    n, level = 40, 0.01
    ours = t = 0.0
    for k in range(n + 1):
        d = np.array([1.0] * k + [-1.0] * (n - k))
        ours += binom.pmf(k, n, 0.5) * paired(d, level).rejects
        t += binom.pmf(k, n, 0.5) * (0 < k < n and stats.ttest_1samp(d, 0).pvalue < level)
    assert ours <= level < t


def test_every_question_moved_alike_is_decided_without_a_t_test():
    """No spread: the t test is undefined (None, never 0); the sign-flip p is exact (2/2ⁿ, scipy's) and its interval
    the shift itself; mixed shifts in an Overall with no spread get the test's interval, not a point."""
    got = paired(np.full(9, 2.0), 0.01)
    assert (got.p_t, got.low, got.high, got.rejects) == (None, 2.0, 2.0, True)
    assert got.p == pytest.approx(scipy_p([np.full(9, 2.0)])) == 2 / 2 ** 9
    assert paired(np.zeros(12), 0.01).p == 1.0
    parts = [np.full(7, 1.0), np.zeros(6)]
    mixed = overall(parts, 0.05 / 3)
    assert mixed.exact and mixed.rejects and 0 < mixed.low < 0.5 < mixed.high and mixed.low != mixed.high
    assert mixed.p_t is None
    assert scipy_p(parts, mixed.low + 1e-6) >= 0.05 / 3 > scipy_p(parts, mixed.low - 1e-6)


def test_a_benchmark_of_two_questions_cannot_decide_the_overall():
    """ELYZA's two questions both +2 beside forty of Tengu's with no difference: the Overall's mean is +1.0, but
    flipping those two questions' signs is a coin toss half the time (a t test weighing ELYZA by its zero variance
    called this "better" at p < 0.001). And a benchmark of one question has no test: too few."""
    rng = np.random.default_rng(3)
    tengu = np.array([-1, 0, 0, 1] * 10, dtype=float)
    rng.shuffle(tengu)
    a = rng.integers(2, 9, 40).astype(float)
    rows = [("elyza", "ELYZA", [6.0, 4.0], [8.0, 6.0], {}, {}, 0, True),
            ("tengu", "Tengu", a.tolist(), (a + tengu).tolist(), {}, {}, 0, True)]
    results, m = comparisons(rows)
    assert m == 3 and [c.verdict for c in results] == ["too few", "n.s.", "n.s."]
    assert results[-1].diff == pytest.approx(1.0) and results[-1].p > 0.1 and results[-1].p_t is None
    rows[0] = ("elyza", "ELYZA", [4.0], [8.0], {}, {}, 0, True)
    assert comparisons(rows)[0][0].verdict == "too few"


def test_the_exact_test_is_scipys_on_ties_zeros_and_repeats():
    """300 small samples (2 to 13 questions, half points, many zeros and ties): the p-value is scipy's exact sign-flip
    test's, to the last digit (samples whose mean is 0 are left out: scipy's tie tolerance is relative to the
    observed statistic, so there it miscounts the patterns whose mean is 0 too)."""
    rng = np.random.default_rng(8)
    checked = 0
    while checked < 300:
        d = rng.choice([-2, -1, -0.5, 0, 0, 0, 0.5, 1, 2, 3], rng.integers(2, 14))
        if abs(d.mean()) < 1e-9:
            continue
        assert paired(d, 0.01).p == pytest.approx(scipy_p([d]), abs=1e-12), d
        checked += 1


def test_scores_stored_to_nine_decimals_keep_their_ties():
    """A mean of three runs is stored to 9 decimals (6.333333333, 6.666666667): a difference of +1/3 and one of -1/3
    tie under a flip as they do exactly; their residue of 1e-9 decides nothing (the exact p-value of 11 questions at
    +1/3 and 2 at -1/3 is 23/1024, not the 0.004 the residue made of it)."""
    a, b = np.array([6.333333333] * 13), np.array([6.666666667] * 11 + [6.0] * 2)
    got = paired(b - a, 0.01)
    assert got.exact and got.p == 23 / 1024 and got.low <= 0 <= got.high


def test_a_row_too_few_moved_for_a_verdict_never_shows_one_even_when_its_patterns_are_drawn():
    """Forty questions of which three moved: the patterns are drawn, but the exact p-value is at least 2/2³ whatever
    the draws, and the interval holds 0."""
    d = np.zeros(40)
    d[[3, 17, 29]] = 1.0
    got = paired(d, 0.01)
    assert not got.exact and got.p >= 0.25 and got.low <= 0 <= got.high and not got.rejects
