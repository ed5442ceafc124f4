"""llm: a judge model grades a free-form answer against the gold target, SimpleQA style
(``prompts/ensemble/simpleqa_grader.jinja``): CORRECT (score 1), INCORRECT or NOT_ATTEMPTED (score 0;
``parse_method`` keeps which, so accuracy given attempted can be computed).

A reply that cannot be read as exactly one grade is ``unparsed``: score NULL (``score`` here returns
None), never 0, with the reply in ``judge_output`` and ``error`` saying why; accuracy is computed over the
readable grades and the unreadable ones are counted apart. A reply is read as: the requested letter at its
start, in upper case ("A", "(B).", "**C**", "Grade: A"; not "A reasonable …"), else the one grade word it
names, as the prompt spells it or capitalised (CORRECT, Incorrect, NOT_ATTEMPTED, "Not attempted"; not
"not correct"); a grade word qualified by a negation or a hedge ("NOT CORRECT", "PARTIALLY CORRECT"), two
letters ("A/B"), a letter and a word that disagree, two different grade words, or neither, are unreadable.
The reply is NFKC-normalised and a ``<think>`` block is not read.
Asynchronous: the stage calls it through the shared client. Registered as ``GRADERS["llm"]``, a ``ModelGrader``."""

from __future__ import annotations

import re
import unicodedata

from ...benchmarks import Question
from ...extract import without_thinking
from ...llm.client import ChatClient, Completion
from ...llm.params import Sampling
from ...prompts import render, template_hash
from . import GRADERS

__all__ = ["GRADES", "TEMPLATE", "UNPARSED", "ask", "score", "verdict"]

TEMPLATE = "ensemble/simpleqa_grader.jinja"
GRADES = ("CORRECT", "INCORRECT", "NOT_ATTEMPTED")
UNPARSED = "unparsed"
_LETTERS = {"A": "CORRECT", "B": "INCORRECT", "C": "NOT_ATTEMPTED"}
# The letter, upper case, alone: "A reasonable guess" starts with an article, not a grade.
_LETTER = re.compile(r"^[\W_]*(?:(?i:grade)\W*)?([ABC])(?!\w)(?!\s+[a-z])")
_TWO_LETTERS = re.compile(r"^[\W_]*(?:(?i:grade)\W*)?[ABC][\s/,&|]+(?:(?i:or|and)\s+)?[ABC](?!\w)")
_QUALIFIED = re.compile(r"(?i:\b(?:not|partially|partly|mostly|largely|somewhat|almost|half)[\s_-]+)"
                        r"(?:CORRECT|Correct|correct|INCORRECT|Incorrect)\b")
# The grade words as the prompt spells them, or capitalised; "not correct" names no grade.
_WORD = re.compile(r"\b(NOT[ _]ATTEMPTED|Not [Aa]ttempted|INCORRECT|Incorrect|CORRECT|Correct)\b")


# The reply is one letter, but a reasoning model's limit (max_completion_tokens) counts its reasoning too: room
# for that, or its answer is cut off before the letter.
SAMPLING = Sampling(temperature=0, max_tokens=1024)


def verdict(reply: str) -> str:
    """CORRECT, INCORRECT, NOT_ATTEMPTED, or ``unparsed``."""
    text = without_thinking(unicodedata.normalize("NFKC", reply)).strip()
    if _QUALIFIED.search(text) or _TWO_LETTERS.match(text):
        return UNPARSED
    letter = _LETTER.match(text)
    words = {w.upper().replace(" ", "_") for w in _WORD.findall(text)}
    if letter:
        grade = _LETTERS[letter.group(1)]
        return grade if words <= {grade} else UNPARSED
    return words.pop() if len(words) == 1 else UNPARSED


def score(grade: str) -> int | None:
    """1 for CORRECT, 0 for INCORRECT and NOT_ATTEMPTED, None (no grade) for anything else."""
    return {"CORRECT": 1, "INCORRECT": 0, "NOT_ATTEMPTED": 0}.get(grade)


def prompt_hash() -> str:
    return template_hash(TEMPLATE)


async def ask(client: ChatClient, model: str, question: Question, answer: str) -> tuple[str, Completion]:
    prompt = render(TEMPLATE, question=question.turns[-1], target=question.reference or "", answer=answer)
    reply = await client.chat(model, [{"role": "user", "content": prompt}], SAMPLING)
    return verdict(reply.content or ""), reply


class _LLM:
    """``GRADERS["llm"]``: this module as a ``ModelGrader``."""

    name = "llm"
    prompt_hash = staticmethod(prompt_hash)
    ask = staticmethod(ask)
    score = staticmethod(score)


GRADERS.register("llm", _LLM())
