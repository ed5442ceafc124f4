"""``shaberi compare TAG_A TAG_B``: is B better or worse than A, per benchmark, question by question?

Each question's score (0–10 scale, averaged over the chosen judges and over the runs of a tag) is paired
across the two tags. Per benchmark: the mean difference B − A, a paired bootstrap 95 % interval
(scipy.stats.bootstrap, BCa), the Wilcoxon signed-rank and paired t tests (scipy), both Holm-corrected
across benchmarks (statsmodels ``multipletests``), and the smallest difference a paired t test would
detect with 80 % power at α = 0.05 for that many questions (statsmodels ``TTestPower``). The verdict
uses the Holm-corrected Wilcoxon p-value: per-question judge scores are ordinal and rarely normal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from .errors import UsageError
from .sql import connect, find_runs

__all__ = ["Comparison", "compare"]


@dataclass
class Comparison:
    benchmark: str
    title: str
    n: int
    mean_a: float | None = None
    mean_b: float | None = None
    diff: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    p_wilcoxon: float | None = None
    p_wilcoxon_holm: float | None = None
    p_t: float | None = None
    p_t_holm: float | None = None
    mde: float | None = None  # smallest |difference| detectable at 80 % power
    verdict: str = ""


def _runs(results_dir: Path, tag: str, model: str | None) -> list[str]:
    found = find_runs(results_dir, "(tag = $tag OR base_tag = $tag) AND ($model IS NULL OR model = $model)",
                      {"tag": tag, "model": model})
    exact = [r for r in found if r[2] == tag]
    chosen = exact or [r for r in found if r[3] == tag]
    if not chosen:
        raise UsageError(f"no run tagged {tag!r}{f' for model {model!r}' if model else ''} under {results_dir}")
    models = sorted({r[1] for r in chosen})
    if len(models) > 1:
        raise UsageError(f"tag {tag!r} holds several models ({', '.join(models)}); choose one with --model")
    return [r[0] for r in chosen]


def compare(results_dir: Path, tag_a: str, tag_b: str, model: str | None = None, judge: str | None = None,
            seed: int = 0) -> list[Comparison]:
    import numpy as np
    from scipy import stats
    from statsmodels.stats.multitest import multipletests
    from statsmodels.stats.power import TTestPower

    runs_a, runs_b = _runs(results_dir, tag_a, model), _runs(results_dir, tag_b, model)
    con = connect(results_dir, None, runs_a + runs_b)
    rows = con.execute(
        """
        WITH per_q AS (
            SELECT benchmark, question_id, list_contains($a, run_id) AS is_a, avg(score_10) AS score
            FROM scores WHERE strategy = '' AND score_10 IS NOT NULL AND ($judge IS NULL OR judge = $judge)
            GROUP BY ALL
        )
        SELECT a.benchmark, b.title, list(a.score ORDER BY a.question_id), list(c.score ORDER BY a.question_id)
        FROM per_q a JOIN per_q c ON c.benchmark = a.benchmark AND c.question_id = a.question_id
                                 AND a.is_a AND NOT c.is_a
        JOIN benchmark_info b ON b.benchmark = a.benchmark
        GROUP BY a.benchmark, b.title, b.position ORDER BY b.position
        """, {"a": runs_a, "judge": judge}).fetchall()
    if not rows:
        raise UsageError(f"tags {tag_a!r} and {tag_b!r} share no scored question"
                         f"{f' for judge {judge!r}' if judge else ''}; nothing to compare")
    results = []
    for bench, title, scores_a, scores_b in rows:
        a, b = np.asarray(scores_a), np.asarray(scores_b)
        d = b - a
        c = Comparison(bench, title, len(d), float(a.mean()), float(b.mean()), float(d.mean()))
        if len(d) >= 2 and np.ptp(d) > 0:
            boot = stats.bootstrap((d,), np.mean, confidence_level=0.95, n_resamples=9999, method="BCa",
                                   random_state=seed)
            c.ci_low, c.ci_high = float(boot.confidence_interval.low), float(boot.confidence_interval.high)
            c.p_t = float(stats.ttest_rel(b, a).pvalue)
            effect = TTestPower().solve_power(nobs=len(d), alpha=0.05, power=0.8, alternative="two-sided")
            c.mde = float(effect * d.std(ddof=1))
        else:  # every question moved by the same amount (often 0): no spread to test against
            c.ci_low = c.ci_high = c.diff
            c.p_t = 1.0 if c.diff == 0 else 0.0
        c.p_wilcoxon = float(stats.wilcoxon(d).pvalue) if np.any(d != 0) else 1.0
        results.append(c)
    for attr in ("p_wilcoxon", "p_t"):
        adjusted = multipletests([getattr(c, attr) for c in results], alpha=0.05, method="holm")[1]
        for c, p in zip(results, adjusted, strict=True):
            setattr(c, f"{attr}_holm", float(p))
    for c in results:
        if c.p_wilcoxon_holm is not None and c.p_wilcoxon_holm < 0.05:
            c.verdict = "B better" if c.diff > 0 else "B worse"
        else:
            c.verdict = "n.s."
        if c.n < 2 or (c.mde is not None and math.isnan(c.mde)):
            c.mde = None
    return results
