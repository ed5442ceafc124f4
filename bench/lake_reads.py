"""The read path on a real lake: the commands that read stored results, on the 20-model legacy subset and on the
whole published legacy tree, each imported into a lake of its own.

    python bench/lake_reads.py TREE [--subset PATH] [--repeat 3]

``TREE``: the ``data/`` folder of a clone of the original repository (``git clone
https://github.com/shisa-ai/shaberi``: about 3.4 GB, hundreds of models); ``--subset``: default
``../shared/datasets/legacy/subset20``. Whole ``shaberi`` processes (and one Python process for the API), as a
user runs them: the first time (the views' entries of ``shaberi.tables.memo`` not yet there: what the first
command after an import or a run pays) and the median of ``--repeat`` after, with the peak RSS, and the ratio
whole tree / 20 models. Targets (issue 52): leaderboard, the API's ``benchmark_scores()`` and ``sql count(*)``
within 2x, the API's peak RSS <= 400 MB, compare and report of two models within 1.5x.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import BIN, run_cli

HERE = Path(__file__).resolve().parent


def api(root: Path) -> tuple[float, int]:
    """``shaberi.open(root).benchmark_scores()`` in a fresh interpreter: (wall seconds, peak RSS in MB)."""
    code = ("import resource, sys, shaberi; shaberi.open(sys.argv[1]).benchmark_scores(); "
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    start = time.perf_counter()
    proc = subprocess.run([str(BIN / "python"), "-c", code, str(root)], capture_output=True, text=True, check=True)
    return time.perf_counter() - start, int(proc.stdout.split()[-1]) // 1024


def commands(root: Path, m1: str, m2: str, out: Path) -> dict[str, object]:
    where = ["--results-dir", str(root)]
    return {
        "leaderboard": ["leaderboard", *where],
        "API benchmark_scores()": lambda: api(root),
        "sql count(*) judgements": ["sql", "select count(*) from judgements", *where],
        "report --tag M1 --compare M2": ["report", "--tag", f"{m1}@legacy", "--compare", f"{m2}@legacy", "--out",
                                         str(out), *where],
        "compare M1 M2": ["compare", f"{m1}@legacy", f"{m2}@legacy", *where],
        "view --tag legacy --model M1": ["view", "--tag", "legacy", "--model", m1, *where],
    }


def timed(command: object) -> tuple[float, int]:
    return command() if callable(command) else run_cli(command)  # type: ignore[operator, arg-type]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tree", type=Path)
    parser.add_argument("--subset", type=Path, default=HERE.parent.parent / "shared/datasets/legacy/subset20")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if not args.tree.is_dir():
        sys.exit(f"no tree at {args.tree}: git clone https://github.com/shisa-ai/shaberi and give its data/ folder")
    work = Path(tempfile.mkdtemp(prefix="shaberi-bench-lakes-"))
    os.environ["SHABERI_STATE_DIR"] = str(work / "state")  # the views' entries: this run's own, empty at first
    lakes = {}
    for name, tree in (("20 models", args.subset), ("whole tree", args.tree)):
        root = work / name.replace(" ", "-")
        wall, rss = run_cli(["import-legacy", str(tree), "--results-dir", str(root)])
        runs = len(list((root / "tables" / "runs").iterdir()))
        print(f"import {name}: {runs} runs, {wall:.1f} s, {rss} MB")
        lakes[name] = root
    # two models both lakes hold (the subset's first two, as the leaderboard ranks them)
    board = subprocess.run([str(BIN / "shaberi"), "leaderboard", "--format", "csv", "--results-dir",
                            str(lakes["20 models"])], capture_output=True, text=True, check=True).stdout
    m1, m2 = (line.split(",")[0] for line in board.splitlines()[1:3])
    print(f"M1 = {m1}, M2 = {m2}\n")
    found: dict[str, dict[str, tuple[float, float, int]]] = {}
    for name, root in lakes.items():
        for label, command in commands(root, m1, m2, work / "report.html").items():
            first, _ = timed(command)
            walls, peaks = zip(*(timed(command) for _ in range(args.repeat)), strict=True)
            found.setdefault(label, {})[name] = (first, statistics.median(walls), max(peaks))
    print("| command | 20 models | whole tree | growth | first time (20 / whole) |\n|---|---|---|---|---|")
    for label, by in found.items():
        (f20, w20, r20), (fw, ww, rw) = by["20 models"], by["whole tree"]
        print(f"| `{label}` | {w20:.2f} s, {r20} MB | {ww:.2f} s, {rw} MB | {ww / w20:.2f}x "
              f"| {f20:.2f} s / {fw:.2f} s |")


if __name__ == "__main__":
    main()
