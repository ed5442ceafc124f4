"""Bradley–Terry ratings from pairwise verdicts, with 95 % intervals from a bootstrap over questions.

A verdict is one question's comparison of two tags, judged in both orders: the first tag won (1), the second (0),
or a tie (0.5: the two orders disagreed, or the judge said tie). Ties count as half a win each way: the
Bradley–Terry likelihood with ties split, which keeps the model ``choix`` fits (the Davidson and Rao–Kupper
extensions add a tie parameter; with both orders judged, a tie mostly means position bias, not a draw).

Strengths are ``choix``'s maximum-likelihood fit (ILSR on the matrix of wins). Where no finite maximum exists — a
tag that won, or lost, every comparison with the others, which a bootstrap sample can make — the fit is
regularised (``ALPHA`` pseudo-comparisons between every pair) and ``Ratings.regularised`` says so. Ratings are on
an Elo-like scale: 400 / ln 10 points per unit of strength (so 400 points are 10:1 odds), the anchor tag (the
reference, or the first) at 1000.

The interval of each rating is the 2.5th and 97.5th percentile of its rating refitted on questions drawn with
replacement (a question's verdicts stay together: they share its difficulty), from a seeded generator, so the same
verdicts and seed give the same interval. **A bound the data do not give is open.** In a resample where a tag is
out of the anchor's reach (nothing the anchor beat, directly or through others, beat it), no finite fit exists
above: its rating there is the prior's, not the data's; so too below for a tag that does not reach the anchor.
Where more than ``TAIL`` (2.5 %, the interval's tail) of the resamples are so on a side, the percentile there is the
prior's, and that side is open (``inf``); where more than 97.5 % are, so is the other percentile, and the tag has no
interval (NaN: it won, or lost, everything in nearly every resample). ``Ratings.open_low`` / ``open_high`` keep the
shares. (B beating A on 8 questions, tying 1 and losing 1: (8/10)¹⁰ ≈ 11 % of resamples hold no tie or loss for B,
so its interval is "1070 to ∞", not the prior's "1070 – 2080".) A tag compared with nothing is left out of the fit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["ALPHA", "SCALE", "TAIL", "Ratings", "Verdict", "fit", "interval", "open_note", "strengths", "wins"]

SCALE = 400 / math.log(10)  # Elo points per unit of Bradley–Terry strength
BASE = 1000.0  # the anchor's rating
ALPHA = 0.01  # pseudo-comparisons between every pair where the maximum-likelihood fit does not exist
TAIL = 0.025  # each side's share of the 95 % interval: more resamples than this unbounded on a side, that side is open


@dataclass(frozen=True)
class Verdict:
    """One question's verdict on two tags, both orders judged: ``outcome`` 1 ``first`` won, 0 ``second``, 0.5 tie."""

    question: str
    first: str
    second: str
    outcome: float


@dataclass(frozen=True)
class Ratings:
    tags: list[str]
    rating: list[float]  # NaN: a tag compared with nothing
    low: list[float]  # 2.5th percentile over the bootstrap; -inf: open (see ``open_low``); NaN: none (the prior's)
    high: list[float]  # 97.5th percentile; inf: open; NaN: none
    win_rate: list[list[float | None]]  # row tag's share of its comparisons with the column tag (ties half)
    comparisons: list[list[int]]
    open_low: list[float]  # the share of resamples with no finite fit below (more than TAIL: ``low`` is -inf)
    open_high: list[float]  # the share with none above
    anchor: str
    regularised: bool  # the point fit needed ALPHA (a tag won or lost everything)
    bootstrap: int
    seed: int


def wins(tags: Sequence[str], verdicts: Sequence[Verdict]) -> np.ndarray:
    """W[i, j]: how often tag i beat tag j, a tie half a win each way."""
    at = {t: k for k, t in enumerate(tags)}
    w = np.zeros((len(tags), len(tags)))
    for v in verdicts:
        i, j = at[v.first], at[v.second]
        w[i, j] += v.outcome
        w[j, i] += 1 - v.outcome
    return w


def _reach(w: np.ndarray) -> list[set[int]]:
    """For each tag, the tags it reaches along wins (i beat j at least partly), itself included."""
    beat = w > 0
    found = []
    for start in range(len(w)):
        seen, todo = {start}, [start]
        while todo:
            k = todo.pop()
            for m in np.flatnonzero(beat[k]):
                if m not in seen:
                    seen.add(int(m))
                    todo.append(int(m))
        found.append(seen)
    return found


def _connected(w: np.ndarray) -> bool:
    """Every tag reaches every other along wins: then, and only then, the maximum-likelihood strengths are finite."""
    return all(len(r) == len(w) for r in _reach(w))


def _unbounded(w: np.ndarray, anchor: int) -> tuple[np.ndarray, np.ndarray]:
    """Which tags the wins ``w`` put no bound on, above and below the anchor. The anchor's reach (what it beat, and
    what those beat) beat no tag outside it, so every tag outside can be raised together as far as one likes, the
    likelihood only growing: no bound above. So too below for a tag that does not reach the anchor."""
    reach = _reach(w)
    return (np.array([k not in reach[anchor] for k in range(len(w))]),
            np.array([anchor not in r for r in reach]))


def _percentiles(samples: np.ndarray, above: np.ndarray, below: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The 2.5th and 97.5th percentiles, a resample unbounded on a side counted beyond every bounded one on that side
    (the most extreme bounded value stands in for it, never the prior's; where such resamples are more than the tail,
    that side is open anyway). One unbounded on both sides (drawn without comparisons) is beyond on both."""
    bounded = ~(above | below)
    top = np.where(bounded, samples, -np.inf).max(axis=0)
    bottom = np.where(bounded, samples, np.inf).min(axis=0)
    top, bottom = np.where(np.isfinite(top), top, samples), np.where(np.isfinite(bottom), bottom, samples)
    high = np.percentile(np.where(above, top, np.where(below, bottom, samples)), 97.5, axis=0)
    low = np.percentile(np.where(below, bottom, np.where(above, top, samples)), 2.5, axis=0)
    return low, high


def strengths(w: np.ndarray) -> tuple[np.ndarray, bool]:
    """Bradley–Terry strengths (mean zero over the tags compared) of a win matrix, and whether the fit needed
    regularising. A tag compared with nothing is left out of the fit (0: no value), so it neither regularises
    the others nor moves them."""
    import choix

    active = (w + w.T).sum(axis=1) > 0
    s = np.zeros(len(w))
    if active.sum() < 2:
        return s, False
    sub = w[np.ix_(active, active)]
    plain = _connected(sub)
    s[active] = choix.ilsr_pairwise_dense(sub, alpha=0.0 if plain else ALPHA, max_iter=1000)
    return s, not plain


def fit(tags: Sequence[str], verdicts: Sequence[Verdict], anchor: str | None = None, bootstrap: int = 1000,
        seed: int = 0) -> Ratings:
    """Ratings of ``tags`` from ``verdicts``, anchored at ``anchor`` (default: the first tag), with bootstrap
    intervals over the verdicts' questions."""
    tags = list(tags)
    anchor = anchor or tags[0]
    a = tags.index(anchor)
    w = wins(tags, verdicts)
    point, regularised = strengths(w)
    by_question: dict[str, list[Verdict]] = {}
    for v in verdicts:
        by_question.setdefault(v.question, []).append(v)
    questions = sorted(by_question)
    per_question = np.stack([wins(tags, by_question[q]) for q in questions]) if questions else np.zeros((0, 1, 1))
    rng = np.random.default_rng(seed)
    samples = np.empty((bootstrap, len(tags)))
    above = np.zeros((bootstrap, len(tags)), dtype=bool)  # no finite fit above (the prior's value) in that resample
    below = np.zeros((bootstrap, len(tags)), dtype=bool)
    for b in range(bootstrap):
        drawn = per_question[rng.integers(0, len(questions), len(questions))].sum(axis=0)
        s, needed = strengths(drawn)
        samples[b] = SCALE * (s - s[a]) + BASE
        if needed or not (drawn + drawn.T).sum(axis=1).all():  # a tag (or the anchor) drawn without comparisons
            above[b], below[b] = _unbounded(drawn, a)  # is unbounded on both sides
    n = w + w.T
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.where(n > 0, w / n, np.nan)
    rating = SCALE * (point - point[a]) + BASE
    open_high, open_low = (x.mean(axis=0) if bootstrap else np.zeros(len(tags)) for x in (above, below))
    low, high = _percentiles(samples, above, below) if bootstrap else (np.full(len(tags), np.nan),) * 2
    if regularised:  # the point fit itself is the prior's on that side (then so is every resample's)
        over, under = _unbounded(w, a)
        open_high, open_low = np.where(over, 1.0, open_high), np.where(under, 1.0, open_low)
    high = np.where(open_high > TAIL, np.inf, high)
    low = np.where(open_low > TAIL, -np.inf, low)
    # Unbounded above in more than 97.5 % of the resamples: even the 2.5th percentile is the prior's (so too below)
    low = np.where(open_high > 1 - TAIL, np.nan, low)
    high = np.where(open_low > 1 - TAIL, np.nan, high)
    unrated = n.sum(axis=1) == 0  # compared with nothing: no value; an anchor compared with nothing anchors nothing
    unrated = np.full(len(tags), True) if unrated[a] else unrated
    rating, low, high = (np.where(unrated, np.nan, v) for v in (rating, low, high))
    return Ratings(tags, [float(x) for x in rating], [float(x) for x in low], [float(x) for x in high],
                   [[None if i == j or math.isnan(rate[i, j]) else float(rate[i, j]) for j in range(len(tags))]
                    for i in range(len(tags))],
                   [[round(n[i, j]) for j in range(len(tags))] for i in range(len(tags))],
                   [float(x) for x in open_low], [float(x) for x in open_high], anchor, regularised, bootstrap, seed)


def interval(low: float | None, high: float | None, between: str = " to ") -> str:
    """An interval as the CLI and the report print it: ``–`` for none, ``∞`` for an open side."""
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return "–"
    return between.join("-∞" if v == -math.inf else "∞" if v == math.inf else f"{v:.0f}" for v in (low, high))


def open_note(tags: Sequence[str], open_low: Sequence[float | None], open_high: Sequence[float | None]) -> str | None:
    """What an open bound means, with each open side's share of resamples: the CLI's note and the report's (a fit
    stored before the shares were has none: None)."""
    sides = [f"{t} {'below' if low else 'above'} in {share:.1%} of the resamples"
             + (" (its whole interval is the prior's: –)" if share > 1 - TAIL else "")
             for k, t in enumerate(tags) for low, share in ((True, open_low[k]), (False, open_high[k]))
             if share is not None and share > TAIL]
    return (f"open bounds (∞): {'; '.join(sides)}: in those no chain of wins links the tag to the anchor on that side, "
            f"so only the prior bounds it there, in more than the interval's {TAIL:.1%} tail") if sides else None
