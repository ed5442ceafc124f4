"""Fixed cost per command: what a process spends besides its requests.

    python bench/startup.py [--latency 1.0] [--n 20]

Whole ``shaberi`` processes, medians of 5: ``shaberi --help``, and a run of ``--n`` calls against a loopback
server answering after ``--latency`` seconds, split by the server's clock into the time before its first request
arrived, the requests' span, and the time after its last answer. Against floors measured in the same run:
the interpreter alone, and the interpreter importing the libraries a run needs (aiohttp, pyarrow, duckdb, jinja2,
typer) and nothing of shaberi. Targets (issue 34): ``--help`` <= 0.3 s; a 20-call run's process within 0.5 s of
its requests' span.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import BIN, synthetic_data_dir

from shaberi.testing import LoopbackServer

LIBRARIES = "import aiohttp, duckdb, jinja2, orjson, pyarrow.parquet, rich, typer"


def timed(args: list[str]) -> float:
    started = time.monotonic()
    subprocess.run(args, capture_output=True, check=True)
    return time.monotonic() - started


def run(server: LoopbackServer, data: Path, latency: float) -> tuple[float, float, float]:
    """(before the first request, the requests' span, after the last answer), seconds."""
    server.reset()
    started = time.monotonic()
    subprocess.run([str(BIN / "shaberi"), "run", "--model", "fake-model", "--base-url", server.base_url,
                    "--benchmark", "rakuda", "--data-dir", str(data), "--results-dir", tempfile.mkdtemp()],
                   capture_output=True, check=True)
    ended = time.monotonic()
    # the server logs each request's arrival on this machine's monotonic clock, the one ``started`` is read from
    arrivals = sorted(t for t, _, _ in server.arrivals())
    first, last = arrivals[0], arrivals[-1] + latency
    return first - started, last - first, ended - last


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--n", type=int, default=20)
    args = parser.parse_args()
    python = str(BIN / "python")
    bare = statistics.median(timed([python, "-c", "pass"]) for _ in range(5))
    libraries = statistics.median(timed([python, "-c", LIBRARIES]) for _ in range(5))
    helped = statistics.median(timed([str(BIN / "shaberi"), "--help"]) for _ in range(5))
    data = synthetic_data_dir(args.n)
    with LoopbackServer(latency_ms=args.latency * 1000) as server:
        runs = [run(server, data, args.latency) for _ in range(5)]
    before, span, after = (statistics.median(r[i] for r in runs) for i in range(3))
    print(f"interpreter alone             {bare:.2f} s  (floor)")
    print(f"interpreter + a run's libraries {libraries:.2f} s  (floor: {LIBRARIES.removeprefix('import ')})")
    print(f"shaberi --help                {helped:.2f} s  (target <= 0.3 s)")
    print(f"run, {args.n} calls at {args.latency:g} s: before the first request {before:.2f} s, requests {span:.2f} s, "
          f"after the last answer {after:.2f} s")
    print(f"run's process beyond its requests {before + after:.2f} s  (target <= 0.5 s; the libraries' import "
          f"alone is {libraries:.2f} s)")


if __name__ == "__main__":
    main()
