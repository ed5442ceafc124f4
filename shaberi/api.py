"""The results root from Python, for notebooks: ``r = shaberi.open("results")``, then polars DataFrames.

Every method reads the same DuckDB views as ``shaberi sql`` and ``shaberi view`` (``sql/*.sql``), so a number
here is the number the command line prints. Results come from DuckDB as Arrow and become polars frames
without a copy through pandas. ``tag`` selects runs as every command does (``tables.selection``): a tag
(the run with that tag, or its family ``{tag}-run1 … N``), ``MODEL@TAG``, or a comma list of them; ``model``
narrows to one model; ``judge`` to one judge (``"*"`` in the pooled views means every judge together).

    >>> r = shaberi.open("results")
    >>> r.runs()                                   # one row per run
    >>> r.benchmark_scores(tag="v1", judge="*")    # per run and benchmark, 0-10
    >>> r.multi_run_stats(tag="v1")                # mean over a family's runs, t-interval
    >>> r.compare("v1", "v2")                      # paired, like for like
    >>> r.compare("base-model@v1", "my-org/my-model@v1")  # two models on the same questions
    >>> r.category_scores(tag="v1", judge="*")     # per category: each question once, then its mean
    >>> r.run_status(tag="v1")                     # ok / partial / failed / interrupted, per benchmark and stage
    >>> r.agreement(tag="v1")                      # judges against judges: Krippendorff's α, Spearman
    >>> r.pairwise_ratings(tags=["v1", "v2", "v3"])  # head to head (shaberi pairwise): ratings, intervals
    >>> r.sql("SELECT judge, avg(score) FROM judgements GROUP BY ALL")
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import UsageError
from .tables.failures import storage_errors
from .tables.location import as_root
from .tables.reader import queries_only
from .tables.selection import find_runs, parse_selectors, select
from .tables.sql import connect, query

if TYPE_CHECKING:
    import duckdb
    import polars as pl

    from .reports.agreement import Agreement

__all__ = ["Results", "open"]


def open(root: str | Path = "results") -> Results:  # shaberi.open, as a user writes it
    """The results root at ``root`` (the folder holding ``tables/``)."""
    path = as_root(root)
    if not (path / "tables").is_dir():
        raise FileNotFoundError(f"{path} holds no tables/: not a Shaberi results root (shaberi run --results-dir)")
    return Results(path)


class Results:
    """A results root. Each call opens the views over the runs it asks for; nothing is cached between calls,
    so a run still writing is seen as it is now."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def sql(self, query: str, params: dict[str, Any] | None = None, tag: str | None = None,
            model: str | None = None) -> pl.DataFrame:
        """Any query over the tables and views, restricted to ``tag``'s runs when given; it only reads, as
        ``shaberi sql`` does (``tables.reader``): anything else is a ``UsageError``."""
        con = self._con(tag, model, read_only=True)
        queries_only(con, query)
        return _frame(con, query, params)

    def _query(self, query: str, tag: str | None, model: str | None) -> pl.DataFrame:
        return _frame(self._con(tag, model), query)

    def runs(self, tag: str | None = None, model: str | None = None) -> pl.DataFrame:
        """One row per run: model, tag, family, status, judges, datasets, timings."""
        return self._query(query("reports.runs"), tag, model)

    def answers(self, tag: str | None = None, model: str | None = None) -> pl.DataFrame:
        """Every current answer with its question (the judged text, its hash, errors, tokens)."""
        return self._query(query("reports.answers"), tag, model)

    def judgements(self, tag: str | None = None, model: str | None = None, judge: str | None = None,
                   history: bool = False) -> pl.DataFrame:
        """The judgements that count (the judge's reply, score, parse method, reason); ``history``: every stored
        row with its lineage (current, stale, superseded) instead."""
        view = "judgement_history" if history else "judgements"
        return self._judged(view, tag, model, judge)

    def scores(self, tag: str | None = None, model: str | None = None, judge: str | None = None) -> pl.DataFrame:
        """Per answer and judge: the judge's score, the pass deltas, the final score and its 0-10 form."""
        return self._judged("scores", tag, model, judge)

    def benchmark_scores(self, tag: str | None = None, model: str | None = None,
                         judge: str | None = None) -> pl.DataFrame:
        """Per run, benchmark and judge (``*``: all pooled): the score (0-10), n, nulls, errors, not judged, as
        ``shaberi view`` shows them."""
        return self._judged("benchmark_scores", tag, model, judge)

    def multi_run_stats(self, tag: str | None = None, model: str | None = None,
                        judge: str | None = None) -> pl.DataFrame:
        """Per family (base tag), benchmark and judge: the mean over complete runs, its t-interval and spread."""
        con = self._con(tag, model)
        return _frame(con, query("reports.multi_run_stats"), {"judge": judge})

    def run_status(self, tag: str | None = None, model: str | None = None) -> pl.DataFrame:
        """Per run and benchmark: its status and each stage's (``run_status``: the rules of ``sql/005_status.sql``);
        ``benchmark`` null: the run itself as readers show it (``interrupted`` when no process writes a run that
        says running)."""
        return self._query(query("reports.run_status"), tag, model)

    def category_scores(self, tag: str | None = None, model: str | None = None,
                        judge: str | None = None) -> pl.DataFrame:
        """Per model, base tag, judge pool (``*``: Shaberi's prompts), benchmark and category: the mean of the
        category's questions' scores, each question first averaged over its judges and runs (``category_scores``,
        the rule the HTML report uses), with n questions."""
        return self._judged("category_scores", tag, model, judge)

    def agreement(self, tag: str | None = None, model: str | None = None) -> Agreement:
        """How far the judges agree on the same answers (``reports.agreement``): Krippendorff's α, Spearman per
        pair of judges, each judge's mean difference from the others with its interval."""
        from .reports.agreement import agreement, ratings

        con = self._con(tag, model)
        run_ids = [r for (r,) in con.execute(query("reports.run_ids")).fetchall()]
        return agreement(ratings(con, run_ids))

    def compare(self, a: str, b: str, model: str | None = None, judge: str | None = None,
                model_a: str | None = None, model_b: str | None = None, judge_a: str | None = None,
                judge_b: str | None = None) -> pl.DataFrame:
        """Side ``b`` against the baseline ``a``, paired per question and like for like (``shaberi compare``): each a
        tag or ``MODEL@TAG`` (or the tag with ``model_a`` / ``model_b``; ``model`` for both), of one model or two;
        ``judge_a`` / ``judge_b``: each side's judge. One row per benchmark, then the Overall (two or more
        benchmarks), with both sides' labels, the difference, the deciding test's p-value and interval at the
        verdict's level, and the verdict (``reports.verdict``); ``shaberi compare --format json`` adds its notes."""
        import polars as pl

        from .reports.compare import compare

        report = compare(self.root, a, b, model=model, judge=judge, model_a=model_a, model_b=model_b, judge_a=judge_a,
                         judge_b=judge_b)
        rows = [{"a": report.label_a, "b": report.label_b} | asdict(c)
                | {"dropped_a": sum(c.dropped_a.values()), "dropped_b": sum(c.dropped_b.values())}
                for c in report.benchmarks]  # questions without a score on each side (the reasons: compare)
        return pl.DataFrame(rows)

    def pairwise_ratings(self, tags: list[str] | None = None, judge: str | None = None) -> pl.DataFrame:
        """The latest Bradley–Terry ratings of ``shaberi pairwise`` (the ``pairwise_ratings`` view): per job, judge,
        benchmark (``*``: all together) and tag, the rating, its 95 % bootstrap interval (``inf``: open on that
        side), comparisons and win rate, with what tells the jobs apart: ``design``, ``anchor``, ``benchmarks``
        and each run's ``compared_with``. ``tags``: only the jobs that rated exactly these tags' runs."""
        runs = None
        if tags is not None:
            from .pairwise.stage import sides
            from .tables.store import Store

            runs = [s.run_id for s in sides(Store(self.root), tags)]
        return _frame(connect(self.root), query("pairwise.all_ratings"), {"runs": runs, "judge": judge})

    def _judged(self, view: str, tag: str | None, model: str | None, judge: str | None) -> pl.DataFrame:
        return _frame(self._con(tag, model), query(f"reports.{view}"), {"judge": judge})

    def _con(self, tag: str | None, model: str | None, read_only: bool = False) -> duckdb.DuckDBPyConnection:
        if tag is None:
            run_ids = None
            if model is not None:
                run_ids = [r.run_id for r in find_runs(self.root, model=model)]
            return connect(self.root, run_ids=run_ids, read_only=read_only)
        run_ids = [r for s in parse_selectors(self.root, tag, model) for r in select(self.root, s).run_ids]
        return connect(self.root, run_ids=list(dict.fromkeys(run_ids)), read_only=read_only)


def _frame(con: duckdb.DuckDBPyConnection, query: str, params: dict[str, Any] | None = None) -> pl.DataFrame:
    import polars as pl

    with storage_errors():
        relation = con.sql(query, params=params or None)
        if relation is None:  # no statement that returns rows (an empty query, a SET)
            raise UsageError(f"{query!r} returns no rows to read; give a query that does")
        frame = pl.from_arrow(relation.to_arrow_table())  # a relation: no row copy
    assert isinstance(frame, pl.DataFrame)
    return frame
