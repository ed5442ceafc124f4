"""Generation: every question answered exactly once, resume without re-paying, kill -9 and resume."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

import orjson
import polars as pl
import pytest

from shaberi.generate import GenerationConfig, split_reasoning
from shaberi.llm.client import ClientConfig
from shaberi.pipeline import RunRequest, run
from shaberi.run_info import run_id_for
from shaberi.testing import LoopbackServer

from .conftest import query, write_rakuda

FAST = ClientConfig(timeout=2.0, backoff_base=0.01, backoff_max=0.05)


def generate(server, results, data_dir, **kw):
    req = RunRequest(model="m", base_url=server.base_url, results_dir=results, data_dir=data_dir,
                     client=kw.pop("client", FAST), **kw)
    outcome = asyncio.run(run(req))
    return outcome.info, outcome.generation


def test_every_question_is_answered_exactly_once_and_resume_calls_nothing(server, data_dir, tmp_path):
    _, progress = generate(server, tmp_path, data_dir)
    assert progress.calls == 315
    stats = server.stats()
    assert stats["calls"] == 315 and set(stats["by_key"].values()) == {1}

    assert query(tmp_path, "SELECT benchmark, count(*), count(DISTINCT question_id), count(error) FROM answers "
                           "GROUP BY ALL ORDER BY 1") == [
        ("elyza", 100, 100, 0), ("mt_bench", 60, 60, 0), ("rakuda", 40, 40, 0), ("tengu", 115, 115, 0)]
    assert query(tmp_path, "SELECT count(*) FROM raw_answers") == [(315,)]
    assert query(tmp_path, "SELECT count(*) FROM questions") == [(315,)]
    # Notebook users read the lake directly; the hive folders and the in-file run_id agree.
    lake = pl.read_parquet(tmp_path / "tables" / "answers" / "**" / "*.parquet")
    assert lake.height == 315 and lake["run_id"].n_unique() == 1
    tokens = query(tmp_path, "SELECT sum(requests), sum(prompt_tokens), sum(cached_requests) FROM token_usage")
    answered = query(tmp_path, "SELECT sum(prompt_tokens) FROM answers")
    assert tokens == [(315, answered[0][0], 0)]

    server.reset()
    _, again = generate(server, tmp_path, data_dir)
    assert again.calls == 0 and server.stats()["calls"] == 0
    assert query(tmp_path, "SELECT sum(requests), sum(cached_requests) FROM token_usage") == [(315, 315)]
    assert query(tmp_path, "SELECT count(*) FROM answers") == [(315,)]


def test_runs_row_records_the_run_and_never_the_key(server, data_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("MY_KEY", "sk-very-secret-key")
    info, _ = generate(server, tmp_path, data_dir, benchmarks=["rakuda"], tag="t1", api_key_env="MY_KEY", limit=2,
                       generation=GenerationConfig(temperature=0.5, seed=7))
    (row,) = query(tmp_path, "SELECT run_id, tag, model, status, api_key_sha256, generation_config, datasets, "
                             "prompt_hashes, benchmarks, package_versions, concurrency_history FROM runs")
    assert row[0] == info.run_id == run_id_for("m", "t1") and row[1:4] == ("t1", "m", "ok")
    assert len(row[4]) == 12 and "secret" not in row[4]
    unset = {"tokens_field": "max_tokens", "top_p": None, "reasoning_effort": None, "extra_body": None,
             "families": None}
    assert orjson.loads(row[5]) == {"temperature": 0.5, "max_tokens": 6000, "frequency_penalty": None, "seed": 7,
                                    "samples": 1, **unset, "judging": {"temperature": 0.0, "max_tokens": 1024, **unset}}
    datasets = orjson.loads(row[6])["rakuda"]
    assert datasets["rows"] == 40 and datasets["questions"] == 2 and datasets["sha256"].startswith("ce26781dc98a")
    assert "generation/rakuda.jinja" in orjson.loads(row[7]) and row[8] == ["rakuda"]
    (limits,) = orjson.loads(row[10])[f"candidate {server.base_url}"]  # per endpoint and invocation
    assert "pyarrow" in orjson.loads(row[9]) and limits["history"][0][2] == "start" and limits["requests"] == 2
    for path in tmp_path.rglob("*"):
        assert not path.is_file() or b"sk-very-secret-key" not in path.read_bytes()


def test_error_rows_are_retried_on_resume_up_to_the_limit(server, tmp_path):
    data = write_rakuda(tmp_path / "data", ["普通の質問", "[[fail:401]] 壊れた質問"])
    results = tmp_path / "results"
    expected_calls = [1, 2, 3, 3]  # first run, then two resumes re-call the error row; the fourth gives up
    for run_no, calls in enumerate(expected_calls):
        generate(server, results, data, benchmarks=["rakuda"], retry_errors=2)
        rows = query(results, "SELECT question_id, error_type, calls, content FROM answers ORDER BY 1")
        assert rows[0] == ("q0", None, 1, rows[0][3]) and rows[0][3]
        assert rows[1][:3] == ("q1", "http_401", calls), run_no
        assert rows[1][3] is None  # an error row never carries an answer
    assert server.stats()["calls"] == 1 + 3


def test_changed_parameters_or_rerun_call_again_and_supersede_the_old_rows(server, tmp_path):
    data = write_rakuda(tmp_path / "data", ["質問A", "質問B"])
    results = tmp_path / "results"
    generate(server, results, data, benchmarks=["rakuda"])
    generate(server, results, data, benchmarks=["rakuda"], generation=GenerationConfig(temperature=0.9))
    assert server.stats()["calls"] == 4
    generate(server, results, data, benchmarks=["rakuda"], generation=GenerationConfig(temperature=0.9), rerun=True)
    assert server.stats()["calls"] == 6
    assert query(results, "SELECT count(*), count(DISTINCT request_hash) FROM answers") == [(2, 2)]
    assert query(results, "SELECT count(*) FROM raw_answers") == [(2,)]  # compacted
    assert query(results, "SELECT sum(requests) FROM token_usage") == [(6,)]  # every paid call is counted


def test_reasoning_is_stripped_into_its_own_column(server, tmp_path):
    data = write_rakuda(tmp_path / "data", ["[[think]] 考えてから答えて"])
    generate(server, tmp_path / "r", data, benchmarks=["rakuda"])
    ((content, reasoning),) = query(tmp_path / "r", "SELECT content, reasoning FROM answers")
    assert reasoning == "まず質問を整理します。" and "<think>" not in content and content.startswith("「")


@pytest.mark.parametrize(
    ("raw", "content", "reasoning"),
    [
        ("答え", "答え", None),
        ("<think>a</think>\n答え", "答え", "a"),
        ("<THINKING>a</THINKING>答え<reasoning>b</reasoning>", "答え", "a\n\nb"),
        ("テンプレートが開いた思考</think>答え", "答え", "テンプレートが開いた思考"),
        ("前置き<think>途中で切れた", "前置き", "途中で切れた"),
        ("a < b かつ b > c", "a < b かつ b > c", None),
    ],
)
def test_split_reasoning(raw, content, reasoning):
    assert split_reasoning(raw) == (content, reasoning)


def test_split_reasoning_keeps_server_side_reasoning_content():
    assert split_reasoning("<think>x</think>答え", "サーバー側") == ("答え", "サーバー側\n\nx")
    assert split_reasoning("答え", "サーバー側") == ("答え", "サーバー側")


def test_a_run_killed_mid_flight_resumes_without_losing_or_repaying_work(data_dir, tmp_path):
    concurrency = 20
    with LoopbackServer(latency_ms=100) as server:
        args = [sys.executable, "-m", "shaberi", "run", "--model", "m", "--base-url", server.base_url,
                "--results-dir", str(tmp_path), "--data-dir", str(data_dir), "--concurrency", str(concurrency)]
        env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        deadline = time.monotonic() + 60
        while server.stats()["calls"] < 120 and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        at_kill = server.stats()["calls"]
        assert 120 <= at_kill < 315, "the run must be killed mid-flight"

        # What the killed process journaled is recovered by the next one; then it finishes the rest.
        resumed = subprocess.run(args, capture_output=True, text=True, env=env, timeout=120)
        assert resumed.returncode == 0, resumed.stderr
        stats = server.stats()

    assert query(tmp_path, "SELECT count(*), count(DISTINCT (benchmark, question_id)), count(error) FROM answers") \
        == [(315, 315, 0)]
    assert query(tmp_path, "SELECT count(*) FROM raw_answers") == [(315,)]  # no duplicate rows on disk either
    repaid = stats["calls"] - 315
    assert 0 <= repaid <= concurrency, f"{repaid} calls were paid twice; at most the {concurrency} in flight may be"
    assert max(stats["by_key"].values()) <= 2
    assert query(tmp_path, "SELECT status FROM runs") == [("ok",)]
    # token_usage counts every call whose answer came back; the few in flight at the kill died with it.
    assert query(tmp_path, "SELECT sum(requests) FROM token_usage") == [(stats["calls"] - repaid,)]
