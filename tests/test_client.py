"""The LLM client over real HTTP: what is retried, what is not, Retry-After, timeouts (rate control:
test_rate_control)."""

from __future__ import annotations

import asyncio
import time

import orjson
import pytest

from shaberi import errors
from shaberi.llm.client import ChatClient, ClientConfig
from shaberi.llm.params import Verbatim
from shaberi.llm.transport import MockTransport, Response
from shaberi.testing import LoopbackServer
from shaberi.testing.server import request_key

FAST = ClientConfig(timeout=2.0, max_retries=6, backoff_base=0.01, backoff_max=0.05)


def body(text: str) -> tuple[str, list[dict], Verbatim]:
    """``ChatClient.chat``'s arguments for a bare request: model ``m``, one user message, nothing else sent."""
    return "m", [{"role": "user", "content": text}], Verbatim()


async def call(base_url: str, text: str, config: ClientConfig = FAST):
    client = ChatClient(base_url, None, config)
    try:
        return await client.chat(*body(text))
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
        await asyncio.gather(*(client.chat(*body(f"rpm {i}")) for i in range(30)))
        await client.aclose()
        return time.monotonic() - start

    assert 1.8 <= asyncio.run(go()) < 6  # spaced evenly at 10/s: about 3 s


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


def test_mock_transport_and_reasoning_content():
    seen = []

    def handler(method: str, url: str, data: bytes | None) -> Response:
        seen.append(url)
        return Response(200, {}, orjson.dumps({"choices": [{"message": {"content": "答え", "reasoning_content": "考え"},
                                                             "finish_reason": "length"}]}))

    client = ChatClient("http://model.invalid/v1/", "sk-test", FAST, transport=MockTransport(handler))
    done = asyncio.run(client.chat(*body("q")))
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


def test_a_parked_call_lets_another_worker_run_and_the_count_comes_back():
    """Two workers, both calls parked until ten others are recorded: two more workers take up the work (with the
    workers held, it would never go on); once both are back, the extra workers stop between calls: no call starts
    with more than two running."""
    from shaberi.llm.dispatch import Dispatcher, parked

    running, after, recorded = 0, [], []

    async def go() -> None:
        back = asyncio.Event()

        async def call(item: int) -> int:
            nonlocal running
            if item < 2:
                with parked():
                    await back.wait()
            elif back.is_set():
                after.append(running + 1)
            running += 1
            for _ in range(3):
                await asyncio.sleep(0)
            running -= 1
            return item

        def record(item: int, outcome: int | None, error: Exception | None) -> None:
            recorded.append(item)
            if len(recorded) == 10:
                back.set()

        await asyncio.wait_for(Dispatcher(iter(range(40)), call, record, workers=2).run(), 30)

    asyncio.run(go())
    assert sorted(recorded) == list(range(40)) and 0 not in recorded[:10] and 1 not in recorded[:10]
    assert after and max(after) <= 2, after
