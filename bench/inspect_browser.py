"""``shaberi inspect`` on a results root of 1,000,000 judgement rows (250 runs) against one of a single run.

    python bench/inspect_browser.py

Each measurement is a fresh process that builds the app, shows the first run's questions headless
(textual's pilot), then re-sorts them once: time to the first screen, time of the re-sort, and peak
memory. The floor is the same on a root holding only that one run's rows, measured in the same run.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from view_scores import build

PROBE = """
import asyncio, re, sys, time
def peak():  # VmHWM: this process's own peak (ru_maxrss would count the forking parent's)
    return int(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1)) // 1024
started = time.perf_counter()
from shaberi.reports.tui import InspectApp
app = InspectApp(sys.argv[1], tag="exp-run1", model="model-0")
async def go():
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.pause()
        shown = time.perf_counter()
        app.query_one("#sort").value = "score ↓"
        await pilot.pause()
        print(shown - started, time.perf_counter() - shown, peak())
asyncio.run(go())
"""


def measure(root: Path) -> tuple[float, float, int]:
    runs = [subprocess.run([sys.executable, "-c", PROBE, str(root)], capture_output=True, text=True, check=True)
            .stdout.split() for _ in range(3)]
    return (statistics.median(float(r[0]) for r in runs), statistics.median(float(r[1]) for r in runs),
            max(int(r[2]) for r in runs))


def main() -> None:
    big, small = (Path(tempfile.mkdtemp(prefix=f"shaberi-bench-inspect-{n}-")) for n in ("big", "small"))
    build(big, 1_000_000)
    build(small, 4_000)  # the same first run alone
    floor, big_ = measure(small), measure(big)
    print("inspect: time to the first screen, re-sort, peak RSS (median of 3 processes)")
    print(f"  one run alone (floor)      {floor[0]:.2f} s  {floor[1]:.2f} s  {floor[2]} MB")
    print(f"  1,000,000 rows, 250 runs   {big_[0]:.2f} s  {big_[1]:.2f} s  {big_[2]} MB   "
          f"ratio {big_[0] / floor[0]:.2f} / {big_[1] / floor[1]:.2f} / {big_[2] / floor[2]:.2f}")


if __name__ == "__main__":
    main()
