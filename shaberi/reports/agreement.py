"""How far several judges agree on the same answers: what the report and the notebook show.

An answer is a unit (run, benchmark, question, sample); each judge's current score of it (0–10, before
pass deltas: passes are not the judges' opinion) is one rating. Three figures, each from a maintained
package:

- Krippendorff's α (``krippendorff``, interval level): chance-corrected agreement of all judges at once;
  it takes missing ratings, so an answer one judge failed on still counts for the others. Pooled over
  benchmarks and per benchmark.
- Spearman's ρ per pair of judges (``scipy.stats.spearmanr``) on the answers both scored.
- Per judge, the mean difference from the other judges on the same answers (its score minus their mean),
  with a 95 % t-interval (``scipy.stats.t``): which judge is harsher, and by how much.

With fewer than two judges there is nothing to compare: every function returns empty results.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import duckdb

from ..tables.sql import query

__all__ = ["Agreement", "agreement", "ratings"]


@dataclass
class Agreement:
    judges: list[str]
    answers: int  # units scored by at least two judges
    alpha: float | None  # Krippendorff's α, interval level, all benchmarks
    alpha_by_benchmark: dict[str, float | None] = field(default_factory=dict)
    # judge_a, judge_b, answers, spearman, mean_difference (b − a)
    pairs: list[dict[str, Any]] = field(default_factory=list)
    bias: list[dict[str, Any]] = field(default_factory=list)  # judge, answers, mean_difference, ci_low, ci_high


def ratings(con: duckdb.DuckDBPyConnection, run_ids: list[str]) -> list[tuple[str, str, str, float | None]]:
    """(unit, benchmark, judge, 0–10 score without passes) for every current judgement of these runs' raw
    answers; a null score (a failed call, an unparsed reply) is a missing rating."""
    return con.execute(query("reports.ratings"), {"ids": run_ids}).fetchall()


def agreement(rows: list[tuple[str, str, str, float | None]]) -> Agreement:
    """The three figures from ``ratings`` rows."""
    judges = sorted({j for _, _, j, _ in rows})
    table: dict[str, dict[str, float]] = {}
    bench_of: dict[str, str] = {}
    for unit, bench, judge, score in rows:
        bench_of[unit] = bench
        if score is not None:
            table.setdefault(unit, {})[judge] = float(score)
    shared = {u: s for u, s in table.items() if len(s) > 1}
    result = Agreement(judges, len(shared), None)
    if len(judges) < 2 or not shared:
        return result
    result.alpha = _alpha(judges, list(shared.values()))
    for bench in sorted({bench_of[u] for u in shared}):
        result.alpha_by_benchmark[bench] = _alpha(judges, [s for u, s in shared.items() if bench_of[u] == bench])
    from scipy import stats

    for a, b in combinations(judges, 2):
        both = [(s[a], s[b]) for s in shared.values() if a in s and b in s]
        rho = None
        if len(both) > 2 and len({x for x, _ in both}) > 1 and len({y for _, y in both}) > 1:
            rho = float(stats.spearmanr([x for x, _ in both], [y for _, y in both]).statistic)
        result.pairs.append({"judge_a": a, "judge_b": b, "answers": len(both), "spearman": rho,
                             "mean_difference": sum(y - x for x, y in both) / len(both) if both else None})
    for judge in judges:
        diffs = [s[judge] - sum(v for k, v in s.items() if k != judge) / (len(s) - 1)
                 for s in shared.values() if judge in s]
        row = {"judge": judge, "answers": len(diffs), "mean_difference": None, "ci_low": None, "ci_high": None}
        if diffs:
            mean = sum(diffs) / len(diffs)
            row["mean_difference"] = mean
            if len(diffs) > 1:
                sem = stats.sem(diffs)
                if sem > 0:
                    row["ci_low"], row["ci_high"] = (float(x) for x in stats.t.interval(0.95, len(diffs) - 1,
                                                                                         loc=mean, scale=sem))
                else:
                    row["ci_low"] = row["ci_high"] = mean
        result.bias.append(row)
    return result


def _alpha(judges: list[str], units: list[dict[str, float]]) -> float | None:
    """Krippendorff's α (interval) of judges × units; None where it is undefined (every rating the same)."""
    import krippendorff
    import numpy as np

    data = np.array([[u.get(j, np.nan) for u in units] for j in judges], dtype=float)
    values = data[~np.isnan(data)]
    if len(units) < 2 or len(set(values.tolist())) < 2:
        return None
    return float(krippendorff.alpha(reliability_data=data, level_of_measurement="interval"))
