"""Today's providers' parameters over real HTTP: the loopback server emulates an OpenAI reasoning model (it
refuses max_tokens and temperature, reports reasoning and cached tokens); --top-p, --max-completion-tokens,
--reasoning-effort, --extra-body and an omitted temperature reach the wire for candidate and judge apart;
the cost view prices cached input at its own rate; /models names a model the endpoint does not serve."""

from __future__ import annotations

import pytest

from shaberi.testing import LoopbackServer

from .conftest import query, shaberi
from .test_cli import assert_clean_refusal


def run(server: LoopbackServer, tmp_path, data_dir, model: str, *extra: str):
    return shaberi("run", "--model", model, "--base-url", server.base_url, "--benchmark", "rakuda", "--limit", "3",
                   "--results-dir", str(tmp_path / "results"), "--data-dir", str(data_dir), *extra)


def test_a_reasoning_model_is_asked_as_its_family_requires_and_its_tokens_are_kept(tmp_path, data_dir):
    pricing = tmp_path / "pricing.toml"
    pricing.write_text('["o3-mini"]\ninput = 1.0\ncached_input = 0.25\noutput = 4.0\n')
    with LoopbackServer(models=("o3-mini", "gpt-5.1")) as server:
        proc = run(server, tmp_path, data_dir, "o3-mini", "--judge", "gpt-5.1", "--temperature", "0.7")
        bodies = server.bodies()
    assert proc.returncode == 0, proc.stderr
    assert "note: candidate o3-mini is in model family 'openai-reasoning'" in proc.stderr  # said, never silent
    assert "note: judge gpt-5.1 is in model family 'openai-reasoning'" in proc.stderr
    assert "temperature not sent, max_tokens sent as max_completion_tokens" in proc.stderr
    assert "does not list" not in proc.stderr  # both models are served
    assert len(bodies) == 6 and all("max_tokens" not in b and "temperature" not in b for b in bodies)
    assert sorted({b["max_completion_tokens"] for b in bodies}) == [1024, 6000]
    ((answers, reasoning, cached),) = query(tmp_path / "results", "SELECT count(*), sum(reasoning_tokens), "
                                            "sum(cached_prompt_tokens) FROM answers WHERE error IS NULL")
    assert answers == 3 and reasoning > 0 and cached > 0  # the same system prompt thrice: served from the cache
    ((judged, judge_reasoning),) = query(tmp_path / "results", "SELECT count(score), sum(reasoning_tokens) "
                                         "FROM judgements")
    assert judged == 3 and judge_reasoning > 0
    from shaberi.tables.sql import connect

    con = connect(tmp_path / "results", pricing=pricing)
    ((prompt, cached_in, completion, cost),) = con.execute(
        "SELECT prompt_tokens, cached_prompt_tokens, completion_tokens, cost_usd FROM cost "
        "WHERE stage = 'generation'").fetchall()
    assert cached_in == cached and cost == pytest.approx(((prompt - cached) * 1.0 + cached * 0.25
                                                          + completion * 4.0) / 1e6)


def test_without_the_family_table_the_reasoning_model_refuses_every_call(tmp_path, data_dir):
    empty = tmp_path / "families.toml"
    empty.write_text("")
    with LoopbackServer(models=("o3-mini",)) as server:
        proc = run(server, tmp_path, data_dir, "o3-mini", "--model-families", str(empty))
    assert proc.returncode == 1  # every call failed: the stage failed
    assert "max_tokens' is not supported with this model" in proc.stderr


def test_request_parameters_reach_the_wire_for_candidate_and_judge_apart(tmp_path, data_dir):
    with LoopbackServer(models=("m", "j")) as server:
        proc = run(server, tmp_path, data_dir, "m", "--temperature", "omit", "--top-p", "0.9", "--reasoning-effort",
                   "low", "--max-completion-tokens", "100", "--extra-body",
                   '{"chat_template_kwargs": {"enable_thinking": false}}', "--judge", "j", "--judge-top-p", "0.5",
                   "--judge-reasoning-effort", "high", "--judge-extra-body", '{"top_k": 20}')
        bodies = server.bodies()
    assert proc.returncode == 0, proc.stderr
    candidate = [b for b in bodies if b["model"] == "m"]
    judge = [b for b in bodies if b["model"] == "j"]
    assert len(candidate) == len(judge) == 3
    assert candidate[0] == {"model": "m", "max_completion_tokens": 100, "top_p": 0.9, "reasoning_effort": "low",
                            "chat_template_kwargs": {"enable_thinking": False}}
    assert judge[0] == {"model": "j", "temperature": 0.0, "max_tokens": 1024, "top_p": 0.5,
                        "reasoning_effort": "high", "top_k": 20}


@pytest.mark.parametrize(("option", "value", "says"), [
    ("--extra-body", "[1]", "must be a JSON object"), ("--judge-extra-body", "{bad", "is not JSON"),
    ("--extra-body", '{"model": "x"}', "cannot set model"), ("--reasoning-effort", "extreme", "is not one of"),
    ("--top-p", "0", "--top-p 0 is out of range"), ("--temperature", "warm", "is not a number"),
    ("--judge-temperature", "nan", "out of range"), ("--max-completion-tokens", "0", "out of range"),
    ("--concurrency-min", "100", "above --concurrency 60"), ("--concurrency-start", "61", "above --concurrency")])
def test_bad_request_parameters_are_refused_before_any_call(server, tmp_path, data_dir, option, value, says):
    proc = run(server, tmp_path, data_dir, "m", option, value)
    assert_clean_refusal(proc, tmp_path, says)
    assert server.stats()["calls"] == 0


def test_one_limit_under_two_names_is_refused(server, tmp_path, data_dir):
    proc = run(server, tmp_path, data_dir, "m", "--max-tokens", "100", "--max-completion-tokens", "200")
    assert_clean_refusal(proc, tmp_path, "--max-tokens and --max-completion-tokens are the same limit")


@pytest.mark.parametrize(("table", "says"), [
    (b'["r"]\nmodels = "o3*"\n', "models must be a list of strings"),  # not three patterns o, 3 and *
    (b'["r"]\nmodels = [1]\n', "models must be a list of strings"),
    (b'["r"]\nmodels = ["o3*"]\ntokens_field = 5\n', "tokens_field"),
    (b'["r"]\nmodels = ["o3*"]\nomit = "temperature"\n', "omit must be a list of strings"),
    (b'\xff\xfe["r"]', "cannot read model families file"), (b'["r"\nmodels', "cannot read model families file")])
def test_a_broken_family_table_is_refused_before_any_call(server, tmp_path, data_dir, table, says):
    path = tmp_path / "families.toml"
    path.write_bytes(table)
    proc = run(server, tmp_path, data_dir, "o3-mini", "--model-families", str(path))
    assert_clean_refusal(proc, tmp_path, says)
    assert server.stats()["calls"] == 0


def test_a_family_may_rename_the_limit_and_omit_the_old_name(tmp_path, data_dir):
    path = tmp_path / "families.toml"
    path.write_text('["r"]\nmodels = ["o3*"]\ntokens_field = "max_completion_tokens"\n'
                    'omit = ["max_tokens", "temperature", "frequency_penalty"]\n')
    with LoopbackServer(models=("o3-mini",)) as server:
        proc = run(server, tmp_path, data_dir, "o3-mini", "--model-families", str(path), "--frequency-penalty", "0.5")
        bodies = server.bodies()
    assert proc.returncode == 0, proc.stderr
    assert "temperature not sent, frequency_penalty not sent, max_tokens sent as max_completion_tokens" in proc.stderr
    assert all(set(b) == {"model", "max_completion_tokens"} for b in bodies)


def test_a_model_the_endpoint_does_not_list_is_named_before_the_run_once_per_family(tmp_path, data_dir):
    with LoopbackServer(models=("qwen2.5-7b-instruct",)) as server:
        proc = run(server, tmp_path, data_dir, "qwen2.5-7b-instuct", "--runs", "3")
    assert proc.returncode == 0  # a warning: some gateways list only a few of the models they serve
    note = (f"note: {server.base_url} does not list model 'qwen2.5-7b-instuct' in /models (it lists "
            "qwen2.5-7b-instruct)")
    assert proc.stderr.count(note) == 1, proc.stderr  # once for the family of three runs
    assert proc.stdout.count("status: ok") == 3
