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

import duckdb

from ..errors import UsageError
from ..tables.location import as_root
from ..tables.rows import decoded
from ..tables.selection import find_runs, require_root
from ..tables.sql import connect

__all__ = ["ALL_JUDGES", "SORTS", "Detail", "Inspector", "Run"]

ALL_JUDGES = "*"
SORTS = {  # name -> ORDER BY (nulls last, then a stable key)
    "score ↑": "score ASC NULLS LAST",
    "score ↓": "score DESC NULLS LAST",
    "difference": "abs(difference) DESC NULLS LAST",
    "pass delta": "pass_delta ASC NULLS LAST",
    "errors": "error IS NULL, score ASC NULLS LAST",
}


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
    judgements: list[dict] = field(default_factory=list)  # judge, score, parse_method, judge_output, …
    passes: list[dict] = field(default_factory=list)  # pass_name, delta, reason, detail
    history: list[dict] = field(default_factory=list)  # judgements not counted: stale or superseded (lineage)


class Inspector:
    def __init__(self, results_dir: Path, tag: str | None = None, model: str | None = None) -> None:
        self.results_dir = as_root(results_dir)
        found = find_runs(results_dir, tag, model=model)
        if not found:
            require_root(results_dir)
            raise UsageError(f"no runs under {results_dir}"
                             f"{f' tagged {tag!r}' if tag else ''}{f' for model {model!r}' if model else ''}; "
                             "check --results-dir, --tag and --model")
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
        return [b for (b,) in self.con(run_id).execute(
            "SELECT benchmark FROM answers WHERE run_id = $r UNION SELECT benchmark FROM judgements WHERE run_id = $r "
            "ORDER BY 1", {"r": run_id}).fetchall()]

    def judges(self, run_id: str) -> list[str]:
        return [j for (j,) in self.con(run_id).execute(
            "SELECT DISTINCT judge FROM judgements WHERE run_id = ? ORDER BY 1", [run_id]).fetchall()]

    def pools(self, run_id: str) -> list[str]:
        """The pooled rows of the run's judges: '*' (Shaberi's prompts), '* [LABEL]' per other prompt set."""
        return [p for (p,) in self.con(run_id).execute(
            "SELECT DISTINCT pooled_judge(judge) FROM judgements WHERE run_id = ? ORDER BY 1", [run_id]).fetchall()]

    def rows(self, run_id: str, benchmark: str | None = None, judge: str = ALL_JUDGES, sort: str = "score ↑",
             compare_run: str | None = None, compare_judge: str | None = None, errors_only: bool = False,
             limit: int = 500, search: str | None = None) -> list[dict]:
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
                  "comparing": comparing, "bench": benchmark, "errors_only": errors_only, "limit": limit}
        matching = ""
        if search:  # added only when asked: the unfiltered list reads no judge reply
            params["needle"] = search
            matching = """
              AND (lower(k.question_id) = lower($needle)
                   OR coalesce(contains(lower(array_to_string(qq.turns, chr(10))), lower($needle))
                            OR contains(lower(a.content), lower($needle)), false)
                   OR EXISTS (SELECT 1 FROM judgements j
                              WHERE j.run_id = $run AND j.benchmark = k.benchmark AND j.question_id = k.question_id
                                AND j.strategy = '' AND j.sample_index = 0
                                AND coalesce(contains(lower(j.judge_output), lower($needle))
                                             OR contains(lower(j.fallback_output), lower($needle)), false)))"""
        query = f"""
            WITH per AS (
                SELECT run_id, benchmark, question_id, avg(score_10) AS score,
                       avg(original_score_10) AS original, any_value(error) FILTER (WHERE error IS NOT NULL) AS jerr
                FROM scores WHERE strategy = '' AND sample_index = 0
                  AND (judge = $judge OR pooled_judge(judge) = $judge)
                GROUP BY ALL
            ), other AS (
                SELECT benchmark, question_id, avg(score_10) AS score FROM scores
                WHERE run_id = $other_run AND strategy = '' AND sample_index = 0
                  AND (judge = $other_judge OR pooled_judge(judge) = $other_judge) GROUP BY ALL
            ), keys AS (  -- answered or judged: a partial run shows what it has
                SELECT benchmark, question_id FROM answers WHERE run_id = $run AND strategy = '' AND sample_index = 0
                UNION
                SELECT benchmark, question_id FROM judgements WHERE run_id = $run AND strategy = '' AND sample_index = 0
            )
            SELECT k.benchmark, k.question_id, p.score, p.original, p.score - p.original AS pass_delta,
                   CASE WHEN $comparing THEN o.score - p.score END AS difference,
                   CASE WHEN $comparing THEN o.score END AS other_score, coalesce(a.error, p.jerr) AS error,
                   qq.turns[1] AS question, count(*) OVER () AS total
            FROM keys k
            LEFT JOIN answers a ON a.run_id = $run AND a.benchmark = k.benchmark AND a.question_id = k.question_id
                               AND a.strategy = '' AND a.sample_index = 0
            LEFT JOIN questions qq ON qq.run_id = $run AND qq.benchmark = k.benchmark AND qq.question_id = k.question_id
            LEFT JOIN per p ON p.run_id = $run AND p.benchmark = k.benchmark AND p.question_id = k.question_id
            LEFT JOIN other o ON o.benchmark = k.benchmark AND o.question_id = k.question_id
            WHERE ($bench IS NULL OR k.benchmark = $bench)
              AND (NOT $errors_only OR coalesce(a.error, p.jerr) IS NOT NULL){matching}
            ORDER BY {SORTS[sort]}, k.benchmark, length(k.question_id), k.question_id
            LIMIT $limit"""
        cursor = con.execute(query, params)
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, r, strict=True)) for r in cursor.fetchall()]

    def detail(self, run_id: str, benchmark: str, question_id: str) -> Detail:
        con = self.con(run_id, *self._connected)
        key = {"run": run_id, "bench": benchmark, "q": question_id}
        q = con.execute("SELECT turns, reference, criteria, category FROM questions WHERE run_id = $run AND "
                        "benchmark = $bench AND question_id = $q", key).fetchone() or ([], None, None, None)
        a = con.execute("SELECT content, reasoning, error, finish_reason FROM answers WHERE run_id = $run AND "
                        "benchmark = $bench AND question_id = $q AND strategy = '' AND sample_index = 0",
                        key).fetchone() or (None, None, "no answer stored", None)
        detail = Detail(benchmark, question_id, list(q[0] or []), q[1], q[2], q[3], a[0], a[1], a[2], a[3])
        cursor = con.execute(
            "SELECT judge, score, score_scale, parse_method, judge_output, fallback_output, error, prompt_hash, "
            "lineage FROM judgement_history WHERE run_id = $run AND benchmark = $bench AND question_id = $q "
            "AND strategy = '' AND sample_index = 0 ORDER BY judge, created_at DESC", key)
        names = [d[0] for d in cursor.description]
        found = [dict(zip(names, r, strict=True)) for r in cursor.fetchall()]
        detail.judgements = [j for j in found if j["lineage"] == "current"]
        detail.history = [j for j in found if j["lineage"] != "current"]
        cursor = con.execute(
            "SELECT pass_name, delta, reason, detail FROM pass_deltas WHERE run_id = $run AND benchmark = $bench "
            "AND question_id = $q AND strategy = '' AND sample_index = 0 ORDER BY pass_name", key)
        detail.passes = [decoded("pass_deltas", dict(zip(("pass_name", "delta", "reason", "detail"), row, strict=True)))
                         for row in cursor.fetchall()]
        return detail
