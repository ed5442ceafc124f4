"""The orchestrator in-process: a typed ``RunRequest`` and the transport seam reach every stage, so a stage-level
test needs neither a subprocess nor a port (the end-to-end chains still go over real HTTP elsewhere)."""

from __future__ import annotations

import asyncio
import json

from shaberi.llm.client import ClientConfig, MockTransport, Response
from shaberi.llm.endpoints import ModelAt
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
