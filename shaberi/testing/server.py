"""A loopback OpenAI-compatible chat server for the test suite, the demo and the benchmarks.

It behaves like a small real endpoint: it answers ``POST /v1/chat/completions`` with a deterministic
Japanese reply and ``usage`` tokens, ``GET /v1/models`` with one model, after ``--latency-ms``.
Its limits, none of which the client is told:

- ``--capacity N``: beyond N requests in flight it answers 429 (no headers, like a gateway's cap; with
  ``--retry-after S`` each carries ``Retry-After: S``, as some providers' load 429s do);
- ``--stray-429 F``: a fraction F of requests get 429 whatever the load (a gateway's random refusals; seeded,
  so a run sees the same ones; ``Retry-After`` as above);
- ``--queue N``: it serves N at a time and queues the rest (latency grows; no 429), like a local vLLM;
- ``--rpm R`` / ``--tpm T``: requests / tokens (prompt + completion) a minute, each a bucket holding two
  seconds' worth; every response carries OpenAI's ``x-ratelimit-limit/remaining/reset-{requests,tokens}``
  headers, and a request over budget gets 429 with ``Retry-After``.

A model named like OpenAI's reasoning models (``o1``/``o3``/``o4``/``gpt-5`` …) is emulated as one: a
request carrying ``max_tokens``, ``top_p`` or a temperature other than 1 is refused with OpenAI's 400, and
``usage`` reports ``reasoning_tokens`` and, for a system prompt seen before, ``cached_tokens``.
``--models`` is what ``/v1/models`` lists (default ``fake-model``).

Faults are injected per request by a marker anywhere in the messages, counted per distinct request
body so that a retry of the same request sees the next outcome::

    [[fail:503*2]]      the first 2 attempts get HTTP 503, later ones succeed
    [[fail:429*1]]      one 429 carrying ``Retry-After: 1``
    [[fail:wait*1]]     one 429 carrying ``Retry-After: 3600`` (a server asking for an hour)
    [[fail:garbage*1]]  one 200 whose body is not JSON
    [[fail:hang*1]]     one request that never answers (the client's timeout must fire)
    [[fail:401]]        always 401 (no ``*n``: every attempt)
    [[fail:echo]]       401 whose error message echoes the request's Authorization header (as some proxies do)
    [[think]]           the reply starts with a ``<think>…</think>`` block
    [[think:N]]         … holding N characters of varied text (a reasoning model's long thinking)
    [[shape:NAME]]      an odd but well-formed response, on every attempt: ``blocks`` (content as Magistral's
                        list of a thinking and a text block), ``dict`` / ``number`` (content that is no text),
                        ``usage_string``, ``tokens_bad`` (non-numeric and negative counts), ``tokens_huge``,
                        ``finish_number`` (a finish_reason that is a number)
    <<answer: TEXT>>    a candidate's reply is TEXT (``\n`` for newlines)
    <<answer#N: TEXT>>  the reply to a request with seed N (before ``<<answer:``): one question text, a reply
                        per run of a family, as the same question gets from a sampling model

The Batch API (files, batches, cancel; ``--batch-seconds``, expiry on demand, partial error files) answers each
line as the chat endpoint would: see ``batch_server.py``.

``POST /v1/responses`` (OpenAI's Responses API: ``input`` for ``messages``, ``max_output_tokens``) answers the
same way in that API's shape; the original Shaberi asks its GPT-5.1 judges there.
``--odd-answers``: every candidate reply ends in what a judging template must pass through unchanged (braces,
``{{ … }}``, ``{% … %}``, ``%``, backslashes, the original's end-of-answer marker, trailing spaces), and two in
three start with a ``<think>`` block (one of them as ``<THINKING>``).

A request whose system message contains ``FINAL SCORE``, or one to a model named in ``--judges``, is a judge
call. Its reply is
``<<judge: PRIMARY || FALLBACK>>`` from the prompt when present (FALLBACK once the conversation already
holds the judge's first reply; ``<<judge@MODEL: …>>`` applies to that judge model only and comes first;
``<<judge@MODEL?TEXT: …>>`` before it, and only when TEXT is in the prompt outside every ``<<…>>``: in the
judged answer, so that each run's answer of one question gets its own verdict;
``<<judge64: …>>`` holds PRIMARY and FALLBACK base64-encoded, so that the reply is not a copy of the answer;
a reply ending in ``[[length]]`` comes without that suffix and with ``finish_reason: length``),
else a short reasoning line and ``FINAL SCORE: n`` with n in 1..5 from a hash of the prompt, valid on
every benchmark's scale (to a ``--judges`` model, with ``評価：[[n]]`` and ``<score>n</score>`` before it: what
every version of the original Shaberi reads).

A request whose system message contains ``FINAL VERDICT`` is a pairwise judge call: ``<<pairwise: PRIMARY ||
FALLBACK>>`` from the prompt when present, else a reasoning line and ``FINAL VERDICT: A``, ``B`` or ``TIE`` (the
fallback: the line alone): the answer (between 【回答】 and 【回答終了】 after ``## 回答A`` / ``## 回答B``) with the
higher ``[[q=N]]`` wins, equal ones tie (an answer without one: N from a hash of its text); with ``--first-wins P``
a share P of the calls (by the prompt's hash) answer A whatever was shown: a judge with position bias.
``<<answer@MODEL:TEXT>>`` in a question is that model's answer (before ``<<answer:…>>``): runs of different
models get different answers.

A consensus prompt of an ensemble strategy (``prompts/ensemble/``: its answers under ``# Answer 1``, ``# Answer
A``, ``# Member 1`` … between ``<answer>`` tags; not a grader's) with no marker is answered with its first answer
as it stands: a synthesizer, a council's chair and critic that trust the first member, an elo comparison read as
a tie (no WINNER line), so each strategy picks the baseline's answer and a gate over the loopback finds no
regression.

``POST /_fail`` with a JSON list of statuses (``[503, 503]``) answers the next chat requests with those,
whatever they hold. ``GET /_stats`` returns call counts (total, per request key, per status), and the
peak in-flight count; ``GET /_requests`` the message lists of the last 2,000 chat requests, ``GET /_bodies``
their other fields, ``GET /_replies`` the model and content of the last 2,000 answers; ``POST /_reset`` clears
them. Run it with ``python -m shaberi.testing.server --port 0``; it prints
``READY <base_url>`` once listening.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import math
import random
import re
import signal
import sys
import time
from collections import Counter, deque
from typing import Any

import orjson
from aiohttp import web

from .batch_server import BatchAPI

__all__ = ["FakeLLM", "main", "request_key"]

_FAULT = re.compile(r"\[\[fail:(\w+)(?:\*(\d+))?\]\]")
_SHAPE = re.compile(r"\[\[shape:(\w+)\]\]")
_ANSWER = re.compile(r"<<answer:(.*?)>>", re.S)
# The first ``<answer>`` block of a consensus prompt (prompts/ensemble/): the loopback as a consensus model that
# trusts the first answer, so that a strategy over the loopback scores as the single-model baseline.
_FIRST_ANSWER = re.compile(r"^# (?:Answer (?:1|A|under review)|Your answer|Member 1\n## Answer)\n<answer>\n(.*?)\n"
                           r"</answer>", re.S | re.M)
_PAIRWISE = re.compile(r"<<pairwise:(.*?)>>", re.S)
_QUALITY = re.compile(r"\[\[q=(\d+)\]\]")
_SIDE = re.compile(r"## 回答([AB])\n【回答】\n(.*?)\n【回答終了】", re.S)
_THINK = re.compile(r"\[\[think:(\d+)\]\]")
_SEEDED_ANSWER = re.compile(r"<<answer#(\d+):(.*?)>>", re.S)
_JUDGE = re.compile(r"<<judge(64)?:(.*?)>>", re.S)
_DIRECTIVE = re.compile(r"<<.*?>>", re.S)
_REASONING_MODEL = re.compile(r"^(o[134]|gpt-5)", re.I)


def request_key(messages: list[dict[str, Any]]) -> str:
    """The key the server counts calls by: a hash of the last user message."""
    text = messages[-1].get("content") or "" if messages else ""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class FakeLLM:
    """The server's state: configuration, fault counters and statistics."""

    def __init__(self, latency_ms: float = 0.0, capacity: int = 0, models: tuple[str, ...] = ("fake-model",),
                 queue: int = 0, rpm: float = 0, tpm: float = 0, judges: tuple[str, ...] = (),
                 odd_answers: bool = False, retry_after: float | None = None, stray_429: float = 0.0,
                 batch_seconds: float = 0.0, first_wins: float = 0.0) -> None:
        self.judges = frozenset(judges)
        self.first_wins = first_wins
        self.batch = BatchAPI(self._chat, batch_seconds)
        self.refused_for = {"Retry-After": f"{retry_after:g}"} if retry_after is not None else None
        self.stray_429 = stray_429
        self.odd_answers = odd_answers
        self.latency = latency_ms / 1000
        self.capacity = capacity
        self.listed = models
        self.model = models[0]
        self.queue = asyncio.Semaphore(queue) if queue else None
        self.budgets = {kind: _Bucket(limit) for kind, limit in (("requests", rpm), ("tokens", tpm)) if limit}
        self.reset()

    def reset(self) -> None:
        self.calls = 0
        self.in_flight = 0
        self.peak_in_flight = 0
        self.by_key: Counter[str] = Counter()
        self.by_status: Counter[int] = Counter()
        self.forced: list[int] = []
        self.recent: deque[list[dict[str, Any]]] = deque(maxlen=2000)
        self.bodies: deque[dict[str, Any]] = deque(maxlen=2000)
        self.replies: deque[dict[str, Any]] = deque(maxlen=2000)  # {model, content} of each answered chat request
        self.system_prompts: set[str] = set()  # seen before: their tokens come from the "cache"
        self.strays = random.Random(0)  # which requests a stray 429 hits: the same ones each run
        # (monotonic seconds at arrival, request key, status) of each chat request: the clock is the machine's,
        # so a test in another process can order its own events against them
        self.arrivals: deque[tuple[float, str | None, int | None]] = deque(maxlen=20_000)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=256 << 20)  # a batch file: up to 200 MB at OpenAI
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_post("/v1/responses", self.chat)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/_stats", self.stats)
        app.router.add_post("/_reset", self.reset_handler)
        app.router.add_post("/_fail", self.fail_handler)
        app.router.add_get("/_requests", self.requests_handler)
        app.router.add_get("/_bodies", self.bodies_handler)
        app.router.add_get("/_replies", self.replies_handler)
        app.router.add_get("/_arrivals", self.arrivals_handler)
        self.batch.routes(app)
        return app

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": m, "object": "model"} for m in self.listed]})

    async def stats(self, request: web.Request) -> web.Response:
        body = {
            "calls": self.calls,
            "in_flight": self.in_flight,
            "peak_in_flight": self.peak_in_flight,
            "by_key": dict(self.by_key),
            "by_status": {str(k): v for k, v in self.by_status.items()},
            "uploads": self.batch.uploads,
            "batches": self.batch.created,
            "batch_requests": self.batch.answered,
        }
        return web.Response(body=orjson.dumps(body), content_type="application/json")

    async def reset_handler(self, request: web.Request) -> web.Response:
        self.reset()
        return web.Response(text="ok")

    async def requests_handler(self, request: web.Request) -> web.Response:
        return web.Response(body=orjson.dumps(list(self.recent)), content_type="application/json")

    async def bodies_handler(self, request: web.Request) -> web.Response:
        return web.Response(body=orjson.dumps(list(self.bodies)), content_type="application/json")

    async def replies_handler(self, request: web.Request) -> web.Response:
        return web.Response(body=orjson.dumps(list(self.replies)), content_type="application/json")

    async def arrivals_handler(self, request: web.Request) -> web.Response:
        return web.Response(body=orjson.dumps(list(self.arrivals)), content_type="application/json")

    async def fail_handler(self, request: web.Request) -> web.Response:
        self.forced.extend(int(status) for status in orjson.loads(await request.read()))
        return web.Response(text="ok")

    def _respond(self, status: int, body: bytes, headers: dict[str, Any] | None = None) -> web.Response:
        self.by_status[status] += 1
        return web.Response(status=status, body=body, content_type="application/json", headers=headers)

    async def chat(self, request: web.Request) -> web.Response:
        self.calls += 1
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        arrived, response = time.monotonic(), None
        try:
            response = await self._chat(request)
            return response
        finally:
            self.in_flight -= 1
            self.arrivals.append((arrived, request.get("key"), response.status if response else None))

    async def _chat(self, request: web.Request) -> web.Response:
        responses = request.path.endswith("/responses")
        try:
            payload = orjson.loads(await request.read())
            messages = payload["input" if responses else "messages"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            return self._respond(400, b'{"error": {"message": "invalid request body"}}')
        key = request["key"] = request_key(messages)
        self.recent.append(messages)
        self.bodies.append({k: v for k, v in payload.items() if k not in ("messages", "input")}
                           | ({"api": "responses"} if responses else {}))
        model = str(payload.get("model", "")).rsplit("/", 1)[-1]
        if not responses and _REASONING_MODEL.match(model) and (refusal := _reasoning_refusal(payload)):
            return self._respond(400, orjson.dumps({"error": {"message": refusal, "type": "invalid_request_error"}}))
        attempt = self.by_key[key]
        self.by_key[key] += 1
        if self.forced:
            return self._respond(self.forced.pop(0), b'{"error": {"message": "forced by /_fail"}}')
        if self.stray_429 and self.strays.random() < self.stray_429:
            return self._respond(429, b'{"error": {"message": "try again"}}', self.refused_for)
        if self.capacity and self.in_flight > self.capacity:
            return self._respond(429, b'{"error": {"message": "capacity exceeded"}}', self.refused_for)
        text = "\n".join(str(m.get("content") or "") for m in messages)
        judging = str(payload.get("model", "")) in self.judges or any(
            m.get("role") == "system" and "FINAL SCORE" in str(m.get("content")) for m in messages)
        if any(m.get("role") == "system" and "FINAL VERDICT" in str(m.get("content")) for m in messages):
            content = _pairwise(messages, text, key, self.first_wins)
        else:
            content = self._reply(messages, text, key, payload.get("seed"), str(payload.get("model", "")), judging,
                                  self.judges)
        if self.odd_answers and not judging:
            content = _odd(content, key)
        prompt_tokens = max(1, len(text) // 2)
        completion_tokens = max(1, len(content) // 2)
        headers: dict[str, str] = {}
        if self.budgets:
            cost = {"requests": 1.0, "tokens": float(prompt_tokens + completion_tokens)}
            short = [kind for kind, b in self.budgets.items() if not b.enough(cost[kind])]
            if not short:
                for kind, b in self.budgets.items():
                    b.take(cost[kind])
            for kind, b in self.budgets.items():
                headers |= b.headers(kind)
            if short:
                wait = max(self.budgets[k].wait(cost[k]) for k in short)
                headers["Retry-After"] = str(max(1, math.ceil(wait)))
                message = f"Rate limit reached for {' and '.join(short)} per minute"
                return self._respond(429, orjson.dumps({"error": {"message": message}}), headers)
        fault = _FAULT.search(text)
        if fault and (fault.group(2) is None or attempt < int(fault.group(2))):
            kind = fault.group(1)
            if kind == "hang":
                await asyncio.sleep(3600)
            if kind == "garbage":
                return self._respond(200, b"<html>upstream proxy error</html>")
            if kind == "echo":
                echoed = f"invalid credentials: Authorization: {request.headers.get('Authorization')}"
                return self._respond(401, orjson.dumps({"error": {"message": echoed}}))
            if kind == "wait":
                return self._respond(429, b'{"error": {"message": "come back in an hour"}}', {"Retry-After": "3600"})
            status = int(kind)
            said = {"Retry-After": "1"} if status == 429 else None
            return self._respond(status, b'{"error": {"message": "injected fault"}}', said)
        if self.queue is not None:
            async with self.queue:
                await asyncio.sleep(self.latency)
        elif self.latency:
            await asyncio.sleep(self.latency)
        finish = "stop"
        if content.endswith("[[length]]"):  # a reply cut off at the token limit
            content, finish = content.removesuffix("[[length]]"), "length"
        body = {
            "id": f"chatcmpl-{key}-{attempt}",
            "object": "chat.completion",
            "model": payload.get("model", self.model),
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
        if _REASONING_MODEL.match(model):  # thinking is billed as completion; a repeated system prompt is cached
            system = next((str(m.get("content")) for m in messages if m.get("role") == "system"), "")
            cached = min(prompt_tokens, len(system) // 2) if system in self.system_prompts else 0
            self.system_prompts.add(system)
            body["usage"]["completion_tokens"] += completion_tokens  # as many thinking tokens as answer tokens
            body["usage"]["total_tokens"] += completion_tokens
            body["usage"]["completion_tokens_details"] = {"reasoning_tokens": completion_tokens}
            body["usage"]["prompt_tokens_details"] = {"cached_tokens": cached}
        if shape := _SHAPE.search(text):
            _reshape(body, shape.group(1))
        self.replies.append({"model": body["model"], "content": body["choices"][0]["message"]["content"]})
        if responses:
            body = _as_response(body)
        return self._respond(200, orjson.dumps(body), headers or None)


    @staticmethod
    def _reply(messages: list[dict[str, Any]], text: str, key: str, seed: int | None = None, model: str = "",
               judging: bool = False, judges: frozenset[str] = frozenset()) -> str:
        if judging:
            outside = _DIRECTIVE.sub("", text)  # the prompt without markers: the judged answer is in it
            when = re.finditer(rf"<<judge@{re.escape(model)}\?([^:>]*):(.*?)>>", text, re.S)
            if found := next((c for c in when if c.group(1) and c.group(1) in outside), None):
                kind, body = "@", found.group(2)
            elif c := re.search(rf"<<judge(@){re.escape(model)}:(.*?)>>", text, re.S) or _JUDGE.search(text):
                kind, body = c.group(1), c.group(2)
            elif model in judges:  # a verdict every version of the original reads (its old forms too)
                n = 1 + int(key, 16) % 5
                return f"テスト用の採点です。評価：[[{n}]] <score>{n}</score>\nFINAL SCORE: {n}"
            else:
                return f"テスト用の採点です。\nFINAL SCORE: {1 + int(key, 16) % 5}"
            primary, _, fallback = body.partition("||")
            reply = fallback if any(msg.get("role") == "assistant" for msg in messages) else primary
            if kind == "64":
                return base64.b64decode(reply.strip()).decode()
            return reply.strip().replace("\\n", "\n")
        seeded = (a for a in _SEEDED_ANSWER.finditer(text) if seed is not None and int(a.group(1)) == seed)
        own = re.search(rf"<<answer@{re.escape(model)}:(.*?)>>", text, re.S) if model else None
        if m := next(seeded, None) or own or _ANSWER.search(text):
            return m.group(m.lastindex or 1).strip().replace("\\n", "\n")  # TEXT: the last group
        if m := _FIRST_ANSWER.search(text):  # an ensemble strategy's prompt: the first answer, as it stands
            return m.group(1)
        question = _DIRECTIVE.sub("", str(messages[-1].get("content") or "")).strip()  # not the test's markup
        content = f"「{question[:24]}」についてお答えします。これはテスト用サーバーの応答です。"
        if seed is not None:  # a different sample per seed, as a sampling model gives
            content += f"（サンプル{seed}）"
        if "[[think]]" in text:
            content = "<think>まず質問を整理します。</think>" + content
        elif m := _THINK.search(text):
            content = f"<think>{_thinking(question, int(m.group(1)))}</think>" + content
        return content


def _pairwise(messages: list[dict[str, Any]], text: str, key: str, first_wins: float) -> str:
    """A pairwise judge's reply: scripted (``<<pairwise: …>>``), else the better ``[[q=N]]`` of the two answers."""
    followed = any(m.get("role") == "assistant" for m in messages)
    if m := _PAIRWISE.search(text):
        primary, _, fallback = m.group(1).partition("||")
        return (fallback if followed else primary).strip().replace("\\n", "\n")
    sides = {side: body for side, body in _SIDE.findall(text)}
    quality = {side: int(q.group(1)) if (q := _QUALITY.search(body)) else
               int(hashlib.sha256(body.encode()).hexdigest(), 16) % 10 for side, body in sides.items()}
    if int(key[:8], 16) / 16**8 < first_wins:
        verdict = "A"
    elif len(quality) < 2 or quality["A"] == quality["B"]:
        verdict = "TIE"
    else:
        verdict = "A" if quality["A"] > quality["B"] else "B"
    return f"FINAL VERDICT: {verdict}" if followed else f"テスト用の比較です。\nFINAL VERDICT: {verdict}"


ODD_TAIL = ("\n{answer} {{ question }} {% if x %}y{% endif %} 100% C:\\temp\\n \\u3042 \\\\ "
            "[アシスタントの回答の終了]  \n  ")


def _odd(content: str, key: str) -> str:
    """A candidate reply as ``--odd-answers`` makes it: ``ODD_TAIL`` after it, a think block before two in three."""
    kind = int(key, 16) % 3
    head = ("<think>考えます {x}。</think>\n\n" if kind == 0 else "<THINKING>%s と {{ y }}</thinking>\n" if kind == 1
            else "")
    return head + content + ODD_TAIL


def _as_response(chat: dict[str, Any]) -> dict[str, Any]:
    """A chat completion in the Responses API's shape."""
    choice, usage = chat["choices"][0], chat["usage"]
    cut = choice["finish_reason"] == "length"
    return {"id": "resp-" + chat["id"], "object": "response", "model": chat["model"],
            "status": "incomplete" if cut else "completed",
            "incomplete_details": {"reason": "max_output_tokens"} if cut else None,
            "output": [{"type": "message", "role": "assistant",
                        "content": [{"type": "output_text", "text": choice["message"]["content"]}]}],
            "usage": {"input_tokens": usage["prompt_tokens"], "output_tokens": usage["completion_tokens"],
                      "total_tokens": usage["total_tokens"]}}


def _thinking(seed: str, n: int) -> str:
    """N characters of thinking, different for each question (so that nothing stores it as one repeated value)."""
    words = ("まず", "質問", "を整理", "します。", "次に", "条件", "を確認", "すると、", "答えは", "考えられる。", "\n")
    out, state, size = [], int(hashlib.sha256(seed.encode()).hexdigest()[:8], 16), 0
    while size < n:
        state = (state * 1103515245 + 12345) % 2**31
        out.append(words[state % len(words)])
        size += len(out[-1])
    return "".join(out)[:n]


def _reasoning_refusal(payload: dict[str, Any]) -> str | None:
    """OpenAI's answer to a reasoning model asked with parameters it does not take."""
    if "max_tokens" in payload:
        return ("Unsupported parameter: 'max_tokens' is not supported with this model. Use "
                "'max_completion_tokens' instead.")
    for name in ("temperature", "top_p"):
        if name in payload and payload[name] != 1:
            return (f"Unsupported value: '{name}' does not support {payload[name]} with this model. Only the "
                    "default (1) value is supported.")
    return None


class _Bucket:
    """A per-minute budget as a token bucket holding two seconds' worth (at least one whole request)."""

    def __init__(self, per_minute: float) -> None:
        self.limit = per_minute
        self.rate = per_minute / 60
        self.size = self.rate * 2
        self.level = self.size
        self.at = time.monotonic()

    def _fill(self) -> None:
        now = time.monotonic()
        self.level = min(self.size, self.level + (now - self.at) * self.rate)
        self.at = now

    def enough(self, cost: float) -> bool:
        self._fill()
        return self.level >= min(cost, self.size)

    def take(self, cost: float) -> None:
        self.level -= cost

    def wait(self, cost: float) -> float:
        return max(0.0, (min(cost, self.size) - self.level) / self.rate)

    def headers(self, kind: str) -> dict[str, str]:
        self._fill()
        reset = max(0.0, (self.size - self.level) / self.rate)
        return {f"x-ratelimit-limit-{kind}": f"{self.limit:g}",
                f"x-ratelimit-remaining-{kind}": str(max(0, int(self.level))),
                f"x-ratelimit-reset-{kind}": f"{reset * 1000:.0f}ms" if reset < 1 else f"{reset:.3f}s"}


async def _serve(args: argparse.Namespace) -> None:
    state = FakeLLM(latency_ms=args.latency_ms, capacity=args.capacity, models=tuple(args.models.split(",")),
                    queue=args.queue, rpm=args.rpm, tpm=args.tpm,
                    judges=tuple(j for j in args.judges.split(",") if j), odd_answers=args.odd_answers,
                    retry_after=args.retry_after, stray_429=args.stray_429, batch_seconds=args.batch_seconds,
                    first_wins=args.first_wins)
    runner = web.AppRunner(state.app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", args.port, backlog=1024)
    await site.start()
    port = runner.addresses[0][1]
    print(f"READY http://127.0.0.1:{port}/v1", flush=True)
    await asyncio.Event().wait()


def _reshape(body: dict[str, Any], shape: str) -> None:
    """The odd response shapes real endpoints send (``[[shape:NAME]]``)."""
    choice, usage = body["choices"][0], body["usage"]
    text = choice["message"]["content"]
    if shape == "blocks":
        choice["message"]["content"] = [{"type": "thinking", "thinking": [{"type": "text", "text": "考えています。"}]},
                                        {"type": "text", "text": text}]
    elif shape == "dict":
        choice["message"]["content"] = {"text": text}
    elif shape == "number":
        choice["message"]["content"] = 42
    elif shape == "usage_string":
        body["usage"] = "12 tokens"
    elif shape == "tokens_bad":
        usage["prompt_tokens"], usage["completion_tokens"] = "many", -5
    elif shape == "tokens_huge":
        usage["prompt_tokens"] = 1e30
    elif shape == "finish_number":
        choice["finish_reason"] = 1


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--capacity", type=int, default=0, help="429 beyond this many in flight (0: none)")
    parser.add_argument("--models", default="fake-model", help="comma list that /v1/models lists")
    parser.add_argument("--queue", type=int, default=0, help="serve this many at once, queue the rest (0: none)")
    parser.add_argument("--rpm", type=float, default=0, help="requests a minute, with x-ratelimit headers (0: none)")
    parser.add_argument("--tpm", type=float, default=0, help="tokens a minute, with x-ratelimit headers (0: none)")
    parser.add_argument("--judges", default="", help="comma list of models whose every request is a judge call")
    parser.add_argument("--odd-answers", action="store_true", help="candidate replies a template must not touch")
    parser.add_argument("--retry-after", type=float, default=None,
                        help="Retry-After seconds on capacity and stray 429s (none: no header)")
    parser.add_argument("--stray-429", type=float, default=0.0, help="fraction of requests refused whatever the load")
    parser.add_argument("--batch-seconds", type=float, default=0.0, help="how long a batch takes (batch_server.py)")
    parser.add_argument("--first-wins", type=float, default=0.0,
                        help="share of pairwise judge calls answering A whatever was shown (position bias)")
    args = parser.parse_args(argv)
    # A parent that ignores SIGTERM (a supervisor's trap, a shell's) passes that on through exec: the server would
    # then outlive every polite stop. Its own dispositions: SIGTERM ends it at once, SIGINT as KeyboardInterrupt.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        try:
            import uvloop  # lower overhead per request: a server closer to its configured latency
        except ImportError:
            asyncio.run(_serve(args))
        else:
            uvloop.run(_serve(args))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
