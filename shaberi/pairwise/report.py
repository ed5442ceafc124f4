"""The report's head-to-head section: for each pairwise job that rated a run the report shows, its overall ratings
with their intervals (an SVG plot), the win-rate matrix, the judge's position bias, and the questions that decided
the closest pair (both answers, the judge's reply in each order). Read from the views and the stored fit only."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import benchmarks as bm
from ..tables.sql import query
from .bias import Position, position
from .ratings import interval, open_note
from .stage import Scope

if TYPE_CHECKING:
    import duckdb

__all__ = ["Section", "sections"]

DECIDED = 12  # questions shown for the closest pair


@dataclass
class Section:
    job: str
    judge: str
    design: str
    benchmarks: list[str]  # compared on
    anchor: str
    ratings: list[dict[str, Any]]  # tag, rating, low, high, comparisons, shown (a run of the report), geometry
    matrix: list[dict[str, Any]]  # tag, cells: [share or None]
    position: Position
    closest: tuple[str, str] | None  # the adjacent tags with the smallest rating gap
    gap: float | None
    decided: list[dict[str, Any]]
    plot: dict[str, Any]
    open_note: str | None = None  # what an open (∞) bound means, with its share of resamples


def sections(con: duckdb.DuckDBPyConnection, run_ids: list[str]) -> list[Section]:
    """One section per pairwise job and judge whose latest fit rated any of ``run_ids``."""
    return [_section(con, job, judge, set(run_ids))
            for job, judge in con.execute(query("pairwise.jobs_for"), {"runs": run_ids}).fetchall()]


def _scope(con: duckdb.DuckDBPyConnection, job: str, judge: str, anchor: str) -> Scope:
    """The job's scope as its latest fit stored it (a fit stored before it was: every pair of its runs, every
    benchmark)."""
    stored = con.execute(query("pairwise.job_scope"), {"job": job, "judge": judge}).fetchall()
    runs = [run for run, _, _ in stored]
    pairs = {(min(run, other), max(run, other)) for run, others, _ in stored for other in others or runs
             if other != run}
    benchmarks = next((b for _, _, b in stored if b is not None), None) or bm.BENCHMARKS
    return Scope(judge, tuple(sorted(pairs)), tuple(sorted(benchmarks)), anchor)


def _section(con: duckdb.DuckDBPyConnection, job: str, judge: str, shown: set[str]) -> Section:
    tag_of = dict(con.execute(query("pairwise.job_runs"), {"job": job, "judge": judge}).fetchall())
    rows = [r for r in con.execute(query("pairwise.ratings"), {"job": job, "judge": judge}).fetchall() if r[0] == "*"]
    ratings = [{"tag": tag, "run": run, "rating": rating, "low": low, "high": high, "interval": interval(low, high),
                "comparisons": n, "shown": run in shown} for _, tag, run, rating, low, high, n, *_ in rows]
    design, anchor = (rows[0][9], rows[0][8]) if rows else ("", "")
    note = open_note([r[1] for r in rows], [r[11] for r in rows], [r[12] for r in rows])
    scope = _scope(con, job, judge, next((r for r, t in tag_of.items() if t == anchor), ""))
    share = {(f, s): (v, n) for f, s, v, n in con.execute(query("pairwise.win_matrix"), scope.params()).fetchall()}
    order = [r["run"] for r in ratings]
    matrix = [{"tag": tag_of[x], "cells": [_share(share, x, y) for y in order]} for x in order]
    closest, gap, decided = None, None, []
    rating = {r["run"]: r["rating"] for r in ratings if r["rating"] is not None}
    compared = [p for p in scope.pairs if all(run in rating for run in p)]
    if compared:  # the pair the design compared whose ratings are closest
        first, second = min(compared, key=lambda p: abs(rating[p[0]] - rating[p[1]]))
        upper, lower = sorted((first, second), key=lambda run: -rating[run])
        closest, gap = (tag_of[upper], tag_of[lower]), rating[upper] - rating[lower]
        for benchmark, question, outcome, text, a, b, reply_first, reply_second in con.execute(
                query("pairwise.decided"), {"judge": judge, "first": first, "second": second, "limit": DECIDED,
                                            "benchmarks": list(scope.benchmarks)}
        ).fetchall():
            decided.append({"benchmark": benchmark, "question_id": question, "question": text,
                            "winner": tag_of[first if outcome == 1 else second],
                            "answers": [(tag_of[first], a), (tag_of[second], b)],
                            "replies": [(f"{tag_of[first]} shown first", reply_first),
                                        (f"{tag_of[second]} shown first", reply_second)]})
    return Section(job, judge, design, [str(bm.BENCHMARKS[b].data.get("title", b)) if b in bm.BENCHMARKS else b
                                        for b in scope.benchmarks],
                   anchor, ratings, matrix, position(con, scope), closest, gap, decided, _plot(ratings), note)


def _share(share: dict[tuple[str, str], tuple[float, int]], x: str, y: str) -> float | None:
    if x == y:
        return None
    if (x, y) in share:
        return share[(x, y)][0]
    if (y, x) in share:
        return 1 - share[(y, x)][0]
    return None


def _plot(ratings: list[dict[str, Any]]) -> dict[str, Any]:
    """Geometry of the rating plot: a row per tag, its rating a dot and its interval a line, on a shared x axis."""
    values = [v for r in ratings for v in (r["rating"], r["low"], r["high"])
              if v is not None and math.isfinite(v)]  # unrated, or an open side: left out
    lo, hi = (min(values), max(values)) if values else (900.0, 1100.0)
    lo, hi = (lo - 50, hi + 50) if hi - lo < 100 else (lo, hi)
    left, width, row = 150, 420, 22

    def x(v: float) -> float:  # an open side: to the plot's edge
        return left + width * (min(max(v, lo), hi) - lo) / (hi - lo)

    step = next(s for s in (25, 50, 100, 200, 500, 1000, 2000, 5000) if (hi - lo) / s <= 8)
    ticks = [t for t in range(int(lo // step * step), int(hi) + step, step) if lo <= t <= hi]
    return {"rows": [{**r, "y": 16 + k * row, "x": x(r["rating"]),
                      "x_low": None if r["low"] is None else x(r["low"]),
                      "x_high": None if r["high"] is None else x(r["high"])} for k, r in enumerate(ratings)
                     if r["rating"] is not None],
            "ticks": [{"x": x(t), "label": t} for t in ticks], "left": left, "width": width,
            "height": 24 + len(ratings) * row}
