"""Memory: peak RSS of ``shaberi export`` as a reasoning model's run grows.

    python bench/export_memory.py [--answers 16000] [--thinking 20000]

Each answer carries ``--thinking`` characters of reasoning (16,000 × 20,000: a 960 MB run as JSON Lines). The
floor is the export of the same number of short answers, measured in the same run: the difference is what the
texts cost. Target: flat in the size of the run (the export streams them, ``shaberi.tables.stream``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import run_cli

from shaberi.testing import LoopbackServer


def exported(server: LoopbackServer, results: str, tag: str, n: int, thinking: int) -> tuple[float, int, int]:
    """(export seconds, its peak RSS in MB, the size of its JSON Lines in MB) of a fresh run of ``n`` answers."""
    data = Path(tempfile.mkdtemp(prefix="shaberi-bench-data-"))
    (data / "ja").mkdir()
    with open(data / "ja" / "rakuda.jsonl", "w", encoding="utf-8") as fh:
        for i in range(n):
            text = f"[[think:{thinking}]] 質問{i}" if thinking else f"質問{i}"
            fh.write(json.dumps({"category": "bench", "question_id": f"q{i:06d}", "text": text}, ensure_ascii=False)
                     + "\n")
    run_cli(["run", "--model", "bench", "--tag", tag, "--base-url", server.base_url, "--benchmark", "rakuda",
             "--results-dir", results, "--data-dir", str(data)])
    wall, peak = run_cli(["export", "--results-dir", results, "--tag", tag])
    size = (Path(results) / "bench" / tag / "artifacts" / "shaberi" / "normalized" / "answers.jsonl").stat().st_size
    return wall, peak, size >> 20


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--answers", type=int, default=16000)
    parser.add_argument("--thinking", type=int, default=20000)
    args = parser.parse_args()
    results = tempfile.mkdtemp(prefix="shaberi-bench-")
    with LoopbackServer() as server:
        floor = exported(server, results, "short", args.answers, 0)
        small = exported(server, results, "thinking-315", 315, args.thinking)
        large = exported(server, results, "thinking", args.answers, args.thinking)
    for name, (wall, peak, size) in (("short answers (floor)", floor), ("315 thinking", small),
                                     (f"{args.answers:,} thinking", large)):
        print(f"export, {name:24s} {size:6,d} MB of JSONL  peak RSS {peak:5d} MB  (+{peak - floor[1]:4d} over the "
              f"floor)  {wall:6.1f} s")


if __name__ == "__main__":
    main()
