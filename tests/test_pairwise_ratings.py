"""Bradley–Terry ratings (``pairwise/ratings.py``): the point fit equals an independent maximum-likelihood fit
(statsmodels' binomial GLM), intervals are reproducible from a seed, and a tag that wins everything is rated finitely
and said to be."""

from __future__ import annotations

import numpy as np
import pytest
import statsmodels.api as sm

from shaberi.pairwise.ratings import BASE, SCALE, Verdict, fit, interval, open_note, wins

TAGS = ["base", "sft", "dpo", "merge"]
STRENGTH = {"base": 0.0, "sft": 0.4, "dpo": 0.9, "merge": 0.6}


def simulated(questions: int = 60, seed: int = 1) -> list[Verdict]:
    """Every pair on every question; the first tag wins with the Bradley–Terry probability, a tie one time in six."""
    rng = np.random.default_rng(seed)
    found = []
    for q in range(questions):
        for i, a in enumerate(TAGS):
            for b in TAGS[i + 1:]:
                p = 1 / (1 + np.exp(STRENGTH[b] - STRENGTH[a]))
                outcome = 0.5 if rng.random() < 1 / 6 else float(rng.random() < p)
                found.append(Verdict(f"q{q}", a, b, outcome))
    return found


def test_ratings_equal_an_independent_maximum_likelihood_fit():
    verdicts = simulated()
    got = fit(TAGS, verdicts, bootstrap=0)
    # the same likelihood, fitted by statsmodels: logit P(first wins) = s_first - s_second, base fixed at 0; a tie is
    # a response of one half (half a win each way)
    x = np.zeros((len(verdicts), len(TAGS) - 1))
    for k, v in enumerate(verdicts):
        for tag, sign in ((v.first, 1), (v.second, -1)):
            if tag != "base":
                x[k, TAGS.index(tag) - 1] = sign
    y = np.array([v.outcome for v in verdicts])
    glm = sm.GLM(y, x, family=sm.families.Binomial()).fit(tol=1e-12)
    expected = [BASE, *(BASE + SCALE * glm.params)]
    assert got.rating == pytest.approx(expected, abs=1e-4)
    assert not got.regularised and got.anchor == "base"
    # the order of the truth is recovered from 60 questions
    assert sorted(TAGS, key=lambda t: got.rating[TAGS.index(t)]) == sorted(TAGS, key=STRENGTH.get)


def test_the_anchor_is_rated_1000_and_400_points_are_ten_to_one_odds():
    verdicts = [Verdict(f"q{k}", "a", "b", 1.0) for k in range(10)] + [Verdict("q10", "a", "b", 0.0)]
    got = fit(["a", "b"], verdicts, anchor="b", bootstrap=0)
    assert got.rating[1] == BASE and got.rating[0] - BASE == pytest.approx(400, rel=1e-6)  # 10 wins to 1
    assert got.win_rate == [[None, 10 / 11], [1 / 11, None]] and got.comparisons == [[0, 11], [11, 0]]


def test_the_bootstrap_interval_is_reproducible_with_a_seed_and_contains_the_fit():
    verdicts = simulated(questions=30)
    first, again, other = (fit(TAGS, verdicts, bootstrap=200, seed=s) for s in (7, 7, 8))
    assert (first.low, first.high) == (again.low, again.high)
    assert (first.low, first.high) != (other.low, other.high)
    assert all(lo <= r <= hi for lo, r, hi in zip(first.low, first.rating, first.high, strict=True))
    assert first.low[0] == first.high[0] == BASE  # the anchor is fixed in every resample


def test_a_tag_that_wins_everything_is_rated_finitely_and_said_to_be_regularised():
    verdicts = [Verdict(f"q{k}", "a", other, 1.0) for k in range(5) for other in ("b", "c")]
    verdicts += [Verdict(f"q{k}", "b", "c", 0.5) for k in range(5)]
    got = fit(["a", "b", "c"], verdicts, bootstrap=50)
    assert got.regularised and all(np.isfinite(got.rating)) and got.rating[0] == BASE
    assert got.rating[1] < BASE and got.rating[1] == pytest.approx(got.rating[2])
    assert wins(["a", "b", "c"], verdicts).tolist() == [[0, 5, 5], [0, 0, 2.5], [0, 2.5, 0]]
    # a is the anchor and beat everyone: b and c are unbounded below it (no data says how far), not certain; and
    # as they are so in every resample, even their 97.5th percentile is the prior's: no interval at all
    assert got.low[1:] == [-np.inf, -np.inf] and np.isnan(got.high[1:]).all() and got.open_low[1:] == [1.0, 1.0]
    assert "b below in 100.0% of the resamples (its whole interval is the prior's: –)" in open_note(
        got.tags, got.open_low, got.open_high)
    # anchored at b instead: a is unbounded above (and so has no lower bound of the data's either), c (which b tied)
    # is bounded both ways
    at_b = fit(["a", "b", "c"], verdicts, anchor="b", bootstrap=50)
    assert at_b.high[0] == np.inf and np.isnan(at_b.low[0]) and all(np.isfinite([at_b.low[2], at_b.high[2]]))
    assert interval(at_b.low[0], at_b.high[0]) == "–" and interval(-np.inf, 3.4) == "-∞ to 3"
    assert interval(1070.4, np.inf) == "1070 to ∞"
    assert interval(float("nan"), 1.0) == interval(None, None) == "–"


def test_a_bound_only_the_prior_gives_in_more_than_the_tail_of_resamples_is_open():
    """B beats A on 8 questions, ties 1 and loses 1: the fit on all the data is finite (B has a loss and a tie), but a
    resample that draws neither has no finite fit above: (8/10)¹⁰ = 10.7 % of resamples take the prior's value
    there, more than the interval's 2.5 % tail, so its upper bound is open ("1070 to ∞", not the prior's 2080). With
    20 such questions (14 wins, 3 ties, 3 losses) the chance is 0.08 %: the bound is the data's."""
    from scipy import stats

    few = [Verdict(f"q{k}", "A", "B", 0.0) for k in range(8)] + [Verdict("q8", "A", "B", 0.5),
                                                                 Verdict("q9", "A", "B", 1.0)]
    got = fit(["A", "B"], few, bootstrap=1000, seed=0)
    assert not got.regularised and np.isfinite(got.rating[1]) and got.rating[1] > BASE
    assert got.high[1] == np.inf and np.isfinite(got.low[1]) and got.low[1] > BASE
    # the share of resamples with no finite fit above, as the binomial chance of drawing no non-win predicts
    assert stats.binomtest(round(got.open_high[1] * 1000), 1000, 0.8 ** 10).pvalue > 0.001
    assert got.open_low == [0.0, 0.0] and got.open_high[0] == 0.0
    assert interval(got.low[1], got.high[1]).endswith("to ∞")
    many = [Verdict(f"q{k}", "A", "B", 0.0) for k in range(14)] + [Verdict(f"q{k}", "A", "B", 0.5)
                                                                   for k in range(14, 17)]
    many += [Verdict(f"q{k}", "A", "B", 1.0) for k in range(17, 20)]
    got = fit(["A", "B"], many, bootstrap=1000, seed=0)
    assert np.isfinite(got.high[1]) and got.open_high[1] <= 0.025
    # The same data when every resample is bounded: the plain 97.5th percentile over the resamples.
    assert got.high[1] < 2000


def test_a_tag_compared_with_nothing_moves_nothing_and_an_anchor_compared_with_nothing_anchors_nothing():
    """A tag with no comparisons (in one benchmark, say) is left out of the fit: the others' ratings are those of the
    fit without it, not regularised; as the anchor, it leaves every rating without a value (–), never a number
    anchored to nothing. At exactly the tail's share of resamples without a finite fit above, the bound is the
    data's (the most extreme bounded resample stands in for those, never the prior's value)."""
    verdicts = [Verdict(f"q{k}", "a", "b", 1.0 if k % 3 else 0.0) for k in range(12)]
    alone, beside = fit(["a", "b"], verdicts, bootstrap=200), fit(["a", "b", "x"], verdicts, bootstrap=200)
    assert beside.rating[:2] == alone.rating and not beside.regularised and np.isnan(beside.rating[2])
    assert (beside.low[:2], beside.high[:2]) == (alone.low, alone.high)
    assert np.isnan(fit(["x", "a", "b"], verdicts, bootstrap=200).rating).all()
    edge = [Verdict(f"q{k}", "A", "B", 0.0) for k in range(7)]
    edge += [Verdict("q7", "A", "B", 0.5), Verdict("q8", "A", "B", 0.5), Verdict("q9", "A", "B", 1.0)]
    got = fit(["A", "B"], edge, bootstrap=1000, seed=13)
    assert got.open_high[1] == 0.025 and np.isfinite(got.high[1])
    prior = fit(["A", "B"], [v for v in edge if v.outcome == 0.0], bootstrap=0).rating[1]  # B won everything
    assert got.high[1] < prior - 300
