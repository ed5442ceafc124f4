"""Legacy import and leaderboard on a real tree (default: ../shared/datasets/legacy/subset20, 132 MB).

    python bench/legacy_import.py [PATH]

Whole `shaberi` processes, as a user runs them: `import-legacy` (wall time, peak RSS) and `leaderboard`
(median of 5), against the floor of `shaberi --help` measured in the same run. The import reads the tree
twice (checked whole before anything is written, then imported: about 0.3 s of the time on subset20), and
reports the rows it set aside.
Targets: import <= 2 s and <= 400 MB; leaderboard <= 0.5 s.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import run_cli


def main() -> None:
    tree = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2] / "shared" / "datasets" / \
        "legacy" / "subset20"
    size = sum(p.stat().st_size for p in tree.rglob("*.json")) / 1e6
    results = tempfile.mkdtemp(prefix="shaberi-bench-legacy-")
    floor = statistics.median(run_cli(["--help"])[0] for _ in range(5))
    wall, rss = run_cli(["import-legacy", str(tree), "--results-dir", results])
    again, _ = run_cli(["import-legacy", str(tree), "--results-dir", results])
    board = statistics.median(run_cli(["leaderboard", "--format", "csv", "--results-dir", results])[0]
                              for _ in range(5))
    print(f"tree                      {tree} ({size:.0f} MB of JSON Lines)")
    print(f"shaberi --help (floor)    {floor:.2f} s")
    print(f"import-legacy             {wall:.2f} s  ratio {wall / floor:.1f}  peak RSS {rss} MB  "
          "(targets <= 2 s, <= 400 MB)")
    print(f"import-legacy again       {again:.2f} s  (adds nothing)")
    print(f"leaderboard               {board:.2f} s  ratio {board / floor:.1f}  (target <= 0.5 s)")


if __name__ == "__main__":
    main()
