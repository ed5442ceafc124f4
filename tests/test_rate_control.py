"""Rate control against limits the client is not told, over real HTTP with the default settings: an in-flight
cap, a queueing server, requests and tokens per minute in headers, Retry-After, and the rules themselves.
Checked for behaviour (429 share, bounded growth, nothing lost), never for wall time: bench/rate_control.py
measures that."""

from __future__ import annotations

import asyncio
import time

import orjson
import pytest

from shaberi import errors
from shaberi.llm.client import ChatClient, ClientConfig
from shaberi.llm.control import ControlConfig, Controller, Ticket, duration
from shaberi.llm.params import Verbatim
from shaberi.llm.transport import MockTransport, Response
from shaberi.testing import LoopbackServer


def body(text: str) -> tuple[str, list[dict], Verbatim]:
    """``ChatClient.chat``'s arguments for a bare request: model ``m``, one user message, nothing else sent."""
    return "m", [{"role": "user", "content": text}], Verbatim()


async def many(base_url: str, n: int) -> tuple[ChatClient, list[float]]:
    """``n`` distinct requests through one client with default settings; (client, each latency in s)."""
    client = ChatClient(base_url, None)
    try:
        done = await asyncio.gather(*(client.chat(*body(f"質問 {i}")) for i in range(n)))
    finally:
        await client.aclose()
    return client, [d.latency_ms / 1000 for d in done]


def first_cut(client: ChatClient) -> float:
    """When the client read its first 429 (``time.monotonic()``, the server's arrivals' clock)."""
    return client.control.started + next(t for t, _, why in client.control.history if why == "429")


def test_an_in_flight_cap_is_found_near_the_wall_and_held():
    with LoopbackServer(latency_ms=50, capacity=8) as server:
        client, _ = asyncio.run(many(server.base_url, 600))
        stats, arrivals = server.stats(), server.arrivals()
    assert stats["by_status"]["200"] == 600  # nothing lost, with the default retry settings
    rejected = stats["by_status"].get("429", 0)
    # Before any answer the first window goes out spread, and on a busy machine the first 429s come back late, so
    # how many of it pass the cap depends on the machine: the window (widened towards the maximum while nothing has
    # answered) and each of its requests retried once before the cut is read, at most; half a second after the
    # client read its first 429 (a stalled machine's start can take longer than that), rarely: a request sent the
    # instant another is answered can reach the server before it has let that one go. Measured beside two CPU-bound
    # processes, 0-1.7 % of the later arrivals (2.6 % once on CI); the wrong rule (no hold below the ceiling, the
    # limit probing the wall again and again) refuses 9-10 % of them on an idle machine.
    later = [status for t, _, status in arrivals if t > first_cut(client) + 0.5]
    assert 0 < rejected < 2 * ControlConfig().max + 0.02 * stats["calls"]
    assert later.count(429) < 0.05 * len(later), (later.count(429), len(later))
    cuts = [limit for _, limit, why in client.control.history if why == "429"]
    # How fast it gets there depends on how busy the machine is (bench/rate_control.py measures it); that it holds
    # at the wall, below it and not collapsed, refusing rarely, does not.
    assert cuts and 5 <= client.control.limit <= 9
    assert client.rate_limited == rejected and client.limits()["rate_limited"] == rejected


def test_a_retry_after_on_a_load_429_is_that_requests_wait_not_everyones():
    """A cap of 8 whose 429s say ``Retry-After: 1``: each refused request waits its second (its next arrival is at
    least 1 s after its refusal), while the others keep the cap busy; nothing holds every send."""
    with LoopbackServer(latency_ms=50, capacity=8, retry_after=1) as server:
        client, _ = asyncio.run(many(server.base_url, 400))
        stats, arrivals = server.stats(), server.arrivals()
    assert stats["by_status"]["200"] == 400
    refused = [(t, key) for t, key, status in arrivals if status == 429]
    # as above: the first window's 429s (at most the window, 40, more of them on a busy machine), then rarely
    assert refused and len(refused) < 40 + 0.02 * stats["calls"]
    assert len([t for t, _ in refused if t > first_cut(client) + 0.5]) < 0.05 * stats["calls"]  # races at the wall
    for t, key in refused:
        again = min(a for a, k, _ in arrivals if k == key and a > t)
        assert again >= t + 1.0, (t, again)
    assert client.pacing.not_before == 0.0  # no hold of every send was ever set
    # the others went on: requests arrived in the second after every refusal but the last
    assert all(any(t < a < t + 1.0 for a, _, _ in arrivals) for t, _ in refused[:-1])


def test_random_refusals_are_not_taken_for_load():
    """A gateway refusing 10 % of requests whatever the load, with no cap: the limit is not driven down (lowering
    it would not make the refusals rarer); every request is answered in the end."""
    with LoopbackServer(latency_ms=50, stray_429=0.1) as server:
        client, _ = asyncio.run(many(server.base_url, 800))
        stats = server.stats()
    assert stats["by_status"]["200"] == 800
    refused = stats["by_status"]["429"]
    assert refused >= 40  # ~10 % of ~890 requests: the strays really came
    history = client.control.history
    cuts = [limit for _, limit, why in history if why == "429"]
    assert len(cuts) <= refused / 8, (len(cuts), refused)  # the old rule cut at every one, down to 1
    # A stray read as a wall costs a step, soon undone; what must not happen is cuts compounding (a wall read into
    # them: 34, 31, 24, 9, 7, 4). Measured from where the limit was, since a busy machine's own lag, read as a
    # queue, may have lowered it first.
    assert deepest_fall(history) >= 0.4, history
    # and it ends high, unless latency lowered it
    assert client.control.limit >= 30 or any(why == "latency" for _, _, why in history), history


def deepest_fall(history: list[tuple[float, int, str]]) -> float:
    """The lowest share of the limit left by a chain of 429 cuts with no undo between them: the lowest limit they set
    over the limit before the first (whose cut may halve it, as the first window's 429 does)."""
    fall, before, chain = 1.0, history[0][1], None
    for _, limit, why in history:
        if why == "429":
            chain = before if chain is None else chain
            fall = min(fall, limit / chain)
        elif why == "undo" or (chain is not None and limit >= chain):
            chain = None
        before = limit
    return fall


def test_a_retry_after_from_an_endpoint_refusing_everything_holds_every_send():
    """Refused at every in-flight level (a spent budget with no x-ratelimit headers): once the controller reads the
    429s as the endpoint's, its Retry-After holds every send, so the endpoint is not asked again before then."""
    calls: list[float] = []

    def handler(method: str, url: str, data: bytes | None) -> Response:
        calls.append(time.monotonic())
        if len(calls) <= 6:
            return Response(429, {"Retry-After": "1"}, b'{"error": {"message": "slow down"}}')
        return Response(200, {}, orjson.dumps({"choices": [{"message": {"content": "答え"}}]}))

    client = ChatClient("http://model.invalid/v1", None, transport=MockTransport(handler))

    async def go() -> None:
        await asyncio.gather(*(client.chat(*body(f"q{i}")) for i in range(10)))

    asyncio.run(go())
    assert client.pacing.not_before > 0  # the endpoint's hold was set
    # after the hold was set, no send went out before it ended: the next call came a second after the refusals
    refusals, later = calls[:6], calls[6:]
    assert min(later) >= max(refusals) + 0.9


def test_a_server_that_queues_is_not_driven_into_an_ever_longer_queue():
    """4 served at a time, 0.1 s each, never a 429: at the default maximum of 60 in flight every request would
    wait 1.5 s. The latency signal keeps the queue short."""
    with LoopbackServer(latency_ms=100, queue=4) as server:
        client, latencies = asyncio.run(many(server.base_url, 300))
        stats = server.stats()
    assert stats["by_status"] == {"200": 300}
    late = sorted(latencies[-100:])
    assert late[50] < 0.5  # median of the last hundred: a short queue, not 1.5 s
    # and the limit that gives it: 4 served 0.1 s each, a limit of 20 waits 0.5 s (60 would wait 1.5 s); an idle
    # machine ends near 10, a busy one higher (its own lag raises the baseline the queue is read against)
    assert client.control.limit <= 20 and any(why == "latency" for _, _, why in client.control.history)


@pytest.mark.parametrize("kind", ["rpm", "tpm"])
def test_budgets_stated_in_headers_are_paced_before_the_wall(kind):
    """1,200 requests (or the tokens of about as many) a minute: the server's x-ratelimit headers say so, and
    the client spaces its sends to fit instead of learning it from 429s."""
    limit = 1200 if kind == "rpm" else 1200 * 40
    with LoopbackServer(latency_ms=20, **{kind: limit}) as server:
        client, _ = asyncio.run(many(server.base_url, 150))
        stats = server.stats()
    assert stats["by_status"]["200"] == 150
    assert stats["by_status"].get("429", 0) <= 3  # a 429 is at most the first burst's, before any header
    assert (client.pacing.server_rpm if kind == "rpm" else client.pacing.server_tpm) == limit


def test_a_429_is_retried_until_a_time_bound_not_an_attempt_count(server):
    server.fail_next(*[429] * 8)  # no Retry-After: the controller's signal, not the request's failure
    client, _ = asyncio.run(many(server.base_url, 1))
    assert client.requests == 9 and client.rate_limited == 8  # more than --max-retries (6) attempts

    async def refused(text: str, timeout: float) -> None:
        client = ChatClient(server.base_url, None, ClientConfig(rate_limit_timeout=timeout))
        try:
            await client.chat(*body(text))
        finally:
            await client.aclose()

    server.reset()
    server.fail_next(*[429] * 500)  # an endpoint refusing everything, without Retry-After
    start = time.monotonic()
    with pytest.raises(errors.RateLimitError):
        asyncio.run(refused("質問", 3.0))
    assert 3.0 <= time.monotonic() - start < 4.5
    assert 6 <= server.stats()["calls"] <= 14  # backed off: not a request every round trip for 3 s
    server.reset()
    start = time.monotonic()
    with pytest.raises(errors.RateLimitError):
        asyncio.run(refused("[[fail:wait]] 質問", 1.0))  # Retry-After: 3600, under the default cap of 300 s
    assert time.monotonic() - start < 3  # the wait stops where the time bound does


def test_a_long_retry_after_is_cut_to_the_cap_and_said():
    with LoopbackServer() as server:
        start = time.monotonic()
        client = ChatClient(server.base_url, None, ClientConfig(retry_after_max=0.3))

        async def go() -> None:
            try:
                await client.chat(*body("[[fail:wait*1]] 質問"))  # 429 with Retry-After: 3600
            finally:
                await client.aclose()

        asyncio.run(go())
    assert time.monotonic() - start < 10
    assert client.notes == [f"{server.base_url} asked to wait 3600 s (Retry-After); waiting 0.3 s instead "
                            "(--retry-after-max)"]


def test_a_429_saying_the_quota_is_spent_is_not_retried():
    calls = []

    def handler(method: str, url: str, data: bytes | None) -> Response:
        calls.append(url)
        return Response(429, {}, b'{"error": {"message": "You exceeded your current quota", '
                                  b'"code": "insufficient_quota"}}')

    client = ChatClient("http://model.invalid/v1", None, transport=MockTransport(handler))
    with pytest.raises(errors.PermanentError, match="quota"):
        asyncio.run(client.chat(*body("q")))
    assert len(calls) == 1


def test_the_rules():
    """Slow start doubles per round trip; a 429 sets the limit below the refused in-flight count, once per
    round trip; the wall is probed again only after a hold; then one slot per round trip; latency shrinks it."""

    async def go() -> None:
        c = Controller(ControlConfig(start=4, max=100))

        async def sent(c: Controller) -> Ticket:
            await c.acquire()
            return c.send()

        async def round_trip(cap: int = 1000) -> None:
            """One window against a server refusing beyond ``cap`` in flight: its 429s come back first."""
            tickets = [await sent(c) for _ in range(int(c.limit))]
            for t in sorted(tickets, key=lambda t: t.in_flight <= cap):
                if t.in_flight > cap:
                    c.rate_limited(t)
                else:
                    c.success(t, 0.01, 0)

        for want in (8, 16, 32):
            await round_trip()
            assert int(c.limit) == want
        await round_trip(cap=24)  # 8 refused: one decrease, to just below the first refused in-flight count
        assert int(c.limit) == 24 and c.ssthresh == 24
        await round_trip(cap=24)
        assert int(c.limit) == 24  # 25 failed: held below it
        await asyncio.sleep(0.25)  # the hold: 4 round trips (at least 0.05 s each)
        await round_trip(cap=30)  # the wall moved
        assert int(c.limit) == 25  # probing the wall again, one slot for the round trip
        c2 = Controller(ControlConfig(start=8, max=100))
        for _ in range(3):
            tickets = [await sent(c2) for _ in range(int(c2.limit))]
            for t in tickets:
                c2.success(t, 0.1, 0)
        peak = c2.limit
        for _ in range(4):  # four times the latency: a queue (the first round still holds earlier answers)
            await asyncio.sleep(0.06)
            tickets = [await sent(c2) for _ in range(int(c2.limit))]
            for t in tickets:
                c2.success(t, 0.4, 0)
            peak = max(peak, c2.limit)
        assert [why for _, _, why in c2.history].count("latency") >= 1 and c2.limit <= 0.6 * peak

    asyncio.run(go())
    with pytest.raises(errors.UsageError):
        ControlConfig(start=5, min=10)


def test_a_stray_429_is_not_taken_for_a_wall():
    """One 429 while the first window goes out (sent with 3 in flight) is doubted: before any success the cut
    stops at half the window, 15; requests sent with 10 in flight then succeed, so the cut is undone."""

    async def go() -> Controller:
        c = Controller(ControlConfig(start=30, max=60))
        tickets = []
        for _ in range(10):
            await c.acquire()
            tickets.append(c.send())
        c.rate_limited(tickets[2])
        assert int(c.limit) == 15
        for t in tickets[3:]:
            c.success(t, 0.1, 0)
        return c

    c = asyncio.run(go())
    assert c.limit >= 30 and [why for _, _, why in c.history] == ["start", "429", "undo"]


def test_a_cluster_of_random_refusals_at_a_low_limit_is_no_wall():
    """At 16 in flight, refusals at a random 1 in 8 for six rounds, then five in one round: 7 of the last 32
    answers (over a fifth, as 10 % random refusals give at 6 % of 429s) but 16 of the last 128. Refused low and
    high alike while most sent with as many in flight succeed: random ones, and the limit stays."""

    async def go() -> Controller:
        c = Controller(ControlConfig(start=16, max=16))
        for refused in [()] * 2 + [(5, 12)] * 6 + [(2, 4, 6, 8, 10)]:
            tickets = []
            for _ in range(16):
                await c.acquire()
                tickets.append(c.send())
            for t in tickets:
                if t.in_flight in refused:
                    c.rate_limited(t)
                else:
                    c.success(t, 0.01, 0)
        return c

    c = asyncio.run(go())
    assert int(c.limit) == 16 and [why for _, _, why in c.history] == ["start"], c.history


def test_a_spent_budget_holds_sends_no_longer_than_the_cap_and_says_so():
    calls = []

    def handler(method: str, url: str, data: bytes | None) -> Response:
        calls.append(time.monotonic())
        return Response(200, {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "9999h"},
                        orjson.dumps({"choices": [{"message": {"content": "答え"}}]}))

    client = ChatClient("http://model.invalid/v1", None, ClientConfig(retry_after_max=0.3),
                        transport=MockTransport(handler))

    async def go() -> None:
        await client.chat(*body("q1"))
        await client.chat(*body("q2"))

    asyncio.run(go())
    assert 0.25 <= calls[1] - calls[0] < 2
    assert client.notes == ["http://model.invalid/v1 asked to wait 3.59964e+07 s (x-ratelimit-reset); waiting 0.3 s "
                            "instead (--retry-after-max)"]


def test_a_tokens_budget_paces_the_first_window_too():
    from shaberi.llm.control import Pacing

    pacing = Pacing(tpm=6000)  # 100 tokens a second
    assert pacing.interval(estimate=50) == 0.5  # before any answer: the request's own size
    pacing.used(200)
    assert pacing.interval(estimate=50) == 2.0  # then what answers took


def test_reset_durations_as_openai_writes_them():
    assert [duration(v) for v in ("20ms", "1s", "6m0s", "1m30.5s", "2", None, "soon", "nan", "-3")] == [
        0.02, 1.0, 360.0, 90.5, 2.0, None, None, None, 0.0]


def test_the_loopback_server_states_retry_after_on_load_429s_and_refuses_strays_at_its_rate():
    """The servers the rate-control bench measures against: 429s beyond the cap carrying ``Retry-After`` when asked,
    and stray 429s for a seeded fraction of requests whatever the load (the same ones each run)."""
    import urllib.error
    import urllib.request

    from scipy.stats import binom

    def refusals(server: LoopbackServer, n: int) -> list[str | None]:
        said = []
        for i in range(n):
            request = urllib.request.Request(f"{server.base_url}/chat/completions", method="POST", data=orjson.dumps(
                {"model": "m", "messages": [{"role": "user", "content": f"q{i}"}]}),
                headers={"Content-Type": "application/json"})
            try:
                urllib.request.urlopen(request, timeout=10).read()
            except urllib.error.HTTPError as exc:
                assert exc.code == 429
                said.append(exc.headers.get("Retry-After"))
        return said

    with LoopbackServer(stray_429=0.1, retry_after=0) as strays:
        first = refusals(strays, 400)
        # one at a time, so never over a capacity: 400 × 10 % refused, within the binomial's 99.9 % interval
        assert binom.ppf(0.0005, 400, 0.1) <= len(first) <= binom.ppf(0.9995, 400, 0.1), len(first)
        assert set(first) == {"0"} and strays.stats()["by_status"]["429"] == len(first)
        strays.reset()
        assert len(refusals(strays, 400)) == len(first)  # seeded: the same run sees the same refusals
    async def burst(url: str) -> list[str | None]:
        """Six requests at once (raw, no controller spreading them) against a cap of two: each 429's Retry-After."""
        import aiohttp

        async with aiohttp.ClientSession() as session:
            async def one(i: int) -> tuple[int, str | None]:
                async with session.post(f"{url}/chat/completions", data=orjson.dumps(
                        {"model": "m", "messages": [{"role": "user", "content": f"b{i}"}]}),
                        headers={"Content-Type": "application/json"}) as resp:
                    await resp.read()
                    return resp.status, resp.headers.get("Retry-After")

            found = await asyncio.gather(*(one(i) for i in range(6)))
        return [said for status, said in found if status == 429]

    # two seconds each: the six overlap on the server however busy the machine
    for retry_after, header in ((1.0, "1"), (None, None)):  # without --retry-after a capacity 429 has none
        with LoopbackServer(latency_ms=2000, capacity=2, retry_after=retry_after) as capped:
            refused = asyncio.run(burst(capped.base_url))
            assert len(refused) == capped.stats()["by_status"]["429"] >= 1 and set(refused) == {header}, refused


def test_a_request_waiting_out_its_retry_after_holds_no_worker():
    """A gateway refusing 10 % at random with ``Retry-After: 2``, one worker and one slot: while a refused request
    waits, the dispatcher runs another worker, so other requests are sent and answered within its wait (with its
    worker held, nothing could be sent until it was back)."""
    from shaberi.llm.dispatch import Dispatcher

    config = ClientConfig(control=ControlConfig(start=1, max=1))
    with LoopbackServer(latency_ms=10, stray_429=0.1, retry_after=2) as server:
        async def go() -> list[int]:
            client, done = ChatClient(server.base_url, None, config), []

            async def call(i: int) -> int:
                return (await client.chat(*body(f"質問 {i}"))).attempts

            try:
                await Dispatcher(iter(range(60)), call, lambda i, attempts, _: done.append(attempts), 1).run()
            finally:
                await client.aclose()
            return done

        attempts = asyncio.run(go())
        arrivals, peak = server.arrivals(), server.stats()["peak_in_flight"]
    assert len(attempts) == 60 and sum(a - 1 for a in attempts) == sum(s == 429 for _, _, s in arrivals) > 0
    assert peak == 1  # the slot still bounds what is sent
    for t, key, status in arrivals:
        if status == 429:  # its wait ends at the request's next arrival
            again = min(a for a, k, _ in arrivals if k == key and a > t)
            others = [a for a, k, s in arrivals if t < a < again and k != key and s == 200]
            assert len(others) >= 3, (t, again, len(others))


def test_a_429_just_below_a_wall_found_is_that_wall_not_a_stray(monkeypatch):
    """Against a cap of 3, one 429 reads 3 in flight (our count lags the server's: a busy machine, or holders
    sharing a budget) and looks like a random refusal. The cut before it has nothing left to undo, so the wall it
    found stays found and its hold keeps doubling; the wrong rule forgot it and probed the wall again at 4, 8, 16
    round trips (the shared-budget test's refusals doubled on CI)."""
    from shaberi.llm import control

    def probes(lag_at: int | None) -> int:
        clock = [1000.0]
        monkeypatch.setattr(control, "time", type("Clock", (), {"monotonic": staticmethod(lambda: clock[0])}))

        async def go() -> Controller:
            c = Controller(ControlConfig(start=1, max=8))
            for r in range(400):
                tickets = []
                while c.held < int(c.limit):
                    await c.acquire()
                    tickets.append(c.send())
                refused = [t for t in tickets if t.in_flight > 3 or (r == lag_at and t.in_flight == 3)]
                for t in refused:
                    c.rate_limited(t)
                for t in tickets:
                    if t not in refused:
                        c.success(t, 0.05, 0)
                clock[0] += 0.05
            return c

        c = asyncio.run(go())
        return [why for _, _, why in c.history].count("429")

    clean = probes(None)
    assert 4 <= clean <= 10  # found, then probed at doubling holds
    assert probes(200) <= clean + 1
