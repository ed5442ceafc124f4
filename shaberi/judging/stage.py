"""Judge stage: score every answer with every judge, keeping each judge's full reply.

A judgement's identity is (answer key, judge, ``prompt_hash`` of the benchmark's judging templates,
``answer_hash`` of the judged text; see ``lineage``). A normal run skips judgements whose identity is
already stored, except rows whose judge call failed; ``rejudge`` calls again. Every call adds a row (a row's
key holds its time): the older ones stay as history, the newest counts. ``reprocess`` re-parses the stored
replies with the current extraction rules and makes no call at all. The stage only reads answers: it never
calls the candidate.

Per answer and judge: one call with ``primary.jinja``; when the reply holds no single valid verdict in the
judge's own words (``shaberi.extract``: none, quoted, ambiguous, out of scale, several that disagree), one
follow-up call in the same conversation with ``fallback.jinja``; when that fails too the score is null
and ``error`` says why. A reply that needs the follow-up is journaled before it is asked (``AWAITING``, with its
tokens): a run killed meanwhile keeps what it paid for, and its resume asks only the follow-up. Error answers
are never sent: their row has a null score and ``error = 'answer_error'``.

Under another prompt set (``judging.promptsets``, ``--judge-prompts``) judgements are stored under the judge's name
qualified by the set's label. A team's templates are rendered and read as above. An original Shaberi clone's
evaluators build the requests and read the replies themselves (``judging.original``: its conversation, its
request fields, its fallback call, its ``round()``); Shaberi's own reading of the same replies is stored beside
the score (``shaberi_score``), and a reply the original read no score from is final (its calls were made).
"""

from __future__ import annotations

import asyncio
import functools
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from .. import batch_journal
from .. import benchmarks as bm
from ..errors import BudgetSpent, LLMError, PromptSetFailed
from ..extract import AS_PUBLISHED_MARK, Extraction, extract
from ..lineage import call_failed, conversation_hash, earlier_turns
from ..llm.client import ChatClient, Completion
from ..llm.dispatch import Dispatcher
from ..llm.params import Sampling
from ..prompts import judge_fallback, judge_messages, unrenderable
from ..tables import typed
from ..tables.rows import ANSWER_COLUMNS, AnswerKey, RunRecord, judgement
from ..tables.schema import TABLES
from ..tables.store import Journal, Store
from ..tables.typed import AnswerRow, JudgementRow, QuestionKey, QuestionRow, Questions, Texts
from . import exchange
from .exchange import AWAITING, Exchange
from .original import MAX_CALLS, Ask, Clone, Verdict
from .promptsets import SHABERI, PromptSet

__all__ = ["ANSWER_ERROR", "Judge", "JudgeConfig", "JudgeProgress", "judge", "pending", "rejudge_since", "reprocess"]

ANSWER_ERROR = "answer_error"
_Verdict = Exchange[Extraction]
# a stored judgement's identity -> (ask it again, kept by a resumed rejudge, the replies its fallback awaits)
_Existing = dict[tuple[AnswerKey, str, str, str], tuple[bool, bool, tuple[Completion, ...]]]


@dataclass(frozen=True)
class Judge:
    """A judge model and the client of the endpoint that serves it (shared with any stage on that endpoint)."""

    name: str
    client: ChatClient


@dataclass(frozen=True)
class JudgeConfig(Sampling):
    """The judges' request parameters: deterministic by default, a judge's reply is short."""

    temperature: float | None = 0.0
    max_tokens: int = 1024


@dataclass
class JudgeProgress:
    total: int = 0
    done: int = 0
    reused: int = 0
    judged: int = 0  # judgements that needed a call this session
    tokens: int = 0  # prompt + completion tokens of those calls
    failed: int = 0  # of which the judge call itself failed (after retries)
    failures: Counter[str] = field(default_factory=Counter)  # why, by error
    answer_errors: int = 0  # error answers: recorded for each judge, never sent
    fallbacks: int = 0
    null_scores: int = 0
    by_judge: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class _Item:
    answer: AnswerRow
    judge: Judge
    label: str  # the judge's name in the tables (qualified by the prompt set's label)
    messages: list[dict[str, str]]
    prompt_hash: str
    answer_hash: str
    shown: str  # every candidate text the judge sees (earlier turns too): what it may copy a verdict from
    prompts: PromptSet = SHABERI
    row: dict[str, Any] | None = None  # an original clone's answer-file row: its evaluator reads the replies
    paid: tuple[Completion, ...] = ()  # the replies a run that stopped before the judgement's end journaled


async def judge(
    store: Store,
    run_id: str,
    judges: list[Judge],
    config: JudgeConfig = JudgeConfig(),
    *,
    rejudge: bool = False,
    benchmarks: list[str] | None = None,
    questions: set[tuple[str, str]] | None = None,
    progress: JudgeProgress | None = None,
    rejudged_since: int | None = None,
    prompts: PromptSet = SHABERI,
) -> JudgeProgress:
    """Judge the run's answers with every judge; returns the counters. ``benchmarks`` and ``questions``
    ((benchmark, question_id) pairs), when given, limit which answers. ``rejudged_since`` (µs): a ``rejudge``
    resuming one that was killed keeps what that one judged from then on instead of paying for it again.
    ``prompts``: the prompt set (checked by the caller before anything is written: ``PromptSet.check``)."""
    progress = progress or JudgeProgress()
    rows, answers, texts, existing = _stored(store, run_id, benchmarks, questions, rejudged_since)
    progress.total += len(answers) * len(judges)
    journal = store.journal(run_id)
    try:
        record = functools.partial(_record, journal, run_id, progress)
        call = functools.partial(_call, config, functools.partial(_awaiting, journal, run_id))
        plan = functools.partial(_plan, run_id=run_id, answers=answers, questions=rows, texts=texts,
                                 existing=existing, rejudge=rejudge, journal=journal, progress=progress,
                                 prompts=prompts)
        clients = list(dict.fromkeys(j.client for j in judges))  # one dispatcher per endpoint and its controller
        transports = batch_journal.bind(clients, store, journal, run_id, "judging")
        ended = await asyncio.gather(*(  # every endpoint's calls land before a stop or a failure is raised
            Dispatcher(plan([j for j in judges if j.client is c]), call, record, c.max_in_flight).run()
            for c in clients
        ), return_exceptions=True)
        if failed := next((e for e in ended if isinstance(e, BaseException) and not isinstance(e, BudgetSpent)),
                          None):
            raise failed
        stopped = next((e for e in ended if isinstance(e, BudgetSpent)), None)
        batch_journal.collected(journal, run_id, transports, "judging", finished=stopped is None)
        if stopped is not None:
            raise stopped
    finally:
        journal.close()
    store.compact("judgements", run_id)
    store.compact("token_usage", run_id)
    return progress


def rejudge_since(run: RunRecord) -> int | None:
    """When a ``--rejudge`` that did not finish started (µs): killed, stopped by Ctrl-C or by its spending limit.
    What it judged is kept, not paid for again; the next ``--rejudge`` goes on with the rest."""
    last = run.stages.get("judge", {})
    unfinished = last.get("status") in ("running", "interrupted") or "stopped" in last
    return last.get("started_at") if unfinished and last.get("rejudge") else None


def _stored(store: Store, run_id: str, benchmarks: list[str] | None, questions: set[tuple[str, str]] | None,
            rejudged_since: int | None) -> tuple[dict[QuestionKey, QuestionRow], list[AnswerRow], Texts, _Existing]:
    """The run's questions, the answers to judge, their texts, and every stored judgement identity (history
    included) -> (is it unfinished, does a resumed rejudge keep it)."""
    rows = typed.questions(store.read("questions", run_id))
    answers = typed.rows(store.read("answers", run_id, [*ANSWER_COLUMNS, "content", "raw_content", "error",
                                                        "answer_hash"]), AnswerRow)
    texts = {AnswerKey.of(a): a["content"] for a in answers}
    judged = store.read("judgements", run_id, [*ANSWER_COLUMNS, "judge", "prompt_hash", "answer_hash", "error",
                                               "fallback_output", "prompt_set", "created_at"])
    awaiting = [i for i, e in enumerate(judged.column("error").to_pylist()) if e == AWAITING]
    replies = dict(zip(awaiting, typed.rows(store.read("judgements", run_id, [
        "judge_output", "finish_reason", "fallback_output", "fallback_finish_reason", "prompt_tokens",
        "completion_tokens", "batch_id"]).take(awaiting), JudgementRow), strict=True)) if awaiting else {}
    existing = {  # (the replies a fallback awaits: only theirs are read, the texts are long)
        (AnswerKey.of(r), r["judge"], r["prompt_hash"], r["answer_hash"]): (
            _unfinished(r), rejudged_since is not None and r["created_at"].timestamp() * 1e6 >= rejudged_since,
            exchange.stored(replies[i]) if i in replies else ())
        for i, r in enumerate(typed.rows(judged, JudgementRow))
    }
    # An answer whose benchmark or question this version does not know has nothing to be judged against.
    answers = [a for a in answers
               if (a["benchmark"], a["question_id"]) in rows and a["benchmark"] in bm.BENCHMARKS
               and (benchmarks is None or a["benchmark"] in benchmarks)
               and (questions is None or (a["benchmark"], a["question_id"]) in questions)]
    return rows, answers, texts, existing


def _hashes(answer: AnswerRow, questions: Questions, texts: Texts, prompts: PromptSet
            ) -> tuple[list[dict[str, str]], str, str]:
    """The earlier turns the judge sees, the judging prompt's hash and the judged text's hash."""
    history = earlier_turns(questions[(answer["benchmark"], answer["question_id"])], answer, questions, texts)
    a_hash = answer["answer_hash"] or conversation_hash([h["assistant"] for h in history], answer["content"])
    return history, prompts.prompt_hash(answer["benchmark"]), a_hash


def _decide(answer: AnswerRow, judge_name: str, prompt_hash: str, a_hash: str, existing: _Existing,
            rejudge: bool) -> str:
    """What the stage does with one answer and judge: ``reused`` (a finished judgement of this text with this
    prompt is stored), ``answer_error`` (an errored answer: never sent; ``answer_error_recorded`` when a resume
    finds it recorded already: not a reused judgement) or ``call``."""
    old = existing.get((AnswerKey.of(answer), judge_name, prompt_hash, a_hash))
    if answer["error"] is not None:
        return "answer_error" if old is None else "answer_error_recorded"
    if old is not None and (not rejudge or old[1]) and not old[0]:
        return "reused"
    return "call"


def pending(store: Store, run_id: str, judges: list[str], *, rejudge: bool = False,
            benchmarks: list[str] | None = None, questions: set[tuple[str, str]] | None = None,
            rejudged_since: int | None = None, replaced: frozenset[AnswerKey] = frozenset(),
            prompts: PromptSet = SHABERI) -> dict[str, Counter]:
    """What ``judge`` would do now, per judge, without a call or a write (``--dry-run``): the counts of
    ``_decide``'s outcomes over the stored answers. ``replaced``: answers the generate stage asks for again
    first; they are left out here (each is a new text: a call)."""
    rows, answers, texts, existing = _stored(store, run_id, benchmarks, questions, rejudged_since)
    out = {j: Counter[str]() for j in judges}
    for answer in answers:
        if AnswerKey.of(answer) in replaced:
            continue
        _, prompt_hash, a_hash = _hashes(answer, rows, texts, prompts)
        for j in judges:
            out[j][_decide(answer, prompts.judge(j), prompt_hash, a_hash, existing, rejudge)] += 1
    return out


def _plan(judges: list[Judge], *, run_id: str, answers: list[AnswerRow], questions: Questions, texts: Texts,
          existing: _Existing,
          rejudge: bool, journal: Journal, progress: JudgeProgress, prompts: PromptSet) -> Iterator[_Item]:
    """Yield the judge calls still needed, lazily; reused judgements and answer errors are handled here."""
    for answer in answers:
        name = answer["benchmark"]
        question = questions[(name, answer["question_id"])]
        history, prompt_hash, a_hash = _hashes(answer, questions, texts, prompts)
        for j in judges:
            label = prompts.judge(j.name)
            decided = _decide(answer, label, prompt_hash, a_hash, existing, rejudge)
            old = existing.get((AnswerKey.of(answer), label, prompt_hash, a_hash))
            paid = old[2] if old and (not rejudge or old[1]) else ()  # paid for: only what follows them is asked
            if decided == "reused":
                progress.done += 1
                progress.reused += 1
                continue
            if decided.startswith("answer_error"):  # never sent to a judge; counted, not averaged as zero
                if decided == "answer_error":
                    journal.append("judgements", _row(run_id, answer, label, prompt_hash, a_hash, error=ANSWER_ERROR,
                                                      prompt_set=prompts.label))
                progress.done += 1
                progress.answer_errors += 1
                continue
            if prompts.clone is not None:  # the original inserts the reply as the endpoint returned it
                text = answer["raw_content"] if answer["raw_content"] is not None else answer["content"]
                row = prompts.clone.row(name, question, text or "")  # (an answer's content is never null)
                first = prompts.clone.read(name, row, j.name, [])
                if isinstance(first, Verdict):  # its prompt functions fail on this answer: nothing to send
                    journal.append("judgements", _row(run_id, answer, label, prompt_hash, a_hash,
                                                      prompt_set=prompts.label, error=f"prompt_error: {first.error}"))
                    progress.done += 1
                    progress.null_scores += 1
                    continue
                yield _Item(answer, j, label, first.messages, prompt_hash, a_hash, row["ModelAnswer"], prompts, row,
                            paid)
                continue
            try:
                messages = judge_messages(name, question, answer["content"] or "", bm.BENCHMARKS[name].scale, history,
                                          prompts.folder)
            except unrenderable as exc:  # this answer takes the template past a bound (checked before, w/o it)
                journal.append("judgements", _row(run_id, answer, label, prompt_hash, a_hash, prompt_set=prompts.label,
                                                  error=f"prompt_error: judging/{name}/primary.jinja: {exc}"[:2000]))
                progress.done += 1
                progress.null_scores += 1
                continue
            shown = "\n".join([*(h["assistant"] or "" for h in history), answer["content"] or ""])
            yield _Item(answer, j, label, messages, prompt_hash, a_hash, shown, prompts, None, paid[:1])


def _unfinished(row: JudgementRow) -> bool:
    """A judgement to ask again: its call failed, or ``reprocess`` found no score in a reply whose fallback
    was never asked (the rules of its day read one). The original's reading is final: it made its calls."""
    return call_failed(row["error"]) or (
        (row["error"] or "").startswith("unparseable") and row["fallback_output"] is None
        and not (row.get("prompt_set") or "").startswith("original:"))


Awaiting = Callable[["_Item", Sequence[Completion], int], None]  # _awaiting, bound to the run's journal


async def _call(config: JudgeConfig, awaiting: Awaiting, item: _Item) -> _Verdict:
    """The primary call, and the fallback call when the reply has no readable score (the reply journaled first:
    ``awaiting``)."""
    spec = bm.BENCHMARKS[item.answer["benchmark"]]
    if item.row is not None:
        assert item.prompts.clone is not None
        return await _call_original(item.prompts.clone, item, spec, awaiting)
    return await exchange.ask(
        lambda messages: item.judge.client.chat(item.judge.name, messages, config), item.messages,
        lambda reply: extract(reply.content, spec.scale, spec.rules, item.shown, reply.finish_reason == "length"),
        judge_fallback(spec.name, spec.scale, item.prompts.folder),
        lambda found, fallback: _with_fallback(found, fallback.content, spec, fallback.finish_reason),
        lambda reply: awaiting(item, [reply], 0), item.paid[0] if item.paid else None)


async def _call_original(clone: Clone, item: _Item, spec: bm.Benchmark, awaiting: Awaiting) -> _Verdict:
    """The original's evaluator drives the calls: each reply is replayed into it until it returns its score; a
    reply it asks a further call after is journaled first (``awaiting``)."""
    request = clone.request(item.judge.name)
    replies = list(item.paid)
    journaled = len(replies)
    step: Ask | Verdict = Ask(item.messages)
    if replies:
        step = clone.read(spec.name, item.row or {}, item.judge.name, [r.content for r in replies])
    while isinstance(step, Ask) and len(replies) < MAX_CALLS:
        if journaled < len(replies):  # a paid reply that a further call follows is kept first
            awaiting(item, replies, journaled)
            journaled = len(replies)
        try:
            reply = await item.judge.client.chat(item.judge.name, step.messages, request)
        except LLMError as exc:
            if not replies:
                raise
            return _original_verdict(replies, None, exc, item, spec)
        replies.append(reply)
        try:
            step = clone.read(spec.name, item.row or {}, item.judge.name, [r.content for r in replies])
        except PromptSetFailed:  # the clone's process failed on a paid reply: kept, read on resume
            if journaled < len(replies):
                awaiting(item, replies, journaled)
            raise
    return _original_verdict(replies, step, None, item, spec)


def _original_verdict(replies: list[Completion], step: Ask | Verdict | None, failed: LLMError | None, item: _Item,
                      spec: bm.Benchmark) -> _Verdict:
    """The original's score, checked against the scale (off it: no score, the value kept as published), with
    Shaberi's reading of the same replies beside it."""
    primary, fallback = replies[0], replies[1] if len(replies) > 1 else None
    counted = original_extraction(step, len(replies), spec)
    own = extract(primary.content, spec.scale, spec.rules, item.shown, primary.finish_reason == "length")
    if not own.ok and fallback is not None:
        own = _with_fallback(own, fallback.content, spec, fallback.finish_reason)
    return _Verdict(primary, counted, fallback, failed, own)


def original_extraction(step: Ask | Verdict | None, calls: int, spec: bm.Benchmark) -> Extraction:
    """An original evaluator's outcome as an ``Extraction``: ``original`` (``original:fallback`` when it needed
    its fallback call); a score off the benchmark's scale is no score (its value ends the reason, as a legacy
    import's does: ``leaderboard --as-published`` counts it)."""

    if step is None:
        return Extraction(None, None, "the original's fallback call failed")
    if isinstance(step, Ask):
        return Extraction(None, None, f"the original's evaluator asked for more than {MAX_CALLS} calls")
    if step.score is None:
        return Extraction(None, None, step.error or "the original read no score")
    low, high = spec.scale
    if not low <= step.score <= high:
        shown = f"{step.score:g}"
        return Extraction(None, None, f"the original read {shown}, outside the {low}–{high} scale"
                                      f"{AS_PUBLISHED_MARK}{shown}")
    return Extraction(step.score, "original" if calls == 1 else "original:fallback", None)


def _with_fallback(first: Extraction, fallback_reply: str | None, spec: bm.Benchmark,
                   finish_reason: str | None = None) -> Extraction:
    # Asked for the score alone, a reply that is only the number is a verdict on every benchmark.
    rules = (*spec.rules, "bare_number") if "bare_number" not in spec.rules else spec.rules
    second = extract(fallback_reply, spec.scale, rules, cut_off=finish_reason == "length")
    if second.ok:
        return Extraction(second.score, f"fallback:{second.method}", None)
    return Extraction(None, None, f"reply: {first.reason}; fallback: {second.reason}")


def _awaiting(journal: Journal, run_id: str, item: _Item, replies: Sequence[Completion], journaled: int) -> None:
    """Journal the paid replies of a judgement not finished yet (the first before its fallback call; both when the
    clone's process fails on the second), with the tokens of those not journaled before: a kill or a failure
    meanwhile loses nothing paid, and the next run asks only what follows them (``_stored`` reads them back)."""
    fields, new = exchange.awaiting(replies, journaled)
    row = _row(run_id, item.answer, item.label, item.prompt_hash, item.answer_hash, prompt_set=item.prompts.label,
               **fields, **batch_journal.via(replies[0]))
    journal.append_many([("judgements", row),
                         ("token_usage", new.usage(run_id, "judging", item.answer["benchmark"], item.judge.name))])


def _row(run_id: str, answer: AnswerRow, judge_name: str, prompt_hash: str, a_hash: str, **values: object
         ) -> dict[str, Any]:
    return judgement(run_id, AnswerKey.of(answer), judge_name, bm.BENCHMARKS[answer["benchmark"]].scale, prompt_hash,
                     a_hash, **values)


def _record(journal: Journal, run_id: str, progress: JudgeProgress, item: _Item, verdict: _Verdict | None,
            exc: LLMError | None) -> None:
    """Journal one judgement (its tokens: primary and fallback calls together) and the token usage of the calls
    not journaled yet."""
    if verdict is None:
        assert exc is not None
        fields, new = exchange.failed(exc)
        progress.failed += 1
        progress.failures[f"{exc.error_type}: {str(exc)[:120]}"] += 1
    else:
        fields, new = exchange.settled(verdict, len(item.paid))
        fields.update(score=verdict.found.score, shaberi_score=verdict.own.score if verdict.own else None,
                      parse_method=verdict.found.method, **batch_journal.via(verdict.reply))
        progress.fallbacks += verdict.followed
        if verdict.fallback_error is not None:  # the judgement has no score because a call failed
            progress.failed += 1
            progress.failures[f"fallback {verdict.fallback_error.error_type}: {str(verdict.fallback_error)[:100]}"] += 1
    row = _row(run_id, item.answer, item.label, item.prompt_hash, item.answer_hash, prompt_set=item.prompts.label,
               **fields)
    journal.append_many([("judgements", row),
                         ("token_usage", new.usage(run_id, "judging", item.answer["benchmark"], item.judge.name))])
    progress.done += 1
    progress.judged += 1
    progress.tokens += (row.get("prompt_tokens") or 0) + (row.get("completion_tokens") or 0)
    progress.null_scores += row.get("score") is None
    progress.by_judge[item.label] = progress.by_judge.get(item.label, 0) + 1


def reprocess(store: Store, run_id: str, prompts: PromptSet = SHABERI) -> int:
    """Re-parse every stored judge reply of the run with the current rules; no API call. Returns rows changed.
    A judgement under an original clone's prompts is re-read by that clone (``prompts``), replaying its replies;
    without it, it is left as it is."""
    rows = store.read("judgements", run_id).to_pylist()
    current = {AnswerKey.of(a): a for a in store.read(
        "answers", run_id, [*ANSWER_COLUMNS, "answer_hash", "content", "raw_content"]).to_pylist()}
    questions = {(q["benchmark"], q["question_id"]): q for q in store.read("questions", run_id).to_pylist()}
    changed = 0
    for row in rows:
        spec = bm.BENCHMARKS.get(row["benchmark"])
        if spec is None or row["judge_output"] is None:
            continue  # answer errors and failed judge calls hold no reply to re-read
        answer = current.get(AnswerKey.of(row))
        judged = answer["content"] if answer and answer["answer_hash"] in (None, row["answer_hash"]) else None
        own = None
        if (row["prompt_set"] or "").startswith("original:"):
            question = questions.get((row["benchmark"], row["question_id"]))
            if prompts.clone is None or row["prompt_set"] != prompts.label or judged is None or question is None:
                continue  # read only by the clone that made it, on the text it judged
            assert answer is not None
            replies = [r for r in (row["judge_output"], row["fallback_output"]) if r is not None]
            text = answer["raw_content"] if answer["raw_content"] is not None else judged
            step = prompts.clone.read(spec.name, prompts.clone.row(spec.name, question, text), row["judge"], replies)
            if isinstance(step, Ask) and len(replies) < MAX_CALLS:
                continue  # its fallback call failed: the next run asks it, not this
            found = original_extraction(step, len(replies), spec)
            own = extract(row["judge_output"], spec.scale, spec.rules, judged, row["finish_reason"] == "length")
            if not own.ok and row["fallback_output"] is not None:
                own = _with_fallback(own, row["fallback_output"], spec, row["fallback_finish_reason"])
        else:
            found = extract(row["judge_output"], spec.scale, spec.rules, judged, row["finish_reason"] == "length")
            if not found.ok and row["fallback_output"] is not None:
                found = _with_fallback(found, row["fallback_output"], spec, row["fallback_finish_reason"])
        error = None if found.ok else (
            row["error"] if call_failed(row["error"]) else f"unparseable: {found.reason}")
        new = (found.score, found.method, error, own.score if own else row["shaberi_score"])
        if new != (row["score"], row["parse_method"], row["error"], row["shaberi_score"]):
            row["score"], row["parse_method"], row["error"], row["shaberi_score"] = new
            changed += 1
    if changed:
        store.replace("judgements", run_id, pa.Table.from_pylist(rows, schema=TABLES["judgements"].schema))
    return changed
