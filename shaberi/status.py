"""Honest statuses: what a run, a stage and a benchmark came to.

Per benchmark and stage, from the tables (so they hold after any sequence of resumes):

    ok           everything asked for is there
    partial      some of it (the counts say what is missing)
    failed       nothing usable: every answer errored, or no judgement holds a score (every judge call failed,
                 or no reply could be read), or no answer was checked by a pass
    not run      the stage never ran on it

Several parts done side by side are ``combined``: failed only when every part that ran failed (one failed beside
usable ones is partial), a part with nothing to do not counted. So a stage over its benchmarks, a run over its
benchmarks, and a benchmark's judging over its judges: one judge failing every call beside one that scored
everything is a failed judge in a partial benchmark, not a failed benchmark. How a reader shows a run whose
writer died (``interrupted``) is ``sql/005_status.sql``'s rule.

For one invocation, ``StageCalls`` counts the calls a stage made and how many failed: what the run says it did.
Its exit code is the tables' verdict alone (the same state gives the same code however often it is read): 1
when the run holds nothing usable or a stage it ran is failed by the tables, with one line naming the most
common error (``describe``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import duckdb

__all__ = ["ORDER", "StageCalls", "benchmark_statuses", "combined", "describe", "generation_status", "judging_status",
           "pass_status", "run_status", "run_statuses", "stage_status", "top_error", "worst"]

ORDER = ("ok", "not run", "partial", "running", "interrupted", "failed")  # better to worse
_LEGACY = {"complete": "ok", "error": "failed"}  # statuses written before these words


def worst(statuses: list[str]) -> str:
    """The worst of several statuses (a run is as good as its worst benchmark); ``ok`` for none."""
    known = [_LEGACY.get(s, s) for s in statuses if s]
    return max(known, key=lambda s: ORDER.index(s) if s in ORDER else 0, default="ok")


def combined(statuses: list[str]) -> str:
    """A whole over parts done side by side (a stage over benchmarks, a run over its benchmarks): a part that
    never ran (nothing to do there) does not count against those that did, and a failed part beside usable
    ones makes the whole partial: failed only when every part that ran failed."""
    ran = [_LEGACY.get(s, s) for s in statuses if s and _LEGACY.get(s, s) != "not run"]
    if not ran:
        return "not run" if statuses else "ok"
    if all(s == "failed" for s in ran):
        return "failed"
    return worst([s for s in ran if s != "failed"] + (["partial"] if "failed" in ran else []))


def generation_status(questions: int, answers: int, errors: int, missing: int) -> str:
    if questions == 0 or answers == 0:
        return "not run"
    if missing == 0 and errors == 0:
        return "ok"
    return "failed" if answers - errors <= 0 else "partial"


def judging_status(answers: int, judged: int, failed: int, not_judged: int, answer_errors: int = 0,
                   scored: int | None = None) -> str:
    """One judge on one benchmark: ``scored`` (None: as many as judged) of the ``judged`` hold a score."""
    if answers == answer_errors or (judged == 0 and failed == 0):  # nothing to judge, or never judged
        return "not run"
    if (judged if scored is None else scored) == 0:  # every call failed, or no reply could be read
        return "failed"
    return "ok" if failed == 0 and not_judged == 0 else "partial"


def pass_status(answers: int, checked: int) -> str:
    """One pass on one benchmark: a row whose model could not be asked, or gave no readable verdict, is not
    a check."""
    if answers == 0:
        return "not run"
    return "ok" if checked == answers else ("failed" if checked == 0 else "partial")


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

    def record(self) -> dict:
        common = self.failures.most_common(1)
        return {"status": self.status, "calls": self.calls, "failed": self.failed,
                "error": common[0][0] if common else None, "error_count": common[0][1] if common else 0}


def run_status(benchmarks: list[str]) -> str:
    """A finished run's status from its benchmarks' (``combined``): something never done makes it partial, not
    'not run', and so does a benchmark that failed beside usable ones."""
    status = combined(benchmarks)
    return "partial" if status == "not run" or (status == "ok" and "not run" in benchmarks) else status


_STATUS_QUERY = """
    SELECT 'answers' AS kind, run_id, benchmark, NULL AS name, questions AS a, answers AS b, answer_errors AS c,
           missing AS d, NULL::BIGINT AS e, NULL::BIGINT AS f, NULL::BIGINT AS g, NULL AS error FROM answer_coverage
    UNION ALL
    SELECT 'judge', run_id, benchmark, judge, answers, judged, judge_failed, not_judged, stale, answer_errors, scored,
           NULL
    FROM judge_coverage
    UNION ALL
    SELECT 'pass', run_id, benchmark, pass_name, answers, checked, stale, NULL, NULL, NULL, NULL, NULL
    FROM pass_coverage
    UNION ALL (  -- the most common error of each benchmark's answers, and of each judge's judgements
        SELECT 'answer_error', run_id, benchmark, NULL, count(*), NULL, NULL, NULL, NULL, NULL, NULL,
               error_type || ': ' || left(min(error), 120)
        FROM answers WHERE error IS NOT NULL AND strategy = '' GROUP BY run_id, benchmark, error_type
        QUALIFY row_number() OVER (PARTITION BY run_id, benchmark ORDER BY count(*) DESC, error_type) = 1)
    UNION ALL (  -- a failed call, or a reply with no score in it (after the fallback)
        SELECT 'judge_error', run_id, benchmark, judge, count(*), NULL, NULL, NULL, NULL, NULL, NULL, left(error, 160)
        FROM judgements
        WHERE error <> 'answer_error' AND strategy = '' GROUP BY run_id, benchmark, judge, error
        QUALIFY row_number() OVER (PARTITION BY run_id, benchmark, judge ORDER BY count(*) DESC, error) = 1)"""


def benchmark_statuses(con: duckdb.DuckDBPyConnection, run_id: str | None = None) -> dict[str, dict]:
    """Per benchmark of a run (``run_id``, or the one run a connection holds: ``sql.connect(run_ids=[…])``): its
    status and, per stage, the status and counts the coverage views give, with the most common error (one
    query: a run pays for it when it ends)."""
    found = run_statuses(con, None if run_id is None else [run_id])
    return found.get(run_id, {}) if run_id is not None else next(iter(found.values()), {})


def run_statuses(con: duckdb.DuckDBPyConnection, run_ids: list[str] | None = None) -> dict[str, dict[str, dict]]:
    """``benchmark_statuses`` of several runs (None: every run the connection holds) in one query, by run."""
    rows = con.execute(f"SELECT * FROM ({_STATUS_QUERY}) WHERE $runs IS NULL OR list_contains($runs, run_id)",
                       {"runs": run_ids}).fetchall()
    by_run: dict[str, list[tuple]] = {}
    for r in rows:
        by_run.setdefault(r[1], []).append(r[:1] + r[2:])
    return {run: _statuses(found) for run, found in by_run.items()}


def _statuses(rows: list[tuple]) -> dict[str, dict]:
    errors = {(kind, bench, name): (error, n) for kind, bench, name, n, *_, error in rows if kind.endswith("_error")}
    out: dict[str, dict] = {}
    for _, bench, _, questions, answers, answer_errors, missing, *_ in sorted(
            (r for r in rows if r[0] == "answers"), key=lambda r: r[1]):
        out[bench] = {"generate": {"status": generation_status(questions, answers, answer_errors, missing),
                                   "questions": questions, "answers": answers, "answer_errors": answer_errors,
                                   "missing": missing, "error": errors.get(("answer_error", bench, None))},
                      "judge": {}, "passes": {}}
    for kind, bench, name, answers, done, failed, not_done, stale, answer_errors, scored, _ in sorted(
            (r for r in rows if r[0] in ("judge", "pass") and r[1] in out), key=lambda r: (r[0], r[2], r[1])):
        if kind == "judge":
            out[bench]["judge"][name] = {
                "status": judging_status(answers, done, failed, not_done, answer_errors, scored), "judged": done,
                "scored": scored, "judge_failed": failed, "not_judged": not_done, "stale": stale,
                "error": errors.get(("judge_error", bench, name))}
        else:  # a pass: done = checked, failed = stale
            out[bench]["passes"][name] = {"status": pass_status(answers, done), "checked": done,
                                          "not_checked": answers - done, "stale": failed}
    for b in out.values():  # scores without a pass's deltas are still scores: a failed pass makes it partial
        passes = stage_status(b, "passes")
        b["status"] = worst([b["generate"]["status"], *([stage_status(b, "judge")] if b["judge"] else []),
                             *(["partial" if passes == "failed" else passes] if b["passes"] else [])])
    return out


def stage_status(benchmark: dict, stage: str) -> str:
    """One stage's status on a benchmark (an entry of ``benchmark_statuses``): over its judges or passes, side by
    side (``combined``: one judge that failed beside one that scored makes it partial)."""
    if stage == "generate":
        return str(benchmark["generate"]["status"])
    parts = benchmark["judge" if stage == "judge" else "passes"].values()
    return combined([p["status"] for p in parts]) if parts else "not run"


def top_error(benchmarks: list[dict], stage: str) -> tuple[str | None, int]:
    """The most common error of a stage over these benchmarks (entries of ``benchmark_statuses``)."""
    found: Counter[str] = Counter()
    for b in benchmarks:
        entries = [b["generate"]] if stage == "generate" else list(b.get(stage, {}).values())
        for e in entries:
            if e.get("error"):
                found[e["error"][0]] += e["error"][1]
    common = found.most_common(1)
    return (common[0][0], common[0][1]) if common else (None, 0)


def describe(stage: str, record: dict) -> str:
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
