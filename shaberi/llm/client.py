"""The one LLM client: async OpenAI-compatible chat completions over a small transport seam.

Why not the openai SDK: its request path costs about 2.4 ms of CPU per call, a ceiling near 400
requests/s on two cores; a bare aiohttp request costs a tenth of that, and batch evaluation is mostly
waiting on many small calls. The wire format is the same, so any OpenAI-compatible server works.

How many requests are in flight and when the next goes is ``control``'s (learned from the endpoint's
answers and headers). A 429 is that controller's signal, not the request's failure: the request waits its
turn again (``Retry-After`` honoured up to ``retry_after_max``) until ``rate_limit_timeout`` seconds of
refusals, however many attempts that takes. 5xx, timeouts, connection errors and bad bodies are retried
``max_retries`` times with exponential backoff and jitter; other 4xx are the caller's fault and never
retried, and so is a 429 saying the account's quota is spent.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import orjson

from .. import errors
from ..redact import redact, url_secrets
from .batch_api import BatchTransport
from .config import ClientConfig
from .control import Controller, Pacing
from .dispatch import parked
from .lease import Answer, Lease
from .params import Sampling, Verbatim, chat_body
from .transport import AiohttpTransport, Response, Transport

if TYPE_CHECKING:
    from .spending import Budget

__all__ = [
    "LLM",
    "ChatClient",
    "ClientConfig",
    "Completion",
    "encode",
    "endpoint_limits",
]


LONG_WAIT = 30.0  # a Retry-After this long is said on the display: a held run must not look stalled


# -- the client --------------------------------------------------------------------------------
@dataclass
class Completion:
    content: str | None
    reasoning: str | None
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    attempts: int
    latency_ms: float  # the answering request's round trip: not time queued in the client, not earlier attempts
    reasoning_tokens: int = 0  # of completion_tokens (usage.completion_tokens_details.reasoning_tokens)
    cached_tokens: int = 0  # of prompt_tokens (usage.prompt_tokens_details.cached_tokens)
    batch_id: str | None = None  # the provider batch that answered it (``llm.batch_api``); None: answered directly


class ChatClient:
    """One endpoint (base URL + key), shared by every stage that calls it."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        config: ClientConfig = ClientConfig(),
        transport: Transport | None = None,
        *,
        option: str = "--base-url",
        key_option: str = "--api-key-env",
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.option, self.key_option = option, key_option  # what the user fixes when the endpoint fails check()
        self.config = config
        self.transport = transport or AiohttpTransport()
        self.control = Controller(config.control)
        self.pacing = Pacing(config.rpm, config.tpm)
        self.headers = {"Content-Type": "application/json"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        self._secrets = (api_key, *url_secrets(self.base_url))  # never in an error's text (``redact``)
        if api_key and urlsplit(self.base_url).username is not None:  # HTTP carries one Authorization header
            raise errors.UsageError(f"{option} {redact(self.base_url)}: a URL with user:password@ and an API key "
                                    f"cannot both be sent; drop one (or name no key with {key_option} on loopback)")
        self.requests = 0  # HTTP requests sent, retries included
        self.rate_limited = 0  # of which answered 429
        self.retries = 0  # requests sent again after a 5xx, a timeout, a connection error or a bad body
        self.notes: list[str] = []  # what the user should know about this endpoint (shown, stored)
        self.lease: Lease | None = None  # set to share the endpoint's slots with other processes
        self.budget: Budget | None = None  # set to stop before a call that could pass --max-cost
        self.models: set[str] = set()  # the model names asked of this endpoint: check() looks for them

    async def check(self) -> None:
        """Fail fast, before any work is written, when the endpoint is unreachable or refuses the key."""
        shown = redact(self.base_url, self._secrets)
        try:
            resp = await self.transport.request("GET", f"{self.base_url}/models", None, self.headers, 15.0)
        except errors.LLMError as exc:
            raise errors.EndpointError(
                f"cannot reach {shown} ({redact(str(exc), self._secrets)}); start the server or fix {self.option}"
            ) from None
        if resp.status in (401, 403):
            raise errors.EndpointError(
                f"{shown} refused the API key (HTTP {resp.status}); check the variable named by "
                f"{self.key_option}"
            )
        if resp.status == 404 and "/v1" not in shown:  # every chat call would 404 too
            raise errors.EndpointError(
                f"{shown}/models answered HTTP 404: the base URL probably lacks /v1 "
                f"(try {shown}/v1)"
            )
        served = _served(resp)
        for model in sorted(self.models - served if served else ()):  # a warning: some gateways list a few
            listed = ", ".join(sorted(served)[:5]) + (", …" if len(served) > 5 else "")
            self.notes.append(f"{shown} does not list model {model!r} in /models (it lists {listed}); "
                              "a misspelt name fails every call")

    async def chat(self, model: str, messages: list[dict[str, Any]], sampling: Sampling | Verbatim,
                   **more: object) -> Completion:
        """Ask ``model`` the ``messages`` with ``sampling`` (``more``: frequency_penalty, seed), the body built
        here (``encode``); retry what is worth retrying. A ``Verbatim`` with ``api="responses"`` goes to OpenAI's
        ``/responses`` (the original Shaberi's GPT-5.1 judge requests), anything else to ``/chat/completions``. With a
        ``budget`` (``--max-cost``) each send's worst case is held first: ``BudgetSpent``, and nothing sent, when it
        does not fit (``_hold``)."""
        body = encode(model, messages, sampling, **more)
        path, parse = _APIS[sampling.api if isinstance(sampling, Verbatim) else "chat"]
        attempts = failures = refusals = 0
        refused_since = 0.0
        refused: errors.RateLimitError | None = None
        while True:
            if refused and self.pacing.not_before > refused_since + self.config.rate_limit_timeout:
                refused.attempts = attempts  # the endpoint holds every send past this request's time bound
                raise refused
            attempts += 1
            held = await self._hold(model, body) if self.budget else 0.0  # BudgetSpent: not sent
            try:
                await self.control.acquire()
            except BaseException:
                self._settle(held, model, None, False)
                raise
            slot = None
            try:  # after the slot: a budget a response has just stated applies to every later send
                if not self.pacing.idle:
                    await self.pacing.wait(estimate=len(body) / 3)  # UTF-8 bytes per token, roughly, in Japanese
                slot = await self.lease.acquire() if self.lease else None
            except BaseException:
                self.control.other(None)
                self._settle(held, model, None, False)
                raise
            ticket, answer = self.control.send(), None
            got: Completion | None = None
            timed_out = False
            try:
                sent = time.perf_counter()
                self.requests += 1
                resp = await self.transport.request(
                    "POST", f"{self.base_url}{path}", body, self.headers, self.config.timeout
                )
                if (spent := self.pacing.observe(resp.headers)) is not None:
                    self.pacing.hold(self._capped(spent, "x-ratelimit-reset"))
                content, reasoning, finish, usage = parse(resp)
            except errors.RateLimitError as exc:
                endpoint = self.control.rate_limited(ticket)
                answer = Answer(refused=True)
                exc.args = (redact(str(exc), self._secrets),)  # a server may echo the key; rows store this text
                self.rate_limited += 1
                refusals += 1
                refused_since = refused_since or time.monotonic()
                left = self.config.rate_limit_timeout - (time.monotonic() - refused_since)
                if left <= 0:
                    exc.attempts = attempts
                    raise
                refused = exc
                delay = min(self._after_429(refusals, exc.retry_after, endpoint), left)
            except errors.LLMError as exc:
                self.control.other(ticket)
                exc.args = (redact(str(exc), self._secrets),)
                timed_out = isinstance(exc, errors.RequestTimeout)
                failures += 1
                if not exc.retryable or failures > self.config.max_retries:
                    exc.attempts = attempts
                    raise
                self.retries += 1
                delay = self._backoff(failures, exc.retry_after)
            except BaseException:
                self.control.other(ticket)
                raise
            else:
                prompt, completion = _tokens(usage.get("prompt_tokens")), _tokens(usage.get("completion_tokens"))
                took = time.perf_counter() - sent
                self.control.success(ticket, took, completion)
                answer = Answer(False, took, completion)
                self.pacing.used(prompt + completion)
                got = Completion(content, reasoning, finish, prompt, completion, attempts, took * 1000,
                                 min(_detail(usage, "completion_tokens_details", "reasoning_tokens"), completion),
                                 min(_detail(usage, "prompt_tokens_details", "cached_tokens"), prompt),
                                 resp.batch_id)
                return got
            finally:
                if slot is not None:
                    self.lease.release(slot, answer)  # type: ignore[union-attr]
                self._settle(held, model, got, timed_out)
            with parked():  # holding no slot, and (under a Dispatcher) no worker: others go meanwhile
                await asyncio.sleep(delay)

    async def _hold(self, model: str, body: bytes) -> float:
        """Each send's worst case held against the spending limit (``budget``), a retry's too: a provider bills
        every request it answered. A request a batch submitted earlier holds is paid for: nothing is held."""
        assert self.budget is not None
        if isinstance(self.transport, BatchTransport) and self.transport.submitted_earlier(body):
            return 0.0
        return await self.budget.reserve(model, body, self.batched)

    def _settle(self, held: float, model: str, got: Completion | None, timed_out: bool) -> None:
        """A send ended: what its answer reported is spent; a send that timed out may have been answered and billed
        all the same, so its worst case is."""
        if self.budget is not None:
            prompt, completion = (got.prompt_tokens, got.completion_tokens) if got else (0, 0)
            self.budget.settle(held, model, self.batched, prompt, completion, lost=timed_out)

    def _after_429(self, refusals: int, retry_after: float | None, endpoint: bool) -> float:
        """How long a refused request waits before it queues again. The controller has already shrunk the
        limit, so the first pauses are about a round trip; from the fourth refusal of the same request on
        each doubles (up to ``backoff_max``), so an endpoint refusing everything is not hammered. A stated
        Retry-After is this request's wait, as the SDKs take it; only when the controller reads the 429 as the
        ``endpoint``'s (a rate or a spent budget) does it hold every send: a capacity 429's Retry-After holding
        all of them would idle the whole cap for one request's refusal."""
        pause = random.uniform(0.5, 1.0) * min(self.config.backoff_max,
                                                max(self.control.rtt, 0.05) * 2 ** max(0, refusals - 3))
        if retry_after is None:
            return pause
        wait = self._capped(retry_after, "Retry-After")
        if endpoint:
            self.pacing.hold(wait)
        return max(pause, wait)

    def _capped(self, seconds: float, what: str) -> float:
        """A wait the server asked for, capped by ``retry_after_max`` and said on the display when long or cut:
        an hour's wait must not look like a stalled run."""
        wait = min(seconds, self.config.retry_after_max)
        if wait >= LONG_WAIT or seconds > wait:
            note = f"{self.shown_url} asked to wait {seconds:g} s ({what}); " + (
                f"waiting {wait:g} s instead (--retry-after-max)" if seconds > wait else "waiting")
            if note not in self.notes:
                self.notes.append(note)
        return wait

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        ceiling = min(self.config.backoff_max, self.config.backoff_base * 2 ** (attempt - 1))
        delay = ceiling / 2 + random.uniform(0, ceiling / 2)
        return max(delay, min(retry_after or 0.0, self.config.retry_after_max))

    @property
    def shown_url(self) -> str:
        """The base URL as it may be shown: no password, no key."""
        return redact(self.base_url, self._secrets)

    @property
    def label(self) -> str:
        """What the endpoint is to this run (candidate, judge or a pass's model) and where: the candidate and a
        judge on one server have a limit each."""
        role = ("candidate" if self.option == "--base-url" else "judge" if self.option.startswith("--judge")
                else "pass model")
        return f"{role} {self.shown_url}"

    @property
    def batched(self) -> bool:
        """Its calls go through a provider's Batch API (priced at its batch rates)."""
        return isinstance(self.transport, BatchTransport)

    @property
    def max_in_flight(self) -> int:
        return self.config.control.max

    def limits(self) -> dict[str, Any]:
        """What this endpoint's limits did in a run, stored per endpoint in ``runs.concurrency_history``."""
        return {"history": self.control.snapshot(), "requests": self.requests, "rate_limited": self.rate_limited,
                "retries": self.retries, "notes": self.notes}

    async def aclose(self) -> None:
        await self.transport.aclose()
        if self.lease:
            self.lease.close()


def encode(model: str, messages: list[dict[str, Any]], sampling: Sampling | Verbatim, **more: object) -> bytes:
    """The bytes ``ChatClient.chat`` sends for these arguments: the one place a request is encoded, so a stored
    request hash (the candidate's resume rule) is the hash of what the model was sent."""
    return orjson.dumps(chat_body(model, messages, sampling, **more))


@dataclass(frozen=True)
class LLM:
    """A model on an endpoint: what a pass, a consensus strategy or a grader asks, through the shared client."""

    model: str
    client: ChatClient


def _parse(resp: Response) -> tuple[str | None, str | None, str | None, dict[str, Any]]:
    """Turn a response into (content, reasoning_content, finish_reason, usage) or raise the right error."""
    _raise_for_status(resp)
    try:
        data = orjson.loads(resp.body)
        choice = data["choices"][0]
        message = choice["message"]
        content, thought = _text(message.get("content"), "message.content")
        reasoning, _ = _text(message.get("reasoning_content") or message.get("reasoning"), "message.reasoning")
        usage = data.get("usage")
        thinking = "\n\n".join(t for t in (reasoning, thought) if t) or None
        return content, thinking, _finish(choice.get("finish_reason")), usage if isinstance(usage, dict) else {}
    except (orjson.JSONDecodeError, KeyError, IndexError, TypeError, AttributeError):
        raise errors.BadResponseError(
            f"HTTP {resp.status} body is not a chat completion: {resp.body[:120]!r}", status=resp.status
        ) from None


def _parse_responses(resp: Response) -> tuple[str | None, str | None, str | None, dict[str, Any]]:
    """The same from a Responses API answer: the text parts of its ``message`` items joined, as the original
    Shaberi joins them; ``incomplete`` for ``max_output_tokens`` is a cut-off reply (``length``); the usage
    renamed to chat completions' names."""
    _raise_for_status(resp)
    try:
        data = orjson.loads(resp.body)
        texts, thoughts = [], []
        for item in data["output"]:
            if item.get("type") == "reasoning":
                thoughts += [s.get("text") or "" for s in item.get("summary") or []]
            for part in item.get("content") or [] if item.get("type") == "message" else []:
                if isinstance(part.get("text"), str):
                    texts.append(part["text"])
        cut = (data.get("incomplete_details") or {}).get("reason") == "max_output_tokens"
        finish = "length" if cut else "stop" if data.get("status") == "completed" else _finish(data.get("status"))
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        renamed = {"prompt_tokens": usage.get("input_tokens"), "completion_tokens": usage.get("output_tokens"),
                   "completion_tokens_details": usage.get("output_tokens_details"),
                   "prompt_tokens_details": usage.get("input_tokens_details")}
        return "".join(texts) if texts else None, "\n\n".join(t for t in thoughts if t) or None, finish, renamed
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
        raise errors.BadResponseError(
            f"HTTP {resp.status} body is not a Responses API answer: {resp.body[:120]!r}", status=resp.status
        ) from None


def _raise_for_status(resp: Response) -> None:
    if resp.status >= 400:
        message = f"HTTP {resp.status}: {_error_message(resp.body)}"
        if resp.status == 429 and not _quota_spent(resp.body):
            raise errors.RateLimitError(message, status=429, retry_after=_retry_after(resp.headers))
        if resp.status >= 500:
            raise errors.ServerError(message, status=resp.status, retry_after=_retry_after(resp.headers))
        if resp.status in (408, 409):  # request timeout / conflict: transient by definition
            raise errors.ServerError(message, status=resp.status)
        raise errors.PermanentError(message, status=resp.status)


_Parser = Callable[[Response], tuple[str | None, str | None, str | None, dict[str, Any]]]
_APIS: dict[str, tuple[str, _Parser]] = {"chat": ("/chat/completions", _parse),
                                         "responses": ("/responses", _parse_responses)}
_TEXT_BLOCKS = ("text", "output_text")
_THOUGHT_BLOCKS = ("thinking", "reasoning")


def _text(value: object, where: str) -> tuple[str | None, str | None]:
    """(text, reasoning) of a message field: a string as it is; a list of content blocks (Mistral's Magistral,
    Anthropic-style gateways) joined, text blocks into the text and thinking blocks into the reasoning.
    Anything else cannot be read as an answer: ``UnreadableResponse``, an error row, never a crash."""
    if value is None or isinstance(value, str):
        return value, None
    if isinstance(value, list):
        texts, thoughts = [], []
        for block in value:
            if isinstance(block, str):
                texts.append(block)
            elif isinstance(block, dict) and block.get("type") in _TEXT_BLOCKS and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif isinstance(block, dict) and block.get("type") in _THOUGHT_BLOCKS:
                inner = block.get(block["type"], block.get("text"))
                thoughts.append(_text(inner, f"{where} {block['type']} block")[0] or "")
            else:
                raise errors.UnreadableResponse(f"{where} holds a block that is not text: {_shown(block)}")
        return "".join(texts), "\n\n".join(t for t in thoughts if t) or None
    raise errors.UnreadableResponse(f"{where} is a {type(value).__name__}, not text: {_shown(value)}")


def _shown(value: object) -> str:
    return orjson.dumps(value).decode()[:120]


def _finish(value: object) -> str | None:
    """finish_reason as a short string; a number or a flag is kept as text, anything else dropped."""
    if value is None or isinstance(value, str):
        return value[:64] if value else value
    return str(value)[:64] if isinstance(value, int | float | bool) else None


_MAX_TOKENS = 1 << 40  # more than any context; beyond it a count is a broken endpoint's, not a measurement


def _tokens(value: object) -> int:
    """A usage count as reported, or 0 when it is not a whole number in range (a string "12" is read)."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and 0 <= value < _MAX_TOKENS else 0


def endpoint_limits(clients: list[ChatClient], before: dict[str, list[dict[str, Any]]] | None = None
                    ) -> dict[str, list[dict[str, Any]]]:
    """Each endpoint's ``limits()`` by its ``label``: one entry per invocation of the run, this one's after
    those stored before (``before``: ``RunRecord.concurrency_history``; a resumed run keeps its history)."""
    merged = {label: value if isinstance(value, list) else [value] for label, value in (before or {}).items()}
    for client in clients:
        merged[client.label] = [*merged.get(client.label, []), client.limits()]
    return merged


def _served(resp: Response) -> set[str]:
    """The model ids a ``/models`` answer lists (empty when it lists none or is not readable)."""
    try:
        data = orjson.loads(resp.body)["data"] if resp.status == 200 else []
        return {m["id"] for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)}
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return set()


def _quota_spent(body: bytes) -> bool:
    """OpenAI answers 429 ``insufficient_quota`` when the account is out of credit: waiting cannot help."""
    return b"insufficient_quota" in body[:2000]


def _detail(usage: dict[str, Any], part: str, name: str) -> int:
    """A count inside a usage breakdown, validated like the totals (0 when absent or not a count)."""
    details = usage.get(part)
    return _tokens(details.get(name)) if isinstance(details, dict) else 0


def _error_message(body: bytes) -> str:
    try:
        err = orjson.loads(body)["error"]
        return str(err.get("message") if isinstance(err, dict) else err)[:300]
    except Exception:
        return body[:300].decode("utf-8", "replace")


def _retry_after(headers: Mapping[str, str]) -> float | None:
    value = headers.get("Retry-After")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None
