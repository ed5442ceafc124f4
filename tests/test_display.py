"""The live progress display: bars with the judging stage's tokens and a line per endpoint on a terminal,
plain lines at a steady interval when stderr is not one (nohup, Slurm, CI)."""

from __future__ import annotations

import asyncio
import io
import re

import orjson
from rich.console import Console

from shaberi.cli.display import PLAIN_WIDTH, _Clock, _Row, live_progress, plain_lines
from shaberi.llm.client import ChatClient
from shaberi.pipeline import Outcome
from shaberi.run_info import RunInfo
from shaberi.testing import LoopbackServer

from .conftest import query, shaberi


def test_a_terminal_shows_judging_tokens_and_each_endpoints_429s_and_retries():
    async def go() -> str:
        out = io.StringIO()
        console = Console(file=out, force_terminal=True, width=200)
        outcome = Outcome(RunInfo(model="m", tag="t", base_url="http://127.0.0.1:9/v1", api_key=None,
                                  generation_config={}, benchmarks=["rakuda"], datasets={}, prompt_hashes={}))
        outcome.clients = [ChatClient("http://u:pw@127.0.0.1:9/v1")]
        outcome.judging.total, outcome.judging.done, outcome.judging.judged = 4, 2, 2
        outcome.judging.tokens = 1234
        outcome.clients[0].rate_limited, outcome.clients[0].retries = 7, 3
        async with live_progress(console) as slot:
            slot.append(outcome)
            await asyncio.sleep(0.6)
        await outcome.clients[0].aclose()
        return out.getvalue()

    shown = asyncio.run(go())
    assert "judging" in shown and "1,234 tok" in shown
    assert "7 429s, 3 retries" in shown and "pw" not in shown  # the password of a URL is never shown


def test_requests_per_second_stop_when_the_bar_is_full():
    clock = _Clock()
    row = _Row("rakuda", total=10, done=5, calls=5, tokens=0, errors=0, limit=1)
    clock.rate(row, 100.0)
    row.done = row.calls = 10
    assert clock.rate(row, 102.0) == 5.0  # 10 calls in 2 s
    assert clock.rate(row, 1000.0) == 5.0  # and so it stays, however long the run goes on


def test_without_a_terminal_a_plain_line_comes_at_a_steady_interval(tmp_path, data_dir):
    args = ["run", "--model", "m", "--benchmark", "rakuda", "--limit", "8", "--concurrency", "2", "--judge", "j",
            "--results-dir", str(tmp_path / "r"), "--data-dir", str(data_dir)]
    with LoopbackServer(latency_ms=400, models=("m", "j")) as slow:
        proc = shaberi(*args, "--base-url", slow.base_url, env={"SHABERI_PROGRESS_EVERY": "0.5"})
        again = shaberi(*args, "--base-url", slow.base_url)  # everything reused: a second invocation, no calls
    assert proc.returncode == 0 and again.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if re.match(r"\[\d\d:\d\d:\d\d\] ", line)]
    assert all(len(line) < 120 for line in lines), lines
    stamps = [line[:10] for line in lines]
    assert len(set(stamps)) >= 4  # 8 answers and 8 judgements two at a time at 0.4 s: about 3.5 s
    last = " | ".join(line[11:] for line in lines if line[:10] == stamps[-1])  # the final update, in lines
    assert "rakuda 8/8" in last and "judging 8/8" in last and " 0 tok" not in last.split("judging")[1]
    assert f"candidate {slow.base_url}: limit" in last and f"judge {slow.base_url}: limit" in last
    assert "0 429s, 0 retries" in last
    ((stored,),) = query(tmp_path / "r", "SELECT concurrency_history FROM runs")
    limits = orjson.loads(stored)  # each endpoint's limit history, the judge's too, one entry per invocation
    assert sorted(limits) == [f"candidate {slow.base_url}", f"judge {slow.base_url}"]
    assert all([e["requests"] for e in sessions] == [8, 0] for sessions in limits.values())
    assert all(sessions[0]["history"][0][2] == "start" for sessions in limits.values())


def test_plain_lines_fit_a_log_line_and_a_long_url_goes_on_over_indented_lines_whole():
    parts = ["rakuda 3/8 (1,234 tok, 2.0 req/s, 0 err)", "judging 1/8 (0 tok, 0.0 req/s, 0 err)",
             "judge https://" + "x" * 200 + ".example/v1: limit 60, in flight 2, 9 requests, 0 429s, 0 retries",
             "tengu 1/2 (0 tok, 0.0 req/s, 0 err)"]
    lines = plain_lines("[00:00:07] ", parts)
    assert all(len(line) <= PLAIN_WIDTH for line in lines) and "…" not in "".join(lines)
    assert lines[0] == "[00:00:07] " + " | ".join(parts[:2])
    assert lines[1].startswith("[00:00:07] judge https://xx") and lines[-1] == "[00:00:07] " + parts[3]
    continued = lines[2:-1]
    assert len(continued) == 2 and all(line.startswith(" " * 13) for line in continued)
    assert lines[1][11:] + "".join(line.strip() for line in continued) == parts[2]  # every character of it
