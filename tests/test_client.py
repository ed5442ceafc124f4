"""The LLM client over real HTTP: what is retried, what is not, Retry-After, timeouts, and AIMD."""

from __future__ import annotations

import asyncio
import time

import orjson
import pytest

from shaberi import errors
from shaberi.llm.client import AdaptiveLimiter, AIMDConfig, ChatClient, ClientConfig, MockTransport, Response
from shaberi.testing import LoopbackServer
from shaberi.testing.server import request_key

FAST = ClientConfig(timeout=2.0, max_retries=6, backoff_base=0.01, backoff_max=0.05)


def body(text: str) -> bytes:
    return orjson.dumps({"model": "m", "messages": [{"role": "user", "content": text}]})


async def call(base_url: str, text: str, config: ClientConfig = FAST):
    client = ChatClient(base_url, None, config)
    try:
        return await client.chat(body(text))
    finally:
        await client.aclose()


def calls_for(server: LoopbackServer, text: str) -> int:
    return server.stats()["by_key"].get(request_key([{"content": text}]), 0)


@pytest.mark.parametrize("fault", ["503*2", "500*2", "garbage*2", "429*2"])
def test_transient_failures_are_retried_until_success(server, fault):
    text = f"[[fail:{fault}]] 質問"
    done = asyncio.run(call(server.base_url, text))
    assert done.content and done.attempts == 3
    assert calls_for(server, text) == 3
    assert done.prompt_tokens > 0 and done.completion_tokens > 0


@pytest.mark.parametrize("status", [400, 401, 403, 404])
def test_permanent_errors_are_not_retried(server, status):
    text = f"[[fail:{status}]] 質問"
    with pytest.raises(errors.PermanentError) as err:
        asyncio.run(call(server.base_url, text))
    assert err.value.error_type == f"http_{status}" and err.value.attempts == 1
    assert calls_for(server, text) == 1


def test_retries_are_bounded(server):
    text = "[[fail:503]] 質問"
    with pytest.raises(errors.ServerError) as err:
        asyncio.run(call(server.base_url, text, ClientConfig(max_retries=3, backoff_base=0.01)))
    assert err.value.attempts == 4 and calls_for(server, text) == 4


def test_retry_after_is_honoured(server):
    start = time.monotonic()
    done = asyncio.run(call(server.base_url, "[[fail:429*1]] 質問"))  # the server sends Retry-After: 1
    assert done.attempts == 2 and time.monotonic() - start >= 1.0


def test_rpm_cap_spaces_requests(server):
    async def go() -> float:
        client = ChatClient(server.base_url, None, ClientConfig(rpm=600))  # 10 a second
        start = time.monotonic()
        await asyncio.gather(*(client.chat(body(f"rpm {i}")) for i in range(30)))
        await client.aclose()
        return time.monotonic() - start

    assert 1.8 <= asyncio.run(go()) < 6  # a burst of 10, then 20 more at 10/s


def test_a_hung_request_times_out_and_is_retried(server):
    start = time.monotonic()
    done = asyncio.run(call(server.base_url, "[[fail:hang*1]] 質問", ClientConfig(timeout=0.5, backoff_base=0.01)))
    assert done.attempts == 2 and 0.5 <= time.monotonic() - start < 5


def test_unreachable_endpoint_fails_the_preflight_check():
    async def check() -> None:
        client = ChatClient("http://127.0.0.1:9/v1")
        try:
            await client.check()
        finally:
            await client.aclose()

    with pytest.raises(errors.EndpointError, match=r"cannot reach http://127\.0\.0\.1:9/v1"):
        asyncio.run(check())


def test_429_storm_shrinks_concurrency_and_every_request_completes():
    async def storm(base_url: str) -> ChatClient:
        aimd = AIMDConfig(start=40, max=60, cooldown=0.2)
        client = ChatClient(base_url, None, ClientConfig(max_retries=30, backoff_base=0.02, backoff_max=0.2,
                                                         aimd=aimd))
        await asyncio.gather(*(client.chat(body(f"q{i}")) for i in range(300)))
        await client.aclose()
        return client

    with LoopbackServer(latency_ms=20, capacity=8) as server:
        client = asyncio.run(storm(server.base_url))
        stats = server.stats()
    assert stats["by_status"]["200"] == 300
    assert stats["by_status"].get("429", 0) > 0
    decreases = [limit for _, limit, why in client.limiter.history if why == "429"]
    assert decreases and decreases[0] == 20  # halved from 40 on the first 429
    assert client.rate_limited == stats["by_status"]["429"]
    assert stats["peak_in_flight"] <= 60


def test_aimd_rules():
    limiter = AdaptiveLimiter(AIMDConfig(start=10, min=2, max=12, cooldown=60))
    loop = asyncio.new_event_loop()
    for _ in range(5):
        loop.run_until_complete(limiter.acquire())
        limiter.release(success=True)
    assert limiter.limit == 12  # +1 per success, capped at max
    for _ in range(3):
        loop.run_until_complete(limiter.acquire())
        limiter.release(rate_limited=True)
    assert limiter.limit == 6  # halved once: later 429s fall inside the cooldown
    loop.run_until_complete(limiter.acquire())
    limiter.release()  # a 5xx or timeout: no change
    assert limiter.limit == 6
    loop.close()
    with pytest.raises(errors.UsageError):
        AdaptiveLimiter(AIMDConfig(start=5, min=10))


def test_limiter_never_exceeds_its_limit():
    async def go() -> int:
        limiter = AdaptiveLimiter(AIMDConfig(start=3, max=3))
        peak = 0

        async def task() -> None:
            nonlocal peak
            await limiter.acquire()
            peak = max(peak, limiter.in_flight)
            await asyncio.sleep(0.001)
            limiter.release(success=True)

        await asyncio.gather(*(task() for _ in range(50)))
        return peak

    assert asyncio.run(go()) == 3


def test_mock_transport_and_reasoning_content():
    seen = []

    def handler(method: str, url: str, data: bytes | None) -> Response:
        seen.append(url)
        return Response(200, {}, orjson.dumps({"choices": [{"message": {"content": "答え", "reasoning_content": "考え"},
                                                             "finish_reason": "length"}]}))

    client = ChatClient("http://model.invalid/v1/", "sk-test", FAST, transport=MockTransport(handler))
    done = asyncio.run(client.chat(body("q")))
    assert (done.content, done.reasoning, done.finish_reason, done.prompt_tokens) == ("答え", "考え", "length", 0)
    assert seen == ["http://model.invalid/v1/chat/completions"]
    assert client.headers["Authorization"] == "Bearer sk-test"


def test_the_dispatcher_records_every_finished_call_even_when_recording_one_fails():
    """Calls that finish together are drained together: one record that raises must not lose the others
    (they were paid for); the failure still ends the run."""
    from shaberi.llm.dispatch import Dispatcher

    recorded: list[int] = []

    async def call(item: int) -> int:
        return item  # no await: every worker finishes in the same loop iteration

    def record(item: int, outcome: int | None, error: Exception | None) -> None:
        if item == 0:
            raise OSError("disk full")
        recorded.append(item)

    with pytest.raises(OSError, match="disk full"):
        asyncio.run(Dispatcher(iter(range(8)), call, record, workers=8).run())
    assert sorted(recorded) == list(range(1, 8))
