"""Which runs a command reads: ``find_runs`` lists runs by tag (exact, family ``{tag}-run1 … N``, either, or
prefix) and model, reading six columns of the runs table only; ``select_runs`` is the one rule every reader
(view, compare, report, the Python API) applies to a ``--tag``; ``left_out`` names the family members that
family statistics leave out."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, NamedTuple

import duckdb

from ..errors import UsageError
from ..run_info import run_id_prefix
from .layout import live_parts_under
from .location import Root, as_root, attach, glob_literal
from .sql import LATEST_RUN_ROW, define_status, latest_row, relisting
from .writers import probe_writers

__all__ = ["Match", "RunRef", "Selection", "find_runs", "left_out", "require_root", "select_runs", "tags_there"]


class RunRef(NamedTuple):
    """A run as ``find_runs`` lists it; ``status`` as readers show it (``sql/005_status.sql``)."""

    run_id: str
    model: str
    tag: str
    base_tag: str
    run_index: int
    status: str | None


Match = Literal["tag", "tag_or_family", "family", "prefix"]


def find_runs(root: Root, tag: str | None = None, *, match: Match = "tag_or_family", model: str | None = None,
              con: duckdb.DuckDBPyConnection | None = None) -> list[RunRef]:
    """The runs a reader names, reading six columns of the runs table only, so that a command can then ``connect``
    to just those runs' partitions (pass the same ``con`` to both to save a database). ``tag`` None: every run;
    else by ``match``: ``tag`` the run tagged so, ``family`` the runs ``{tag}-run1 … N``, ``tag_or_family``
    either, ``prefix`` every tag starting so. Only the folders of runs whose tag can match are read."""
    folders = "*" if tag is None else f"run_id={run_id_prefix(tag)}*"
    root = as_root(root)
    where = {"tag": "tag = $tag", "family": "base_tag = $tag AND tag <> $tag",
             "tag_or_family": "(tag = $tag OR base_tag = $tag)", "prefix": "starts_with(tag, $tag)"}[match]
    con = attach(con or duckdb.connect(), root)
    define_status(con)

    def read() -> list[RunRef]:
        # Listed afresh on each attempt (``relisting``): every stage of a run rewrites its row.
        parts, _ = live_parts_under(root / "tables" / "runs", folders)
        if not parts:
            return []
        con.execute(
            "CREATE OR REPLACE TEMP TABLE listed_runs AS SELECT run_id, model, tag, base_tag, run_index, status "
            f"FROM {_parquet(parts)} QUALIFY {LATEST_RUN_ROW} "
            f"AND ($tag IS NULL OR {where}) AND ($model IS NULL OR model = $model)", {"tag": tag, "model": model})
        probe_writers(con, root, "SELECT run_id, status FROM listed_runs")
        batches, _ = live_parts_under(root / "tables" / "batches", folders)  # none unless a run used a Batch API
        waiting = "SELECT NULL::VARCHAR AS run_id, NULL::BOOLEAN AS waiting WHERE false"
        if batches:
            waiting = (f"SELECT run_id, bool_or(status = 'submitted') AS waiting FROM (SELECT run_id, status FROM "
                       f"{_parquet(batches)} QUALIFY {latest_row('batches', None)}) GROUP BY run_id")
        rows = con.execute("SELECT run_id, model, tag, base_tag, run_index, shown_status(status, w.alive, b.waiting) "
                           f"FROM listed_runs LEFT JOIN run_writers w USING (run_id) LEFT JOIN ({waiting}) b "
                           "USING (run_id) ORDER BY model, run_index, tag").fetchall()
        return [RunRef(*r) for r in rows]

    return relisting(read)


def _parquet(parts: list[Root]) -> str:
    """A read of these parts' rows, as SQL."""
    files = ", ".join("'{}'".format(glob_literal(p).replace("'", "''")) for p in parts)
    return f"read_parquet([{files}], union_by_name = true)"


@dataclass
class Selection:
    """The runs a ``--tag`` names: per model, its run tagged so, or its family ``{tag}-run1 … N`` (``families``:
    the models read as a family)."""

    tag: str
    runs: list[RunRef]
    families: set[str] = field(default_factory=set)

    @property
    def family(self) -> bool:
        """Whether any model's runs are a family (a one-model selection: whether it is one)."""
        return bool(self.families)

    @property
    def run_ids(self) -> list[str]:
        return [r.run_id for r in self.runs]

    @property
    def models(self) -> list[str]:
        return list(dict.fromkeys(r.model for r in self.runs))

    def of(self, model: str) -> Selection:
        """One model's part of the selection."""
        return Selection(self.tag, [r for r in self.runs if r.model == model], self.families & {model})


def left_out(con: duckdb.DuckDBPyConnection, judge: str = "*", model: str | None = None
             ) -> list[tuple[str, str, list[str]]]:
    """(run_id, tag, reasons) of the family members not complete for ``judge`` ('*': every judge): the runs
    family statistics leave out (``run_completeness``), in run order, each with why (``elyza: no score by j``)."""
    return [(r, t, b or []) for r, t, b in con.execute(
        "SELECT r.run_id, r.tag, c.reasons FROM run_completeness c JOIN runs r USING (run_id) "
        "WHERE NOT c.complete AND c.judge = $judge AND ($model IS NULL OR r.model = $model) AND r.tag <> r.base_tag "
        "ORDER BY r.run_index", {"judge": judge, "model": model}).fetchall()]


def select_runs(root: str | Path, tag: str, model: str | None = None, runs: int | None = None,
                prefer_family: bool = False, con: duckdb.DuckDBPyConnection | None = None) -> Selection:
    """Per model: its run tagged ``tag``, or its family ``{tag}-run1 … N`` when it has no such run, when ``runs``
    asks for the first N members, or when ``prefer_family`` (one model's plain run tagged ``f`` never hides another
    model's family ``f-run1 … N``). One rule for every reader (view, compare, report, leaderboard, the API)."""
    if runs is not None and runs < 1:
        raise UsageError(f"--runs {runs} must be at least 1")
    found = find_runs(root, tag, model=model, con=con)
    chosen: list[RunRef] = []
    families: set[str] = set()
    for m in dict.fromkeys(r.model for r in found):
        exact = [r for r in found if r.model == m and r.tag == tag]
        family = [r for r in found if r.model == m and r.tag != tag and r.base_tag == tag
                  and (runs is None or r.run_index <= runs)]
        if family and (runs is not None or prefer_family or not exact):
            if runs is not None and len({r.run_index for r in family}) < runs:
                raise UsageError(f"--runs {runs} asked for, but only {len({r.run_index for r in family})} runs of "
                                 f"{tag!r}{f' ({m})' if len(found) > len(family) else ''} exist")
            chosen += family
            families.add(m)
        else:
            chosen += exact
    if not chosen:
        require_root(root)
        raise UsageError(f"no run tagged {tag!r}{f' for model {model!r}' if model else ''} under {root}"
                         f"; {tags_there(root, con)}")
    return Selection(tag, chosen, families)


def require_root(root: str | Path | Root) -> None:
    """Say that a results root is missing, not that it holds no such run: a command run from another directory
    reads ``results`` there."""
    if not (where := as_root(root)).joinpath("tables").exists():
        shown = where.resolve() if isinstance(where, Path) else where
        raise UsageError(f"no results root at {shown} (no tables/ there): give --results-dir DIR (or set "
                         "SHABERI_RESULTS_DIR) where shaberi run wrote its results")


def tags_there(root: Root, con: duckdb.DuckDBPyConnection | None = None) -> str:
    """The tags of a results root, for a message saying that the one asked for is not there: a family as the
    base tag that names it (``v1 (3 runs)``), other runs by their tag."""
    runs: dict[str, set[str]] = {}
    for r in find_runs(root, con=con):
        runs.setdefault(r.base_tag if r.tag != r.base_tag else r.tag, set()).add(r.tag)
    tags = [t if members == {t} else f"{t} ({len(members)} run{'s' if len(members) > 1 else ''})"
            for t, members in sorted(runs.items())]
    return f"tags there: {', '.join(tags[:20]) or 'none'}{' …' if len(tags) > 20 else ''}"
