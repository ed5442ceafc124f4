"""view-scores on a large results root: 1,000,000 judgement rows.

    python bench/view_scores.py [--rows 1000000]

Builds a results root of 250 runs (50 models × base tags of 5 runs) × 4 benchmarks × 250 questions × 4
judges, then times the whole `shaberi view` command (a fresh process, as a user runs it) for one run
and for a 5-run family, against the floor of `shaberi --help` (interpreter and CLI start-up) measured
in the same run. Target: under 1 s.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

from shaberi.schema import TABLES
from shaberi.store import Store

BIN = Path(sys.executable).parent
T = 1_700_000_000_000_000


def build(root: Path, rows: int) -> None:
    store = Store(root)
    per_run = 4 * 250 * 4
    for r in range(rows // per_run):
        model, index = f"model-{r // 5}", r % 5 + 1
        run_id = f"exp-run{index}__{model}"
        store.write_part("runs", run_id, [{"run_id": run_id, "tag": f"exp-run{index}", "base_tag": "exp",
                                           "run_index": index, "model": model, "status": "complete",
                                           "created_at": T, "updated_at": T}])
        n = per_run
        bench = [b for b in ("elyza", "tengu", "mt_bench", "rakuda") for _ in range(1000)]
        score = [float((i * 7 + r) % 5 + 1) for i in range(n)]
        table = pa.table({"run_id": [run_id] * n, "benchmark": bench,
                          "question_id": [str(i % 250) for i in range(n)], "sample_index": [0] * n,
                          "strategy": [""] * n, "judge": [f"judge-{i // 250 % 4}" for i in range(n)],
                          "score": score, "created_at": [T] * n})
        table = table.append_column("parse_method", pa.array(["final_score"] * n))
        full = {name: table.column(name) if name in table.column_names else pa.nulls(n, f.type)
                for name, f in zip(TABLES["judgements"].schema.names, TABLES["judgements"].schema, strict=True)}
        store.write_part("judgements", run_id, pa.table(full, schema=TABLES["judgements"].schema))


def timed(args: list[str], repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run([str(BIN / "shaberi"), *args], check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="shaberi-bench-view-"))
    start = time.perf_counter()
    build(root, args.rows)
    print(f"results root: {args.rows:,} judgement rows in {len(list(root.glob('tables/runs/*')))} runs "
          f"(built in {time.perf_counter() - start:.1f} s)")
    floor = timed(["--help"])
    single = timed(["view", "--tag", "exp-run3", "--model", "model-7", "--results-dir", str(root)])
    family = timed(["view", "--tag", "exp", "--model", "model-7", "--results-dir", str(root)])
    print(f"shaberi --help (floor)          {floor:.2f} s")
    print(f"view, one run                   {single:.2f} s  ratio {single / floor:.1f}  (target < 1 s)")
    print(f"view, 5-run family              {family:.2f} s  ratio {family / floor:.1f}  (target < 1 s)")


if __name__ == "__main__":
    main()
