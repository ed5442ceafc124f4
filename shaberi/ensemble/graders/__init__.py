"""Graders: is an answer right? One file each, registered by name; a grade is a ``judgements`` row.

A rule grader (``numeric``, ``mcq``, ``math``) extracts the final answer from a response and compares it
with the gold; its judge name is ``exact:<name>``, its score 1 or 0, ``parse_method`` says which rule found
the answer (``none``: nothing found, ``hedged``: more than one choice named, ``timeout``: math gave up; all
graded wrong, as the response gave no readable answer, and counted as unreadable) and ``judge_output`` holds
what was extracted. ``version`` is part of a stored grade's identity (column ``grader_version``; a rule
grader has no prompt, so ``prompt_hash`` is null): bump it when the rules change, and stored grades are made
again. ``extract`` is also what ``majority`` votes over. The ``llm`` grader asks a judge model (SimpleQA
style: CORRECT, INCORRECT or NOT_ATTEMPTED) and is asynchronous (``graders.llm``); a reply it cannot read is
no grade at all (score NULL, ``unparsed``), never a wrong one.

Both kinds live in ``GRADERS``: a rule grader is a ``Grader`` (``@GRADERS.register(name)`` makes one from an
extraction function), a judge-model grader a ``ModelGrader`` (``GRADERS.register(name, grader)``); plugins
register theirs the same way (``docs/reference/plugins.md``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ...benchmarks import Question
from ...registry import Registry

if TYPE_CHECKING:
    from ...llm.client import ChatClient, Completion

__all__ = ["GRADERS", "Extraction", "Grader", "ModelGrader", "RuleGrader"]


@dataclass(frozen=True)
class Extraction:
    answer: str | None  # normalised: equal strings mean the same answer
    method: str  # the rule that found it, or "none"


@runtime_checkable
class Grader(Protocol):
    """A rule grader: its grades are judge ``exact:<name>``, ``grader_version`` its ``version``."""

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> str: ...  # of the rules: a stored grade of another version is made again

    def extract(self, text: str, question: Question) -> Extraction:
        """The final answer in ``text``, normalised, and the rule that found it."""
        ...

    def grade(self, response: str | None, question: Question) -> tuple[bool, Extraction]:
        """Whether ``response`` gives the gold answer, and what was read from it."""
        ...


@runtime_checkable
class ModelGrader(Protocol):
    """A grader that asks a judge model (``--judge``): its grades are judge <the judge model>, ``prompt_hash``
    ``<name>:<prompt_hash()>``, ``parse_method`` the grade word ``ask`` read from the reply."""

    @property
    def name(self) -> str: ...

    def prompt_hash(self) -> str:
        """What the judge is asked, hashed: a stored grade with another hash is asked again."""
        ...

    async def ask(self, client: ChatClient, model: str, question: Question, answer: str) -> tuple[str, Completion]:
        """The grade of ``answer`` and the judge's reply."""
        ...

    def score(self, grade: str) -> int | None:
        """1 (right), 0 (wrong) or None: no grade (the reply could not be read), never a wrong one."""
        ...


@dataclass(frozen=True)
class RuleGrader:
    """A ``Grader`` from an extraction function and a comparison."""

    name: str
    extract: Callable[[str, Question], Extraction]
    same: Callable[[Extraction, Question], bool]  # is this extraction the gold answer?
    version: str = "1"

    def grade(self, response: str | None, question: Question) -> tuple[bool, Extraction]:
        found = self.extract(response or "", question)
        return (found.answer is not None and self.same(found, question)), found


def _make(name: str, thing: Grader | ModelGrader | Callable[[str, Question], Extraction], *,
          same: Callable[[Extraction, Question], bool] | None = None, version: str = "1") -> Grader | ModelGrader:
    """``GRADERS.register(name, same=…, version=…)`` on an extraction function makes a ``RuleGrader``: by
    default an answer is right when it equals the gold extracted the same way (so the gold's own formatting
    does not matter); ``GRADERS.register(name, grader)`` given a ``Grader`` or ``ModelGrader`` keeps it."""
    if isinstance(thing, (Grader, ModelGrader)):
        if same is not None or version != "1":
            raise TypeError(f"grader {name!r}: same= and version= are for an extraction function, not a grader")
        return thing
    fn = thing

    def equal(found: Extraction, q: Question) -> bool:
        return found.answer == fn(q.reference or "", q).answer or found.answer == (q.reference or "").strip()

    return RuleGrader(name, fn, same or equal, version)


GRADERS: Registry[Grader | ModelGrader] = Registry("grader", make=_make)


from . import llm, math, mcq, numeric  # noqa: E402,F401  (registration)
