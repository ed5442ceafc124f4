"""The three passes over every real answer in the legacy trees (default: ../shared/datasets/legacy).

    python bench/passes.py [LEGACY_DIR]

Imports each tree (samples, subset20) into a temporary results root, runs lang_mixing, repetition and
format_validation over every run as ``--stages passes`` does, and prints: how many answers each pass
changes the score of, by reason; a sample of flagged spans; Spearman's rank correlation between the
lang_mixing ratio and the original Shaberi's % JA heuristic (the Japanese share of letters), per answer
and per model; and the passes' time per answer against a floor measured in the same run (reading the
answers and questions of every run, which any pass must do).
"""

from __future__ import annotations

import asyncio
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import duckdb
import orjson
from scipy.stats import spearmanr

from shaberi.legacy import import_tree
from shaberi.passes import build
from shaberi.passes.runner import answer_items, run_passes
from shaberi.tables.selection import find_runs
from shaberi.tables.store import Store

NAMES = "lang_mixing,repetition,format_validation"


def main() -> None:
    legacy = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2] / "shared" / \
        "datasets" / "legacy"
    results = Path(tempfile.mkdtemp(prefix="shaberi-bench-passes-"))
    for tree in sorted(p for p in legacy.iterdir() if (p / "data").is_dir()):
        report = import_tree(tree, results)
        print(f"imported {tree.name}: {report.models} models, {report.answers:,} answers")
    store = Store(results)
    run_ids = [r.run_id for r in find_runs(results)]

    started = time.perf_counter()
    answers = sum(sum(1 for _ in answer_items(store, run_id)) for run_id in run_ids)
    floor = time.perf_counter() - started
    started = time.perf_counter()
    for run_id in run_ids:
        asyncio.run(run_passes(store, run_id, build(NAMES)))
    took = time.perf_counter() - started
    print(f"\n{answers:,} answers in {len(run_ids)} runs; passes {took:.2f} s ({took / answers * 1e3:.2f} ms per "
          f"answer), floor (reading them) {floor:.2f} s: ratio {took / floor:.1f}")

    con = duckdb.connect()
    deltas = f"read_parquet('{results}/tables/pass_deltas/*/*.parquet')"
    answers_table = f"read_parquet('{results}/tables/answers/*/*.parquet')"
    print("\nanswers whose score a pass changes (delta ≠ 0), by reason:")
    for name in NAMES.split(","):
        rows = con.execute(f"SELECT detail FROM {deltas} WHERE pass_name = ? AND delta <> 0", [name]).fetchall()
        kinds: Counter[str] = Counter()
        for (detail,) in rows:
            d = orjson.loads(detail)
            if name == "lang_mixing":
                kinds.update({s["script"] for s in d["spans"]})
            elif name == "repetition":
                kinds.update(d["looping"] or ["truncated"])
            else:
                kinds.update([d["kind"]] if d["kind"] != "format" else [v["request"] for v in d["requests"]
                                                                         if not v["ok"]])
        print(f"  {name:<18} {len(rows):>5} of {answers:,} ({len(rows) / answers:.1%}): "
              + ", ".join(f"{k} {n}" for k, n in kinds.most_common()))

    print("\na sample of flagged spans (lang_mixing):")
    spans = [(b, q, s) for b, q, detail in con.execute(
        f"SELECT benchmark, question_id, detail FROM {deltas} WHERE pass_name = 'lang_mixing' AND delta <> 0 "
        "ORDER BY run_id, benchmark, question_id").fetchall() for s in orjson.loads(detail)["spans"]]
    for b, q, s in random.Random(0).sample(spans, min(12, len(spans))):
        print(f"  {f'{b}/{q}':<34} {s['script']:<20} {s['text'][:60]!r}")
    print("a sample of the other passes' reasons:")
    for name in ("repetition", "format_validation"):
        reasons = [r for (r,) in con.execute(f"SELECT reason FROM {deltas} WHERE pass_name = ? AND delta <> 0",
                                             [name]).fetchall()]
        for r in random.Random(0).sample(reasons, min(4, len(reasons))):
            print(f"  {name:<18} {r[:100]}")

    pairs = con.execute(f"""
        SELECT a.model, CAST(json_extract(d.detail, '$.ratio') AS DOUBLE) AS ratio,
               a.japanese_chars / a.letter_chars AS ja
        FROM {deltas} d JOIN {answers_table} a USING (run_id, benchmark, question_id, sample_index, strategy)
        WHERE d.pass_name = 'lang_mixing' AND a.letter_chars > 0""").fetchall()
    per_answer = spearmanr([p[1] for p in pairs], [p[2] for p in pairs])
    models: dict[str, list[tuple[float, float]]] = {}
    for model, ratio, ja in pairs:
        models.setdefault(model, []).append((ratio, ja))
    means = [(sum(r for r, _ in v) / len(v), sum(j for _, j in v) / len(v)) for v in models.values()]
    per_model = spearmanr([m[0] for m in means], [m[1] for m in means])
    print(f"\nSpearman rank correlation, lang_mixing ratio vs % JA: per answer rho = {per_answer.statistic:.3f} "
          f"(n = {len(pairs):,}, p = {per_answer.pvalue:.1e}); per model rho = {per_model.statistic:.3f} "
          f"(n = {len(means)}, p = {per_model.pvalue:.1e})")


if __name__ == "__main__":
    main()
