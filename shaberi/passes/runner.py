"""Run passes over a stored run: every answer checked by every pass, one ``pass_deltas`` row each.

Each row carries the hash of what was checked (the answer, and for a later turn the model's earlier
answers, as a judgement's ``answer_hash``): the ``scores`` view applies a delta only to judgements of
that same text, so a regenerated answer never inherits the old answer's penalty.

A pass's rows replace all of its earlier rows for the run (and nothing else) when it finishes. Model
verdicts are journaled as each call returns, so a killed pass keeps what it paid for; the next run reuses
any stored verdict whose answer text, model and prompt are unchanged, and calls only for the rest. A reply
whose verdict the pass could not read (``verdict`` null in the detail) is never reused and is counted apart
(``PassProgress.unreadable``), so that a detector nobody can read is never summed up as "0 flagged".
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from .. import benchmarks as bm
from ..errors import LLMError
from ..lineage import conversation_hash, earlier_turns
from ..llm.client import Completion
from ..llm.dispatch import Dispatcher
from ..tables import typed
from ..tables.rows import ANSWER_COLUMNS, AnswerKey, decoded, pass_delta, token_usage
from ..tables.schema import TABLES
from ..tables.store import Journal, Store
from . import Consulting, Finding, Item, Pass

__all__ = ["PassProgress", "answer_items", "run_passes"]



@dataclass
class PassProgress:
    answers: int = 0
    total: int = 0  # answers × passes
    done: int = 0
    flagged: dict[str, int] = field(default_factory=dict)  # pass -> answers with a non-zero delta
    noted: dict[str, int] = field(default_factory=dict)  # pass -> answers flagged with a zero penalty (flag only)
    consulted: int = 0  # model calls made this session
    reused: int = 0  # stored verdicts reused
    failed: int = 0  # model calls that failed: the rules' finding stands, the row says so
    failures: Counter[str] = field(default_factory=Counter)  # why, by error
    asked: Counter[str] = field(default_factory=Counter)  # pass -> answers its model judged (called, reused, failed)
    # pass -> replies with no verdict the pass could read (``verdict`` null): the rules' finding stands, the row
    # says why, and the next run asks again; never counted as fine
    unreadable: Counter[str] = field(default_factory=Counter)


async def run_passes(store: Store, run_id: str, passes: list[Pass], progress: PassProgress | None = None,
                     benchmarks: list[str] | None = None, questions: set[tuple[str, str]] | None = None
                     ) -> PassProgress:
    """Run ``passes`` over the run's answers: of ``benchmarks`` and ``questions`` ((benchmark, question_id)
    pairs) only, when given; the passes' rows outside them stay as they are."""
    progress = progress or PassProgress()

    def in_scope(benchmark: str, question_id: str) -> bool:
        return (benchmarks is None or benchmark in benchmarks) and (
            questions is None or (benchmark, question_id) in questions)

    items = [(item, h) for item, h in answer_items(store, run_id) if in_scope(item.benchmark, item.question_id)]
    progress.answers = len(items)
    progress.total = len(items) * len(passes)
    old = store.read("pass_deltas", run_id)
    names = [p.name for p in passes]
    verdicts = _stored_verdicts(old.filter(pc.is_in(old["pass_name"], pa.array(names))).to_pylist())
    journal = store.journal(run_id)
    rows: list[dict[str, Any]] = []
    try:
        for p in passes:
            asker = p if p.llm is not None and isinstance(p, Consulting) else None  # a pass with a model to ask
            asks: list[tuple[Item, Finding, str]] = []
            for item, a_hash in items:
                finding = p.check(item)
                if asker is not None and asker.needs_llm(finding):
                    stored = verdicts.get((p.name, _key(item), a_hash))
                    if stored is None or not asker.reusable(stored[0]):
                        asks.append((item, finding, a_hash))
                        continue
                    progress.reused += 1
                    progress.asked[p.name] += 1
                    finding = asker.decide(item, finding, stored[0])
                    finding.prompt_tokens, finding.completion_tokens = stored[1], stored[2]
                rows.append(_row(run_id, p, item, finding, a_hash))
                progress.done += 1
            if asker is not None and asks:
                rows += await _consult(journal, run_id, asker, asks, progress)
            mine = [r for r in rows if r["pass_name"] == p.name]
            progress.flagged[p.name] = sum(1 for r in mine if r["delta"])
            progress.noted[p.name] = sum(1 for r in mine
                                         if not r["delta"] and decoded("pass_deltas", r)["detail"].get("flagged"))
    finally:
        journal.close()
    scoped = pa.array([in_scope(b, q) for b, q in zip(old["benchmark"].to_pylist(), old["question_id"].to_pylist(),
                                                        strict=True)], pa.bool_())
    kept = old.filter(pc.invert(pc.and_(pc.is_in(old["pass_name"], pa.array(names)), scoped)))
    fresh = pa.Table.from_pylist(rows, TABLES["pass_deltas"].schema)
    store.replace("pass_deltas", run_id, pa.concat_tables([kept, fresh]))
    store.compact("token_usage", run_id)
    return progress


def _key(item: Item) -> AnswerKey:
    return AnswerKey(item.benchmark, item.question_id, item.sample_index, item.strategy)


def answer_items(store: Store, run_id: str) -> Iterator[tuple[Item, str]]:
    """(Item, conversation hash) for every answer of a benchmark this version knows."""
    questions = typed.questions(store.read("questions", run_id, ["benchmark", "question_id", "turns", "extra"]))
    answers = typed.rows(store.read("answers", run_id, [*ANSWER_COLUMNS, "content", "error", "finish_reason",
                                                        "answer_hash"]), typed.AnswerRow)
    texts = {AnswerKey.of(a): a["content"] for a in answers}
    current = {AnswerKey.of(a): a["answer_hash"] for a in answers}
    scores: dict[AnswerKey, dict[str, Any]] = defaultdict(dict)
    judged = store.read("judgements", run_id, [*ANSWER_COLUMNS, "judge", "score", "answer_hash", "error",
                                               "created_at"])
    # the lineage rule (sql/015_lineage.sql): the latest of this text, a failed call superseding none that returned
    for j in sorted(judged.to_pylist(), key=lambda j: (not (j["error"] or "").startswith("judge_error"),
                                                       j["created_at"])):
        key = AnswerKey.of(j)
        if None in (j["answer_hash"], current.get(key)) or j["answer_hash"] == current.get(key):
            scores[key][j["judge"]] = j["score"]
    for a in answers:
        spec = bm.BENCHMARKS.get(a["benchmark"])
        question = questions.get((a["benchmark"], a["question_id"]))
        if spec is None or question is None:
            continue
        asked = question["turns"] or [""]
        key = AnswerKey.of(a)
        item = Item(a["benchmark"], a["question_id"], a["sample_index"], a["strategy"], prompt=asked[-1],
                    question="\n".join(asked), content=a["content"], error=a["error"],
                    finish_reason=a["finish_reason"], scale=spec.scale, scores=scores.get(key, {}))
        yield item, a["answer_hash"] or conversation_hash(
            [t["assistant"] for t in earlier_turns(question, a, questions, texts)], a["content"])


def _stored_verdicts(rows: list[dict[str, Any]]) -> dict[tuple, tuple[dict[str, Any], int | None, int | None]]:
    found = {}
    for r in sorted(rows, key=lambda r: r["created_at"]):
        verdict = decoded("pass_deltas", r)["detail"].get("detector")
        if verdict and verdict.get("verdict"):
            found[(r["pass_name"], AnswerKey.of(r), r["answer_hash"])] = (
                verdict, r["prompt_tokens"], r["completion_tokens"])
    return found


async def _consult(journal: Journal, run_id: str, p: Consulting, asks: list[tuple[Item, Finding, str]],
                   progress: PassProgress) -> list[dict[str, Any]]:
    assert p.llm is not None
    llm = p.llm
    rows: list[dict[str, Any]] = []

    async def call(ask: tuple[Item, Finding, str]) -> tuple[dict[str, Any], Completion]:
        return await p.consult(ask[0], ask[1], llm)

    def record(ask: tuple[Item, Finding, str], outcome: tuple[dict[str, Any], Completion] | None,
               error: LLMError | None) -> None:
        item, finding, a_hash = ask
        progress.done += 1
        progress.asked[p.name] += 1
        if outcome is None:  # the rules' finding stands; the row says the model could not be asked
            progress.failed += 1
            progress.failures[f"{error.error_type}: {str(error)[:120]}" if error else "unknown"] += 1
            finding.detail["detector"] = {"model": llm.model, "error": str(error)}
            rows.append(_row(run_id, p, item, finding, a_hash))
            journal.append("token_usage", token_usage(run_id, "passes", item.benchmark, llm.model,
                                                      requests=error.attempts if error else 0))
            return
        progress.consulted += 1
        verdict, reply = outcome
        progress.unreadable[p.name] += verdict.get("verdict") is None  # what _stored_verdicts will not reuse
        found = p.decide(item, finding, verdict)
        found.prompt_tokens, found.completion_tokens = reply.prompt_tokens, reply.completion_tokens
        row = _row(run_id, p, item, found, a_hash)
        rows.append(row)
        journal.append_many([("pass_deltas", row), ("token_usage", token_usage(
            run_id, "passes", item.benchmark, llm.model, requests=reply.attempts, prompt_tokens=reply.prompt_tokens,
            completion_tokens=reply.completion_tokens, reasoning_tokens=reply.reasoning_tokens,
            cached_prompt_tokens=reply.cached_tokens))])

    await Dispatcher(iter(asks), call, record, llm.client.max_in_flight).run()
    return rows


def _row(run_id: str, p: Pass, item: Item, finding: Finding, a_hash: str) -> dict[str, Any]:
    return pass_delta(run_id, _key(item), p.name, p.version, finding.delta, reason=finding.reason,
                      detail=orjson.dumps(finding.detail).decode(), answer_hash=a_hash,
                      prompt_tokens=finding.prompt_tokens, completion_tokens=finding.completion_tokens)
