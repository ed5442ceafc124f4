"""The cost of plugins when none is installed: importing shaberi's six registries, then the first read of each
(the one scan of the installed entry points, ``shaberi.registry.PLUGINS``), in fresh interpreters.

    python bench/plugin_scan.py [--runs 7]

Before the one group each registry scanned on its own first read: 6 scans, about 31 ms on a 2-core machine;
one scan for all of them takes about 10 ms there.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

PROBE = """
import json, time
from importlib import metadata
calls = []
scan = metadata.entry_points
metadata.entry_points = lambda *a, **k: calls.append(1) or scan(*a, **k)
t0 = time.perf_counter()
from shaberi import benchmarks, passes, prompts
from shaberi.ensemble import datasets, graders, strategies
t1 = time.perf_counter()
for registry in (benchmarks.BENCHMARKS, datasets.DATASETS, graders.GRADERS, strategies.STRATEGIES, passes.PASSES,
                 prompts.PROMPTS):
    registry.names()
t2 = time.perf_counter()
print(json.dumps({"import_ms": 1000 * (t1 - t0), "first_reads_ms": 1000 * (t2 - t1), "scans": len(calls)}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    runs = [json.loads(subprocess.run([sys.executable, "-c", PROBE], check=True, capture_output=True,
                                      text=True).stdout) for _ in range(parser.parse_args().runs)]
    for key in ("import_ms", "first_reads_ms"):
        print(f"{key}: median {statistics.median(r[key] for r in runs):.1f} ms over {len(runs)} runs")
    print(f"entry point scans: {runs[0]['scans']}")


if __name__ == "__main__":
    main()
