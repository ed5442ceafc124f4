"""Graders: is an answer right? One file each, registered by name; a grade is a ``judgements`` row.

A rule grader (``numeric``, ``mcq``, ``math``) extracts the final answer from a response and compares it
with the gold; its judge name is ``exact:<name>``, its score 1 or 0, ``parse_method`` says which rule found
the answer (``none``: nothing found, ``hedged``: more than one choice named, ``timeout``: math gave up; all
graded wrong, as the response gave no readable answer, and counted as unreadable) and ``judge_output`` holds
what was extracted. ``version`` is part of a stored grade's identity (``prompt_hash``
``exact:<name>@<version>``): bump it when the rules change, and stored grades are made again. ``extract`` is
also what ``majority`` votes over. The ``llm`` grader asks a judge model (SimpleQA style: CORRECT, INCORRECT
or NOT_ATTEMPTED) and is asynchronous (``graders.llm``); a reply it cannot read is no grade at all (score
NULL, ``unparsed``), never a wrong one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ...benchmarks import Question

__all__ = ["GRADERS", "Extraction", "Grader", "grader"]


@dataclass(frozen=True)
class Extraction:
    answer: str | None  # normalised: equal strings mean the same answer
    method: str  # the rule that found it, or "none"


@dataclass(frozen=True)
class Grader:
    name: str
    extract: Callable[[str, Question], Extraction]
    same: Callable[[Extraction, Question], bool]  # is this extraction the gold answer?
    version: str = "1"  # of the rules: a stored grade of another version is made again

    @property
    def judge(self) -> str:
        return f"exact:{self.name}"

    def grade(self, response: str | None, question: Question) -> tuple[bool, Extraction]:
        found = self.extract(response or "", question)
        return (found.answer is not None and self.same(found, question)), found


GRADERS: dict[str, Grader] = {}


def grader(name: str, same: Callable[[Extraction, Question], bool] | None = None, version: str = "1") -> Callable:
    """Register an extraction function; by default an answer is right when it equals the gold extracted the
    same way (so the gold's own formatting does not matter)."""

    def register(fn: Callable[[str, Question], Extraction]) -> Callable:
        def equal(found: Extraction, q: Question) -> bool:
            return found.answer == fn(q.reference or "", q).answer or found.answer == (q.reference or "").strip()

        GRADERS[name] = Grader(name, fn, same or equal, version)
        return fn

    return register


from . import math, mcq, numeric  # noqa: E402,F401  (registration)
