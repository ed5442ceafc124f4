"""majority: the most common final answer among the members, as the grader extracts it; no model call.
For free answers graded by a judge model (SimpleQA) there is no rule to extract with: the whole reply,
case-folded and without punctuation or extra spaces, is the answer voted on. Ties go to the answer given
first (the lowest sample index, so the single model's own answer wins a tie it is part of); members
whose answer cannot be extracted do not vote. The consensus text is the first member response with the
winning answer."""

from __future__ import annotations

import re
from collections import Counter

from ...benchmarks import Question
from . import STRATEGIES, Consensus, Context, Strategy


@STRATEGIES.register("majority")
class Majority(Strategy):

    async def combine(self, question: Question, responses: list[str], ctx: Context) -> Consensus:
        answers = [ctx.grader.extract(r, question).answer if ctx.grader else _free(r) for r in responses]
        votes = Counter(a for a in answers if a is not None)
        if not votes:
            return Consensus(responses[0], {"votes": {}, "winner": None})
        top = max(votes.values())
        winner = next(a for a in answers if a is not None and votes[a] == top)  # first given among the tied
        return Consensus(responses[answers.index(winner)], {"votes": dict(votes), "winner": winner})


def _free(response: str) -> str | None:
    text = " ".join(re.sub(r"[^\w\s]", " ", response.casefold()).split())
    return text or None
