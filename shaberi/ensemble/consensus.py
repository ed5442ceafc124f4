"""The consensus stage: each strategy's answer to every sampled question, from the members' answers, stored as
an ``answers`` row with ``strategy`` set under a ``request_hash`` of everything it depended on (strategy and its
version, the model, its templates' hashes, the member responses): the same evaluation again reuses it instead
of paying again; a failed call is left without an answer (and without a grade), asked again next time."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from ..errors import LLMError
from ..lineage import answer_hash
from ..llm.client import LLM
from ..llm.dispatch import Dispatcher
from ..prompts import template_hash
from ..tables.rows import AnswerKey, token_usage
from ..tables.rows import answer as answer_row
from ..tables.store import Journal
from .entry import CachedEntry
from .grading import Grading
from .result import StrategyOutcome
from .strategies import Context, Strategy

__all__ = ["Consensus", "consensus"]


class Consensus(dict):
    """qid -> a strategy's answer (None: its call failed), and what producing them took."""

    outcome: StrategyOutcome


async def consensus(journal: Journal, cached: CachedEntry, strat: Strategy, ids: list[str],
                     members: dict[str, list[str | None]], llm: LLM | None, grading: Grading) -> Consensus:
    """qid -> consensus text for every sampled question, reusing stored answers with the same identity; a
    strategy compares answers with ``grading``'s rule graders (what it extracted from the members' texts)."""
    done = Consensus()
    done.outcome = StrategyOutcome([], [])
    uses_model = bool(strat.templates)
    model = llm.model if (llm and uses_model) else strat.name
    todo = []
    for qid in ids:
        responses = [r or "" for r in members[qid]]
        identity = hashlib.sha256(orjson.dumps([strat.name, strat.version, model,
                                                [template_hash(t) for t in strat.templates], responses])
                                  ).hexdigest()[:32]
        old = cached.consensus.get((qid, strat.name))
        if old is not None and old[0] == identity and old[1] is not None:
            done[qid] = old[1]
            done.outcome.reused += 1
        else:
            todo.append((qid, responses, identity))
    if not todo:
        return done
    question_of = cached.questions

    async def call(work: tuple[str, list[str], str]) -> tuple[str, dict[str, Any], Context]:
        qid, responses, _ = work
        question = question_of[qid]
        ctx = Context(grading.rules(question), llm.model if llm else None, llm.client if llm else None)
        found = await strat.combine(question, responses, ctx)
        return found.content, found.detail, ctx

    def record(work: tuple[str, list[str], str], outcome: tuple[str, dict[str, Any], Context] | None,
               error: LLMError | None) -> None:
        qid, _, identity = work
        key = AnswerKey(question_of[qid].benchmark, qid, 0, strat.name)
        if outcome is None:
            done[qid] = None
            done.outcome.failed += 1
            done.outcome.error = done.outcome.error or str(error)[:200]
            journal.append("answers", answer_row(cached.run_id, key, model, request_hash=identity, calls=1,
                                                 answer_hash=answer_hash(None), error=str(error)[:2000],
                                                 error_type=error.error_type if error else "error"))
            return
        content, detail, ctx = outcome
        # its text's hash: a grade of another text of this strategy (an earlier answer, a failed call) is stale
        row = answer_row(cached.run_id, key, model, request_hash=identity, calls=1, content=content,
                         answer_hash=answer_hash(content),
                         reasoning=orjson.dumps(detail).decode(), attempts=ctx.requests,
                         prompt_tokens=ctx.prompt_tokens, completion_tokens=ctx.completion_tokens)
        done[qid] = content
        o = done.outcome
        o.requests += ctx.requests
        o.prompt_tokens += ctx.prompt_tokens
        o.completion_tokens += ctx.completion_tokens
        rows = [("answers", row)]
        if ctx.requests:
            rows.append(("token_usage", token_usage(cached.run_id, "consensus", question_of[qid].benchmark, model,
                                                    requests=ctx.requests, prompt_tokens=ctx.prompt_tokens,
                                                    completion_tokens=ctx.completion_tokens)))
        journal.append_many(rows)

    workers = llm.client.max_in_flight if (llm and uses_model) else 1
    await Dispatcher(iter(todo), call, record, workers).run()
    return done
