"""Latency-bound throughput: 100 ms per request, a server capacity of 64 the client is not told.

    python bench/latency.py [--n 3000]

Prints wall time over the ideal N × 0.1 s / 64 (the server's capacity fully used from the first to the
last request) and the share of requests answered 429. Target: ratio <= 1.15, 429 < 5 %. The capacity is
above the default maximum of 60: caps below it, and seconds of latency, are bench/rate_control.py's.
"Whole stage" includes loading the dataset and writing the run's Parquet parts; "calls only" is the
span from the first request sent to the last answer. For scale it also prints a bare aiohttp loop
holding 60 requests in flight (the default maximum, --concurrency) against the same server: 64/60 = 1.067 is the
best any client capped at 60 can do.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
# pyarrow imports pandas (a statsmodels dependency) on its first array, a quarter of a second once per
# process: start-up, like the interpreter's, so the stage is timed in a warm process. The "whole
# process" figures include it.
import pandas  # noqa: F401
from _common import bare_aiohttp, synthetic_data_dir

from shaberi.pipeline import RunRequest, execute
from shaberi.tables.sql import connect
from shaberi.testing import LoopbackServer

LATENCY, CAPACITY = 0.100, 64


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=3000)
    args = parser.parse_args()
    data = synthetic_data_dir(args.n)
    ideal = args.n * LATENCY / CAPACITY
    with LoopbackServer(latency_ms=LATENCY * 1000, capacity=CAPACITY) as server:
        bare = args.n / asyncio.run(bare_aiohttp(server.base_url, args.n, 60))
        server.reset()
        results = Path(tempfile.mkdtemp())
        req = RunRequest(model="bench", base_url=server.base_url, results_dir=results, data_dir=data,
                         benchmarks=["rakuda"], export=False)
        start = time.perf_counter()
        progress = execute(req).generation
        wall = time.perf_counter() - start
        stats = server.stats()
        start = time.perf_counter()
        execute(replace(req, tag="with-export", export=True))
        with_export = time.perf_counter() - start
    ((span,),) = connect(results).execute(
        "SELECT epoch(max(a.created_at)) - min(epoch(a.created_at) - a.latency_ms / 1000) FROM answers a "
        "JOIN runs r USING (run_id) WHERE r.tag = 'default'").fetchall()
    sent = stats["calls"]
    rejected = stats["by_status"].get("429", 0)
    print(f"requests                {args.n} answered, {sent} sent, peak {stats['peak_in_flight']} in flight")
    print(f"ideal (N x 0.1 s / 64)  {ideal:6.2f} s")
    print(f"bare aiohttp loop, 60   {bare:6.2f} s  ratio {bare / ideal:.3f}  (what 60 in flight costs here)")
    print(f"shaberi, whole stage    {wall:6.2f} s  ratio {wall / ideal:.3f}  (target <= 1.15)")
    print(f"shaberi, with export    {with_export:6.2f} s  ratio {with_export / ideal:.3f}  (the run's manifest and "
          "JSONL artifacts added)")
    print(f"shaberi, calls only     {span:6.2f} s  ratio {span / ideal:.3f}  (first request sent to last answer)")
    print(f"429 responses           {rejected} = {100 * rejected / sent:.2f} % of requests  (target < 5 %)")
    assert progress.calls == args.n


if __name__ == "__main__":
    main()
