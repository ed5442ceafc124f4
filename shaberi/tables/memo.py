"""Views computed once per run: what a run's rows make of a view in ``PER_RUN_VIEWS`` is kept on this machine,
keyed by the run's parts, and read back instead of computed again.

Why: the rules at the bottom of the view stack (the latest row of every key, the lineage of every judgement) are
window functions over every row of the lake, and every table is hundreds of small parts, one per run: on a lake of
hundreds of runs each command that read them (the leaderboard, a count in ``shaberi sql``) paid seconds. A run's
rows of these views come from that run's partitions of the tables the view reads and the reference tables alone,
and a part never changes once written (a new part has a new name), so the rows computed once stay right for as
long as the run has the same parts. A run's **key** hashes its id, its live parts' names in those tables and the
rules (every ``sql/`` script, the reference tables, the declared columns, DuckDB's version). Nothing is
invalidated: a run whose parts changed has another key, and is computed again. The rule stays in its SQL view,
the one place; this only remembers what it gave.

The entries of a view are a few **segments**, Parquet files of many runs' rows (a column ``_memo_key`` says whose),
each listing the keys it holds in its footer (``memo_keys``), so that a command reads a handful of files, not one
per run. The runs a command finds no entry for are computed in one pass and written as a new segment; beyond
``MERGE_AT`` segments they are merged into one that keeps each run's newest rows, named as a part that covers the
older ones (``layout.live_parts``: readers skip those); covered segments are deleted once older than ``GRACE``
seconds, so that a reader that listed them a moment ago can still read them.

Entries live under ``$SHABERI_STATE_DIR`` (default ``~/.cache/shaberi``) ``/views/<hash of the root>/<hash of the
rules>/<view>/``,
outside the results root: a command that only reads writes nothing there, and a remote root's entries are on the
machine that reads it. Where they cannot be written or computed (an inf score the view's mean cannot sum), the views
are left as they are defined: a command that never reads them never fails on them.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import duckdb
import orjson

from .layout import live_parts, part_name, part_seq
from .location import Root, glob_literal, is_remote

__all__ = ["PER_RUN_VIEWS", "memo_dir", "remember", "rules_key", "run_keys"]

# The views whose rows of a run depend only on that run's partitions of these tables and on the reference tables
# (never on another run, a writer's liveness, the prices or the clock). ``tests/test_memo.py`` writes to each
# table and checks every view's entries against the view itself, and that each table left out of a list is caught.
PER_RUN_VIEWS: dict[str, tuple[str, ...]] = {
    "run_rows": ("runs",),
    "answer_letters": ("answers",),
    "judgement_history": ("answers", "judgements"),
    "score_means": ("answers", "judgements", "pass_deltas"),
    "judge_coverage": ("answers", "judgements", "runs"),  # runs: the judges a run names, not its status
}
MERGE_AT = 8  # segments of a view before they are merged into one
GRACE = 600.0  # seconds a covered segment is kept for the readers that listed it
_KEYS = "memo_keys"


def memo_dir(root: Root) -> Path:
    """Where the entries of ``root`` live (module docstring)."""
    base = Path(os.environ.get("SHABERI_STATE_DIR") or Path.home() / ".cache" / "shaberi")
    where = str(root) if is_remote(root) else os.path.realpath(root)
    return base / "views" / hashlib.sha256(where.encode()).hexdigest()[:16]


def rules_key(*texts: str) -> str:
    """A hash of everything besides a run's parts that a view's rows depend on."""
    digest = hashlib.sha256(duckdb.__version__.encode())
    for text in texts:
        digest.update(b"\0" + text.encode())
    return digest.hexdigest()


def run_keys(view: str, rules: str, parts: Mapping[str, Iterable[Root]], runs: Iterable[str] = ()) -> dict[str, str]:
    """Each run's key for ``view``: its id, the rules and the names of its live parts in the tables the view reads
    (``parts``: table -> live parts); ``runs``: runs to key even where they have no part in those tables."""
    names: dict[str, list[str]] = {run: [] for run in runs}
    for table in PER_RUN_VIEWS[view]:
        for p in parts.get(table, ()):
            names.setdefault(p.parent.name.removeprefix("run_id="), []).append(f"{table}/{p.name}")
    return {run: hashlib.sha256("\n".join([view, rules, run, *sorted(n)]).encode()).hexdigest()[:32]
            for run, n in names.items()}


def remember(con: duckdb.DuckDBPyConnection, view: str, where: Path, rules: str, keys: Mapping[str, str],
             name: Callable[[Path], str], entry: str | None = None) -> bool:
    """Make ``view`` read the entries of the runs ``keys`` names (run -> key), first computing, from the view as it
    is defined now, the runs that have none; False when they cannot be written (the view is left as it was).
    ``name``: a file's name as the connection's readers must be given it; ``entry``: whose entries these are, when
    the view has another name in this connection."""
    folder = where / rules[:16] / (entry or view)  # one schema per folder: the rules name the columns
    try:
        folder.mkdir(parents=True, exist_ok=True)
        segments = _segments(con, folder)
        held = {k for ks in segments.values() for k in ks}
        if missing := {run: key for run, key in keys.items() if key not in held}:
            path, written = _write(con, view, folder, missing)
            segments[path] = written
        if len(segments) > MERGE_AT:
            segments = _merge(con, folder, segments)
        _collect(folder)
    except (OSError, duckdb.Error):  # unwritable, or a row the view itself fails on: raised only where it is read
        return False
    wanted = set(keys.values())
    if used := [p for p, ks in segments.items() if ks.keys() & wanted]:
        files = ", ".join(_literal(name(p)) for p in used)
        chosen = ", ".join(_literal(k) for k in sorted(wanted))
        con.execute(f"CREATE OR REPLACE VIEW {view} AS SELECT * EXCLUDE (_memo_key) FROM read_parquet([{files}]) "
                    f"WHERE _memo_key IN ({chosen})")
    return True


def _literal(text: str) -> str:
    return "'{}'".format(text.replace("'", "''"))


def _segments(con: duckdb.DuckDBPyConnection, folder: Path) -> dict[Path, dict[str, str]]:
    """The live segments, oldest first, each with the keys it holds (key -> run)."""
    found = {}
    for p in live_parts(list(folder.glob("part-*.parquet"))):
        row = con.execute("SELECT value FROM parquet_kv_metadata($file) WHERE decode(key) = $key",
                          {"file": glob_literal(p), "key": _KEYS}).fetchone()
        found[p] = orjson.loads(row[0]) if row else {}
    return found


def _write(con: duckdb.DuckDBPyConnection, view: str, folder: Path, runs: Mapping[str, str],
           covers: int | None = None, source: str | None = None) -> tuple[Path, dict[str, str]]:
    """A new segment: the view's rows of ``runs`` (run -> key), or the rows ``source`` selects; written whole."""
    final = folder / part_name(time.time_ns(), covers)
    tmp = folder / f".{final.name}.tmp"
    keys = {key: run for run, key in runs.items()}
    if source is None:
        con.execute("CREATE OR REPLACE TEMP TABLE _memo_runs (run_id VARCHAR, _memo_key VARCHAR)")
        con.executemany("INSERT INTO _memo_runs VALUES (?, ?)", list(runs.items()))
        source = f"SELECT v.*, m._memo_key FROM {view} v JOIN _memo_runs m USING (run_id)"
    metadata = _literal(orjson.dumps(keys).decode())
    try:
        con.execute(f"COPY ({source}) TO {_literal(glob_literal(tmp))} (FORMAT parquet, COMPRESSION zstd, "
                    f"KV_METADATA {{{_KEYS}: {metadata}}})")
        os.replace(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)
        con.execute("DROP TABLE IF EXISTS _memo_runs")
    return final, keys


def _merge(con: duckdb.DuckDBPyConnection, folder: Path, segments: dict[Path, dict[str, str]]
           ) -> dict[Path, dict[str, str]]:
    """One segment for ``segments``: each run's rows of the newest segment that holds it."""
    newest: dict[str, str] = {}  # run -> key
    for keys in segments.values():
        newest |= {run: key for key, run in keys.items()}
    files = ", ".join(_literal(glob_literal(p)) for p in segments)
    held = ", ".join(_literal(k) for k in newest.values()) or "NULL"
    path, keys = _write(con, "", folder, newest, covers=max(map(part_seq, segments)),
                        source=f"SELECT * FROM read_parquet([{files}]) WHERE _memo_key IN ({held})")
    return {path: keys}


def _collect(folder: Path) -> None:
    """Delete the segments a newer one covers, once no reader can still be reading them (``GRACE``)."""
    every = list(folder.glob("part-*.parquet"))
    live = set(live_parts(every))
    for p in every:
        if p not in live and time.time() - p.stat().st_mtime > GRACE:
            p.unlink(missing_ok=True)
