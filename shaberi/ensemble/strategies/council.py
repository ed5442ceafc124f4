"""council: critique, rebuttal and judgment rounds among model calls.

Round 1, one call per response: a critic points out its errors (``council_critique.jinja``). Round 2,
one call per response: its author answers the critique and gives a final answer, revised or defended
(``council_rebuttal.jinja``). Round 3, one call: a judge reads every response with its critique and
rebuttal and writes the final answer (``council_judgment.jinja``). N responses cost 2N + 1 calls."""

from __future__ import annotations

import asyncio

from ...benchmarks import Question
from ...prompts import render
from . import STRATEGIES, Consensus, Context, Strategy

CRITIQUE, REBUTTAL, JUDGMENT = (f"ensemble/council_{r}.jinja" for r in ("critique", "rebuttal", "judgment"))


@STRATEGIES.register("council")
class Council(Strategy):
    templates = (CRITIQUE, REBUTTAL, JUDGMENT)

    async def combine(self, question: Question, responses: list[str], ctx: Context) -> Consensus:
        asked = question.turns[-1]
        critiques = await asyncio.gather(*(ctx.ask(render(CRITIQUE, question=asked, response=r)) for r in responses))
        rebuttals = await asyncio.gather(*(
            ctx.ask(render(REBUTTAL, question=asked, response=r, critique=c))
            for r, c in zip(responses, critiques, strict=True)))
        final = await ctx.ask(render(JUDGMENT, question=asked, rounds=list(zip(responses, critiques, rebuttals,
                                                                               strict=True))))
        return Consensus(final, {"critiques": critiques, "rebuttals": rebuttals, "calls": 2 * len(responses) + 1})
