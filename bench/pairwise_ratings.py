"""Bradley–Terry ratings recovered from simulated verdicts with known strengths (``pairwise/ratings.py``).

    python bench/pairwise_ratings.py [--simulations 200] [--tags 10] [--questions 40] [--bootstrap 200]

Each simulation draws the tags' true strengths (normal, sd 0.5), then a verdict per pair and question from the
Bradley–Terry probability (every pair on every question, as ``--tags`` all-pairs judging makes them), fits the
ratings with their bootstrap intervals, and checks them against the truth: Kendall's tau between the fitted and
the true order (scipy), and how many of the 95 % intervals of the non-anchor tags hold the true rating (coverage:
near 0.95 when the intervals are right). A second regime adds position bias: each pair is judged in both orders,
the first position wins a further 15 % of the time, and orders that disagree are a tie; its coverage is against the
strengths ties-as-half-wins estimate, which are the truth shrunk, so only its rank agreement is comparable.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.stats import kendalltau

from shaberi.pairwise.ratings import BASE, SCALE, Verdict, fit


def simulate(rng: np.random.Generator, tags: int, questions: int, bias: float) -> tuple[np.ndarray, list[Verdict]]:
    truth = rng.normal(0, 0.5, tags)
    names = [f"t{k}" for k in range(tags)]
    verdicts = []
    for q in range(questions):
        for i in range(tags):
            for j in range(i + 1, tags):
                p = 1 / (1 + np.exp(truth[j] - truth[i]))
                if bias:
                    forward = rng.random() < min(1.0, p + bias)  # i shown first
                    backward = rng.random() < min(1.0, (1 - p) + bias)  # j shown first
                    outcome = 1.0 if forward and not backward else 0.0 if backward and not forward else 0.5
                else:
                    outcome = float(rng.random() < p)
                verdicts.append(Verdict(f"q{q}", names[i], names[j], outcome))
    return truth, verdicts


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--simulations", type=int, default=200)
    parser.add_argument("--tags", type=int, default=10)
    parser.add_argument("--questions", type=int, default=40)
    parser.add_argument("--bootstrap", type=int, default=200)
    args = parser.parse_args()
    names = [f"t{k}" for k in range(args.tags)]
    for regime, bias in (("no position bias", 0.0), ("position bias 0.15, ties", 0.15)):
        rng = np.random.default_rng(0)
        taus, covered, total, started = [], 0, 0, time.perf_counter()
        for s in range(args.simulations):
            truth, verdicts = simulate(rng, args.tags, args.questions, bias)
            got = fit(names, verdicts, bootstrap=args.bootstrap, seed=s)
            taus.append(kendalltau(got.rating, truth).statistic)
            true_rating = SCALE * (truth - truth[0]) + BASE
            for k in range(1, args.tags):
                covered += got.low[k] <= true_rating[k] <= got.high[k]
                total += 1
        took = time.perf_counter() - started
        print(f"{regime:26}  {args.simulations} simulations x {args.tags} tags x {args.questions} questions: "
              f"Kendall tau mean {np.mean(taus):.3f} (min {np.min(taus):.3f}); 95 % interval coverage "
              f"{covered / total:.3f} of {total}; {took / args.simulations * 1000:.0f} ms a fit with "
              f"{args.bootstrap} resamples")


if __name__ == "__main__":
    main()
