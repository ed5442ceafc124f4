"""standard: one synthesizer call that reads the question and all N responses and writes the final
answer (``prompts/ensemble/standard.jinja``)."""

from __future__ import annotations

from ...benchmarks import Question
from ...prompts import render
from . import STRATEGIES, Consensus, Context, Strategy

TEMPLATE = "ensemble/standard.jinja"


@STRATEGIES.register("standard")
class Standard(Strategy):
    templates = (TEMPLATE,)

    async def combine(self, question: Question, responses: list[str], ctx: Context) -> Consensus:
        reply = await ctx.ask(render(TEMPLATE, question=question.turns[-1], responses=responses))
        return Consensus(reply, {"calls": 1})
