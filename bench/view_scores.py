"""view-scores and the HTML report on a large results root: 1,000,000 judgement rows.

    python bench/view_scores.py [--rows 1000000]

Builds a results root of 250 runs (50 models × base tags of 5 runs) × 4 benchmarks × 250 questions × 4
judges, with the questions and answers the judgements belong to, so that the lineage rule has real work
(every judgement's answer hash is checked against its answer, and a tenth of one judge's answers also
carry a stale judgement of an earlier text), and with a 1,200-character reply in every judgement, as real
ones have. Then it times the whole `shaberi view` command (a fresh process, as a user runs it) for one run
and for a 5-run family, against the floor of `shaberi --help` (interpreter and CLI start-up) measured in
the same run. Target: under 1 s. Then the HTML report of a 5-run family with its 4 judges (agreement,
histograms, spread) and of two runs compared (movers: 5 per benchmark with every judge's reply); no target,
the figures say what a report costs at this size.
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

from shaberi.tables.schema import TABLES
from shaberi.tables.store import Store

BIN = Path(sys.executable).parent
T = 1_700_000_000_000_000
REPLY = "回答は質問の意図を正しく理解しており、要点を押さえています。" * 40 + "\nFINAL SCORE: 4"  # a judge's reply


def build(root: Path, rows: int) -> None:
    store = Store(root)
    per_run = 4 * 250 * 4
    for r in range(rows // per_run):
        model, index = f"model-{r // 5}", r % 5 + 1
        run_id = f"exp-run{index}__{model}"
        store.write_part("runs", run_id, [{"run_id": run_id, "tag": f"exp-run{index}", "base_tag": "exp",
                                           "run_index": index, "model": model, "status": "ok",
                                           "judges": [f"judge-{j}@http://127.0.0.1:9/v1" for j in range(4)],
                                           "created_at": T, "updated_at": T}])
        keys = [(b, str(q)) for b in ("elyza", "tengu", "mt_bench", "rakuda") for q in range(250)]
        store.write_part("questions", run_id, full_table("questions", {
            "run_id": [run_id] * len(keys), "benchmark": [b for b, _ in keys], "question_id": [q for _, q in keys],
            "turns": [["質問"]] * len(keys), "created_at": [T] * len(keys)}))
        hashes = [f"{r:04x}{i:012x}" for i in range(len(keys))]
        store.write_part("answers", run_id, full_table("answers", {
            "run_id": [run_id] * len(keys), "benchmark": [b for b, _ in keys], "question_id": [q for _, q in keys],
            "sample_index": [0] * len(keys), "strategy": [""] * len(keys), "model": [model] * len(keys),
            "content": ["回答です。"] * len(keys), "answer_hash": hashes, "created_at": [T] * len(keys)}))
        n = per_run
        a = [i % 1000 for i in range(n)]  # the answer each judgement judged: 4 judges × 1000 answers
        stale = [i for i in range(n) if i // 1000 == 0 and i % 10 == 0]  # judge-0 judged a tenth twice
        rows = {"run_id": [run_id] * n, "benchmark": [keys[k][0] for k in a], "question_id": [keys[k][1] for k in a],
                "sample_index": [0] * n, "strategy": [""] * n, "judge": [f"judge-{i // 1000}" for i in range(n)],
                "score": [float((i * 7 + r) % 5 + 1) for i in range(n)], "parse_method": ["final_score"] * n,
                "judge_output": [REPLY] * n,
                "prompt_hash": ["p1"] * n, "answer_hash": [hashes[k] for k in a], "created_at": [T] * n}
        for i in stale[: n - len(stale)]:  # an earlier answer's judgement, kept as history
            for name, value in (("answer_hash", "0" * 16), ("created_at", T - 1)):
                rows[name].append(value)
            for name in rows:
                if name not in ("answer_hash", "created_at"):
                    rows[name].append(rows[name][i])
        store.write_part("judgements", run_id, full_table("judgements", rows))


def full_table(name: str, columns: dict) -> pa.Table:
    schema = TABLES[name].schema
    n = len(next(iter(columns.values())))
    return pa.table({f.name: pa.array(columns[f.name], f.type) if f.name in columns else pa.nulls(n, f.type)
                     for f in schema}, schema=schema)


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
    print(f"results root: {args.rows:,} current judgement rows (and a tenth of a judge's stale) in "
          f"{len(list(root.glob('tables/runs/*')))} runs (built in {time.perf_counter() - start:.1f} s)")
    floor = timed(["--help"])
    single = timed(["view", "--tag", "exp-run3", "--model", "model-7", "--results-dir", str(root)])
    family = timed(["view", "--tag", "exp", "--model", "model-7", "--results-dir", str(root)])
    print(f"shaberi --help (floor)          {floor:.2f} s")
    print(f"view, one run                   {single:.2f} s  ratio {single / floor:.1f}  (target < 1 s)")
    print(f"view, 5-run family              {family:.2f} s  ratio {family / floor:.1f}  (target < 1 s)")
    out = str(root / "report.html")
    report = timed(["report", "--tag", "exp", "--model", "model-7", "--out", out, "--results-dir", str(root)], 3)
    print(f"report, 5-run family, 4 judges  {report:.2f} s  ratio {report / floor:.1f}")
    report = timed(["report", "--tag", "exp-run1", "--compare", "exp-run3", "--model", "model-7", "--out", out,
                    "--results-dir", str(root)], 3)
    print(f"report, two runs compared       {report:.2f} s  ratio {report / floor:.1f}")


if __name__ == "__main__":
    main()
