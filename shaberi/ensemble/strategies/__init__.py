"""Consensus strategies: N member responses to one question in, one answer out. One file each, a
``Strategy`` class registered by name with ``@STRATEGIES.register(name)``, as a plugin's is.

A strategy that calls a model does so through ``Context.ask``, which goes through the shared client and
counts requests and tokens (stage ``consensus``). Its answer is stored as an ``answers`` row with
``strategy`` set, under a ``request_hash`` of everything it depended on (strategy version, model, prompt
templates, the member responses), so the same evaluation again reuses it instead of paying again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from ...benchmarks import Question
from ...llm.client import ChatClient
from ...llm.params import Sampling
from ...registry import Registry, named
from ..graders import Grader

__all__ = ["STRATEGIES", "Consensus", "Context", "Strategy", "resolve"]


@dataclass
class Context:
    """What a strategy may use: the grader's extraction (to compare answers) and a model to ask."""

    grader: Grader | None
    model: str | None = None
    client: ChatClient | None = None
    sampling: Sampling = field(default_factory=lambda: Sampling(temperature=0, max_tokens=2048))
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    async def ask(self, prompt: str) -> str:
        if self.client is None or self.model is None:
            raise RuntimeError("this strategy needs a model: give --consensus-model MODEL[@BASE_URL]")
        reply = await self.client.chat(self.model, [{"role": "user", "content": prompt}], self.sampling)
        self.requests += reply.attempts
        self.prompt_tokens += reply.prompt_tokens
        self.completion_tokens += reply.completion_tokens
        return reply.content or ""


@dataclass
class Consensus:
    content: str
    detail: dict[str, Any] = field(default_factory=dict)  # what the strategy saw and decided (votes, ratings, rounds)


class Strategy(Protocol):
    """A consensus strategy, instantiated with no arguments; subclass it for the defaults below."""

    name: ClassVar[str]
    version: ClassVar[str] = "1"  # part of its answers' cache key: bump it when the strategy changes
    # The prompts/ templates it renders: their hashes key its cache, and a strategy with templates calls a
    # model, so it needs --consensus-model.
    templates: ClassVar[tuple[str, ...]] = ()

    async def combine(self, question: Question, responses: list[str], ctx: Context) -> Consensus:
        """One answer from the members' ``responses`` to ``question``."""
        ...


STRATEGIES: Registry[type[Strategy]] = Registry("strategy", takes_all=True, make=named)


def resolve(spec: str) -> list[str]:
    """``all`` (every strategy, in registration order) or a comma list, validated."""
    return STRATEGIES.resolve(spec)


from . import council, elo, majority, standard  # noqa: E402,F401  (registration)
