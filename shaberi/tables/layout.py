"""Part files: how a partition's Parquet parts are named, and which of them hold its rows.

Kept apart from the store (which needs pyarrow) so that commands that only read (``view``, ``leaderboard``)
can list parts without importing it.
"""

from __future__ import annotations

from pathlib import Path

from .location import Root, glob_in

__all__ = ["live_parts", "live_parts_under", "part_name", "part_seq"]


def part_name(seq: int, covers: int | None = None) -> str:
    """``part-<seq>.parquet``, or ``part-<seq>~<covers>.parquet`` for a part that holds every row of the
    partition's parts up to ``covers`` (written by ``Store.replace`` and ``Store.compact``)."""
    return f"part-{seq}~{covers}.parquet" if covers is not None else f"part-{seq}.parquet"


def part_seq(path: Path) -> int:
    return int(path.stem.removeprefix("part-").partition("~")[0])


def live_parts(paths: list[Path]) -> list[Path]:
    """The parts of one partition that hold its rows, oldest first: the parts a covering part replaced are
    skipped, should a crash have left them behind (a summed table would otherwise count them twice)."""
    paths = sorted(paths, key=part_seq)
    covering = [p for p in paths if "~" in p.stem]
    if not covering:
        return paths
    top = max(covering, key=part_seq)
    covered = int(top.stem.partition("~")[2])
    return [p for p in paths if p == top or part_seq(p) > covered]


def live_parts_under(table_dir: Root, folders: str = "*") -> tuple[list[Root], int]:
    """The live parts of every partition of a table whose folder matches ``folders``, and how many parts were
    listed in all (more than live ones: replaced parts a crash, or a recent ``Store.replace``, left behind)."""
    by_run: dict[Root, list[Root]] = {}
    listed = 0
    for part in glob_in(table_dir, f"{folders}/part-*.parquet"):
        by_run.setdefault(part.parent, []).append(part)
        listed += 1
    return [p for parts in by_run.values() for p in live_parts(parts)], listed
