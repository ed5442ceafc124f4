"""Memory: peak RSS of a whole ``shaberi run`` process as the run grows.

    python bench/memory.py [--n 2000,20000]

Each size is one run of that many generations against the loopback server (no judge), its process's peak RSS
against floors measured in the same run: a bare aiohttp loop making the same 2,000 calls, the libraries and
modules a run imports (with one DuckDB database opened, as every run's end opens one), and a run of 20 calls.
Targets (issue 34): <= 150 MB at 2,000 generations and flat beyond. RSS counts the pages of the libraries'
code a process has run (DuckDB's own is about 40 MB once its queries have run), not only what it allocated.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import run_cli, synthetic_data_dir

from shaberi.testing import LoopbackServer

IMPORTS = ("import duckdb, shaberi.cli.run, shaberi.pipeline; from shaberi.cli.common import prepare_arrow; "
           "prepare_arrow(); duckdb.connect().execute('SELECT 1').fetchall()")
BARE = ("import asyncio, sys; sys.path.insert(0, {bench!r}); from _common import bare_aiohttp; "
        "asyncio.run(bare_aiohttp({url!r}, 2000, 60))")


def measure(server: LoopbackServer, n: int) -> tuple[float, int]:
    data = synthetic_data_dir(n)
    return run_cli(["run", "--model", "bench", "--base-url", server.base_url, "--benchmark", "rakuda",
                    "--results-dir", tempfile.mkdtemp(), "--data-dir", str(data)])


def peak_of(code: str) -> int:
    """Peak RSS (MB) of ``python -c code``, measured from a fresh intermediate process (RUSAGE_CHILDREN)."""
    probe = ("import resource, subprocess, sys; subprocess.run([sys.executable, '-c', sys.argv[1]], check=True); "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    return int(subprocess.run([sys.executable, "-c", probe, code], capture_output=True, text=True, check=True
                              ).stdout.split()[-1]) // 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", default="2000,20000")
    args = parser.parse_args()
    sizes = [int(n) for n in args.n.split(",")]
    with LoopbackServer() as server:
        bare = peak_of(BARE.format(bench=str(Path(__file__).resolve().parent), url=server.base_url))
        imports = peak_of(IMPORTS)
        _, small = measure(server, 20)
        peaks = [(n, *measure(server, n)) for n in sizes]
    print(f"bare aiohttp loop, 2,000 calls   {bare:5d} MB  (floor)")
    print(f"a run's imports + DuckDB opened  {imports:5d} MB  (floor of this architecture)")
    print(f"run, 20 generations              {small:5d} MB")
    for n, wall, peak in peaks:
        print(f"run, {n:,} generations {peak:5d} MB  {peak - small:+4d} MB over 20  ({wall:.1f} s)  "
              "(target <= 150 MB at 2,000, flat beyond)")


if __name__ == "__main__":
    main()
