"""The question-level interval of a number ``view`` and ``report`` show: a benchmark's score or the Overall, of one
run or of a family's complete runs, with its standard error clustered by question (the same question scored in
several runs, and by several judges, is one cluster).

A benchmark's number is a mean of means: per run the mean of its rows (every judge's, pooled, or one judge's),
averaged over the runs. As a linear estimator it is a weighted mean, each row weighted 1 / (runs × the rows of its
run): statsmodels' WLS on a constant with those weights gives exactly that number, and its cluster-robust
(sandwich, CR1) standard error by question, with Student's t at questions − 1 degrees of freedom (for one run
judged alike on every question this is the t-interval over the questions' means). The Overall is the mean of its
benchmarks' numbers; no question is in two benchmarks, so their errors are independent and its variance is the sum
of theirs ÷ benchmarks², with Welch–Satterthwaite's degrees of freedom. Either way the SE of the number shown, not of
the pooled rows' mean (which weighs a run with more scored questions more, and is centred elsewhere).

An interval reaching beyond the scale (ELYZA's 2–10 on the 0–10 scale; the Overall's, the mean of its benchmarks')
is clipped to it and says so (``clipped``), as ``multi_run_stats`` clips a family's interval over runs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import duckdb

from ..tables.sql import SCORE_DIGITS, query
from .verdict import satterthwaite

__all__ = ["QuestionInterval", "question_intervals"]

LEVEL = 0.95


@dataclass(frozen=True)
class QuestionInterval:
    mean: float  # the number shown (the fit's own, equal to the view's to rounding)
    se: float
    low: float
    high: float
    clusters: int  # questions
    df: float
    clipped: bool = False  # the interval reached beyond the scale and was cut at its end


def question_intervals(con: duckdb.DuckDBPyConnection, run_ids: list[str], judge: str
                       ) -> dict[str, QuestionInterval]:
    """Per benchmark (and ``overall``, over the benchmarks that count in it) of ``run_ids`` (a run, or a family's
    counted runs), for ``judge`` ('*': every judge pooled; '* [LABEL]': those under that prompt set): the shown
    mean's question-clustered SE and interval.
    A benchmark with fewer than two questions has none, and then neither has the Overall."""
    rows = con.execute(query("reports.question_scores"), {"ids": run_ids, "judge": judge}).fetchall()
    import numpy as np
    from scipy import stats
    from statsmodels.regression.linear_model import WLS  # about a second to import: only when asked for

    by_benchmark: dict[str, list[tuple]] = {}
    for r in rows:
        by_benchmark.setdefault(r[0], []).append(r)
    out: dict[str, QuestionInterval] = {}

    def interval(name: str, mean: float, se: float, df: float, questions: int, bottom: float, top: float) -> None:
        half = float(stats.t.ppf(0.5 + LEVEL / 2, df)) * se
        out[name] = QuestionInterval(mean, se, max(mean - half, bottom), min(mean + half, top), questions, df,
                                     mean - half < bottom or mean + half > top)

    for bench, found in by_benchmark.items():
        per_run: dict[str, int] = {}
        for r in found:
            per_run[r[1]] = per_run.get(r[1], 0) + 1
        questions = np.unique(np.array([r[2] for r in found]), return_inverse=True)[1]
        if questions.max() < 1:  # one question: no spread over questions to measure
            continue
        weights = np.array([1.0 / (len(per_run) * per_run[r[1]]) for r in found])
        fit = WLS(np.array([r[3] for r in found], dtype=float), np.ones(len(found)), weights=weights).fit(
            cov_type="cluster", cov_kwds={"groups": questions}, use_t=True)
        interval(bench, float(fit.params[0]), float(fit.bse[0]), float(questions.max()), int(questions.max()) + 1,
                 found[0][5], found[0][6])
    core = [b for b, found in by_benchmark.items() if found[0][4]]
    if core and all(b in out for b in core):  # the mean of the benchmarks' numbers, their errors independent
        parts = [out[b] for b in core]
        variances = [(p.se / len(core)) ** 2 for p in parts]
        df = satterthwaite(variances, [p.df for p in parts])
        interval("overall", sum(p.mean for p in parts) / len(core), sum(variances) ** 0.5, df,
                 sum(p.clusters for p in parts), sum(by_benchmark[b][0][5] for b in core) / len(core),
                 sum(by_benchmark[b][0][6] for b in core) / len(core))
    return {name: replace(q, mean=round(q.mean, SCORE_DIGITS), se=round(q.se, SCORE_DIGITS),
                          low=round(q.low, SCORE_DIGITS), high=round(q.high, SCORE_DIGITS))
            for name, q in out.items()}  # rounded as every printed score is
