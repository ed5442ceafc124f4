"""The grading stage: every answer quick-eval compares graded, by a rule grader or a judge model, as
``judgements`` rows of the cache entry. A grade is reused by the judge stage's rule (``lineage.call_failed``):
one stored for the same answer text under the same grader (prompt hash or rules version) is final unless its
judge call failed; the same text for the same question is graded once, whichever member or strategy wrote it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any, NamedTuple

from ..benchmarks import Question
from ..errors import LLMError, UsageError
from ..lineage import answer_hash, call_failed
from ..llm.client import LLM, Completion
from ..llm.dispatch import Dispatcher
from ..tables.rows import AnswerKey, token_usage
from ..tables.rows import judgement as judgement_row
from ..tables.store import Journal, Store
from .entry import CachedEntry, How
from .graders import GRADERS, Extraction, Grader, ModelGrader, RuleGrader
from .graders.llm import GRADES

__all__ = ["UNREADABLE", "Grading", "grader_counts"]

# parse_method values of a response no rule or judge could read (rule graders count it wrong, the llm
# grader leaves it without a grade).
UNREADABLE = ("none", "hedged", "unparsed", "timeout")


class _Graded(NamedTuple):
    """How one grader's grades are made and stored."""

    rules: Grader | None  # a rule grader, or
    model: ModelGrader | None  # one that asks the judge model
    judge: str  # the judgements' judge
    how: How
    label: str  # what the counts call it: the rule grader's name, or <grader>:<judge model>


class _Ask(NamedTuple):
    """An answer text a judge-model grader is to grade."""

    question: Question
    sample_index: int
    strategy: str
    graded: _Graded
    a_hash: str
    text: str


class Grading:
    """Grades of one entry's answers: stored ones reused (same answer text, same grader version), the rest
    computed (rule graders) or asked (a judge-model grader), journaled as ``judgements`` rows."""

    def __init__(self, cached: CachedEntry, judge: LLM | None) -> None:
        self.cached, self.judge = cached, judge
        self.judges: dict[str, str] = {}  # the judge names this grading used -> their grader labels
        self.graders: dict[str, _Graded] = {}
        self.results: dict[tuple[str, int, str], tuple[int | None, int | None]] = {}
        # The same text for the same question is graded once, whichever member or strategy wrote it.
        self.by_text: dict[tuple[str, str, How, str], tuple[int | None, str, str | None, str | None]] = {
            (qid, judge_name, how, a_hash): (_score(score, method), method, output, error)
            for (qid, _, _, judge_name, a_hash, how), (score, method, error, output) in cached.grades.items()}
        self._rules: dict[str, Grader | None] = {}
        self._free: list[dict[str, Any]] = []  # grades made again for nothing (``_write``)

    def rules(self, question: Question) -> Grader | None:
        """The question's rule grader for a strategy to extract answers with (None: graded by a judge model, or
        by nothing), reading back what this grading extracted from the same text rather than extracting it
        again: a vote reads every member's answer, all of them graded just before."""
        kind = question.extra.get("grader", "")
        if kind not in self._rules:
            grader = GRADERS.get(kind)
            if isinstance(grader, RuleGrader):
                grader = replace(grader, extract=partial(self._extracted, grader.extract))
            self._rules[kind] = grader if isinstance(grader, Grader) else None
        return self._rules[kind]

    def _extracted(self, extract: Callable[[str, Question], Extraction], text: str, question: Question) -> Extraction:
        graded = self._grader(question)
        got = self.by_text.get((question.question_id, graded.judge, graded.how, answer_hash(text)))
        if got is not None and got[3] is None and got[1] not in _ERRORS:  # (score, method, output, error)
            return Extraction(got[2], got[1])
        return extract(text, question)

    def get(self, qid: str, sample_index: int, strategy: str) -> tuple[int | None, int | None]:
        """(correct, attempted) as 0/1, both None when there is no readable grade."""
        return self.results.get((qid, sample_index, strategy), (None, None))

    def _grader(self, question: Question) -> _Graded:
        kind = question.extra.get("grader", "mcq")
        if kind not in self.graders:
            grader = GRADERS[kind]
            if isinstance(grader, ModelGrader):
                if self.judge is None:
                    raise UsageError(f"{question.benchmark} is graded by a judge model: give --judge MODEL[@BASE_URL]")
                self.graders[kind] = _Graded(None, grader, self.judge.model, How(f"{kind}:{grader.prompt_hash()}",
                                                                                 None), f"{kind}:{self.judge.model}")
            else:
                self.graders[kind] = _Graded(grader, None, f"exact:{kind}", How(None, grader.version), kind)
        return self.graders[kind]

    async def grade(self, items: list[tuple[str, int, str, str | None]], journal: Journal) -> None:
        asks = []
        for qid, index, strategy, text in items:
            question = self.cached.questions[qid]
            graded = self._grader(question)
            self.judges[graded.judge] = graded.label
            a_hash = answer_hash(text)
            old = self.cached.grades.get((qid, index, strategy, graded.judge, a_hash, graded.how))
            if old is not None and not call_failed(old[2]):
                self.results[(qid, index, strategy)] = _outcome(_score(old[0], old[1]), old[1])
                continue
            same = self.by_text.get((qid, graded.judge, graded.how, a_hash))
            if text is None and strategy:  # the strategy's model call failed: no grade, not a wrong one
                self._store(question, index, strategy, graded, a_hash, None, "consensus_error", None)
            elif text is None:  # a member's error answer: wrong, and never sent to a judge
                self._store(question, index, strategy, graded, a_hash, 0, "answer_error", None)
            elif same is not None and not call_failed(same[3]) and same[1] != "answer_error":
                self._store(question, index, strategy, graded, a_hash, same[0], same[1], same[2])
            elif graded.rules is None:
                asks.append(_Ask(question, index, strategy, graded, a_hash, text))
            else:
                right, found = graded.rules.grade(text, question)
                self._store(question, index, strategy, graded, a_hash, int(right), found.method,
                            found.answer)
        if asks:
            await self._ask(asks, journal)
        self._write(journal)

    def _write(self, journal: Journal) -> None:
        """The grades that cost nothing to make again (a rule's, a copy of a stored one, an error answer's) as one
        part, not through the journal: a kill loses only what is made again next time, and 60,000 of them
        skip a round trip through JSON (0.6 s of quick-eval's 4.5)."""
        if self._free:
            journal.store.write_part("judgements", journal.run_id, self._free)
            self._free = []

    async def _ask(self, asks: list[_Ask], journal: Journal) -> None:
        assert self.judge is not None
        client, model = self.judge.client, self.judge.model

        def grader(ask: _Ask) -> ModelGrader:
            assert ask.graded.model is not None
            return ask.graded.model

        async def call(ask: _Ask) -> tuple[str, Completion]:
            return await grader(ask).ask(client, model, ask.question, ask.text)

        def record(ask: _Ask, outcome: tuple[str, Completion] | None, error: LLMError | None) -> None:
            question, index, strategy, graded, a_hash, _ = ask
            if outcome is None:  # no grade: asked again next time
                self._store(question, index, strategy, graded, a_hash, None, "judge_error", None,
                            error=f"judge_error: {error}")
                return
            grade, reply = outcome
            row = self._store(question, index, strategy, graded, a_hash, grader(ask).score(grade), grade,
                              reply.content, tokens=(reply.prompt_tokens, reply.completion_tokens))
            journal.append_many([("judgements", row), ("token_usage", token_usage(  # paid for: durable now
                self.cached.run_id, "judging", question.benchmark, model, requests=reply.attempts,
                prompt_tokens=reply.prompt_tokens, completion_tokens=reply.completion_tokens))])

        unique: dict[tuple[str, str], _Ask] = {}
        for ask in asks:  # one call per distinct text; the repeats copy its grade afterwards
            unique.setdefault((ask.question.question_id, ask.a_hash), ask)
        await Dispatcher(iter(unique.values()), call, record, client.max_in_flight).run()
        for ask in asks:
            question, index, strategy, graded, a_hash, _ = ask
            if (question.question_id, index, strategy) not in self.results:
                score, method, output, error = self.by_text[(question.question_id, graded.judge, graded.how, a_hash)]
                self._store(question, index, strategy, graded, a_hash, score, method, output, error)

    def _store(self, question: Question, index: int, strategy: str, graded: _Graded, a_hash: str,
               score: int | None, method: str, output: str | None, error: str | None = None,
               tokens: tuple[int, int] | None = None) -> dict[str, Any]:
        """Record a grade; its row is written with the others (``_write``) unless it came from a paid call
        (``tokens``), whose caller journals it at once."""
        error = error or _ERRORS.get(method)
        self.results[(question.question_id, index, strategy)] = _outcome(score, method)
        self.by_text[(question.question_id, graded.judge, graded.how, a_hash)] = (score, method, output, error)
        row = judgement_row(
            self.cached.run_id, AnswerKey(question.benchmark, question.question_id, index, strategy), graded.judge,
            (0, 1), graded.how.prompt_hash, a_hash, grader_version=graded.how.grader_version,
            score=None if score is None else float(score), parse_method=method, judge_output=output,
            prompt_tokens=tokens[0] if tokens else None, completion_tokens=tokens[1] if tokens else None,
            error=error)
        if tokens is None:
            self._free.append(row)
        return row


_ERRORS = {"answer_error": "answer_error", "judge_error": "judge_error", "consensus_error": "consensus_error",
           "unparsed": f"unparseable: the judge's reply is none of A, B, C, {', '.join(GRADES)}"}


def _score(score: float | None, method: str) -> int | None:
    """A stored score as a grade: None stays None, and so does an unreadable judge reply stored as 0 before
    issue 14."""
    return None if score is None or method in ("unparsed", "judge_error", "consensus_error") else int(score)


def _outcome(score: int | None, method: str) -> tuple[int | None, int | None]:
    """(correct, attempted): both None without a grade."""
    return (None, None) if score is None else (score, int(method != "NOT_ATTEMPTED"))


def grader_counts(store: Store, run_id: str, ids: list[str], strategies: list[str], base_run: str | None,
                   judges: dict[str, str]) -> dict[str, dict[str, int]]:
    """Per grader (``judges``: judge name -> grader label), the grades that count (the ``judgements`` view) of
    this evaluation's answers by its graders: every member and strategy answer of the sampled questions, and
    the separate baseline's sample 0."""
    from ..tables.sql import connect, query

    con = connect(store.root, run_ids=[run_id] + ([base_run] if base_run else []), upto="lineage")
    rows = con.execute(query("ensemble.grader_counts"), {
        "ids": ids, "judges": sorted(judges), "run": run_id, "strategies": ["", *strategies], "base": base_run or "",
        "unreadable": list(UNREADABLE)}).fetchall()
    return {judges[judge]: {"graded": n, "unreadable": unread, "no_grade": null}
            for judge, n, unread, null in sorted(rows, key=lambda r: judges[r[0]])}
