"""The CI gate on a committed cache: wall time of ``shaberi ensemble check`` and what it can detect.

    python bench/ensemble_gate.py [DATA_DIR]       # default ../shared/datasets

Imports the five recorded MMLU-Pro models into a committed-cache directory (``--cache-dir``), then times
whole ``check`` processes (majority, the configuration of ``baselines/quick-eval.json``) at ``--sample
500`` and on all 12,032 questions: cold (a fresh results root: the cache file read in, every member
graded) and warm (grades reused), against a floor measured in the same run (``shaberi --help``, the
process start). Counts the calls the results root recorded (there is no endpoint at all: 0). Then the
detectable regression (80 % power, exact McNemar at α ÷ m, here α = 0.1 and m = 2) at n = 30, 100, 500
and 12,032, at the discordance observed on all questions, and the exact power of each against 4,000
simulated studies.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy import stats

from shaberi.ensemble.gate import detectable, power

MEMBERS = ["Meta-Llama-3_1-8B-Instruct", "Mistral-7B-Instruct-v0.2", "Qwen1.5-7B-Chat", "Yi-6b-Chat", "gemma-7b"]


def shaberi(*args: str) -> float:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "shaberi", *args], capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise SystemExit(done.stderr)
    return time.perf_counter() - started


def main() -> None:
    data = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2] / "shared" / "datasets"
    work = Path(tempfile.mkdtemp(prefix="shaberi-bench-gate-"))
    files = [str(data / "recorded" / "mmlu_pro" / f"{m}.jsonl") for m in MEMBERS]
    imported = shaberi("ensemble", "import-responses", "--dataset", "mmlu_pro", "--model", "recorded-5", *files,
                       "--data-dir", str(data), "--cache-dir", str(work / ".cache" / "ensemble"), "--results-dir",
                       str(work / "import"))
    (cached,) = (work / ".cache").rglob("*.parquet")
    floor = min(shaberi("--help") for _ in range(3))
    print(f"import-responses into --cache-dir: {imported:.2f} s; cache file {cached.stat().st_size / 1e6:.1f} MB; "
          f"floor (shaberi --help) {floor:.2f} s")
    final = {}
    for sample in (500, 12_032):
        config = work / f"quick-eval-{sample}.json"
        config.write_text(json.dumps({"alpha": 0.1, "models": {"recorded-5": {
            "datasets": ["mmlu_pro"], "strategies": ["majority"], "sample": sample, "seed": 0}}}))
        results = work / f"results-{sample}"
        args = ["ensemble", "check", "--model", "recorded-5", "--baseline-file", str(config), "--cache-dir",
                str(work / ".cache"), "--data-dir", str(data), "--results-dir", str(results), "--out",
                str(work / f"gate-{sample}.json")]
        cold = shaberi(*args)
        warm = min(shaberi(*args) for _ in range(3))
        from shaberi.tables.sql import connect

        calls = connect(results).execute("SELECT coalesce(sum(requests), 0) FROM token_usage").fetchone()
        final[sample] = json.loads((work / f"gate-{sample}.json").read_text())["datasets"]["mmlu_pro"]
        print(f"check --sample {sample:>6,}: cold {cold:5.2f} s ({cold / floor:4.1f}× floor), warm {warm:5.2f} s "
              f"({warm / floor:4.1f}×); calls recorded: {calls[0]}")
    d = final[12_032]
    vote = d["strategies"]["majority"]["correct"]
    discordance = sum(1 for b, v in zip(d["baseline"], vote, strict=True) if b is not None and v is not None
                      and b != v) / len(vote)
    print(f"\ndetectable regression, 80 % power, exact one-sided McNemar at α/m = 0.1/2, discordance "
          f"{discordance:.1%} (majority vs Llama-3.1 on all questions):")
    rng = np.random.default_rng(0)
    for n in (30, 100, 500, 12_032):
        drop = detectable(n, discordance, 0.05)
        if not np.isfinite(drop):
            print(f"  n = {n:>6,}: none (even every discordant question lost is detected less than 80 % of the time;"
                  f" power then {power(n, discordance, discordance, 0.05):.2f})")
            continue
        lost, gained = (discordance + drop) / 2, (discordance - drop) / 2
        tables = rng.multinomial(n, [lost, gained, 1 - lost - gained], size=4000)
        b, c = tables[:, 0], tables[:, 1]
        simulated = float(np.mean(np.where(b + c > 0, stats.binom.sf(b - 1, b + c, 0.5), 1.0) <= 0.05))
        print(f"  n = {n:>6,}: {100 * drop:5.2f} points (simulated power {simulated:.3f})")


if __name__ == "__main__":
    main()
