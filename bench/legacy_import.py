"""Legacy import and leaderboard on a real tree (default: ../shared/datasets/legacy/subset20, 132 MB).

    python bench/legacy_import.py [PATH] [--models N]

``--models N``: a tree of N models made from the given one's (each model's files hard-linked again under a
renamed model: ``--models 41`` is the size of the tree issue 34 measured, ``--models 520`` about the 3.4 GB of the
whole published tree). The copies are the same bytes, so the page cache holds them after the first read, as it
would a real tree read twice.

Whole `shaberi` processes, as a user runs them: `import-legacy` (wall time, peak RSS) and `leaderboard`
(median of 5), against two floors measured in the same run: `shaberi --help` (start-up), and reading and parsing
every line of the tree with orjson in a process per core (what any Python importer pays before building a row).
The import reads the tree once (every model staged, published once all are read), and reports the rows it set
aside.
Targets: import <= 2 s and <= 400 MB (41 models: issue 34); the whole tree <= 5 s; leaderboard <= 0.5 s.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import run_cli


def widened(tree: Path, models: int) -> Path:
    """``tree``'s files linked into a new tree of ``models`` models (the i-th copy of a model named ``<model>.cI``)."""
    data = tree / "data" if (tree / "data").is_dir() else tree
    by_model: dict[str, list[Path]] = defaultdict(list)
    for path in sorted(data.glob("*/*/*.json")) + sorted(data.glob("judgements/*/*/*.json")):
        by_model[path.stem].append(path)
    names = sorted(by_model)
    out = Path(tempfile.mkdtemp(prefix="shaberi-bench-legacy-tree-")) / "data"
    for i in range(models):
        name, copy = names[i % len(names)], i // len(names)
        for path in by_model[name]:
            target = out / path.parent.relative_to(data) / f"{name}{f'.c{copy}' if copy else ''}.json"
            target.parent.mkdir(parents=True, exist_ok=True)
            os.link(path, target)
    return out.parent


def _parse(files: list[Path]) -> int:
    rows = 0
    for path in files:
        for line in path.read_bytes().split(b"\n"):
            if line.strip():
                orjson.loads(line)
                rows += 1
    return rows


def parse_floor(tree: Path) -> float:
    """Seconds to read and parse every line of the tree's files, a process per core."""
    files = sorted(tree.rglob("*.json"))
    cores = len(os.sched_getaffinity(0))
    started = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(cores) as pool:
        pool.map(_parse, [files[i::cores] for i in range(cores)])
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("tree", nargs="?", type=Path, default=Path(__file__).resolve().parents[2] / "shared" /
                        "datasets" / "legacy" / "subset20")
    parser.add_argument("--models", type=int, default=0, help="a tree of this many models made from the given one's")
    args = parser.parse_args()
    tree = widened(args.tree, args.models) if args.models else args.tree
    size = sum(p.stat().st_size for p in tree.rglob("*.json")) / 1e6
    results = tempfile.mkdtemp(prefix="shaberi-bench-legacy-")
    floor = statistics.median(run_cli(["--help"])[0] for _ in range(5))
    parse_floor(tree)  # the page cache warm, as for the import
    parsed = statistics.median(parse_floor(tree) for _ in range(3))
    wall, rss = run_cli(["import-legacy", str(tree), "--results-dir", results])
    again, _ = run_cli(["import-legacy", str(tree), "--results-dir", results])
    board = statistics.median(run_cli(["leaderboard", "--format", "csv", "--results-dir", results])[0]
                              for _ in range(5))
    print(f"tree                      {tree} ({size:.0f} MB of JSON Lines)")
    print(f"shaberi --help (floor)    {floor:.2f} s")
    print(f"read and parse, per core  {parsed:.2f} s  (floor)")
    print(f"import-legacy             {wall:.2f} s  ratio {wall / floor:.1f}  {wall / parsed:.1f}x the parse  "
          f"peak RSS {rss} MB  (targets <= 2 s, <= 400 MB)")
    print(f"import-legacy again       {again:.2f} s  (adds nothing)")
    print(f"leaderboard               {board:.2f} s  ratio {board / floor:.1f}  (target <= 0.5 s)")


if __name__ == "__main__":
    main()
