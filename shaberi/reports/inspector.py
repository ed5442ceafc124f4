"""What ``shaberi inspect`` and ``shaberi report`` show, as queries over the views: no widget, no HTML.

Every query reads only the partitions of the runs asked about (``sql.connect(run_ids=…)``), and the
question list is sorted and cut in DuckDB (``LIMIT``), so a results root of a million judgement rows
opens as fast as a small one and is never held in memory. Questions come from the run's answers, so a
question that was answered but not judged (a partial run) is listed with no score, an errored answer
with its error, and a legacy import without judge replies says so instead of failing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from ..errors import UsageError
from ..tables.location import as_root
from ..tables.rows import decoded
from ..tables.selection import runs_named
from ..tables.sql import connect, query

__all__ = ["ALL_JUDGES", "SORTS", "Detail", "Inspector", "Run"]

ALL_JUDGES = "*"
# The orders a list can take (nulls last, then a stable key): inspect.rows in sql/queries/inspect.sql orders by name.
SORTS = ("score ↑", "score ↓", "difference", "pass delta", "errors")


@dataclass(frozen=True)
class Run:
    run_id: str
    model: str
    tag: str

    @property
    def label(self) -> str:
        return f"{self.model} · {self.tag}"


@dataclass
class Detail:
    benchmark: str
    question_id: str
    turns: list[str]
    reference: str | None
    criteria: str | None
    category: str | None
    answer: str | None
    reasoning: str | None
    answer_error: str | None
    finish_reason: str | None
    judgements: list[dict[str, Any]] = field(default_factory=list)  # judge, score, parse_method, judge_output, …
    passes: list[dict[str, Any]] = field(default_factory=list)  # pass_name, delta, reason, detail
    history: list[dict[str, Any]] = field(default_factory=list)  # judgements not counted: stale or superseded (lineage)


class Inspector:
    def __init__(self, results_dir: Path, tag: str | None = None, model: str | None = None) -> None:
        self.results_dir = as_root(results_dir)
        found = runs_named(results_dir, tag, model)
        self.runs = [Run(r.run_id, r.model, r.tag) for r in found]
        self._con: duckdb.DuckDBPyConnection | None = None
        self._connected: tuple[str, ...] = ()

    def con(self, *run_ids: str) -> duckdb.DuckDBPyConnection:
        """A connection over these runs' partitions only (kept while the same runs are asked about)."""
        wanted = tuple(sorted(set(run_ids)))
        if self._con is None or wanted != self._connected:
            self._con = connect(self.results_dir, None, list(wanted))
            self._connected = wanted
        return self._con

    def run(self, run_id: str) -> Run:
        return next(r for r in self.runs if r.run_id == run_id)

    def benchmarks(self, run_id: str) -> list[str]:
        return [b for (b,) in self.con(run_id).execute(query("inspect.benchmarks"), {"r": run_id}).fetchall()]

    def judges(self, run_id: str) -> list[str]:
        return [j for (j,) in self.con(run_id).execute(query("inspect.judges"), {"r": run_id}).fetchall()]

    def pools(self, run_id: str) -> list[str]:
        """The pooled rows of the run's judges: '*' (Shaberi's prompts), '* [LABEL]' per other prompt set."""
        return [p for (p,) in self.con(run_id).execute(query("inspect.pools"), {"r": run_id}).fetchall()]

    def rows(self, run_id: str, benchmark: str | None = None, judge: str = ALL_JUDGES, sort: str = "score ↑",
             compare_run: str | None = None, compare_judge: str | None = None, errors_only: bool = False,
             limit: int = 500, search: str | None = None) -> list[dict[str, Any]]:
        """One row per question: score (0–10, the judges' mean for ``*``), score without passes, pass delta,
        the difference to another run or judge, the answer's or judge's error, the question's first turn
        (``question``) and how many questions the filters match before ``limit`` (``total``).

        ``search`` keeps the question whose id it is and the questions whose prompt (any turn), answer or any
        current judge reply (or fallback reply, of any judge) holds it, case-insensitively; matched in DuckDB,
        as a parameter (``contains``, so ``%`` and ``_`` are literal)."""
        if sort not in SORTS:
            raise UsageError(f"sort {sort!r} is not one of {', '.join(SORTS)}")
        search = search.strip() if search else None
        other_run = compare_run or run_id
        other_judge = compare_judge or judge
        comparing = compare_run is not None or compare_judge is not None
        con = self.con(run_id, other_run)
        params = {"run": run_id, "judge": judge, "other_run": other_run, "other_judge": other_judge,
                  "comparing": comparing, "bench": benchmark, "errors_only": errors_only, "limit": limit, "sort": sort}
        rows = query("inspect.rows")
        if search:  # added only when asked: the unfiltered list reads no judge reply
            params["needle"] = search
            rows = rows.replace("/*matching*/", query("inspect.matching"))
        cursor = con.execute(rows, params)
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, r, strict=True)) for r in cursor.fetchall()]

    def detail(self, run_id: str, benchmark: str, question_id: str) -> Detail:
        con = self.con(run_id, *self._connected)
        key = {"run": run_id, "bench": benchmark, "q": question_id}
        q = con.execute(query("inspect.question"), key).fetchone() or ([], None, None, None)
        a = con.execute(query("inspect.answer"), key).fetchone() or (None, None, "no answer stored", None)
        detail = Detail(benchmark, question_id, list(q[0] or []), q[1], q[2], q[3], a[0], a[1], a[2], a[3])
        cursor = con.execute(query("inspect.judgements"), key)
        names = [d[0] for d in cursor.description]
        found = [dict(zip(names, r, strict=True)) for r in cursor.fetchall()]
        detail.judgements = [j for j in found if j["lineage"] == "current"]
        detail.history = [j for j in found if j["lineage"] != "current"]
        cursor = con.execute(query("inspect.passes"), key)
        detail.passes = [decoded("pass_deltas", dict(zip(("pass_name", "delta", "reason", "detail"), row, strict=True)))
                         for row in cursor.fetchall()]
        return detail
