"""Honest statuses: what a run, a stage and a benchmark came to.

The rules live in SQL (``sql/005_status.sql``: the words and how they combine; ``sql/020_coverage.sql``: the
``stage_status`` and ``run_status`` views over the coverage counts), so ``shaberi sql`` readers, the manifest and
the command line see one status. Per benchmark and stage, from the tables (so they hold after any sequence of
resumes):

    ok           everything asked for is there
    partial      some of it (the counts say what is missing)
    failed       nothing usable: every answer errored, or no judgement holds a score (every judge call failed,
                 or no reply could be read), or no answer was checked by a pass
    not run      the stage never ran on it

Several parts done side by side are ``combined``: failed only when every part that ran failed (one failed beside
usable ones is partial), a part with nothing to do not counted. So a stage over its benchmarks, a run over its
benchmarks, and a benchmark's judging over its judges: one judge failing every call beside one that scored
everything is a failed judge in a partial benchmark, not a failed benchmark. A run whose writer died reads
``interrupted`` (``shown_status``, in the runs and run_status views).

For one invocation, ``StageCalls`` counts the calls a stage made and how many failed: what the run says it did.
Its exit code is the tables' verdict alone (the same state gives the same code however often it is read): 1
when the run holds nothing usable or a stage it ran is failed by the tables, with one line naming the most
common error (``describe``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .tables.sql import query, status_rule

if TYPE_CHECKING:
    import duckdb

__all__ = ["StageCalls", "benchmark_statuses", "combined", "describe", "partial_reasons", "run_status", "run_statuses",
           "stage_status", "top_error", "worst"]


def worst(statuses: list[str]) -> str:
    """The worst of several statuses (a run is as good as its worst benchmark); ``ok`` for none
    (``worst_status``)."""
    return status_rule("worst_status", statuses)


def combined(statuses: list[str]) -> str:
    """A whole over parts done side by side (a stage over benchmarks, a run over its benchmarks): a part that
    never ran (nothing to do there) does not count against those that did, and a failed part beside usable
    ones makes the whole partial: failed only when every part that ran failed (``combined_status``)."""
    return status_rule("combined_status", statuses)


@dataclass
class StageCalls:
    """The calls one stage made in this invocation."""

    stage: str
    calls: int = 0
    failed: int = 0
    failures: Counter[str] = field(default_factory=Counter)

    @property
    def all_failed(self) -> bool:
        return self.calls > 0 and self.failed >= self.calls

    @property
    def status(self) -> str:
        return "failed" if self.all_failed else ("partial" if self.failed else "ok")

    def record(self) -> dict[str, Any]:
        common = self.failures.most_common(1)
        return {"status": self.status, "calls": self.calls, "failed": self.failed,
                "error": common[0][0] if common else None, "error_count": common[0][1] if common else 0}


def run_status(benchmarks: list[str]) -> str:
    """A finished run's status from its benchmarks' (``finished_status``: combined, and something never done makes
    it partial, not 'not run', as does a benchmark that failed beside usable ones)."""
    return status_rule("finished_status", benchmarks)


def benchmark_statuses(con: duckdb.DuckDBPyConnection, run_id: str | None = None) -> dict[str, dict[str, Any]]:
    """Per benchmark of a run (``run_id``, or the one run a connection holds: ``sql.connect(run_ids=[…])``): its
    status and, per stage, the status and counts the ``stage_status`` view gives, with the most common error (one
    query: a run pays for it when it ends)."""
    found = run_statuses(con, None if run_id is None else [run_id])
    return found.get(run_id, {}) if run_id is not None else next(iter(found.values()), {})


def run_statuses(con: duckdb.DuckDBPyConnection, run_ids: list[str] | None = None
                ) -> dict[str, dict[str, dict[str, Any]]]:
    """``benchmark_statuses`` of several runs (None: every run the connection holds) in one query, by run: the
    ``stage_status`` and ``run_status`` views, read, not derived again."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for run_id, bench, stage, name, status, questions, answers, answer_errors, missing, judged, scored, judge_failed, \
            not_judged, checked, not_checked, stale, error, error_count, bench_status in con.execute(
                query("status.stages"), {"runs": run_ids}).fetchall():
        b = out.setdefault(run_id, {}).setdefault(bench, {"generate": {}, "judge": {}, "passes": {},
                                                         "status": bench_status})
        found = (error, error_count) if error is not None else None
        if stage == "generate":
            b["generate"] = {"status": status, "questions": questions, "answers": answers,
                             "answer_errors": answer_errors, "missing": missing, "error": found}
        elif stage == "judge":
            b["judge"][name] = {"status": status, "judged": judged, "scored": scored, "judge_failed": judge_failed,
                                "not_judged": not_judged, "stale": stale, "error": found}
        else:
            b["passes"][name] = {"status": status, "checked": checked, "not_checked": not_checked, "stale": stale}
    return out


def stage_status(benchmark: dict[str, Any], stage: str) -> str:
    """One stage's status on a benchmark (an entry of ``benchmark_statuses``): over its judges or passes, side by
    side (``combined``: one judge that failed beside one that scored makes it partial)."""
    if stage == "generate":
        return str(benchmark["generate"]["status"])
    parts = benchmark["judge" if stage == "judge" else "passes"].values()
    return combined([p["status"] for p in parts]) if parts else "not run"


def top_error(benchmarks: list[dict[str, Any]], stage: str) -> tuple[str | None, int]:
    """The most common error of a stage over these benchmarks (entries of ``benchmark_statuses``)."""
    found: Counter[str] = Counter()
    for b in benchmarks:
        entries = [b["generate"]] if stage == "generate" else list(b.get(stage, {}).values())
        for e in entries:
            if e.get("error"):
                found[e["error"][0]] += e["error"][1]
    common = found.most_common(1)
    return (common[0][0], common[0][1]) if common else (None, 0)


def describe(stage: str, record: dict[str, Any]) -> str:
    """One line for a failed stage: ``judge stage: all 40 calls failed; most common: … (40)``, or ``passes stage:
    nothing usable; most common: safety_check: verdict unreadable (40)`` when no call failed."""
    calls, failed = record.get("calls") or 0, record.get("failed") or 0
    if not calls or not failed:
        what = "nothing usable"
    elif failed >= calls:
        what = "its one call failed" if calls == 1 else f"all {calls} calls failed"
    else:
        what = f"{failed} of {calls} calls failed"
    why = f"; most common: {record['error']} ({record.get('error_count') or 0})" if record.get("error") else ""
    return f"{stage} stage: {what}{why}"


def partial_reasons(benchmarks: dict[str, dict[str, Any]], most: int = 3) -> str | None:
    """Why a run is partial, from its ``benchmark_statuses``: each benchmark, stage and judge or pass that is not
    ok, with what is missing and its most common error (``elyza: judge j: 3 of 100 without a score; most common:
    judge_error: HTTP 500 (3)``), the first ``most`` of them and how many more. None: nothing is short."""
    found = []
    for name, b in benchmarks.items():
        g = b["generate"]
        if g and g.get("status") not in ("ok", None):
            short = (g.get("answer_errors") or 0) + (g.get("missing") or 0)
            found.append((f"{name}: generate: {short} of {g.get('questions') or 0} answers missing or errored", g))
        for judge, j in b["judge"].items():
            if j.get("status") != "ok":
                short = sum(j.get(k) or 0 for k in ("judged", "judge_failed", "not_judged")) - (j.get("scored") or 0)
                found.append((f"{name}: judge {judge}: {j.get('status')}, {short} without a score", j))
        for pass_name, x in b["passes"].items():
            if x.get("status") != "ok":
                found.append((f"{name}: pass {pass_name}: {x.get('not_checked') or 0} answers not checked", x))
    if not found:
        return None
    lines = [what + (f"; most common: {e['error'][0]} ({e['error'][1]})" if e.get("error") else "")
             for what, e in found[:most]]
    return "; ".join(lines) + (f"; and {len(found) - most} more (shaberi view, run_status)" if len(found) > most
                               else "")
