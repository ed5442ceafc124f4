"""elo: pairwise comparisons of the responses by a model, Bradley–Terry ratings, the best one wins.

Every pair is judged twice, in both orders (position bias is real), each verdict read by ``extract.choose``;
when the two disagree, or one has none, the pair counts as a tie. The ratings are fitted in one batch over
all comparisons (``choix``'s regularised maximum likelihood; a tie is a win each way), and the highest-rated
response is the answer (ties in rating: the lowest sample index). N responses cost N·(N−1) calls
(``prompts/ensemble/elo.jinja``)."""

from __future__ import annotations

import asyncio
import itertools

from ...benchmarks import Question
from ...extract import choose
from ...prompts import render
from . import STRATEGIES, Consensus, Context, Strategy

TEMPLATE = "ensemble/elo.jinja"


def ratings(n: int, outcomes: list[tuple[int, int, str]]) -> list[float]:
    """Bradley–Terry strengths from (i, j, "i" | "j" | "tie") outcomes."""
    import choix

    data = []
    for i, j, result in outcomes:
        if result == "i":
            data.append((i, j))
        elif result == "j":
            data.append((j, i))
        else:
            data += [(i, j), (j, i)]
    return [float(x) for x in choix.ilsr_pairwise(n, data, alpha=0.01)] if data else [0.0] * n


@STRATEGIES.register("elo")
class Elo(Strategy):
    templates = (TEMPLATE,)

    async def combine(self, question: Question, responses: list[str], ctx: Context) -> Consensus:
        pairs = list(itertools.combinations(range(len(responses)), 2))

        async def judge(first: int, second: int) -> str:
            reply = await ctx.ask(render(TEMPLATE, question=question.turns[-1], a=responses[first],
                                         b=responses[second]))
            return choose(reply, (responses[first], responses[second])).value or "TIE"  # none read: a tie

        replies = await asyncio.gather(*(judge(a, b) for i, j in pairs for a, b in ((i, j), (j, i))))
        outcomes = []
        for k, (i, j) in enumerate(pairs):
            forward, backward = replies[2 * k], replies[2 * k + 1]  # i shown as A, then j shown as A
            first = {"A": "i", "B": "j"}.get(forward, "tie")
            second = {"A": "j", "B": "i"}.get(backward, "tie")
            outcomes.append((i, j, first if first == second else "tie"))
        strength = ratings(len(responses), outcomes)
        # equal ratings come back equal only to rounding (all ties: ~1e-16 apart): compare them rounded
        best = max(range(len(responses)), key=lambda k: (round(strength[k], 9), -k))
        return Consensus(responses[best], {"ratings": strength, "outcomes": outcomes, "winner": best,
                                           "calls": len(replies)})
