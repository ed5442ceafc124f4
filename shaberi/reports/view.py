"""What ``shaberi view`` (``view-scores``) shows, as plain rows: the CLI only renders them.

One run (``--tag T`` naming a run): per-benchmark scores on the 0–10 scale and the overall. A family
of runs (``--tag T`` with runs ``T-run1 … T-runN``; ``--runs N`` keeps the first N): per benchmark the
mean over its complete runs, sample sd, the 95 % t-interval **over runs** (N − 1 degrees of freedom, clipped to the
scale: ``multi_run_stats``), range. Asked for with ``clustered`` (statsmodels takes a second to import), every
row also gets the standard error of the number shown clustered by question, and the 95 % interval over questions
(× runs) from it (``intervals``). Then token usage and estimated cost by stage, per model. A tag holding
several models gives each its sections, the best Overall first. A benchmark without a score says why, never 0:
not run, answered and not judged, every answer an error (``_state``), every judgement failed, or no score in its
judges' replies.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from ..errors import UsageError
from ..status import run_statuses, worst
from ..tables.selection import RunRef, Selector, left_out, select
from ..tables.sql import connect, query

__all__ = ["Report", "build", "rank"]

ALL_JUDGES = "*"


@dataclass
class Section:
    model: str
    judge: str
    runs: list[str]
    columns: list[str]
    rows: list[list] = field(default_factory=list)
    status: str = "ok"  # the run's (a family: the worst member's), interrupted when its writer died
    notes: list[str] = field(default_factory=list)  # what the numbers leave out: excluded runs, stale judgements
    prompt_hashes: dict[str, list[str]] = field(default_factory=dict)  # benchmark -> judging prompts scored
    excluded: list[str] = field(default_factory=list)  # a family's runs left out of its numbers
    complete: bool = False  # every benchmark of the overall has a score (its Overall is over all of them)

    @property
    def overall(self) -> float | None:
        """The Overall row's score (a family: its mean)."""
        return next((r[1] for r in self.rows if r[0] == "Overall"), None)


def rank(complete: bool, overall: float | None) -> tuple:
    """Where a model's block stands among a tag's: complete ones first (an Overall over fewer benchmarks does not
    rank against one over all, as the leaderboard ranks), then the best Overall; none last."""
    return not complete, overall is None, -(overall or 0)


@dataclass
class Report:
    tag: str
    multi: bool
    sections: list[Section]  # model by model, the best Overall first
    token_columns: list[str]
    tokens: list[list]  # per model: by stage, then its Total; several models: then the tag's ('all models')
    notes: list[str] = field(default_factory=list)  # what sets the models apart (judged by other judges, …)

    @property
    def models(self) -> list[str]:
        return list(dict.fromkeys(s.model for s in self.sections))


def build(results_dir: Path, tag: str, runs: int | None = None, model: str | None = None, judge: str | None = None,
          pricing: Path | None = None, clustered: bool = False, every_judge: bool = False) -> Report:
    """``every_judge``: the pooled section, then one per judge when there are several (the HTML report)."""
    chosen = select(results_dir, Selector(tag, model), runs)
    con = connect(results_dir, pricing, chosen.run_ids, upto="multi_run_stats",  # the chosen runs, the views needed
                  cache=(*(["scores"] if clustered else []), "benchmark_scores",  # read again per section
                         *(["run_completeness"] if chosen.family else [])))
    statuses = {r.run_id: r.status or "ok" for r in chosen.runs}
    by_model: dict[str, list[Section]] = {}
    judged = {m: _present(con, chosen.of(m).run_ids) for m in chosen.models}
    pooled = set(_pools(con, [j for js in judged.values() for j in js]).values())
    if judge not in (None, ALL_JUDGES, *pooled) and not any(judge in js for js in judged.values()):
        there = sorted({j for js in judged.values() for j in js} | pooled)
        raise UsageError(f"judge {judge!r} has no judgements in these runs; judges there: {', '.join(there) or 'none'}")
    notes = [f"{m}: not judged by {judge} (its judges: {', '.join(js) or 'none'})" for m, js in judged.items()
             if judge not in (None, ALL_JUDGES, *pooled) and judge not in js]
    if len({tuple(js) for js in judged.values()}) > 1 and judge in (None, ALL_JUDGES):
        notes.append("the models were judged by different judges (" + "; ".join(
            f"{m}: {', '.join(js) or 'none'}" for m, js in judged.items()) + "): their scores are not like for like")
    stopped = dict(con.execute(query("view.stopped_runs"), {"ids": [r.run_id for r in chosen.runs]}).fetchall())
    partial = dict(con.execute(query("view.partial_runs"), {"ids": [r.run_id for r in chosen.runs]}).fetchall())
    for m in chosen.models:
        run_ids = [r.run_id for r in chosen.runs if r.model == m]
        family = chosen.of(m).family
        failed_judges = _failed_judges(con, chosen.of(m).runs, family)
        for j in _judges(con, judged[m], judge, every_judge):
            section = _multi(con, m, j, run_ids, tag, clustered) if family else _single(con, m, j, run_ids[0],
                                                                                       clustered)
            section.status = worst([statuses[r] for r in run_ids])
            section.notes += [note for name, note in failed_judges.items() if j in (ALL_JUDGES, name)]
            if section.status == "interrupted":
                section.notes.append("interrupted: no process is writing it; the rows its last calls journaled "
                                     "count once it is resumed (run the same command again)")
            section.notes += [f"partial: its spending limit stopped it ({stopped[r]}); raise --max-cost and run the "
                              "same command again" for r in run_ids if r in stopped]
            tags = {r.run_id: r.tag for r in chosen.runs}
            section.notes += [f"partial{f' ({tags[r]})' if family else ''}: {partial[r]}" for r in run_ids
                              if r in partial]
            if section.status == "waiting":
                section.notes.append("waiting: batches it submitted run on at the provider; the same command "
                                     "collects them (nothing is submitted again)")
            by_model.setdefault(m, []).append(section)
    # A tag holding several models: one block per model, best Overall first (a model without one last).
    models = sorted(by_model, key=lambda m: (*rank(by_model[m][0].complete, by_model[m][0].overall), m))
    token_cols = ["model", "stage", "requests", "cached_requests", "prompt_tokens", "completion_tokens", "cost_usd",
                  "priced"]
    found = con.execute(query("view.tokens"), {"ids": chosen.run_ids}).fetchall()
    tokens = [list(t) for m in models for t in found if t[0] == m]  # each model's own, and its Total
    if len(models) > 1:  # and the tag's, said as such: never a silent sum
        tokens += [["all models", *t[1:]] for t in found if t[0] is None]
    return Report(tag, chosen.family, [s for m in models for s in by_model[m]], token_cols, tokens, notes)


def _failed_judges(con: duckdb.DuckDBPyConnection, runs: list[RunRef], family: bool) -> dict[str, str]:
    """judge -> one line naming the benchmarks where it holds no score at all (every call failed, or no reply
    could be read), with its most common error: beside judges that scored, the run is partial, not failed,
    and the failed judge is named (``status.run_statuses``)."""
    suspects = [r for (r,) in con.execute(  # a judge with no score where it judged: the statuses say why (costly)
        query("view.unscored_runs"), {"ids": [r.run_id for r in runs]}).fetchall()]
    if not suspects:
        return {}
    titles = dict(con.execute(query("view.titles")).fetchall())
    found: dict[str, dict[str, list[str]]] = {}
    statuses = run_statuses(con, suspects)
    for r in runs:
        for bench, b in statuses.get(r.run_id, {}).items():
            for name, j in b["judge"].items():
                if j["status"] == "failed":
                    where = f"{titles.get(bench, bench)}{f' ({r.tag})' if family else ''}"
                    found.setdefault(name, {}).setdefault(j["error"][0] if j["error"] else "", []).append(where)
    return {name: f"judge {name} failed (no score) on " + "; ".join(
        ", ".join(where) + (f": {error}" if error else "") for error, where in by_error.items())
        for name, by_error in found.items()}


def _present(con: duckdb.DuckDBPyConnection, run_ids: list[str]) -> list[str]:
    """The judges with judgements in these runs."""
    return [j for (j,) in con.execute(query("view.judges"), {"ids": run_ids}).fetchall()]


def _judges(con: duckdb.DuckDBPyConnection, present: list[str], judge: str | None, every: bool = False) -> list[str]:
    """The sections of one model's runs, judged by ``present``: ``judge``'s (none when it did not judge them), or
    per prompt set the pooled one and, with ``every``, each judge's (one judge: its own)."""
    pools = _pools(con, present)
    if judge is not None:
        return [judge] if judge in present or judge in pools.values() or judge == ALL_JUDGES else []
    groups: dict[str, list[str]] = {}
    for j in present:
        groups.setdefault(pools[j], []).append(j)
    if not groups:
        return [ALL_JUDGES]
    several = every and len(groups) > 1  # every prompt set's pooled table, then its judges'
    return [s for pooled, members in groups.items()
            for s in ([pooled, *members] if several or (every and len(members) > 1) else
                      members if len(members) == 1 else [pooled])]


def _pools(con: duckdb.DuckDBPyConnection, judges: list[str]) -> dict[str, str]:
    """Each judge's pooled row ('*', or '* [LABEL]' under another prompt set: ``pooled_judge``)."""
    return dict(con.execute(query("view.pools"), {"js": judges}).fetchall())


def _benchmarks(con: duckdb.DuckDBPyConnection, run_ids: list[str]) -> list[tuple[str, str]]:
    """The core benchmarks always (a missing one shows as not run), others when they were run."""
    return con.execute(query("view.benchmarks"), {"ids": run_ids}).fetchall()


QUESTION_COLUMNS = ["se_clustered", "ci_questions_low", "ci_questions_high"]  # with --clustered-se (intervals.py)


def _by_question(con: duckdb.DuckDBPyConnection, section: Section, run_ids: list[str], clustered: bool
                 ) -> dict[str, list[float | None]]:
    """benchmark (and 'overall') -> [SE, low, high] of the number shown, clustered by question, when asked for;
    an interval clipped to the scale is said in the section's notes."""
    if not clustered:
        return {}
    from .intervals import question_intervals

    found = question_intervals(con, run_ids, section.judge)
    titles = dict(con.execute(query("view.titles")).fetchall()) | {"overall": "Overall"}
    if clipped := [titles.get(b, b) for b, q in found.items() if q.clipped]:
        section.notes.append(f"95% CI (questions) clipped to the scale: {', '.join(clipped)}")
    return {b: [q.se, q.low, q.high] for b, q in found.items()}


def _single(con: duckdb.DuckDBPyConnection, model: str, judge: str, run_id: str, clustered: bool = False
            ) -> Section:
    section = Section(model, judge, [run_id], ["benchmark", "score", "baseline", "n", "null", "errors", "not_judged",
                                               *QUESTION_COLUMNS, "note"])
    by_question = _by_question(con, section, [run_id], clustered)
    none = [None] * len(QUESTION_COLUMNS)
    got = {r[0]: r[1:] for r in con.execute(query("view.run_benchmarks"), {"run": run_id, "judge": judge}).fetchall()}
    coverage = _answered(con, [run_id])
    by_judge = _not_judged_by_judge(con, [run_id]) if judge == ALL_JUDGES else {}
    for bench, title in _benchmarks(con, [run_id]):
        state = _state(coverage.get(bench), judged=bench in got and got[bench][2] > 0)
        if bench not in got:  # no judge has looked at it: was it answered at all?
            n = coverage.get(bench, (0, 0))[0]
            section.rows.append([title, None, None, 0, 0, 0, n, *none, state])
            continue
        score, baseline, n, null, errors, not_judged, stale, prompts, differ = got[bench]
        if score is None:  # judged, yet no score: the judges' calls failed, or their replies held none
            why = f"all {n} judgements failed" if errors >= n else f"no scores ({null} unparsed, {errors} failed)"
        else:
            why = "with pass deltas" if baseline != score else ""
        notes = [state or why]
        if not_judged and not (state or "").startswith("all "):  # which judges left them, and stale ones
            who = by_judge.get(bench)
            notes.append(f"{not_judged} not judged" + (f" ({who})" if who else "")
                         + (f", {stale} of them judged as an earlier answer: stale" if stale else ""))
        if len(prompts) > 1:
            notes.append(f"{len(prompts)} judging prompt versions")
        if differ:
            notes.append(f"Shaberi's reading differs on {differ}")
        section.prompt_hashes[bench] = prompts
        section.rows.append([title, score, baseline, n, null, errors, not_judged, *by_question.get(bench, none),
                             "; ".join(x for x in notes if x)])
    overall = con.execute(query("view.run_overall"), {"run": run_id, "judge": judge}).fetchone()
    if overall and overall[0] is not None:
        section.complete = bool(overall[2])
        section.rows.append(["Overall", overall[0], overall[1], None, None, None, None, *by_question.get(
            "overall", none), "" if overall[2] else "not every benchmark has a score"])
    else:
        section.rows.append(["Overall", None, None, None, None, None, None, *none,
                             "none of the four core benchmarks has a score"])
    return section


def _answered(con: duckdb.DuckDBPyConnection, run_ids: list[str]) -> dict[str, tuple[int, int]]:
    """Per benchmark: the answers these runs hold and how many of them are errors."""
    return {b: (int(n), int(e)) for b, n, e in con.execute(query("view.answered"), {"ids": run_ids}).fetchall()}


def _state(answered: tuple[int, int] | None, judged: bool) -> str | None:
    """Why a benchmark has no score, when it is not the judges' doing: never run, every answer an error, or
    answered and not (yet) judged. None: it has judgements to show."""
    answers, errors = answered or (0, 0)
    if not answers:
        return "not run"
    if errors == answers:
        return f"all {answers} answers errored"
    return None if judged else f"answered, not judged ({answers} answer{'s' if answers != 1 else ''})"


def _not_judged_by_judge(con: duckdb.DuckDBPyConnection, run_ids: list[str]) -> dict[str, str]:
    """Pooled judges count an answer once per judge: per benchmark, which judges left how many out."""
    rows = con.execute(query("view.not_judged_by_judge"), {"ids": run_ids}).fetchall()
    out: dict[str, list[str]] = {}
    for bench, judge, n in rows:
        out.setdefault(bench, []).append(f"{judge} {n}")
    return {bench: ", ".join(parts) for bench, parts in out.items()}


def _multi(con: duckdb.DuckDBPyConnection, model: str, judge: str, run_ids: list[str], tag: str,
           clustered: bool) -> Section:
    section = Section(model, judge, run_ids,
                      ["benchmark", "mean", "std_dev", "ci_low", "ci_high", "min", "max", "runs", *QUESTION_COLUMNS,
                       "baseline_mean", "note"])
    excluded = left_out(con, judge, model)  # members that did less: their numbers would mix another average in
    section.excluded = [e[0] for e in excluded]
    counted = [r for r in run_ids if r not in section.excluded]
    if excluded:
        section.notes.append("left out (family statistics count complete runs only): " + ", ".join(
            f"{t} ({'; '.join(b)})" for _, t, b in excluded))
    for bench, prompts in con.execute(query("view.family_prompts"), {"ids": counted, "judge": judge}).fetchall():
        section.prompt_hashes[bench] = prompts
    stats = {r[0]: r[1:] for r in con.execute(query("view.family_stats"),
                                              {"tag": tag, "model": model, "judge": judge}).fetchall()}
    if (runs := max((v[6] for v in stats.values()), default=0)) > 1:
        clipped = [t for b, t in [*_benchmarks(con, run_ids), ("overall", "Overall")] if b in stats and stats[b][8]]
        section.notes.append(f"95% CI: run to run only ({runs} runs, {runs - 1} degree{'s' if runs > 2 else ''} of "
                             "freedom)"
                             + (f"; clipped to the scale: {', '.join(clipped)}" if clipped else "")
                             + ("" if clustered else "; --clustered-se adds the interval over questions × runs"))
    coverage = _answered(con, run_ids)
    judged = {b for (b,) in con.execute(query("view.judged_benchmarks"), {"ids": run_ids, "judge": judge}).fetchall()}
    by_question = _by_question(con, section, counted, clustered)
    none = [None] * len(QUESTION_COLUMNS)
    core = {b for (b,) in con.execute(query("view.core")).fetchall()}
    for bench, title in [*_benchmarks(con, run_ids), ("overall", "Overall")]:
        if bench not in stats:
            state = _state(coverage.get(bench), judged=bench in judged) if bench != "overall" else None
            note = state or "no complete run has a score"
            section.rows.append([title, None, None, None, None, None, None, 0, *none, None, note])
            continue
        *values, baseline, _ = stats[bench]
        note = "not every benchmark has a score" if bench == "overall" and not core <= set(stats) else ""
        section.complete = section.complete or (bench == "overall" and core <= set(stats))
        section.rows.append([title, *values, *by_question.get(bench, none), baseline, note])
    return section
