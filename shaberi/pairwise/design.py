"""Which tags a question's answers are compared between: every pair, each tag against a reference, or a sampled
design for many tags.

- **all pairs**: n·(n−1)/2 pairs; every rating is fitted from every comparison.
- **reference** (``--reference TAG``): each other tag against it, as Rakuda's leaderboard and MT-Bench's
  "pairwise-baseline" do: n−1 pairs, the reference anchors the scale.
- **sampled** (``--opponents K``): each tag against K others, so the pairs grow as n·K/2, not n². The pairs are
  a ring (each tag beside the next: the comparison graph is connected, so every rating is on one scale) plus
  seeded random chords until every tag has K opponents (as even as the arithmetic allows: the degrees differ by
  one at most). The design is the same for the same tags, K and seed, and is stated in the output.

Each pair is judged in both orders, on every question both tags answered.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import UsageError

__all__ = ["Design", "against", "all_pairs", "sampled"]


@dataclass(frozen=True)
class Design:
    """The pairs (by tag, each once) and how they were chosen, in words for the output."""

    pairs: tuple[tuple[str, str], ...]
    kind: str  # all | reference | sampled
    described: str

    def degrees(self, tags: Sequence[str]) -> dict[str, int]:
        return {t: sum(t in p for p in self.pairs) for t in tags}


def all_pairs(tags: Sequence[str]) -> Design:
    pairs = tuple(itertools.combinations(tags, 2))
    return Design(pairs, "all", f"all pairs: {len(pairs)} among {len(tags)} tags")


def against(tags: Sequence[str], reference: str) -> Design:
    if reference not in tags:
        raise UsageError(f"--reference {reference} is not one of --tags ({', '.join(tags)}); add it to --tags")
    pairs = tuple((reference, t) for t in tags if t != reference)
    return Design(pairs, "reference", f"each tag against {reference}: {len(pairs)} pairs")


ATTEMPTS = 200  # draws of the chords before settling for the one closest to K each


def sampled(tags: Sequence[str], opponents: int, seed: int = 0) -> Design:
    """Each tag against ``opponents`` others: a ring, then random chords between the tags with the fewest so far."""
    n = len(tags)
    if n < 4:
        raise UsageError(f"--opponents needs 4 or more tags: {n} have only {n * (n - 1) // 2} pairs, all compared "
                         "without it; leave --opponents out")
    if not 2 <= opponents < n - 1:
        raise UsageError(f"--opponents {opponents}: give 2 to {n - 2} for {n} tags (1 leaves a chain; {n - 1} or more "
                         "is every pair: leave --opponents out)")
    rng = random.Random(seed)
    order = list(tags)
    rng.shuffle(order)
    ring = {frozenset((order[k], order[(k + 1) % n])) for k in range(n)}  # connected
    best: tuple[set[frozenset[str]], dict[str, int]] | None = None
    for _ in range(ATTEMPTS):  # the greedy chords can corner themselves; another draw (seeded) seldom does
        pairs, degree = _chords(order, ring, opponents, rng)
        if best is None or len(pairs) > len(best[0]):
            best = (pairs, degree)
        if len(pairs) == n * opponents // 2:  # every tag has K (one K - 1 where n·K is odd)
            break
    assert best is not None
    pairs, degree = best
    at = {t: k for k, t in enumerate(tags)}
    ends = [sorted(p, key=at.__getitem__) for p in pairs]
    ordered = tuple(sorted(((a, b) for a, b in ends), key=lambda p: (at[p[0]], at[p[1]])))
    low, high = min(degree.values()), max(degree.values())
    spread = f"{low}" if low == high else f"{low}–{high}"
    return Design(ordered, "sampled",
                  f"sampled: each tag against {spread} others (--opponents {opponents}, seed {seed}), "
                  f"{len(ordered)} of {n * (n - 1) // 2} pairs, connected")


def _chords(order: list[str], ring: set[frozenset[str]], opponents: int, rng: random.Random
            ) -> tuple[set[frozenset[str]], dict[str, int]]:
    """The ring plus random chords, each joining two of the tags furthest below ``opponents``."""
    pairs, degree = set(ring), dict.fromkeys(order, 2)
    while True:
        short = [t for t in order if degree[t] < opponents]
        a = min(short, key=lambda t: (degree[t], rng.random()), default=None)
        candidates = [t for t in short if t != a and frozenset((a, t)) not in pairs]
        if a is None or not candidates:
            return pairs, degree
        b = min(candidates, key=lambda t: (degree[t], rng.random()))
        pairs.add(frozenset((a, b)))
        degree[a] += 1
        degree[b] += 1
