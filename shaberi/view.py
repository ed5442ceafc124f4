"""What ``shaberi view`` (``view-scores``) shows, as plain rows: the CLI only renders them.

One run (``--tag T`` naming a run): per-benchmark scores on the 0–10 scale and the overall. A family
of runs (``--tag T`` with runs ``T-run1 … T-runN``; ``--runs N`` keeps the first N): per benchmark the
mean, sample sd, 95 % t-interval, range and, from statsmodels, the standard error of the mean clustered
by question across runs (how much of the spread is the same questions scoring differently; asked for
with ``clustered``, because statsmodels takes a second to import). Then token
usage and estimated cost by stage. A benchmark that was not run, or has no score, says so: never 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from .errors import UsageError
from .sql import connect, find_runs

__all__ = ["Report", "build", "clustered_se"]

ALL_JUDGES = "*"


@dataclass
class Section:
    model: str
    judge: str
    runs: list[str]
    columns: list[str]
    rows: list[list] = field(default_factory=list)


@dataclass
class Report:
    tag: str
    multi: bool
    sections: list[Section]
    token_columns: list[str]
    tokens: list[list]


def clustered_se(scores: list[float], clusters: list[str]) -> float | None:
    """SE of the mean of ``scores`` with observations grouped by ``clusters`` (statsmodels OLS on a
    constant, cluster-robust covariance)."""
    if len(scores) < 2 or len(set(clusters)) < 2:
        return None
    import numpy as np
    from statsmodels.regression.linear_model import OLS  # about a second to import: only when asked for

    groups = np.unique(np.asarray(clusters), return_inverse=True)[1]
    fit = OLS(np.asarray(scores, dtype=float), np.ones(len(scores))).fit(cov_type="cluster",
                                                                         cov_kwds={"groups": groups})
    return float(fit.bse[0])


def build(results_dir: Path, tag: str, runs: int | None = None, model: str | None = None, judge: str | None = None,
          pricing: Path | None = None, clustered: bool = False) -> Report:
    found = find_runs(results_dir, "(tag = $tag OR base_tag = $tag) AND ($model IS NULL OR model = $model)",
                      {"tag": tag, "model": model})
    exact = [r for r in found if r[2] == tag]
    family = [r for r in found if r[2] != tag and r[3] == tag]
    if runs is not None:
        family = [r for r in family if r[4] <= runs]
    chosen = family if family and (runs is not None or not exact) else exact
    if not chosen:
        tags = sorted({r[2] for r in find_runs(results_dir, "true", {})})
        raise UsageError(f"no run tagged {tag!r}{f' for model {model!r}' if model else ''} under {results_dir}"
                         f"; tags there: {', '.join(tags) or 'none'}")
    multi = chosen is family
    con = connect(results_dir, pricing, [r[0] for r in chosen])  # read only the chosen runs' partitions
    if multi and runs is not None and len({r[4] for r in chosen}) < runs:
        raise UsageError(f"--runs {runs} asked for, but only {len({r[4] for r in chosen})} runs of {tag!r} exist")
    sections = []
    for m in dict.fromkeys(r[1] for r in chosen):
        run_ids = [r[0] for r in chosen if r[1] == m]
        for j in _judges(con, run_ids, judge):
            sections.append(_multi(con, m, j, run_ids, tag, clustered) if multi else _single(con, m, j, run_ids[0]))
    token_cols = ["stage", "requests", "cached_requests", "prompt_tokens", "completion_tokens", "cost_usd", "priced"]
    tokens = con.execute(
        "SELECT stage, sum(requests), sum(cached_requests), sum(prompt_tokens), sum(completion_tokens), "
        "sum(cost_usd), bool_and(priced) FROM cost WHERE list_contains($ids, run_id) GROUP BY stage ORDER BY stage",
        {"ids": [r[0] for r in chosen]}).fetchall()
    return Report(tag, multi, sections, token_cols, [list(t) for t in tokens])


def _judges(con: duckdb.DuckDBPyConnection, run_ids: list[str], judge: str | None) -> list[str]:
    present = [j for (j,) in con.execute(
        "SELECT DISTINCT judge FROM benchmark_scores WHERE list_contains($ids, run_id) AND judge <> '*' ORDER BY 1",
        {"ids": run_ids}).fetchall()]
    if judge is not None:
        if judge not in present and judge != ALL_JUDGES:
            raise UsageError(f"judge {judge!r} has no judgements in these runs; judges there: "
                             f"{', '.join(present) or 'none'}")
        return [judge]
    return present if len(present) == 1 else [ALL_JUDGES]  # several judges: their rows pooled


def _benchmarks(con: duckdb.DuckDBPyConnection, run_ids: list[str]) -> list[tuple[str, str]]:
    """The core benchmarks always (a missing one shows as not run), others when they were run."""
    return con.execute(
        "SELECT benchmark, title FROM benchmark_info WHERE in_overall OR benchmark IN "
        "(SELECT DISTINCT benchmark FROM questions WHERE list_contains($ids, run_id)) ORDER BY position",
        {"ids": run_ids}).fetchall()


def _single(con: duckdb.DuckDBPyConnection, model: str, judge: str, run_id: str) -> Section:
    section = Section(model, judge, [run_id], ["benchmark", "score", "baseline", "n", "null", "errors", "note"])
    got = {r[0]: r[1:] for r in con.execute(
        "SELECT benchmark, score, baseline_score, n, n_null, n_error + n_judge_error FROM benchmark_scores "
        "WHERE run_id = $run AND judge = $judge", {"run": run_id, "judge": judge}).fetchall()}
    for bench, title in _benchmarks(con, [run_id]):
        if bench not in got:
            section.rows.append([title, None, None, 0, 0, 0, "not run"])
            continue
        score, baseline, n, null, errors = got[bench]
        note = "no scores" if score is None else ("with pass deltas" if baseline != score else "")
        section.rows.append([title, score, baseline, n, null, errors, note])
    overall = con.execute("SELECT overall, baseline_overall, complete FROM run_scores WHERE run_id = $run AND judge = "
                          "$judge", {"run": run_id, "judge": judge}).fetchone()
    if overall:
        section.rows.append(["Overall", overall[0], overall[1], None, None, None,
                             "" if overall[2] else "not every benchmark has a score"])
    else:
        section.rows.append(["Overall", None, None, None, None, None, "no scores"])
    return section


def _multi(con: duckdb.DuckDBPyConnection, model: str, judge: str, run_ids: list[str], tag: str,
           clustered: bool) -> Section:
    section = Section(model, judge, run_ids,
                      ["benchmark", "mean", "std_dev", "ci_low", "ci_high", "min", "max", "runs", "se_clustered",
                       "baseline_mean"])
    stats = {r[0]: r[1:] for r in con.execute(
        "SELECT benchmark, mean, sd, ci_low, ci_high, min, max, runs, baseline_mean FROM multi_run_stats "
        "WHERE base_tag = $tag AND "
        "model = $model AND judge = $judge", {"tag": tag, "model": model, "judge": judge}).fetchall()}
    per_question = con.execute(
        "SELECT benchmark, question_id, score_10 FROM scores WHERE list_contains($ids, run_id) AND strategy = '' "
        "AND score_10 IS NOT NULL AND ($judge = '*' OR judge = $judge)", {"ids": run_ids, "judge": judge}).fetchall(
    ) if clustered else []
    for bench, title in [*_benchmarks(con, run_ids), ("overall", "Overall")]:
        if bench not in stats:
            section.rows.append([title, None, None, None, None, None, None, 0, None, None])
            continue
        rows = [(q, s) for b, q, s in per_question if b == bench]
        se = clustered_se([s for _, s in rows], [q for q, _ in rows]) if rows else None
        *values, baseline = stats[bench]
        section.rows.append([title, *values, se, baseline])
    return section
