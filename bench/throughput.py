"""Throughput: harness requests/s over a bare aiohttp loop's requests/s, same server, same run.

    python bench/throughput.py [--n 3000]

The server is the project's loopback server at zero latency in its own process. "stage" times the
generation stage in-process (planning, calls, journaling, Parquet parts, compaction); "process" times a
whole ``shaberi run`` command including interpreter start-up, imports, dataset loading and the closing
manifest and JSONL export.
Target: stage ratio >= 0.5.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
# pyarrow imports pandas (a statsmodels dependency) on its first array, a quarter of a second once per
# process: start-up, like the interpreter's, so the stage is timed in a warm process. The "whole
# process" figures include it.
import pandas  # noqa: F401
from _common import bare_aiohttp, run_cli, synthetic_data_dir

from shaberi.pipeline import RunRequest, execute
from shaberi.testing import LoopbackServer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=3000)
    args = parser.parse_args()
    data = synthetic_data_dir(args.n)
    with LoopbackServer() as server:
        asyncio.run(bare_aiohttp(server.base_url, 300, 60))  # warm-up
        floor = max(asyncio.run(bare_aiohttp(server.base_url, args.n, 60)) for _ in range(2))

        results = Path(tempfile.mkdtemp(prefix="shaberi-bench-"))
        req = RunRequest(model="bench", base_url=server.base_url, results_dir=results, data_dir=data,
                         benchmarks=["rakuda"], tag="stage", export=False)
        start = time.perf_counter()
        progress = execute(req).generation
        stage_rps = progress.calls / (time.perf_counter() - start)

        wall, _ = run_cli(["run", "--model", "bench", "--base-url", server.base_url, "--benchmark", "rakuda",
                              "--tag", "process", "--results-dir", str(results), "--data-dir", str(data)])
        process_rps = args.n / wall
        calls = server.stats()["calls"]

    print(f"requests per run        {args.n}")
    print(f"bare aiohttp loop       {floor:8.0f} req/s  (floor, best of 2)")
    print(f"shaberi stage           {stage_rps:8.0f} req/s  ratio {stage_rps / floor:.2f}  (target >= 0.5)")
    print(f"shaberi whole process   {process_rps:8.0f} req/s  ratio {process_rps / floor:.2f}  ({wall:.2f} s)")
    print(f"server calls            {calls} (expected {4 * args.n + 300})")


if __name__ == "__main__":
    main()
