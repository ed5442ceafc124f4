"""What running an original clone's code in a process of its own costs (``--judge-prompts CLONE``): its start, and
each reading of a judge reply, against the same evaluator run in this process (the floor, measured here).

    python bench/clone_replay.py [--data-dir ../shared/datasets] [--n 5000]

A reading is the clone's evaluator replayed on a stored reply: once per judgement (twice with its fallback), and
once per question when the run checks the clone before any call.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from shaberi import benchmarks as bm
from shaberi.judging import original


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=Path(os.environ.get("SHABERI_DATA_DIR", "../shared/datasets")))
    parser.add_argument("--n", type=int, default=5000)
    args = parser.parse_args()
    path = args.data_dir / "original" / "2025-11-26-263ac28"

    started = time.perf_counter()
    clone = original.load(path)
    start = time.perf_counter() - started
    rows = [clone.row("rakuda", {"question_id": str(i), "turns": [f"質問{i}"], "category": "c"}, f"回答{i}")
            for i in range(args.n)]
    reply = ["理由。\nFINAL SCORE: 7"]

    started = time.perf_counter()
    child = [clone.read("rakuda", row, "gpt-4.1-2025-04-14", reply) for row in rows]
    in_child = (time.perf_counter() - started) / args.n

    module, evaluators = original._load_here(path, bm.registry())
    started = time.perf_counter()
    here = [original._evaluate(evaluators["rakuda"], module.__file__, row, "gpt-4.1-2025-04-14", reply)
            for row in rows]
    in_process = (time.perf_counter() - started) / args.n
    assert child == here, "the child reads what this process reads"

    print(f"start of the clone's process: {start:.2f} s")
    print(f"per reading: {1e6 * in_child:.0f} µs in its process, {1e6 * in_process:.1f} µs in this one "
          f"(floor); {in_child / in_process:.1f}× the floor, {1e6 * (in_child - in_process):.0f} µs a reading more "
          f"({args.n} readings, all scored 7)")


if __name__ == "__main__":
    main()
