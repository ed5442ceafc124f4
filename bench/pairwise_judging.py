"""``shaberi pairwise`` on the loopback server: 10 tags × 40 Rakuda questions, every pair against a sampled design.

    python bench/pairwise_judging.py [--tags 10] [--questions 40] [--opponents 4] [--latency-ms 200]

Ten runs of ten models are generated first (their answers carry a quality the loopback judge prefers, ``[[q=N]]``:
the model's true strength plus noise per question). Then each design is run as a user runs it, through the command
line, on a fresh copy of the results: every pair (n·(n−1)/2 pairs, both orders, every question), and ``--opponents
K`` (n·K/2 pairs). For each: the judge calls counted on the server, the wall time, and its ratio to the floor for
that many calls (calls × latency ÷ the client's 60 in flight: no client sends them faster), and Kendall's tau
between the fitted overall ratings and the true strengths (scipy). A second invocation of the same command is timed
too: it makes no call (every comparison reused) and only fits the ratings again.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy.stats import kendalltau

from shaberi.testing import LoopbackServer

BIN = Path(sys.executable).parent


def shaberi(*args: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    out = subprocess.run([str(BIN / "shaberi"), *args], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"shaberi {args[0]} failed ({out.returncode}): {out.stderr[-2000:]}")
    return time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tags", type=int, default=10)
    parser.add_argument("--questions", type=int, default=40)
    parser.add_argument("--opponents", type=int, default=4)
    parser.add_argument("--latency-ms", type=float, default=200.0)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    strength = {f"m{k}": float(x) for k, x in enumerate(np.linspace(2, 8, args.tags))}
    work = Path(tempfile.mkdtemp(prefix="shaberi-bench-pairwise-"))
    (work / "d" / "ja").mkdir(parents=True)
    with open(work / "d" / "ja" / "rakuda.jsonl", "w", encoding="utf-8") as fh:
        for i in range(args.questions):
            answers = " ".join(f"<<answer@{m}: {m}の回答{i}。[[q={max(0, round(s + rng.normal(0, 2)))}]]>>"
                               for m, s in strength.items())
            fh.write(json.dumps({"category": "bench", "question_id": f"q{i}", "text": f"質問{i} {answers}"},
                                ensure_ascii=False) + "\n")
    tags = [f"t{m}" for m in strength]
    with LoopbackServer(latency_ms=args.latency_ms, models=(*strength, "judge")) as server:
        for m in strength:
            shaberi("run", "--model", m, "--tag", f"t{m}", "--base-url", server.base_url, "--benchmark", "rakuda",
                    "--data-dir", str(work / "d"), "--results-dir", str(work / "generated"))
        print(f"{args.tags} tags × {args.questions} Rakuda questions, judge latency {args.latency_ms:g} ms, "
              "client at most 60 in flight", flush=True)
        for name, more in (("every pair", []), (f"--opponents {args.opponents}", ["--opponents", str(args.opponents)])):
            root = work / name.replace(" ", "_").strip("-")
            shutil.copytree(work / "generated", root)
            server.reset()
            command = ["pairwise", "--tags", ",".join(tags), "--judge", f"judge@{server.base_url}", "--results-dir",
                       str(root), "--bootstrap", "200", *more]
            wall, out = shaberi(*command)
            calls = server.stats()["calls"]
            again, _ = shaberi(*command)
            floor = calls * args.latency_ms / 1000 / 60
            rated = _ratings(root)
            tau = kendalltau([rated[t] for t in tags], [strength[t[1:]] for t in tags]).statistic
            design = next((line for line in out.stdout.splitlines() if line.startswith("pairwise ")), "")
            print(f"{name}: {calls:,} judge calls, {wall:.1f} s ({wall / floor:.2f}× the floor of {floor:.1f} s), "
                  f"again with nothing to call {again:.1f} s; Kendall tau against the true strengths {tau:.3f}"
                  f"\n  {design}", flush=True)
            assert server.stats()["calls"] == calls  # the second invocation called nothing


def _ratings(root: Path) -> dict[str, float]:
    import shaberi

    frame = shaberi.open(root).pairwise_ratings()
    return {t: r for b, t, r in frame.select("benchmark", "tag", "rating").iter_rows() if b == "*"}


if __name__ == "__main__":
    main()
