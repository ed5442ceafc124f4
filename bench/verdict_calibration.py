"""How often `compare`'s verdicts are wrong, and how often its intervals hold the truth, by simulation.

    python bench/verdict_calibration.py [--sims 4000] [--power-sims 1000] [--sizes 12,40,60,100,115]
                                        [--regime judges|ties|ones|skewed] [--bca-resamples 9999] [--workers 2]

Each simulated comparison is a table as `compare` makes it: four benchmarks of n questions; per question a
quality drawn uniformly from 1.5–9.5 and each side's score the mean of two judges' integer 1–10 scores (one
lenient, one strict, normal noise of sd 1.2, rounded and clipped). With no true difference both sides share the
quality; ``--regime ties`` makes 60 % of the questions identical on both sides (the same answer, a deterministic
judge); ``--regime ones`` makes every difference one point either way, at random (where a t test overshoots its
level); ``--regime skewed`` is a stress case outside that model: B is 3 points better on a quarter of the questions
and 1 point worse on the rest (the same mean, a two-valued skewed difference). The rows are run through
`compare`'s own rule (``reports.compare.comparisons``: each benchmark and the Overall, one family, each at 0.05/5).

Printed per n, with Monte Carlo standard errors:

- no true difference: the false-verdict rate per benchmark row (claimed: at most 0.01), the family-wise error over
  the four benchmarks (claimed: at most 0.04 by Bonferroni, 0.05 for the table) and over the whole table with the
  Overall (claimed: 0.05), and the coverage of the printed interval (claimed: 0.99), benchmarks and Overall; beside
  them, on the same comparisons, a paired t test at the same level (the p-value the table reports for information)
  and the old rule (a BCa bootstrap interval at 1 − 0.05/4 per benchmark, scipy, with ``--bca-resamples``);
- a true difference of 0.5 and 1.0 (B's quality shifted; the expected score difference, smaller by the clipping
  at the scale's ends, is estimated from 10⁶ questions and is what coverage is measured against): the power per
  benchmark and of the Overall, and the coverage.

A cell is ``ok`` when it is at most its nominal level plus two Monte Carlo errors.
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from shaberi.reports.compare import comparisons

BENCHMARKS = ("elyza", "tengu", "mt_bench", "rakuda")
ALPHA = 0.05


def judged(rng: np.random.Generator, quality: np.ndarray) -> np.ndarray:
    return np.mean([np.clip(np.rint(quality + bias + rng.normal(0, 1.2, quality.shape)), 1, 10)
                    for bias in (0.3, -0.4)], axis=0)


def sides(rng: np.random.Generator, n: int, shift: float, regime: str) -> tuple[np.ndarray, np.ndarray]:
    quality = rng.uniform(1.5, 9.5, n)
    a = judged(rng, quality)
    if regime == "skewed":
        return a, a + np.where(rng.random(n) < 0.25, 3.0, -1.0) + shift
    if regime == "ones":
        return a, a + rng.choice([-1.0, 1.0], n) + shift
    b = judged(rng, quality + shift)
    if regime == "ties":
        b = np.where(rng.random(n) < 0.6, a + shift, b)
    return a, b


def truth(shift: float, regime: str) -> float:
    """The expected score difference per question for this shift (the clipping shrinks it near the ends)."""
    if regime in ("skewed", "ones") or shift == 0:
        return shift
    rng = np.random.default_rng(123)
    a, b = sides(rng, 1_000_000, shift, regime)
    return float((b - a).mean())


def chunk(args: tuple[int, int, float, str, int]) -> dict[str, np.ndarray]:
    """``sims`` tables of four benchmarks of ``n`` questions: each row's verdict, interval and differences."""
    seed, sims, shift, regime, n = args
    rng = np.random.default_rng(seed)
    verdicts, lows, highs, diffs, ts = [], [], [], [], []
    for _ in range(sims):
        rows, d = [], []
        for bench in BENCHMARKS:
            a, b = sides(rng, n, shift, regime)
            rows.append((bench, bench, a.tolist(), b.tolist(), {}, {}, 0, True))
            d.append(b - a)
        results, m = comparisons(rows)
        assert m == 5
        verdicts.append([c.verdict for c in results])
        ts.append([c.p_t is not None and c.p_t < ALPHA / m for c in results])
        lows.append([np.nan if c.ci_low is None else c.ci_low for c in results])
        highs.append([np.nan if c.ci_high is None else c.ci_high for c in results])
        diffs.append(d)
    return {"verdict": np.array(verdicts), "low": np.array(lows), "high": np.array(highs), "d": np.array(diffs),
            "t": np.array(ts)}


def simulate(sims: int, n: int, shift: float, regime: str, workers: int, seed: int) -> dict[str, np.ndarray]:
    per = -(-sims // (4 * workers))
    jobs = [(seed + k, min(per, sims - k * per), shift, regime, n) for k in range(-(-sims // per))]
    with ProcessPoolExecutor(workers) as pool:
        parts = list(pool.map(chunk, jobs))
    return {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}


def bca(d: np.ndarray, resamples: int) -> np.ndarray:
    """The old rule on the same comparisons, as ``compare`` gave it: per benchmark, a verdict where the BCa interval
    at 1 − 0.05/4 excludes 0 (a point, the shift itself, where every question moved alike), but none on fewer than
    8 questions that moved."""
    from scipy import stats

    flat = d.reshape(-1, d.shape[-1])
    out = np.zeros(len(flat), dtype=bool)
    spread = np.ptp(flat, axis=1) > 0
    out[~spread] = flat[~spread, 0] != 0
    moves = np.flatnonzero(spread)
    step = max(1, 2_000_000 // (resamples * d.shape[-1]))
    for start in range(0, len(moves), step):
        rows = moves[start:start + step]
        ci = stats.bootstrap((flat[rows],), np.mean, axis=-1, confidence_level=1 - ALPHA / 4,
                             n_resamples=resamples, method="BCa", random_state=start).confidence_interval
        out[rows] = (ci.low > 0) | (ci.high < 0)
    out &= np.count_nonzero(flat, axis=1) >= 8
    return out.reshape(d.shape[:2])


def cell(x: np.ndarray, nominal: float, below: bool = True) -> str:
    """A rate with its Monte Carlo error, ``ok`` when within two errors of ``nominal`` on the right side."""
    rate, se = float(x.mean()), float(np.sqrt(x.mean() * (1 - x.mean()) / x.size)) if x.size else 0.0
    se = max(se, float(np.sqrt(nominal * (1 - nominal) / x.size)))  # a rate of 0 still has the nominal's error
    ok = rate <= nominal + 2 * se if below else rate >= nominal - 2 * se
    return f"{rate:.4f} ± {se:.4f} {'ok' if ok else 'NO'}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sims", type=int, default=4000)
    parser.add_argument("--power-sims", type=int, default=1000)
    parser.add_argument("--sizes", default="12,40,60,100,115")
    parser.add_argument("--regime", choices=("judges", "ties", "ones", "skewed"), default="judges")
    parser.add_argument("--bca-resamples", type=int, default=9999)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    level = ALPHA / 5
    print(f"regime {args.regime}; {args.sims} comparisons per size with no difference, {args.power_sims} with one; "
          f"4 benchmarks + Overall, each row at {level:g}")
    print("\nno true difference")
    print(f"{'n':>4}  {'false verdict / benchmark (≤ 0.01)':36} {'FWE, 4 benchmarks (≤ 0.04)':30} "
          f"{'FWE, table (≤ 0.05)':28} {'coverage, benchmarks (≥ 0.99)':32} {'coverage, Overall (≥ 0.99)':30} "
          f"{'t test: false / benchmark':30} {'t test: FWE, table':28} "
          f"{'old BCa: false / benchmark (≤ 0.0125)':38} {'old BCa: FWE (≤ 0.05)'}")
    for n in sizes:
        start = time.perf_counter()
        r = simulate(args.sims, n, 0.0, args.regime, args.workers, seed=1000 * n)
        called = np.isin(r["verdict"], ["B better", "B worse"])
        covered = (r["low"] <= 0) & (r["high"] >= 0)
        old = bca(r["d"], args.bca_resamples) if args.bca_resamples else np.zeros((1, 4), dtype=bool)
        print(f"{n:>4}  {cell(called[:, :4].ravel(), level):36} {cell(called[:, :4].any(1), 4 * level):30} "
              f"{cell(called.any(1), ALPHA):28} {cell(covered[:, :4].ravel(), 1 - level, below=False):32} "
              f"{cell(covered[:, 4], 1 - level, below=False):30} {cell(r['t'][:, :4].ravel(), level):30} "
              f"{cell(r['t'].any(1), ALPHA):28} {cell(old.ravel(), ALPHA / 4):38} "
              f"{cell(old.any(1), ALPHA)}   ({time.perf_counter() - start:.0f} s)", flush=True)
    for shift in (0.5, 1.0):
        true = truth(shift, args.regime)
        print(f"\ntrue difference: quality + {shift} (expected score difference {true:.3f})")
        print(f"{'n':>4}  {'power / benchmark':20} {'power, Overall':16} {'coverage, benchmarks (≥ 0.99)':32} "
              f"{'coverage, Overall (≥ 0.99)'}")
        for n in sizes:
            r = simulate(args.power_sims, n, shift, args.regime, args.workers, seed=1000 * n + int(10 * shift))
            covered = (r["low"] <= true) & (true <= r["high"])
            print(f"{n:>4}  {(r['verdict'][:, :4] == 'B better').mean():<20.3f} "
                  f"{(r['verdict'][:, 4] == 'B better').mean():<16.3f} "
                  f"{cell(covered[:, :4].ravel(), 1 - level, below=False):32} "
                  f"{cell(covered[:, 4], 1 - level, below=False)}", flush=True)


if __name__ == "__main__":
    main()
