"""A sweep on a local Ray cluster against the same plan run one model after another in one process.

    python bench/sweep.py [--models 8] [--limit 20] [--latency-ms 200]

Every model of the plan is served by its own loopback server, started by the sweep on the worker from the
plan's ``serve`` command (as a vLLM checkpoint would be), answering after ``--latency-ms`` and holding the
candidate at 4 requests in flight (``concurrency``); one judge, also at that latency, with a limit of 8 in
flight shared by every worker. The cluster is ``ray start --head --num-cpus 2`` on this machine: two tasks
at a time.

Printed:
- the floor, measured in the same run: ``shaberi --help`` (start-up), and Ray's own cost per task: an empty
  task's round trip, and a one-model sweep on Ray less the same sweep without Ray (connect, actors, task);
  and how many judge calls a second one budget actor admits (its ceiling as a cluster grows);
- the ideal: the calls the servers answered, at the plan's limits, with no overhead: generation on two
  workers, judging (which needs no worker slot) overlapped with it, held by the judge's limit only:
  max(generation calls × latency ÷ 4 ÷ 2 workers, judge calls × latency ÷ 8);
- wall time of ``shaberi sweep --local`` (sequential) and of ``shaberi sweep`` on Ray, with ratios;
- the judge's peak in flight as the judge's server saw it (must not exceed 8), and its 429s;
- the hard regime: the judge's server refuses (429) beyond 3 in flight, which the plan does not say
  (``judge_concurrency = 8``): the shared budget must come down to it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import BIN

from shaberi.tables.sql import connect
from shaberi.testing import LoopbackServer
from shaberi.testing.ray import CLIENT_ENV, RayCluster

DATA = Path(os.environ.get("SHABERI_DATA_DIR") or Path(__file__).resolve().parents[2] / "shared" / "datasets")
BENCHMARKS = ["elyza", "tengu", "mt_bench", "rakuda"]
CONCURRENCY, JUDGE_LIMIT, WORKERS = 4, 8, 2


def plan(path: Path, models: int, limit: int, latency_ms: float, judge_url: str) -> Path:
    serve = f"{sys.executable} -m shaberi.testing.server --port {{port}} --latency-ms {latency_ms:g}"
    lines = ['tag = "bench"', f"benchmarks = {json.dumps(BENCHMARKS)}", f"limit = {limit}",
             f"concurrency = {CONCURRENCY}", f"judge_concurrency = {JUDGE_LIMIT}", f'data_dir = "{DATA}"',
             "[[judges]]", 'model = "judge"', f'base_url = "{judge_url}"']
    for i in range(models):
        lines += ["[[models]]", f'model = "ckpt-{i:02d}"', f'serve = "{serve}"']
    path.write_text("\n".join(lines) + "\n")
    return path


def sweep(plan_file: Path, env: dict[str, str], local: bool) -> tuple[float, dict]:
    """One whole ``shaberi sweep`` into a fresh results folder; (wall seconds, its summary with the generation
    calls its answers took: one per turn)."""
    results = Path(tempfile.mkdtemp(prefix="shaberi-bench-sweep-"))
    start = time.perf_counter()
    proc = subprocess.run([str(BIN / "shaberi"), "sweep", str(plan_file), "--results-dir", str(results),
                           *(["--local"] if local else [])], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"shaberi sweep failed ({proc.returncode}): {proc.stderr[-3000:]}")
    [summary] = results.glob("sweeps/*/summary.json")
    ((calls,),) = connect(results).execute(
        "SELECT sum(len(q.turns)) FROM answers a JOIN questions q USING (run_id, benchmark, question_id)").fetchall()
    return wall, json.loads(summary.read_text()) | {"generation_calls": int(calls)}



def empty_task_ms(address: str) -> tuple[float, float]:
    """Ray's round trip of an empty task (median of 50, after a warm-up), and of the first task that imports
    the sweep's runner on a fresh worker process."""
    code = (
        "import json, logging, statistics, time, ray\n"
        f"ray.init(address={address!r}, log_to_driver=False, logging_level=logging.ERROR)\n"
        "@ray.remote(num_cpus=1)\n"
        "def empty(): return 0\n"
        "@ray.remote(num_cpus=1, max_calls=1)\n"
        "def first():\n"
        "    import shaberi.sweep.runner  # noqa: F401\n"
        "    return 0\n"
        "ray.get(empty.remote())\n"
        "times = []\n"
        "for _ in range(50):\n"
        "    t = time.perf_counter(); ray.get(empty.remote()); times.append(time.perf_counter() - t)\n"
        "t = time.perf_counter(); ray.get(first.remote()); cold = time.perf_counter() - t\n"
        "print(json.dumps([1000 * statistics.median(times), 1000 * cold]))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    warm, cold = json.loads(out.strip().splitlines()[-1])
    return warm, cold


def budget_rate(address: str) -> float:
    """Judge calls a second one ``JudgeBudget`` actor admits (an acquire and a release each), 64 at a time."""
    code = (
        "import asyncio, json, logging, time, ray\n"
        "from shaberi.llm.lease import Answer\n"
        "from shaberi.sweep.slots import ClusterLease, JudgeBudget\n"
        f"ray.init(address={address!r}, log_to_driver=False, logging_level=logging.ERROR)\n"
        "actor = ray.remote(JudgeBudget).options(num_cpus=0, max_concurrency=1000).remote()\n"
        "lease = ClusterLease(actor, 'judge', 64)\n"
        "async def one():\n"
        "    for _ in range(40):\n"
        "        slot = await lease.acquire(); lease.release(slot, Answer(False, 0.2, 300))\n"
        "async def main():\n"
        "    await asyncio.gather(*(one() for _ in range(64)))\n"
        "asyncio.run(main())\n"
        "t = time.perf_counter(); asyncio.run(main()); wall = time.perf_counter() - t\n"
        "ray.get(actor.stats.remote())\n"
        "print(json.dumps(64 * 40 / wall))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return float(out.strip().splitlines()[-1])


def help_floor() -> float:
    times = []
    for _ in range(3):
        start = time.perf_counter()
        subprocess.run([str(BIN / "shaberi"), "--help"], capture_output=True, check=True)
        times.append(time.perf_counter() - start)
    return min(times)


def figures(wall: float, judge: LoopbackServer, candidates_calls: int, latency: float, judge_limit: int) -> dict:
    stats = judge.stats()
    judged = stats["by_status"].get("200", 0)
    ideal = max(candidates_calls * latency / CONCURRENCY / WORKERS, judged * latency / judge_limit)
    return {"wall": wall, "ideal": ideal, "judge_calls": stats["calls"], "judge_ok": judged,
            "judge_429": stats["by_status"].get("429", 0), "judge_peak": stats["peak_in_flight"]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", type=int, default=8)
    parser.add_argument("--limit", type=int, default=20, help="questions per benchmark")
    parser.add_argument("--latency-ms", type=float, default=200.0)
    args = parser.parse_args()
    latency = args.latency_ms / 1000
    os.environ.update(CLIENT_ENV)  # this process connects too (empty_task_ms)
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "SHABERI_STATE_DIR": tempfile.mkdtemp()}
    env.pop("RAY_ADDRESS", None)
    work = Path(tempfile.mkdtemp(prefix="shaberi-bench-plan-"))
    cluster = RayCluster(WORKERS, env).start()  # its own: stopping it stops no other Ray cluster here
    address = cluster.address
    ray_env = {**env, "RAY_ADDRESS": address}
    try:
        floor = help_floor()
        warm_ms, cold_ms = empty_task_ms(address)
        print(f"floor: shaberi --help {floor:.2f} s; Ray empty task {warm_ms:.1f} ms (warm), "
              f"{cold_ms:.0f} ms (fresh worker importing the runner); one judge budget actor admits "
              f"{budget_rate(address):,.0f} calls/s")
        with LoopbackServer(latency_ms=args.latency_ms) as judge:
            one = plan(work / "one.toml", 1, args.limit, args.latency_ms, judge.base_url)
            one_local, _ = sweep(one, env, local=True)
            one_ray, _ = sweep(one, ray_env, local=False)
            print(f"one model: --local {one_local:.1f} s, on Ray {one_ray:.1f} s: Ray's cost per sweep "
                  f"{one_ray - one_local:+.1f} s")

            full = plan(work / "full.toml", args.models, args.limit, args.latency_ms, judge.base_url)
            print(f"\n{args.models} models × {len(BENCHMARKS)} benchmarks × {args.limit} questions, latency "
                  f"{args.latency_ms:g} ms, candidate {CONCURRENCY} in flight, judge limit {JUDGE_LIMIT}, "
                  f"{WORKERS} workers")
            rows = []
            for name, e, local in (("sequential (--local)", env, True), ("Ray", ray_env, False)):
                judge.reset()
                wall, summary = sweep(full, e, local)
                rows.append((name, figures(wall, judge, summary["generation_calls"], latency, JUDGE_LIMIT),
                             summary))
        with LoopbackServer(latency_ms=args.latency_ms, capacity=3) as judge:
            capped = plan(work / "capped.toml", args.models, args.limit, args.latency_ms, judge.base_url)
            wall, summary = sweep(capped, ray_env, local=False)
            capped_figures = figures(wall, judge, summary["generation_calls"], latency, 3)
            rows.append(("Ray, judge refuses beyond 3", capped_figures, summary))
    finally:
        cluster.stop()

    sequential = rows[0][1]["wall"]
    print(f"{'mode':<30}{'wall s':>8}{'ideal s':>9}{'÷ ideal':>9}{'÷ seq':>7}{'judge calls':>13}{'429':>6}"
          f"{'peak':>6}{'gen calls':>11}")
    for name, f, summary in rows:
        print(f"{name:<30}{f['wall']:>8.1f}{f['ideal']:>9.1f}{f['wall'] / f['ideal']:>9.2f}"
              f"{f['wall'] / sequential:>7.2f}{f['judge_calls']:>13}{f['judge_429']:>6}{f['judge_peak']:>6}"
              f"{summary['generation_calls']:>11}")
        shared = summary.get("judges") or {}
        for key, s in shared.items():
            print(f"{'':<30}budget {key}: limit now {s['limit']}/{s['slots']}, peak {s['peak_in_flight']}, "
                  f"{s['requests']} requests, {s['rate_limited']} refused")
    seconds = [m["seconds"] for m in rows[1][2]["models"] if m["seconds"]]
    print(f"Ray: per-model task seconds median {statistics.median(seconds):.1f}, Σ {sum(seconds):.1f} over "
          f"{WORKERS} workers = {sum(seconds) / WORKERS:.1f} s of {rows[1][1]['wall']:.1f} s wall")
    over = [name for name, f, _ in rows[:2] if f["judge_peak"] > JUDGE_LIMIT]
    if over:
        sys.exit(f"judge limit exceeded in: {', '.join(over)}")


if __name__ == "__main__":
    main()
