"""Honest statuses: what a run, a stage and a benchmark came to, and whether the process writing it is alive.

Per benchmark and stage, from the tables (so they hold after any sequence of resumes):

    ok           everything asked for is there
    partial      some of it (the counts say what is missing)
    failed       nothing usable: every answer errored, or every judge call failed
    not run      the stage never ran on it
    interrupted  the run says it is running, but no process holds its lock (killed, or the machine died)

A stage over its benchmarks, and a run over its benchmarks, is ``combined``: failed only when every benchmark
that ran failed (one failed beside usable ones is partial), a benchmark with nothing to do not counted.

For one invocation, ``StageCalls`` counts the calls a stage made and how many failed. A stage that ends
``failed`` — every call of it failed, or the tables hold nothing usable of it — makes ``shaberi run`` exit
with code 1 and one line naming the most common error (``describe``).
"""

from __future__ import annotations

import fcntl
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .tables.location import Root, as_root, is_remote
from .tables.objectlock import holder

if TYPE_CHECKING:
    import duckdb

__all__ = ["ORDER", "StageCalls", "benchmark_statuses", "combined", "describe", "effective", "generation_status",
           "judging_status", "run_status", "stage_status", "top_error", "worst", "writer_alive"]

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


def judging_status(answers: int, judged: int, failed: int, not_judged: int, answer_errors: int = 0) -> str:
    if answers == answer_errors or (judged == 0 and failed == 0):  # nothing to judge, or never judged
        return "not run"
    if failed == 0 and not_judged == 0:
        return "ok"
    return "failed" if judged == 0 else "partial"


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


def writer_alive(results_dir: Root, run_id: str) -> bool | None:
    """Whether a process holds the run's lock (``Store.lock``); None when that cannot be told (a read-only
    or foreign results root). Probes with a shared lock released at once: no file is created. On object storage:
    whether the run's lease was renewed within its ttl (``objectlock.py``)."""
    root = as_root(results_dir)
    if is_remote(root):
        try:
            return holder(root / "locks" / f"{run_id}.lock") is not None
        except OSError:
            return None
    try:
        fd = os.open(root / "locks" / f"{run_id}.lock", os.O_RDONLY)
    except FileNotFoundError:
        return False
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return None
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def effective(status: str | None, alive: bool | None) -> str:
    """A stored status as a reader should show it: ``running`` with no live writer (``writer_alive``) is
    ``interrupted``."""
    status = _LEGACY.get(status or "", status or "ok")
    return "interrupted" if status == "running" and alive is False else status


def run_status(benchmarks: list[str]) -> str:
    """A finished run's status from its benchmarks' (``combined``): something never done makes it partial, not
    'not run', and so does a benchmark that failed beside usable ones."""
    status = combined(benchmarks)
    return "partial" if status == "not run" or (status == "ok" and "not run" in benchmarks) else status


_STATUS_QUERY = """
    SELECT 'answers' AS kind, benchmark, NULL AS name, questions AS a, answers AS b, answer_errors AS c,
           missing AS d, NULL::BIGINT AS e, NULL::BIGINT AS f, NULL AS error FROM answer_coverage
    UNION ALL
    SELECT 'judge', benchmark, judge, answers, judged, judge_failed, not_judged, stale, answer_errors, NULL
    FROM judge_coverage
    UNION ALL
    SELECT 'pass', benchmark, pass_name, answers, checked, stale, NULL, NULL, NULL, NULL FROM pass_coverage
    UNION ALL (  -- the most common error of each benchmark's answers, and of each judge's calls
        SELECT 'answer_error', benchmark, NULL, count(*), NULL, NULL, NULL, NULL, NULL,
               error_type || ': ' || left(min(error), 120)
        FROM answers WHERE error IS NOT NULL AND strategy = '' GROUP BY benchmark, error_type
        QUALIFY row_number() OVER (PARTITION BY benchmark ORDER BY count(*) DESC, error_type) = 1)
    UNION ALL (
        SELECT 'judge_error', benchmark, judge, count(*), NULL, NULL, NULL, NULL, NULL, left(error, 160)
        FROM judgements
        WHERE error LIKE 'judge_error%' AND strategy = '' GROUP BY benchmark, judge, error
        QUALIFY row_number() OVER (PARTITION BY benchmark, judge ORDER BY count(*) DESC, error) = 1)"""


def benchmark_statuses(con: duckdb.DuckDBPyConnection) -> dict[str, dict]:
    """Per benchmark of the run a connection holds (``sql.connect(run_ids=[…])``): its status and, per stage,
    the status and counts the coverage views give, with the most common error (one query: a run pays for
    it when it ends)."""
    rows = con.execute(_STATUS_QUERY).fetchall()
    errors = {(kind, bench, name): (error, n) for kind, bench, name, n, *_, error in rows if kind.endswith("_error")}
    out: dict[str, dict] = {}
    for _, bench, _, questions, answers, answer_errors, missing, _, _, _ in sorted(
            (r for r in rows if r[0] == "answers"), key=lambda r: r[1]):
        out[bench] = {"generate": {"status": generation_status(questions, answers, answer_errors, missing),
                                   "questions": questions, "answers": answers, "answer_errors": answer_errors,
                                   "missing": missing, "error": errors.get(("answer_error", bench, None))},
                      "judge": {}, "passes": {}}
    for kind, bench, name, answers, done, failed, not_done, stale, answer_errors, _ in sorted(
            (r for r in rows if r[0] in ("judge", "pass") and r[1] in out), key=lambda r: (r[0], r[2], r[1])):
        if kind == "judge":
            out[bench]["judge"][name] = {"status": judging_status(answers, done, failed, not_done, answer_errors),
                                         "judged": done, "judge_failed": failed, "not_judged": not_done,
                                         "stale": stale, "error": errors.get(("judge_error", bench, name))}
        else:  # a pass: done = checked, failed = stale
            out[bench]["passes"][name] = {"status": "ok" if done == answers else "partial", "checked": done,
                                          "not_checked": answers - done, "stale": failed}
    for b in out.values():
        b["status"] = worst([b["generate"]["status"], *(e["status"] for stage in ("judge", "passes")
                                                          for e in b[stage].values())])
    return out


def stage_status(benchmark: dict, stage: str) -> str:
    """One stage's status on a benchmark (an entry of ``benchmark_statuses``): over its judges or passes."""
    if stage == "generate":
        return str(benchmark["generate"]["status"])
    parts = benchmark["judge" if stage == "judge" else "passes"].values()
    return worst([p["status"] for p in parts]) if parts else "not run"


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
    """One line for a failed stage: ``judge stage: all 40 calls failed; most common: … (40)``."""
    calls, failed = record.get("calls") or 0, record.get("failed") or 0
    if not calls:
        what = "nothing usable"
    elif failed >= calls:
        what = "its one call failed" if calls == 1 else f"all {calls} calls failed"
    else:
        what = f"{failed} of {calls} calls failed"
    why = f"; most common: {record['error']} ({record.get('error_count') or 0})" if record.get("error") else ""
    return f"{stage} stage: {what}{why}"
