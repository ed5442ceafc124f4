"""The orchestrator in-process: a typed ``RunRequest`` and the transport seam reach every stage, so a stage-level
test needs neither a subprocess nor a port (the end-to-end chains still go over real HTTP elsewhere)."""

from __future__ import annotations

import asyncio
import json

import pytest

from shaberi.errors import UsageError
from shaberi.llm.client import ClientConfig
from shaberi.llm.endpoints import ModelAt
from shaberi.llm.transport import MockTransport, Response
from shaberi.passes import build
from shaberi.pipeline import RunRequest, run

from .conftest import query, write_rakuda


def test_every_stage_sends_through_the_request_transport(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # not loopback URLs: a key is required
    seen: list[tuple[str, str]] = []

    def handler(method: str, url: str, body: bytes | None) -> Response:
        if method == "GET":
            return Response(200, {}, b'{"data": []}')
        request = json.loads(body or b"{}")
        seen.append((url, request["model"]))
        content = "FINAL SCORE: 7" if request["model"] == "judge" else "東京は日本の首都です。"
        return Response(200, {"content-type": "application/json"}, json.dumps({
            "choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2}}).encode())

    data = write_rakuda(tmp_path / "d", ["首都は?", "山は?"])
    req = RunRequest(model="cand", base_url="http://cand.invalid/v1", results_dir=tmp_path / "r", data_dir=data,
                     benchmarks=["rakuda"], judges=[ModelAt("judge", "http://judge.invalid/v1")],
                     passes=build("lang_mixing"), client=ClientConfig(max_retries=0),
                     transport=MockTransport(handler))
    assert req.stages == ["generate", "judge", "passes"]  # what the options ask for, typed at construction
    out = asyncio.run(run(req))
    assert out.status == "ok" and out.failed_stages == {}
    assert sorted(seen) == [("http://cand.invalid/v1/chat/completions", "cand")] * 2 + [
        ("http://judge.invalid/v1/chat/completions", "judge")] * 2
    assert query(tmp_path / "r", "SELECT question_id, score FROM scores ORDER BY 1") == [("q0", 7.0), ("q1", 7.0)]


def _chat(content: str):
    def handler(method: str, url: str, body: bytes | None) -> Response:
        if method == "GET":
            return Response(200, {}, b'{"data": []}')
        return Response(200, {}, json.dumps({"choices": [{"message": {"content": content}, "finish_reason": "stop"}],
                                             "usage": {"prompt_tokens": 1, "completion_tokens": 1}}).encode())
    return MockTransport(handler)


def test_a_request_refuses_untyped_values_and_unknown_benchmarks(tmp_path):
    import pytest

    from shaberi.errors import UsageError

    base = {"model": "m", "base_url": "http://127.0.0.1:9/v1", "results_dir": tmp_path, "data_dir": tmp_path}
    for bad in ({"benchmarks": "rakuda"}, {"judges": ["j@http://127.0.0.1:9/v1"]}, {"judges": ["jx"]},
                {"passes": ["lang_mixing"]}):
        with pytest.raises(TypeError, match="typed values"):
            RunRequest(**base, **bad)
    with pytest.raises(UsageError, match="unknown benchmark nope; choose from: elyza"):
        RunRequest(**base, benchmarks=["nope"])


def test_an_unreachable_judge_is_named_as_the_judge_not_the_base_url(tmp_path):
    import pytest

    from shaberi.errors import ConnectError, EndpointError

    answer = _chat("東京です。")

    def handler(method: str, url: str, body: bytes | None) -> Response:
        if url.startswith("http://127.0.0.1:1/"):
            raise ConnectError("connection refused")
        return answer.handler(method, url, body)  # type: ignore[return-value]

    data = write_rakuda(tmp_path / "d", ["首都は?"])
    req = RunRequest(model="m", base_url="http://127.0.0.1:9/v1", results_dir=tmp_path / "r", data_dir=data,
                     benchmarks=["rakuda"], judges=[ModelAt("j", "http://127.0.0.1:1/v1")],
                     transport=MockTransport(handler))
    with pytest.raises(EndpointError, match=r"cannot reach http://127.0.0.1:1/v1 .*fix --judge j@http://127"):
        asyncio.run(run(req))
    assert not (tmp_path / "r").exists()  # checked before anything is written


def test_a_report_of_a_tag_with_several_models_gives_each_its_block(tmp_path):
    from shaberi.reports.html import write_report

    data = write_rakuda(tmp_path / "d", ["首都は?"])
    for model in ("a", "b"):
        asyncio.run(run(RunRequest(model=model, base_url="http://127.0.0.1:9/v1", results_dir=tmp_path / "r",
                                   data_dir=data, benchmarks=["rakuda"], transport=_chat("東京です。"))))
    page = write_report(tmp_path / "r", "default", tmp_path / "x.html").read_text(encoding="utf-8")
    assert "<h1>shaberi report: default (2 models)</h1>" in page and "<h3>All models of default</h3>" in page
    assert page.count("<h3>a · default") == page.count("<h3>b · default") == 1
    page = write_report(tmp_path / "r", "default", tmp_path / "x.html", model="b").read_text(encoding="utf-8")
    assert "<h3>a · default" not in page and "<h3>b · default" in page


def test_an_invocation_keeps_what_the_run_had_and_a_prompt_sets_other_judges_requests():
    """The runs row an invocation writes (``_merged``): its own settings, the run's creation time, benchmarks,
    judges and passes kept (a pass run again replaces its entry), and a prompt set judged with again keeps the
    request record of its judges not asked this time (gpt-5.1's Responses API request beside gpt-4.1's)."""
    from shaberi.pipeline import _merged
    from shaberi.tables.rows import RunRecord

    base = RunRecord("t__m__x", "t", "t", 1, "m")
    before = base.replace(created_at=1, benchmarks=["rakuda"], judges=["a@u"], passes=["p@1", "q@1"],
                          judge_prompts={"original:c1": {"folder": "f", "requests": {"gpt-5.1": {"api": "responses"}}}})
    now = base.replace(created_at=2, benchmarks=["tengu"], judges=["b@u"], passes=["p@2"],
                       judge_prompts={"original:c1": {"folder": "f", "requests": {"gpt-4.1": {"api": "chat"}}}})
    merged = _merged(before, now)
    assert (merged.created_at, merged.benchmarks, merged.judges, merged.passes) == (
        1, ["rakuda", "tengu"], ["a@u", "b@u"], ["q@1", "p@2"])
    assert merged.judge_prompts["original:c1"]["requests"] == {"gpt-5.1": {"api": "responses"},
                                                               "gpt-4.1": {"api": "chat"}}
    with pytest.raises(UsageError, match="rename one of the two folders"):
        _merged(before, now.replace(judge_prompts={"original:c1": {"folder": "other", "path": "p"}}))
