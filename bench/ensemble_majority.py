"""Majority vote over five real models' recorded MMLU-Pro answers: all 12,032 questions, zero model calls.

    python bench/ensemble_majority.py [DATA_DIR]       # default ../shared/datasets

Imports ``recorded/mmlu_pro/*.jsonl`` as five ensemble members (``import-responses``), runs quick-eval
with the majority strategy over every question, and prints each member's accuracy, the vote's, the
paired comparison (exact McNemar, paired t, Fisher) of the vote against the best member, and the wall
time of each step against a floor measured in the same run (reading the five files with orjson).

Then the same as a user runs it: whole ``shaberi ensemble import-responses`` and ``quick-eval`` processes (wall,
peak RSS), quick-eval grading every member (cold) and again from stored grades, against the floor of the
interpreter importing the libraries quick-eval needs and nothing of shaberi. Targets (issue 34): quick-eval
<= 3 s and <= 500 MB.
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import BIN, run_cli

from shaberi.ensemble import cache
from shaberi.ensemble import datasets as gt
from shaberi.ensemble.evaluate import quick_eval
from shaberi.ensemble.gate import compare

MEMBERS = ["Meta-Llama-3_1-8B-Instruct", "Mistral-7B-Instruct-v0.2", "Qwen1.5-7B-Chat", "Yi-6b-Chat", "gemma-7b"]


def main() -> None:
    data = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2] / "shared" / "datasets"
    files = [data / "recorded" / "mmlu_pro" / f"{m}.jsonl" for m in MEMBERS]
    results = Path(tempfile.mkdtemp(prefix="shaberi-bench-ensemble-"))

    started = time.perf_counter()
    for f in files:
        [orjson.loads(line) for line in f.read_bytes().splitlines()]
    floor = time.perf_counter() - started

    started = time.perf_counter()
    dataset = gt.load("mmlu_pro", data)
    cache.import_responses(results, "recorded-5", dataset, files)
    imported = time.perf_counter() - started

    started = time.perf_counter()
    result = asyncio.run(quick_eval(results, "recorded-5", ["majority"], ["mmlu_pro"], sample=10**6, seed=0))
    evaluated = time.perf_counter() - started
    again_started = time.perf_counter()
    asyncio.run(quick_eval(results, "recorded-5", ["majority"], ["mmlu_pro"], sample=10**6, seed=0))
    again = time.perf_counter() - again_started

    d = result.datasets["mmlu_pro"]
    vote = d.strategies["majority"].correct
    print(f"MMLU-Pro, {len(d.question_ids):,} questions, {d.n_members} recorded members, 0 model calls")
    for name, acc in zip(MEMBERS, d.member_accuracy, strict=True):
        print(f"  member  {name:<28} {acc:6.1%}")
    print(f"  majority vote                        {sum(vote) / len(vote):6.1%}  (mean of members "
          f"{sum(d.samples_mean) / len(d.samples_mean):.1%})")
    best = max(range(d.n_members), key=lambda i: d.member_accuracy[i])
    store_grades = _member_vector(results, best, d.question_ids)
    c = compare("mmlu_pro", "majority", store_grades, vote, d.samples_mean)
    print(f"\nvote vs the best member ({MEMBERS[best]}), paired by question: {100 * c.difference:+.2f} points "
          f"(95 % CI {100 * c.ci_low:+.2f} to {100 * c.ci_high:+.2f}); lost {c.worse}, gained {c.better}; "
          f"McNemar one-sided p = {c.p_mcnemar:.3g}, Fisher p = {c.p_fisher:.3g}; detectable regression at 80 % "
          f"power: {100 * c.mde:.2f} points")
    print(f"\nwall time: reading the five files {floor:.2f} s (floor); import-responses {imported:.2f} s "
          f"({imported / floor:.1f}×); quick-eval, grading every member and voting {evaluated:.2f} s "
          f"({evaluated / floor:.1f}×); again, all from stored grades {again:.2f} s ({again / floor:.1f}×)")
    whole_processes(data, files)


LIBRARIES = "import duckdb, pyarrow.parquet, rich, scipy.stats, statsmodels.stats.multitest, typer"


def whole_processes(data: Path, files: list[Path]) -> None:
    results = tempfile.mkdtemp(prefix="shaberi-bench-ensemble-cli-")
    common = ["--results-dir", results, "--data-dir", str(data)]
    run_cli(["ensemble", "import-responses", *map(str, files), "--dataset", "mmlu_pro", "--model", "recorded-5",
             *common])
    quick = ["ensemble", "quick-eval", "--model", "recorded-5", "--sample", "1000000", "--out",
             str(Path(results) / "qe.json"), *common]
    cold, cold_rss = run_cli(quick)
    again, again_rss = run_cli(quick)
    floor = statistics.median(timed([str(BIN / "python"), "-c", LIBRARIES]) for _ in range(3))
    print(f"\nwhole processes: the libraries' import alone {floor:.2f} s (floor: {LIBRARIES.removeprefix('import ')})"
          f"; quick-eval grading every member {cold:.2f} s, {cold_rss} MB; again {again:.2f} s, {again_rss} MB "
          "(targets <= 3 s, <= 500 MB)")


def timed(args: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(args, capture_output=True, check=True)
    return time.perf_counter() - started


def _member_vector(results: Path, index: int, ids: list[str]) -> list[int]:
    from shaberi.tables.sql import connect

    con = connect(results)
    got = dict(con.execute("SELECT question_id, score FROM judgements WHERE strategy = '' AND sample_index = ?",
                           [index]).fetchall())
    return [int(got.get(q) or 0) for q in ids]


if __name__ == "__main__":
    main()
