"""Judging through a Batch API against judging synchronously: 315 answers × 3 judges on the loopback server.

    python bench/batch_judging.py [--n 315] [--batch-seconds 5]

Two whole ``shaberi run`` processes on the same answers (a first run generates them): one judging synchronously,
one with ``--judge-batch``, its batch taking ``--batch-seconds`` on the server. Printed: the requests each sent
(synchronous calls, uploads, batches, batched requests, counted on the server), the wall time of each, the batched
one's besides the server's batch delay (the floor: the synchronous run's own time), and the judging cost the
``cost`` view reports for each with the shipped prices (gpt-4.1, gpt-4.1-mini, gpt-4o-mini: batch at half).

Then ``--max-cost`` at half the synchronous run's judging cost: how much of the limit a run stopped by it has
spent (the rest is the worst case of the call it did not send), how many judgements it made, and the calls a
second invocation with a higher limit makes (the server's count over both: none repeated).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import BIN, synthetic_data_dir

from shaberi.tables.sql import connect
from shaberi.testing import LoopbackServer

JUDGES = ("gpt-4.1", "gpt-4.1-mini", "gpt-4o-mini")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=315)
    parser.add_argument("--batch-seconds", type=float, default=5.0)
    args = parser.parse_args()
    data, results = synthetic_data_dir(args.n), Path(tempfile.mkdtemp(prefix="shaberi-bench-batch-"))
    with LoopbackServer() as candidate, LoopbackServer(batch_seconds=args.batch_seconds) as judges:
        base = [str(BIN / "shaberi"), "run", "--model", "bench", "--base-url", candidate.base_url, "--benchmark",
                "rakuda", "--data-dir", str(data), "--results-dir", str(results)]
        subprocess.run([*base, "--tag", "answers"], capture_output=True, check=True)  # the answers, once
        judged = [*base, *(a for j in JUDGES for a in ("--judge", f"{j}@{judges.base_url}"))]
        walls, stats = {}, {}
        for tag, extra in (("sync", []), ("batch", ["--judge-batch", "--batch-poll", "0.5"])):
            judges.reset()
            started = time.perf_counter()
            done = subprocess.run([*judged, "--tag", tag, *extra], capture_output=True, text=True)
            walls[tag] = time.perf_counter() - started
            if done.returncode != 0:
                sys.exit(f"shaberi failed ({done.returncode}): {done.stderr[-2000:]}")
            stats[tag] = judges.stats()
        limit = float(connect(results).execute(
            "SELECT sum(c.cost_usd) FROM cost c JOIN runs r USING (run_id) WHERE c.stage = 'judging' AND "
            "r.tag = 'sync'").fetchone()[0]) / 2
        prices = results / "prices.toml"  # the shipped prices, and the candidate's (free: a local model)
        prices.write_text((Path(__file__).resolve().parents[1] / "data" / "pricing.toml").read_text()
                          + '\n["bench"]\ninput = 0\noutput = 0\n')
        judges.reset()
        capped = [*judged, "--tag", "capped", "--pricing", str(prices), "--max-cost"]
        stopped = subprocess.run([*capped, f"{limit:.6f}"], capture_output=True, text=True)
        con = connect(results, prices)
        spent = con.execute("SELECT sum(c.cost_usd) FROM cost c JOIN runs r USING (run_id) WHERE r.tag = 'capped'"
                            ).fetchone()[0]
        made = con.execute("SELECT count(*) FROM judgements j JOIN runs r USING (run_id) WHERE r.tag = 'capped' "
                           "AND j.score IS NOT NULL").fetchone()[0]
        first = judges.stats()["calls"]
        resumed = subprocess.run([*capped, "1000"], capture_output=True, text=True)
        total = judges.stats()["calls"]
    costs = dict(connect(results).execute(
        "SELECT r.tag, sum(c.cost_usd) FROM cost c JOIN runs r USING (run_id) WHERE c.stage = 'judging' "
        "GROUP BY r.tag").fetchall())
    calls = args.n * len(JUDGES)
    print(f"{args.n} answers x {len(JUDGES)} judges = {calls} judgements per run; the server's batch takes "
          f"{args.batch_seconds:g} s")
    for tag in ("sync", "batch"):
        s = stats[tag]
        print(f"{tag:5}  synchronous calls {s['calls']:5d}  uploads {s['uploads']}  batches {s['batches']}  "
              f"batched requests {s['batch_requests']:5d}  wall {walls[tag]:6.2f} s  judging cost "
              f"${costs[tag]:.4f}")
    besides = walls["batch"] - args.batch_seconds
    print(f"batch run besides the server's batch delay: {besides:.2f} s = {besides / walls['sync']:.2f}x the "
          f"synchronous run (floor); cost {costs['batch'] / costs['sync']:.3f}x")
    print(f"--max-cost ${limit:.4f} (half the synchronous judging): exit {stopped.returncode}, ${spent:.4f} spent = "
          f"{spent / limit:.3f} of the limit, {made} of {calls} judged, {first} calls; again with a higher limit: "
          f"exit {resumed.returncode}, {total - first} more calls, {total} in all (none repeated: {total == calls})")


if __name__ == "__main__":
    main()
