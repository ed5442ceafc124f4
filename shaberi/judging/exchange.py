"""One judgement's calls, the sequence the judge stage and ``pairwise`` share: the judge's reply; when it holds no
verdict the reader accepts, the reply journaled (``AWAITING``) and one follow-up in the same conversation asking for
the verdict alone; then what the calls cost, each counted once in ``token_usage``.

A stage brings its reader (a score: ``extract.extract``; a choice: ``extract.choose``) and builds its rows from the
fields given here (``awaiting``, ``settled``, ``failed``), so both stages store the same replies, tokens and errors
the same way. A run killed between the two calls keeps the paid reply; its resume reads it back (``stored``) and
asks only the follow-up, whose tokens alone are new.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from ..errors import LLMError
from ..llm.client import Completion
from ..tables.rows import Stage, token_usage

__all__ = ["AWAITING", "Cost", "Exchange", "Reading", "ask", "awaiting", "failed", "settled", "stored"]

AWAITING = "judge_error: awaiting its fallback call"  # a paid first reply, kept; the next run asks the rest

Messages = list[dict[str, str]]


class Reading(Protocol):
    """What a reader makes of a reply: a verdict (``ok``), or why there is none."""

    @property
    def ok(self) -> bool: ...

    @property
    def reason(self) -> str | None: ...


R = TypeVar("R", bound=Reading)


@dataclass(frozen=True)
class Exchange(Generic[R]):
    """A judgement's replies and the reading counted; ``own``: Shaberi's reading of the same replies where the counted
    one is another prompt set's (an original clone's)."""

    reply: Completion
    found: R
    fallback: Completion | None = None
    fallback_error: LLMError | None = None
    own: R | None = None

    @property
    def calls(self) -> list[Completion]:
        return [c for c in (self.reply, self.fallback) if c is not None]

    @property
    def followed(self) -> bool:
        """Whether the follow-up was asked (answered or failed): the first reply was journaled before it."""
        return self.fallback is not None or self.fallback_error is not None

    def error(self) -> str | None:
        if self.found.ok:
            return None
        if self.fallback_error is not None:
            return f"judge_error on fallback: {self.fallback_error.error_type}; reply: {self.found.reason}"
        return f"unparseable: {self.found.reason}"


async def ask(chat: Callable[[Messages], Awaitable[Completion]], messages: Messages, read: Callable[[Completion], R],
              follow_up: str, reread: Callable[[R, Completion], R], journal_first: Callable[[Completion], None],
              paid: Completion | None = None) -> Exchange[R]:
    """The primary call (``paid``: its reply, read back from a run that stopped before its follow-up), then, when
    ``read`` finds no verdict, the first reply journaled and ``follow_up`` asked after it; ``reread`` reads the second
    reply (given the first reading). A failed follow-up is kept as such: the first reply was paid for."""
    reply = paid or await chat(messages)
    found = read(reply)
    if found.ok:
        return Exchange(reply, found)
    if paid is None:
        journal_first(reply)
    conversation = [*messages, {"role": "assistant", "content": reply.content or ""},
                    {"role": "user", "content": follow_up}]
    try:
        fallback = await chat(conversation)
    except LLMError as exc:
        return Exchange(reply, found, None, exc)
    return Exchange(reply, reread(found, fallback), fallback)


@dataclass(frozen=True)
class Cost:
    """What calls cost: HTTP requests (retries included) and tokens; ``batch``: sent through a Batch API."""

    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    cached_prompt_tokens: int = 0
    batch: bool = False

    @classmethod
    def of(cls, calls: Sequence[Completion], failed: LLMError | None = None) -> Cost:
        """The replies' cost, and the attempts of a call that failed after them."""
        return cls(sum(c.attempts for c in calls) + (failed.attempts if failed else 0),
                   sum(c.prompt_tokens for c in calls), sum(c.completion_tokens for c in calls),
                   sum(c.reasoning_tokens for c in calls), sum(c.cached_tokens for c in calls),
                   any(c.batch_id is not None for c in calls))

    def tokens(self) -> dict[str, int]:
        """The row's token columns."""
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "reasoning_tokens": self.reasoning_tokens, "cached_prompt_tokens": self.cached_prompt_tokens}

    def usage(self, run_id: str, stage: Stage, benchmark: str, model: str) -> dict[str, object]:
        """The ``token_usage`` increment."""
        return token_usage(run_id, stage, benchmark, model, requests=self.requests, **self.tokens(), batch=self.batch)


def _replies(first: Completion, later: Completion | None) -> dict[str, Any]:
    return {"judge_output": first.content, "finish_reason": first.finish_reason,
            "fallback_output": later.content if later else None,
            "fallback_finish_reason": later.finish_reason if later else None}


def awaiting(replies: Sequence[Completion], journaled: int = 0) -> tuple[dict[str, Any], Cost]:
    """A judgement not finished yet: its row's fields (the paid replies, their tokens, ``AWAITING``: a failed call's
    row until the judgement's supersedes it), and the cost of the replies after the ``journaled`` ones."""
    first, later = replies[0], replies[1] if len(replies) > 1 else None
    fields = {**_replies(first, later), **Cost.of(replies).tokens(), "error": AWAITING}
    return fields, Cost.of(replies[journaled:])


def settled(exchange: Exchange[Any], paid: int) -> tuple[dict[str, Any], Cost]:
    """A finished judgement: its row's fields (both replies, the tokens of both, its error) and the cost
    ``token_usage`` does not hold yet: not the ``paid`` replies a resume read back, nor a first reply journaled
    before its follow-up."""
    fields = {**_replies(exchange.reply, exchange.fallback), **Cost.of(exchange.calls).tokens(),
              "error": exchange.error()}
    return fields, Cost.of(exchange.calls[paid or int(exchange.followed):], exchange.fallback_error)


def failed(exc: LLMError) -> tuple[dict[str, Any], Cost]:
    """A judgement whose call failed (after retries): asked again by the next run."""
    return {"error": f"judge_error: {exc.error_type}: {exc}"[:2000]}, Cost(requests=exc.attempts)


def stored(row: Mapping[str, Any]) -> tuple[Completion, ...]:
    """An ``AWAITING`` row's replies, in order (the row's tokens, all of them, carried by the first)."""
    first = Completion(row["judge_output"], None, row["finish_reason"], row["prompt_tokens"] or 0,
                       row["completion_tokens"] or 0, 0, 0.0, batch_id=row.get("batch_id"))
    if row.get("fallback_output") is None:
        return (first,)
    return first, Completion(row["fallback_output"], None, row["fallback_finish_reason"], 0, 0, 0, 0.0)
