"""Memory: peak RSS of a whole ``shaberi run`` process as the run grows.

    python bench/memory.py [--n 20000]

The floor is the same command on 300 questions, measured in the same run: the ratio shows whether
memory stays flat as runs grow. Target: 20,000 generations under 300 MB peak RSS.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import run_cli, synthetic_data_dir

from shaberi.testing import LoopbackServer


def measure(server: LoopbackServer, n: int) -> tuple[float, int]:
    data = synthetic_data_dir(n)
    return run_cli(["run", "--model", "bench", "--base-url", server.base_url, "--benchmark", "rakuda",
                    "--results-dir", tempfile.mkdtemp(), "--data-dir", str(data)])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=20000)
    args = parser.parse_args()
    with LoopbackServer() as server:
        _, floor = measure(server, 300)
        wall, peak = measure(server, args.n)
    print(f"peak RSS, 300 generations      {floor:5d} MB  (floor)")
    print(f"peak RSS, {args.n:,} generations {peak:5d} MB  ratio {peak / floor:.2f}  (target < 300 MB)  "
          f"{wall:.1f} s")


if __name__ == "__main__":
    main()
