"""Rate control against limits the client is not told: whole ``shaberi run`` processes, default options.

    python bench/rate_control.py                       # the whole grid (about half an hour)
    python bench/rate_control.py --caps 5,20 --latencies 0.5 --min-ideal 5

For each in-flight cap (5, 20, 60, 150) and latency (0.1, 0.5, 2 s) the loopback server answers 429 beyond
the cap (``--retry-after S``: each such 429 says ``Retry-After: S``, as some providers' do); a run of N calls
(at least ``--min-calls``, 1,000, more where needed for the ideal to last ``--min-ideal`` seconds) is timed
with default options (``--concurrency 200`` where the cap is above the default 60) and, as the floor, with the
concurrency fixed at the true cap. Printed per cell: wall ÷ ideal (N × latency ÷ cap) for both, the 429 share
of requests and answers lost. Then a cap above ``--concurrency`` (150 against the default 60: the same command
with the concurrency fixed at 60 is the floor), and other endpoints: one that queues instead of refusing
(``--queue``: the latency growth is the figure), requests- and tokens-per-minute budgets stated in
``x-ratelimit-*`` headers, and a gateway refusing 10 % of requests whatever the load (``stray``: with no header
and with ``Retry-After`` 0, 1 and 5 s), against the same run without the stray refusals and against the floor of
any client that honours Retry-After (``retry_after_floor``). Targets
(issues 16, 34, 52): wall <= 1.15 x ideal (or 1.05 x the floor where the floor is above 1.1 x), 429s < 2 %, none
lost; above --concurrency within 1.1 x the fixed run; with stray 429s within 1.3 x the run without them, or of
the Retry-After floor where that is above it (Retry-After 1 and 5 at 2,000 calls).

    python bench/rate_control.py --caps 20,150 --latencies 0.3 --retry-after 1 --skip queue,rpm,tpm,stray
"""

from __future__ import annotations

import argparse
import heapq
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import BIN, synthetic_data_dir

from shaberi.tables.sql import connect
from shaberi.testing import LoopbackServer

DEFAULT_MAX = 60


def run(server: LoopbackServer, n: int, extra: list[str]) -> tuple[float, dict, dict]:
    """One whole ``shaberi run``; (wall seconds, server stats, answer figures)."""
    import subprocess

    server.reset()
    data, results = synthetic_data_dir(n), Path(tempfile.mkdtemp(prefix="shaberi-bench-rc-"))
    start = time.perf_counter()
    proc = subprocess.run([str(BIN / "shaberi"), "run", "--model", "bench", "--base-url", server.base_url,
                           "--benchmark", "rakuda", "--data-dir", str(data), "--results-dir", str(results),
                           *extra], capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        sys.exit(f"shaberi run failed ({proc.returncode}): {proc.stderr[-2000:]}")
    ((ok, lost, mean_ms, p50_ms, tokens, attempts),) = connect(results).execute(
        "SELECT count(*) FILTER (error_type IS NULL), count(*) FILTER (error_type IS NOT NULL), "
        "avg(latency_ms), median(latency_ms), sum(prompt_tokens + completion_tokens), max(attempts) FROM answers"
    ).fetchall()
    return wall, server.stats(), {"ok": ok, "lost": lost, "mean_ms": mean_ms or 0.0, "p50_ms": p50_ms or 0.0,
                                  "tokens": tokens or 0, "attempts": attempts or 1}


def retry_after_floor(n: int, slots: int, latency: float, refused: float, retry_after: float, seeds: int = 50
                      ) -> float:
    """The median span of ``n`` calls by an ideal client that honours Retry-After: ``slots`` always busy, each send
    refused at once with probability ``refused`` and sent again exactly ``retry_after`` later, a request ready
    again going before a fresh one. (The tail is the floor: the last round's refusals, and any refused again,
    end a Retry-After or more after the fresh work; at 2,000 calls of 0.1 s that is most of a second per
    Retry-After second.)"""
    spans = []
    for seed in range(seeds):
        rng, fresh, left, end = random.Random(seed), n, n, 0.0
        free, again = [0.0] * slots, []  # when each slot is free; when each refused request may go again
        while left:
            at = heapq.heappop(free)
            if again and (again[0] <= at or not fresh):
                at = max(at, heapq.heappop(again))
            elif fresh:
                fresh -= 1
            else:
                continue  # nothing to send: this slot is done
            if rng.random() < refused:
                heapq.heappush(again, at + retry_after)
                heapq.heappush(free, at)
            else:
                left, end = left - 1, max(end, at + latency)
                heapq.heappush(free, at + latency)
        spans.append(end)
    return statistics.median(spans)


def share(stats: dict) -> float:
    return 100 * stats["by_status"].get("429", 0) / max(1, stats["calls"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--caps", default="5,20,60,150")
    parser.add_argument("--latencies", default="0.1,0.5,2")
    parser.add_argument("--min-ideal", type=float, default=10.0, help="seconds the ideal run lasts at least")
    parser.add_argument("--min-calls", type=int, default=1000, help="calls a grid cell makes at least")
    parser.add_argument("--skip", default="", help="comma list of: grid,floor,above,queue,rpm,tpm,stray")
    parser.add_argument("--stray-calls", type=int, default=2000, help="calls of the stray 429s' runs")
    parser.add_argument("--retry-after", type=float, default=None, help="Retry-After seconds on the grid's 429s")
    args = parser.parse_args()
    skip = set(args.skip.split(","))
    worst = {"ratio": 0.0, "share": 0.0, "lost": 0}
    if "grid" not in skip:
        print(f"{'cap':>4} {'latency':>7} {'calls':>6} {'ideal s':>8} | {'shaberi':>7} {'429 %':>6} {'lost':>4} "
              f"{'peak':>4} | {'floor':>6} {'429 %':>6} | {'vs floor':>8}")
        for cap in map(int, args.caps.split(",")):
            for latency in map(float, args.latencies.split(",")):
                n = max(args.min_calls, int(args.min_ideal * cap / latency + 0.5))
                ideal = n * latency / cap
                extra = ["--concurrency", "200"] if cap > DEFAULT_MAX else []
                with LoopbackServer(latency_ms=latency * 1000, capacity=cap, retry_after=args.retry_after) as server:
                    wall, stats, answers = run(server, n, extra)
                    floor_wall, floor_stats = float("nan"), {"calls": 1, "by_status": {}}
                    if "floor" not in skip:
                        fixed = ["--concurrency", str(cap), "--concurrency-start", str(cap), "--concurrency-min",
                                 str(cap)]
                        floor_wall, floor_stats, _ = run(server, n, fixed)
                print(f"{cap:>4} {latency:>6.1f}s {n:>6} {ideal:>8.1f} | {wall / ideal:>6.3f}x {share(stats):>5.2f}% "
                      f"{answers['lost']:>4} {stats['peak_in_flight']:>4} | {floor_wall / ideal:>5.3f}x "
                      f"{share(floor_stats):>5.2f}% | {wall / floor_wall:>7.3f}x", flush=True)
                worst = {"ratio": max(worst["ratio"], wall / ideal), "share": max(worst["share"], share(stats)),
                         "lost": worst["lost"] + answers["lost"]}
        print(f"worst: wall {worst['ratio']:.3f}x ideal, 429s {worst['share']:.2f} %, {worst['lost']} answers lost")
    if "above" not in skip:  # the cap above --concurrency: the default maximum is the wall; against it fixed
        n, latency, cap = 3000, 0.3, 150
        with LoopbackServer(latency_ms=latency * 1000, capacity=cap, retry_after=args.retry_after) as server:
            wall, stats, answers = run(server, n, [])
            fixed, _, _ = run(server, n, ["--concurrency", str(DEFAULT_MAX), "--concurrency-start", str(DEFAULT_MAX),
                                          "--concurrency-min", str(DEFAULT_MAX)])
        print(f"cap {cap} above --concurrency {DEFAULT_MAX} (0.3 s, {n:,} calls): default options {wall:.1f} s, "
              f"{wall / fixed:.3f}x the same run with the concurrency fixed at {DEFAULT_MAX} ({fixed:.1f} s), 429s "
              f"{share(stats):.2f} %, {answers['lost']} lost", flush=True)
    if "queue" not in skip:  # a server that queues beyond 20 at 0.5 s: ideal = N x 0.5 / 20
        n, latency, slots = 1000, 0.5, 20
        with LoopbackServer(latency_ms=latency * 1000, queue=slots) as server:
            wall, stats, answers = run(server, n, [])
        print(f"queueing server (serves {slots}, 0.5 s each, never 429): wall {wall / (n * latency / slots):.3f}x "
              f"ideal, latency mean {answers['mean_ms'] / 1000:.2f} s / median {answers['p50_ms'] / 1000:.2f} s "
              f"(unqueued 0.50 s; at the default maximum of 60 in flight it would be 1.50 s), peak in flight "
              f"{stats['peak_in_flight']}")
    if "stray" not in skip:  # 10 % refused whatever the load, 100 ms: against the same run with no refusals
        n, latency = args.stray_calls, 0.1
        with LoopbackServer(latency_ms=latency * 1000) as server:
            clean, _, _ = run(server, n, [])
        for retry_after in (None, 0.0, 1.0, 5.0):
            with LoopbackServer(latency_ms=latency * 1000, stray_429=0.1, retry_after=retry_after) as server:
                wall, stats, answers = run(server, n, [])
            said = "no header" if retry_after is None else f"Retry-After: {retry_after:g}"
            # The floor of a client that honours Retry-After: the same share refused, each refusal's request sent
            # again exactly its Retry-After later, every slot of the default maximum kept busy (retry_after_floor),
            # after the command's fixed cost (the clean run's wall beyond its ideal span)
            fixed = clean - n * latency / DEFAULT_MAX
            floor = fixed + retry_after_floor(n, DEFAULT_MAX, latency, 0.1, retry_after or 0.0)
            print(f"stray 429s (10 % of requests, {said}, 0.1 s, {n:,} calls): wall {wall / clean:.3f}x the same run "
                  f"without them ({clean:.1f} s), {wall / floor:.3f}x the floor ({floor:.1f} s), "
                  f"429s {share(stats):.2f} %, {answers['lost']} lost", flush=True)
    for kind in ("rpm", "tpm"):
        if kind in skip:
            continue
        n, latency = 1000, 0.5
        limit = 3000.0 if kind == "rpm" else 150_000.0  # 50 requests a second; about that many tokens' worth
        with LoopbackServer(latency_ms=latency * 1000, **{kind: limit}) as server:
            wall, stats, answers = run(server, n, [])
        ideal = (n if kind == "rpm" else answers["tokens"]) / (limit / 60)
        print(f"{kind.upper()} budget in x-ratelimit headers ({limit:,.0f}/min, 0.5 s latency): wall "
              f"{wall / ideal:.3f}x ideal ({ideal:.0f} s at the budget), 429s {share(stats):.2f} %, "
              f"{answers['lost']} lost")


if __name__ == "__main__":
    main()
