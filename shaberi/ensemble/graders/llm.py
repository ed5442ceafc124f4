"""llm: a judge model grades a free-form answer against the gold target, SimpleQA style
(``prompts/ensemble/simpleqa_grader.jinja``): CORRECT (score 1), INCORRECT or NOT_ATTEMPTED (score 0;
``parse_method`` keeps which, so accuracy given attempted can be computed). An unreadable reply is
INCORRECT with method ``unparsed``. Asynchronous: the stage calls it through the shared client."""

from __future__ import annotations

import re

import orjson

from ...benchmarks import Question
from ...client import ChatClient, Completion
from ...prompts import render, template_hash

__all__ = ["TEMPLATE", "ask", "verdict"]

TEMPLATE = "ensemble/simpleqa_grader.jinja"
_GRADES = {"A": "CORRECT", "B": "INCORRECT", "C": "NOT_ATTEMPTED"}


def verdict(reply: str) -> str:
    """CORRECT, INCORRECT, NOT_ATTEMPTED, or unparsed."""
    text = reply.strip().upper()
    if m := re.search(r"\b(NOT_ATTEMPTED|INCORRECT|CORRECT)\b", text):
        return m.group(1)
    if m := re.match(r"^\W*([ABC])\b", text):
        return _GRADES[m.group(1)]
    return "unparsed"


def prompt_hash() -> str:
    return template_hash(TEMPLATE)


async def ask(client: ChatClient, model: str, question: Question, answer: str) -> tuple[str, Completion]:
    prompt = render(TEMPLATE, question=question.turns[-1], target=question.reference or "", answer=answer)
    reply = await client.chat(orjson.dumps({"model": model, "messages": [{"role": "user", "content": prompt}],
                                            "temperature": 0, "max_tokens": 16}))
    return verdict(reply.content or ""), reply
