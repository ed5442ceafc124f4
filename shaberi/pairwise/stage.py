"""Pairwise judging stage: for each question, the answers of two stored runs shown to a judge side by side, in both
orders; no generation call.

A pairwise judgement's identity is (question, run shown as A, run shown as B, judge, ``prompt_hash`` of the benchmark's
pairwise templates, both judged texts' hashes): one already stored with a reply is reused, never paid for twice; a
failed call is asked again. Per order: one call with ``pairwise.jinja``; when the reply holds no readable choice in
the judge's own words (``extract.choose``: none, quoted, several that disagree, one an answer states), one follow-up
in the same conversation with ``_pairwise_fallback.jinja``; a reply that needs it is journaled first (``AWAITING``),
so a run killed meanwhile asks only the follow-up. How the two orders combine is ``sql/080_pairwise.sql``'s rule.

A run is compared by its first sample's raw answer (sample 0, no strategy). A question one of the two runs has no
answer for (not generated, or its call failed), or whose text differs between them, is not compared: it is counted
per run and said (``PairwiseProgress.missing``).
"""

from __future__ import annotations

import functools
import hashlib
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import benchmarks as bm
from ..errors import LLMError, UsageError
from ..extract import Choice, choose
from ..judging import exchange
from ..judging.exchange import AWAITING, Exchange
from ..lineage import call_failed, conversation_hash, earlier_turns
from ..llm.client import ChatClient, Completion
from ..llm.dispatch import Dispatcher
from ..llm.params import Sampling
from ..prompts import pairwise_fallback, pairwise_hash, pairwise_messages, unrenderable
from ..tables import typed
from ..tables.rows import AnswerKey, Stage, pairwise
from ..tables.selection import parse_selector, select
from ..tables.store import Journal, Store
from ..tables.typed import AnswerRow, PairwiseRow, QuestionKey, QuestionRow, Texts
from .design import Design

__all__ = ["PairwiseProgress", "Scope", "Side", "Work", "compared_benchmarks", "judge_pairs", "plan", "sides"]

STAGE: Stage = "pairwise"
_Verdict = Exchange[Choice]


@dataclass(frozen=True)
class Side:
    """One run compared, and its name as the user gave it (TAG or MODEL@TAG): the name shown and stored."""

    tag: str
    run_id: str


@dataclass
class PairwiseProgress:
    total: int = 0  # ordered comparisons the design asks for (both orders of each pair, on each shared question)
    done: int = 0
    reused: int = 0
    judged: int = 0  # comparisons that needed a call this session
    calls: int = 0  # HTTP requests those made (fallbacks and retries included)
    tokens: int = 0
    failed: int = 0  # the judge call itself failed (after retries): asked again next time
    fallbacks: int = 0
    no_verdict: int = 0  # a reply, and its fallback's, held no readable choice
    missing: Counter[str] = field(default_factory=Counter)  # tag -> questions it could not be compared on
    differing: int = 0  # questions whose text differs between two runs: not compared


@dataclass(frozen=True)
class _Item:
    benchmark: str
    question_id: str
    run_a: str
    run_b: str
    messages: list[dict[str, Any]]
    prompt_hash: str
    hashes: tuple[str, str]
    answers: tuple[str, str]  # every candidate text the judge sees: a choice one states is not the judge's
    primary: Completion | None = None  # the first reply, journaled by a run killed before its fallback call


@dataclass
class Work:
    """What ``plan`` found: the comparisons still to make (lazily), and the counts so far."""

    items: list[_Item]
    progress: PairwiseProgress


def compared_benchmarks(store: Store, chosen: Sequence[Side], design: Design, benchmarks: Sequence[str] | None
                        ) -> list[str]:
    """The benchmarks asked (default: all) on which some pair of the design both answered: what the job compares on.
    A tag with no answer there, or no pair with one in common, is one line before anything is written."""
    asked = set(benchmarks or bm.BENCHMARKS)
    where = f"--benchmark {','.join(benchmarks)}" if benchmarks else "any benchmark"
    answered = {}
    for side in chosen:
        rows = store.read("answers", side.run_id, ["benchmark", "sample_index", "strategy", "error"]).to_pylist()
        answered[side.tag] = {a["benchmark"] for a in rows if a["benchmark"] in asked and a["sample_index"] == 0
                              and a["strategy"] == "" and a["error"] is None}
        if not answered[side.tag]:
            raise UsageError(f"tag {side.tag!r} has no answer to compare on {where} (its run's calls failed, or it did "
                             f"not run it); `shaberi view --tag {side.tag}` shows its answers")
    found = sorted({b for x, y in design.pairs for b in answered[x] & answered[y]})
    if not found:
        raise UsageError(f"no pair of --tags has answers to {where} in common; `shaberi view` shows what each ran")
    return found


def sides(store: Store, tags: Sequence[str]) -> list[Side]:
    """The run each name of ``--tags`` selects (``selection``: TAG, or MODEL@TAG for one model of a tag holding
    several): exactly one, labelled as named."""
    chosen = [parse_selector(store.root, t, option="--tags") for t in tags]
    if len(set(chosen)) != len(chosen) or len(chosen) < 2:
        raise UsageError(f"--tags needs two or more different runs, got {','.join(tags)}")
    found = []
    for name in chosen:
        runs = select(store.root, name).runs
        if len({r.model for r in runs}) > 1:
            raise UsageError(f"--tags {name.label!r} names runs of {len(runs)} models: name one as MODEL@TAG ("
                             + ", ".join(f"{r.model}@{r.tag}" for r in runs) + ")")
        if len(runs) > 1:
            raise UsageError(f"--tags {name.label!r} is a family of {len(runs)} runs: name one member ("
                             + ", ".join(r.tag if name.model is None else f"{r.model}@{r.tag}" for r in runs) + ")")
        found.append(Side(name.label, runs[0].run_id))
    return found


@dataclass(frozen=True)
class Scope:
    """What a job compares, and so what its ratings, win rates and position bias are read from: its judge, its
    design's pairs of runs and its benchmarks (comparisons other jobs stored for the same runs are reused when the
    design asks for them, never counted when it does not)."""

    judge: str
    pairs: tuple[tuple[str, str], ...]  # run ids, each pair's smaller first, sorted
    benchmarks: tuple[str, ...]
    anchor: str  # the run rated 1000

    @classmethod
    def of(cls, chosen: Sequence[Side], design: Design, judge: str, benchmarks: Sequence[str]) -> Scope:
        """``benchmarks``: those compared on (``compared_benchmarks``), so that asking for them by name, by ``all``
        or by default is the same job."""
        run = {s.tag: s.run_id for s in chosen}
        anchor = design.pairs[0][0] if design.kind == "reference" else chosen[0].tag
        pairs = sorted({(min(run[x], run[y]), max(run[x], run[y])) for x, y in design.pairs})
        return cls(judge, tuple(pairs), tuple(sorted(benchmarks)), run[anchor])

    @property
    def job(self) -> str:
        """The partition the job writes: the same for the same judge, pairs, benchmarks and anchor, so the same
        command resumes there, and another design's fit is another job's, not this one's replaced."""
        key = "\0".join([self.judge, self.anchor, *self.benchmarks, *(f"{a}|{b}" for a, b in self.pairs)])
        return "pairwise-" + hashlib.sha256(key.encode()).hexdigest()[:12]

    def params(self) -> dict[str, object]:
        """The parameters of ``sql/queries/pairwise.sql``'s queries."""
        return {"judge": self.judge, "pairs": [list(p) for p in self.pairs], "benchmarks": list(self.benchmarks)}


def _existing(store: Store) -> dict[tuple[str, ...], tuple[bool, Completion | None]]:
    """Every stored pairwise identity (any job's) -> (ask it again: its call failed, the reply a fallback awaits)."""
    found: dict[tuple[str, ...], tuple[bool, Completion | None]] = {}
    base = store.root / "tables" / "pairwise"
    for folder in sorted(base.iterdir()) if base.is_dir() else []:
        run_id = folder.name.removeprefix("run_id=")
        rows = store.read("pairwise", run_id, ["benchmark", "question_id", "run_a", "run_b", "judge", "prompt_hash",
                                               "answer_hash_a", "answer_hash_b", "error", "judge_output",
                                               "finish_reason", "prompt_tokens", "completion_tokens", "created_at"])
        for r in sorted(typed.rows(rows, PairwiseRow), key=lambda r: r["created_at"]):  # oldest first: the newest wins
            key = (r["benchmark"], r["question_id"], r["run_a"], r["run_b"], r["judge"], r["prompt_hash"],
                   r["answer_hash_a"], r["answer_hash_b"])
            found[key] = (call_failed(r["error"]), exchange.stored(r)[0] if r["error"] == AWAITING else None)
    return found


def _answers(store: Store, run_id: str, benchmarks: Sequence[str] | None
             ) -> tuple[dict[QuestionKey, QuestionRow], dict[QuestionKey, AnswerRow], Texts]:
    """A run's questions, its compared answers (sample 0, no strategy) and their texts, by (benchmark, question)."""
    questions = typed.questions(store.read("questions", run_id))
    rows = typed.rows(store.read("answers", run_id, ["benchmark", "question_id", "sample_index", "strategy", "content",
                                                     "error", "answer_hash"]), AnswerRow)
    texts = {AnswerKey.of({**a, "run_id": run_id}): a["content"] for a in rows}
    answers = {(a["benchmark"], a["question_id"]): a for a in rows
               if a["sample_index"] == 0 and a["strategy"] == "" and a["benchmark"] in bm.BENCHMARKS
               and (benchmarks is None or a["benchmark"] in benchmarks)}
    return questions, answers, texts


def plan(store: Store, chosen: Sequence[Side], design: Design, judge: str, benchmarks: Sequence[str] | None = None,
         judging: str | None = None) -> Work:
    """Every comparison the design asks for, both orders; the ones stored with a reply are counted as reused, the
    questions a pair cannot be compared on as missing."""
    progress = PairwiseProgress()
    by_tag = {s.tag: s for s in chosen}
    runs = {s.run_id: _answers(store, s.run_id, benchmarks) for s in chosen}
    existing = _existing(store)
    items: list[_Item] = []
    for x, y in design.pairs:
        (qx, ax, tx), (qy, ay, ty) = runs[by_tag[x].run_id], runs[by_tag[y].run_id]
        for key in sorted(set(qx) | set(qy)):
            if key[0] not in bm.BENCHMARKS or (benchmarks is not None and key[0] not in benchmarks):
                continue
            usable = {tag: key in answers and answers[key]["error"] is None and key in questions
                      for tag, questions, answers in ((x, qx, ax), (y, qy, ay))}
            if not all(usable.values()):
                progress.missing.update(t for t, ok in usable.items() if not ok)
                continue
            if qx[key]["turns"] != qy[key]["turns"]:
                progress.differing += 1
                continue
            shown: dict[str, tuple[str, list[dict[str, str]], str]] = {}
            for tag, questions, answers, texts in ((x, qx, ax, tx), (y, qy, ay, ty)):
                answer: AnswerRow = {**answers[key], "run_id": by_tag[tag].run_id}
                history = earlier_turns(questions[key], answer, questions, texts)
                shown[tag] = (answer["content"] or "", history,
                              answer["answer_hash"] or conversation_hash([h["assistant"] for h in history],
                                                                         answer["content"]))
            prompt_hash = pairwise_hash(key[0], judging)
            for a, b in ((x, y), (y, x)):
                progress.total += 1
                run_a, run_b = by_tag[a].run_id, by_tag[b].run_id
                hashes = (shown[a][2], shown[b][2])
                old = existing.get((*key, run_a, run_b, judge, prompt_hash, *hashes))
                if old is not None and not old[0]:
                    progress.done += 1
                    progress.reused += 1
                    continue
                try:
                    messages = pairwise_messages(key[0], qx[key], shown[a][0], shown[b][0],
                                                 (shown[a][1], shown[b][1]), judging)
                except unrenderable as exc:  # planned before any call: bad input, one line
                    raise UsageError(f"template judging/{key[0]}/pairwise.jinja cannot be rendered for {key[0]} "
                                     f"question {key[1]} ({type(exc).__name__}: {exc})") from None
                seen = tuple("\n".join([*(h["assistant"] or "" for h in shown[t][1]), shown[t][0]]) for t in (a, b))
                items.append(_Item(key[0], key[1], run_a, run_b, messages, prompt_hash, hashes,
                                   (seen[0], seen[1]), old[1] if old else None))
    return Work(items, progress)


async def judge_pairs(store: Store, job: str, work: Work, judge: str, client: ChatClient,
                      config: Sampling) -> PairwiseProgress:
    """Make the planned comparisons through ``client``; every reply is journaled under ``job`` as it lands."""
    journal = store.journal(job)
    try:
        awaiting = functools.partial(_awaiting, journal, job, judge, work.progress)
        call = functools.partial(_call, client, judge, config, awaiting)
        record = functools.partial(_record, journal, job, judge, work.progress)
        await Dispatcher(iter(work.items), call, record, client.max_in_flight).run()
    finally:
        journal.close()
    store.compact("pairwise", job)
    store.compact("token_usage", job)
    return work.progress


async def _call(client: ChatClient, judge: str, config: Sampling, awaiting: Callable[[_Item, Completion], None],
                item: _Item) -> _Verdict:
    """The primary call, and the fallback call when the reply has no readable choice (the reply journaled first)."""
    return await exchange.ask(lambda messages: client.chat(judge, messages, config), item.messages,
                              lambda reply: choose(reply.content, item.answers, reply.finish_reason == "length"),
                              pairwise_fallback(), _second, lambda reply: awaiting(item, reply), item.primary)


def _second(first: Choice, fallback: Completion) -> Choice:
    """The fallback's reply answers a direct question: taken as given (an answer's planted line cannot reach it)."""
    second = choose(fallback.content, cut_off=fallback.finish_reason == "length")
    return second if second.ok else Choice(None, f"reply: {first.reason}; fallback: {second.reason}")


def _row(job: str, item: _Item, judge: str, **values: object) -> dict[str, object]:
    return pairwise(job, item.benchmark, item.question_id, item.run_a, item.run_b, judge, item.prompt_hash,
                    item.hashes, **values)


def _awaiting(journal: Journal, job: str, judge: str, progress: PairwiseProgress, item: _Item,
              reply: Completion) -> None:
    """Journal a paid first reply before its fallback call, with its tokens."""
    fields, new = exchange.awaiting([reply])
    progress.calls += new.requests
    journal.append_many([("pairwise", _row(job, item, judge, **fields)),
                         ("token_usage", new.usage(job, STAGE, item.benchmark, judge))])


def _record(journal: Journal, job: str, judge: str, progress: PairwiseProgress, item: _Item,
            verdict: _Verdict | None, exc: LLMError | None) -> None:
    """Journal one comparison (its tokens: both calls) and the token usage of the calls not journaled yet."""
    if verdict is None:
        assert exc is not None
        fields, new = exchange.failed(exc)
        progress.failed += 1
    else:
        fields, new = exchange.settled(verdict, int(item.primary is not None))
        fields["verdict"] = verdict.found.value
        if not verdict.found.ok:
            progress.no_verdict += verdict.fallback_error is None
            progress.failed += verdict.fallback_error is not None
        progress.fallbacks += verdict.followed
        progress.tokens += fields["prompt_tokens"] + fields["completion_tokens"]
    journal.append_many([("pairwise", _row(job, item, judge, **fields)),
                         ("token_usage", new.usage(job, STAGE, item.benchmark, judge))])
    progress.done += 1
    progress.judged += 1
    progress.calls += new.requests
