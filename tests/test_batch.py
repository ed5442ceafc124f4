"""Chat calls through the Batch API (``llm/batch_api.py``), over real HTTP to the loopback server's Batch API: the same
replies as synchronous calls, one upload per batch, lines a batch failed or left unprocessed retried in a later
batch, and a batch submitted by one process collected by the next instead of being paid for again."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from shaberi.errors import ServerError
from shaberi.llm.batch_api import BatchTransport
from shaberi.llm.client import ChatClient, ClientConfig
from shaberi.llm.control import ControlConfig
from shaberi.llm.params import Sampling
from shaberi.llm.transport import AiohttpTransport
from shaberi.tables.sql import connect
from shaberi.testing import LoopbackServer

from .conftest import query, shaberi, write_rakuda

FIXED = ClientConfig(control=ControlConfig(start=500, min=500, max=500), timeout=2.0, max_retries=2,
                     backoff_base=0.05, backoff_max=0.1)


def messages(i: int, marker: str = "") -> list[dict]:
    return [{"role": "user", "content": f"質問{i}：日本の首都は？{marker}"}]


async def ask_all(base_url: str, prompts: list[list[dict]], **batch: object) -> tuple[list, BatchTransport]:
    transport = BatchTransport(AiohttpTransport(), base_url, linger=0.2, poll=0.05, **batch)  # type: ignore[arg-type]
    client = ChatClient(base_url, None, FIXED, transport=transport)
    try:
        got = await asyncio.gather(*(client.chat("fake-model", m, Sampling(temperature=0.0)) for m in prompts),
                                   return_exceptions=True)
    finally:
        await client.aclose()
    return got, transport


def test_calls_through_a_batch_get_the_replies_synchronous_calls_get_with_one_upload():
    prompts = [messages(i) for i in range(30)]
    with LoopbackServer() as server:
        direct = asyncio.run(_direct(server.base_url, prompts))
        server.reset()
        got, transport = asyncio.run(ask_all(server.base_url, prompts))
        stats = server.stats()
    assert [c.content for c in got] == [c.content for c in direct]
    assert [c.prompt_tokens for c in got] == [c.prompt_tokens for c in direct]
    assert stats["calls"] == 0, "no synchronous call"
    assert (stats["uploads"], stats["batches"], stats["batch_requests"]) == (1, 1, 30)
    assert len(transport.submitted) == 1 and transport.status[transport.submitted[0]]["status"] == "completed"


async def _direct(base_url: str, prompts: list[list[dict]]) -> list:
    client = ChatClient(base_url, None, ClientConfig())
    try:
        return list(await asyncio.gather(*(client.chat("fake-model", m, Sampling(temperature=0.0)) for m in prompts)))
    finally:
        await client.aclose()


def test_a_batch_holds_at_most_size_requests():
    with LoopbackServer() as server:
        got, _ = asyncio.run(ask_all(server.base_url, [messages(i) for i in range(7)], size=3))
        stats = server.stats()
    assert all(not isinstance(c, BaseException) for c in got)
    assert (stats["uploads"], stats["batches"], stats["batch_requests"], stats["calls"]) == (3, 3, 7, 0)


def test_a_batch_taking_longer_than_the_request_timeout_is_waited_for():
    with LoopbackServer(batch_seconds=3.0) as server:  # FIXED's per-request timeout is 2 s
        got, _ = asyncio.run(ask_all(server.base_url, [messages(i) for i in range(5)]))
    assert all(not isinstance(c, BaseException) and c.content for c in got), got


def test_lines_in_the_error_file_are_retried_in_later_batches_as_often_as_any_5xx_and_the_rest_answered():
    prompts = [messages(i) for i in range(10)] + [messages(99, "[[batch:fail]]")]
    with LoopbackServer() as server:
        got, transport = asyncio.run(ask_all(server.base_url, prompts))
        stats = server.stats()
    assert all(not isinstance(c, BaseException) for c in got[:10])
    assert isinstance(got[10], ServerError) and "server_error" in str(got[10])
    # the failing line: its first batch, then max_retries (2) more, each its own batch
    assert stats["batches"] == 3 and stats["batch_requests"] == 10 + 3
    assert len(set(transport.submitted)) == 3
    # said once per batch that sent a line back: the first of 11 requests, then the one line alone, twice
    assert [n.split(": ", 1)[1].split(" requests")[0] for n in transport.notes] == ["1 of its 11", "1 of its 1",
                                                                                   "1 of its 1"], transport.notes


def test_an_expired_batch_answers_what_it_did_and_its_other_lines_go_in_a_new_batch():
    prompts = [messages(i) for i in range(20)]

    async def scenario(server: LoopbackServer) -> tuple[list, BatchTransport]:
        task = asyncio.create_task(ask_all(server.base_url, prompts))
        while server.stats()["batch_requests"] < 5:
            await asyncio.sleep(0.05)
        expired = await asyncio.to_thread(server.expire_batches)
        assert len(expired) == 1
        return await task

    with LoopbackServer(batch_seconds=4.0) as server:
        got, transport = asyncio.run(scenario(server))
        stats = server.stats()
    assert all(not isinstance(c, BaseException) and c.content for c in got), got
    assert stats["batches"] == 2 and stats["calls"] == 0
    first = transport.status[transport.submitted[0]]
    assert first["status"] == "expired" and first["request_counts"]["completed"] >= 5
    # the expired batch's answered lines were not asked again: every question was answered in exactly one batch
    assert stats["batch_requests"] == 20


def test_a_batch_submitted_by_a_process_that_died_is_collected_by_the_next_not_submitted_again():
    prompts = [messages(i) for i in range(12)]
    journal: dict[str, str] = {}

    async def first(base_url: str) -> None:  # submits, journals, then dies while the batch runs
        def record(batch_id: str, cids: list[str]) -> None:
            journal.update(dict.fromkeys(cids, batch_id))

        task = asyncio.create_task(ask_all(base_url, prompts, on_submit=record))
        while not journal:
            await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    with LoopbackServer(batch_seconds=2.0) as server:
        asyncio.run(first(server.base_url))
        assert server.stats()["uploads"] == 1
        got, transport = asyncio.run(ask_all(server.base_url, prompts, known=journal))
        stats = server.stats()
    assert all(not isinstance(c, BaseException) and c.content for c in got), got
    assert (stats["uploads"], stats["batches"], stats["batch_requests"], stats["calls"]) == (1, 1, 12, 0)
    assert transport.submitted == [next(iter(journal.values()))]



def _kill_once_journaled(args: list[str], server: LoopbackServer, results, batches: int, lines: int) -> None:
    """Run ``shaberi *args`` and SIGKILL it once it has submitted and journaled ``batches`` batches, asserting the
    last is still under way (fewer than ``lines`` requests answered)."""
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    proc = subprocess.Popen([sys.executable, "-m", "shaberi", *args], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while server.stats()["batches"] < batches and time.monotonic() < deadline:
            time.sleep(0.05)
        _journaled(results, batches, deadline)
        assert server.stats()["batch_requests"] < lines, "killed while the batch is under way"
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        proc.kill()


def _journaled(results, batches: int, deadline: float) -> None:
    """Wait until the run has journaled this many batches (right after each was created; later on a busy
    machine)."""
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):  # no results root yet, or a part being written
            if query(results, "SELECT count(*) FROM batches")[0][0] >= batches:
                return
        time.sleep(0.05)


def _judged(results, tag: str) -> list[tuple]:
    return query(results, "SELECT question_id, score, via, batch_id IS NOT NULL FROM judgements j JOIN runs r "
                          f"USING (run_id) WHERE r.tag = '{tag}' ORDER BY question_id")


def test_a_run_judged_through_batches_has_the_scores_a_synchronous_one_has_and_makes_no_synchronous_judge_call(
        tmp_path):
    data = write_rakuda(tmp_path / "d", [f"質問{i}：日本の首都は？" for i in range(8)])
    results = tmp_path / "r"
    with LoopbackServer() as candidate, LoopbackServer(batch_seconds=0.5) as judges:
        common = ["run", "--model", "m", "--base-url", candidate.base_url, "--benchmark", "rakuda",
                  "--judge", f"gpt-4.1-mini@{judges.base_url}", "--data-dir", str(data), "--results-dir", str(results)]
        done = shaberi(*common, "--tag", "sync")
        assert done.returncode == 0, done.stderr
        assert judges.stats()["calls"] == 8
        judges.reset()
        done = shaberi(*common, "--tag", "batched", "--judge-batch", "--batch-poll", "0.1")
        assert done.returncode == 0, done.stderr
        stats = judges.stats()
    assert (stats["calls"], stats["uploads"], stats["batches"], stats["batch_requests"]) == (0, 1, 1, 8)
    # the plain lines say how the batch stands, whenever they were printed: queued, or submitted
    assert "8 requests queued for a batch" in done.stderr or "batches: 1 submitted" in done.stderr, done.stderr
    assert "batches 8/8" in done.stderr, done.stderr  # the provider's progress, a row of its own
    sync, batched = _judged(results, "sync"), _judged(results, "batched")
    assert [(q, s) for q, s, _, _ in batched] == [(q, s) for q, s, _, _ in sync] and len(sync) == 8
    assert {(via, has_id) for _, _, via, has_id in sync} == {("sync", False)}
    assert {(via, has_id) for _, _, via, has_id in batched} == {("batch", True)}
    assert query(results, "SELECT status, count(*) FROM batches GROUP BY ALL") == [("collected", 1)]
    # the same tokens, priced at the shipped Batch API rates (half of gpt-4.1-mini's: 0.20 and 0.80 per million)
    cost = dict((tag, rest) for tag, *rest in query(
        results, "SELECT r.tag, c.prompt_tokens, c.completion_tokens, c.batch_prompt_tokens, c.batch_completion_tokens,"
                 " c.cost_usd FROM cost c JOIN runs r USING (run_id) WHERE c.stage = 'judging'"))
    prompt, completion = cost["sync"][:2]
    assert prompt > 0 and cost["batched"][:4] == [prompt, completion, prompt, completion]
    assert cost["sync"][2:4] == [0, 0]
    assert cost["sync"][4] == pytest.approx(prompt / 1e6 * 0.40 + completion / 1e6 * 1.60, rel=1e-12)
    batch_cost = prompt / 1e6 * 0.20 + completion / 1e6 * 0.80
    assert cost["batched"][4] == pytest.approx(batch_cost, rel=1e-12)
    # every reader prices it from the cost view: the manifest and the report say the batch price
    manifest = json.loads((results / "m" / "batched" / "manifest.json").read_text())
    assert manifest["token_totals"]["by_stage"]["judging"]["cost_usd"] == pytest.approx(batch_cost, rel=1e-12)
    out = tmp_path / "report.html"
    assert shaberi("report", "--tag", "batched", "--out", str(out), "--results-dir", str(results)).returncode == 0
    assert f"<td>judging</td><td>8</td><td>0</td><td>{prompt:,}</td><td>{completion:,}</td><td>{batch_cost:.4f}</td>" \
        in out.read_text(encoding="utf-8")
    # judged again through a batch: the old judgements stay as history, the new ones count, scores unchanged
    with LoopbackServer(batch_seconds=0.2) as judges:
        again = shaberi("run", "--model", "m", "--tag", "batched", "--rejudge", "--judge",
                        f"gpt-4.1-mini@{judges.base_url}", "--judge-batch", "--batch-poll", "0.1",
                        "--results-dir", str(results))
        assert again.returncode == 0, again.stderr
        assert (judges.stats()["calls"], judges.stats()["batches"]) == (0, 1)
    assert _judged(results, "batched") == batched
    assert query(results, "SELECT count(*) FROM judgement_rows j JOIN runs r USING (run_id) "
                          "WHERE r.tag = 'batched'") == [(16,)]
    # and compared with the synchronous run: the same scores, no difference
    compared = shaberi("compare", "sync", "batched", "--model", "m", "--format", "json", "--results-dir",
                       str(results))
    assert compared.returncode == 0, compared.stderr
    (rakuda,) = json.loads(compared.stdout)["benchmarks"]
    assert (rakuda["n"], rakuda["diff"], rakuda["moved_pairs"]) == (8, 0.0, 0), rakuda


def test_a_run_killed_while_its_batch_runs_collects_that_batch_when_run_again_and_pays_for_nothing_twice(tmp_path):
    data = write_rakuda(tmp_path / "d", [f"質問{i}：日本の首都は？" for i in range(6)])
    results = tmp_path / "r"
    with LoopbackServer() as candidate, LoopbackServer(batch_seconds=6.0) as judges:
        args = ["run", "--model", "m", "--base-url", candidate.base_url, "--benchmark", "rakuda",
                "--judge", f"j@{judges.base_url}", "--judge-batch", "--batch-poll", "0.1", "--data-dir", str(data),
                "--results-dir", str(results)]
        _kill_once_journaled(args, judges, results, 1, 6)
        # readers show it waiting on its batch, not interrupted: the batch runs on at the provider
        assert query(results, "SELECT status FROM runs") == [("waiting",)]
        shown = shaberi("view", "--results-dir", str(results))
        assert "waiting: batches it submitted run on" in shown.stdout + shown.stderr, shown.stdout
        again = shaberi(*args)
        assert again.returncode == 0, again.stderr
        stats = judges.stats()
    assert query(results, "SELECT status FROM runs") == [("ok",)]
    assert query(results, "SELECT status FROM batches") == [("collected",)]
    assert (stats["calls"], stats["uploads"], stats["batches"], stats["batch_requests"]) == (0, 1, 1, 6)
    assert query(results, "SELECT count(*), count(score), count(DISTINCT batch_id) FROM judgements") == [(6, 6, 1)]


def test_a_reply_without_a_score_asks_its_fallback_in_a_later_batch_with_the_rows_a_synchronous_run_writes(
        tmp_path):
    data = write_rakuda(tmp_path / "d", [
        "<<judge: 丁寧な回答です。 || FINAL SCORE: 6>> 質問1",  # the follow-up gives the score
        "<<judge: 判断できません。 || やはり判断できません。>> 質問2",  # neither does
        "<<judge: FINAL SCORE: 7>> 質問3",  # the first reply does
    ])
    results = tmp_path / "r"
    with LoopbackServer() as candidate, LoopbackServer(batch_seconds=0.3) as judges:
        common = ["run", "--model", "m", "--base-url", candidate.base_url, "--benchmark", "rakuda",
                  "--judge", f"j@{judges.base_url}", "--data-dir", str(data), "--results-dir", str(results)]
        assert shaberi(*common, "--tag", "sync").returncode == 0
        judges.reset()
        done = shaberi(*common, "--tag", "batched", "--judge-batch", "--batch-poll", "0.1")
        assert done.returncode == 0, done.stderr
        stats = judges.stats()
    # three primaries in the first batch; the two follow-ups in a second
    assert (stats["calls"], stats["batches"], stats["batch_requests"]) == (0, 2, 5)
    rows = ("SELECT question_id, score, parse_method, judge_output, fallback_output, j.error FROM judgements j "
            "JOIN runs r USING (run_id) WHERE r.tag = $tag ORDER BY question_id")
    con = connect(results)
    sync, batched = (con.execute(rows, {"tag": t}).fetchall() for t in ("sync", "batched"))
    assert batched == sync and [r[1] for r in sync] == [6.0, None, 7.0]
    assert con.execute("SELECT count(DISTINCT batch_id) FROM judgements j JOIN runs r USING (run_id) "
                       "WHERE r.tag = 'batched'").fetchall() == [(1,)]  # a judgement names its first reply's batch


def test_a_candidate_generating_through_batches_killed_mid_batch_collects_it_and_answers_as_a_synchronous_run(
        tmp_path):
    data = write_rakuda(tmp_path / "d", [f"質問{i}：日本の首都は？" for i in range(6)])
    results = tmp_path / "r"
    with LoopbackServer(models=("gpt-4.1-mini",), batch_seconds=6.0) as candidate, LoopbackServer() as judges:
        common = ["run", "--model", "gpt-4.1-mini", "--base-url", candidate.base_url, "--benchmark", "rakuda",
                  "--judge", f"j@{judges.base_url}", "--data-dir", str(data), "--results-dir", str(results)]
        assert shaberi(*common, "--tag", "sync").returncode == 0
        candidate.reset()
        args = [*common, "--tag", "batched", "--batch", "--batch-poll", "0.1"]
        _kill_once_journaled(args, candidate, results, 1, 6)
        assert query(results, "SELECT status FROM runs WHERE tag = 'batched'") == [("waiting",)]
        again = shaberi(*args)
        assert again.returncode == 0, again.stderr
        stats = candidate.stats()
    assert (stats["calls"], stats["uploads"], stats["batches"], stats["batch_requests"]) == (0, 1, 1, 6)
    answers = ("SELECT a.question_id, a.content, a.via, a.batch_id IS NOT NULL, j.score FROM answers a JOIN runs r "
               "USING (run_id) JOIN judgements j USING (run_id, benchmark, question_id) WHERE r.tag = $tag "
               "ORDER BY 1")
    con = connect(results)
    sync, batched = (con.execute(answers, {"tag": t}).fetchall() for t in ("sync", "batched"))
    assert [(q, c, s) for q, c, _, _, s in batched] == [(q, c, s) for q, c, _, _, s in sync] and len(sync) == 6
    assert {(via, has) for _, _, via, has, _ in sync} == {("sync", False)}
    assert {(via, has) for _, _, via, has, _ in batched} == {("batch", True)}
    assert con.execute("SELECT stage, status FROM batches").fetchall() == [("generation", "collected")]
    # generation priced at the shipped Batch API rates of gpt-4.1-mini (0.20 and 0.80 per million)
    prompt, completion, batch_prompt, cost = con.execute(
        "SELECT c.prompt_tokens, c.completion_tokens, c.batch_prompt_tokens, c.cost_usd FROM cost c JOIN runs r "
        "USING (run_id) WHERE r.tag = 'batched' AND c.stage = 'generation'").fetchone()
    assert batch_prompt == prompt > 0
    assert cost == pytest.approx(prompt / 1e6 * 0.20 + completion / 1e6 * 0.80, rel=1e-12)


def test_a_run_killed_while_its_fallback_batch_runs_prices_it_as_batch_collects_it_past_a_spent_limit_and_a_rejudge_asks_afresh(  # noqa: E501
        tmp_path):
    data = write_rakuda(tmp_path / "d", ["質問0", "<<judge: 判断できません。 || FINAL SCORE: 6>> 質問1",
                                         "質問2", "<<judge: 判断できません。 || FINAL SCORE: 4>> 質問3"])
    results = tmp_path / "r"
    with LoopbackServer() as candidate, LoopbackServer(batch_seconds=4.0) as judges:
        args = ["run", "--model", "m", "--base-url", candidate.base_url, "--benchmark", "rakuda", "--judge",
                f"gpt-4.1-mini@{judges.base_url}", "--judge-batch", "--batch-poll", "0.1", "--data-dir", str(data),
                "--results-dir", str(results)]
        assert shaberi(*args, "--stages", "generate").returncode == 0
        _kill_once_journaled([*args, "--stages", "judge"], judges, results, 2, 6)  # the follow-ups' batch
        # a limit already spent: the follow-ups' batch is paid for, so it is collected all the same
        again = shaberi(*args, "--stages", "judge", "--max-cost", "0.000001")
        assert again.returncode == 0, again.stderr
        assert (judges.stats()["calls"], judges.stats()["batches"], judges.stats()["batch_requests"]) == (0, 2, 6)
        assert query(results, "SELECT question_id, score FROM judgements WHERE question_id IN ('q1', 'q3') "
                              "ORDER BY 1") == [("q1", 6.0), ("q3", 4.0)]
        assert query(results, "SELECT count(score) FROM judgements") == [(4,)]
        assert query(results, "SELECT status, count(*) FROM batches GROUP BY ALL") == [("collected", 2)]
        old = {b for (b,) in query(results, "SELECT batch_id FROM batches")}
        # every judging token went through a batch: priced at the batch rates
        assert query(results, "SELECT prompt_tokens = batch_prompt_tokens AND completion_tokens = "
                              "batch_completion_tokens AND prompt_tokens > 0 FROM cost WHERE stage = 'judging'"
                     ) == [(True,)]
        # judged again: every request asked afresh in new batches, none answered from the old ones
        rejudged = shaberi(*args, "--rejudge")
        assert rejudged.returncode == 0, rejudged.stderr
        stats = judges.stats()
    assert (stats["calls"], stats["batches"], stats["batch_requests"]) == (0, 4, 12)
    (newest,) = query(results, "SELECT DISTINCT batch_id FROM judgements")  # each names its first reply's batch
    assert newest[0] not in old and query(results, "SELECT count(score) FROM judgements") == [(4,)]
