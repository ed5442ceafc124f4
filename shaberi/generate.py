"""Generation stage: answer every question, resumably, streaming rows to the run's tables.

Resume rule: a planned request is identified by ``request_hash`` = sha256(endpoint, the exact JSON body —
model, messages, parameters — and the sample index). The endpoint is the base URL, except for a model served
on a port picked for it (a sweep's ``serve`` command, the embedded local model): there it is what is served
(``RunRequest.served_as``), so that the same model on another port makes the same requests. An existing answer
row with the same key and hash is reused; a missing row, a row whose hash differs, or an error row that has
been called fewer than ``1 + retry_errors`` times is called again; ``rerun`` calls everything. Each finished
call is journaled at once (see ``store``), with its token usage, so a killed run loses only what was in flight.
An answer row carries the hash of the text a judge will see (``lineage``); an error row has none.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import re
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from . import batch_journal, errors
from .benchmarks import Dataset, Question
from .extract import THINK_TAGS
from .lineage import conversation_hash
from .llm.client import ChatClient, Completion, encode
from .llm.dispatch import Dispatcher
from .llm.params import Sampling
from .prompts import generation_messages
from .tables import rows
from .tables.schema import TABLES
from .tables.store import Journal, Store, now_us

__all__ = ["GenerationConfig", "Progress", "existing_answers", "generate", "plan_calls", "split_reasoning",
           "write_questions"]

_BLOCK = re.compile(rf"<({THINK_TAGS})>(.*?)</\1>", re.S | re.I)
_CLOSE = re.compile(rf"</({THINK_TAGS})>", re.I)
_OPEN = re.compile(rf"<({THINK_TAGS})>", re.I)


def split_reasoning(content: str | None, reasoning: str | None = None) -> tuple[str | None, str | None]:
    """Separate ``<think>…</think>``-style reasoning from the answer the judge should see.

    Also handles a closing tag with no opening one (chat templates that put ``<think>`` in the prompt)
    and an opening tag never closed (cut off by max_tokens: everything after it is reasoning).
    """
    if content is None or "<" not in content:
        return content, reasoning or None
    found = [reasoning] if reasoning else []

    def grab(m: re.Match[str]) -> str:
        found.append(m.group(2).strip())
        return ""

    text = _BLOCK.sub(grab, content)
    if m := _CLOSE.search(text):
        found.append(text[: m.start()].strip())
        text = text[m.end() :]
    if m := _OPEN.search(text):
        found.append(text[m.end() :].strip())
        text = text[: m.start()]
    if len(found) == (1 if reasoning else 0):
        return content, reasoning or None
    return text.strip(), "\n\n".join(f for f in found if f) or None


@dataclass(frozen=True)
class GenerationConfig(Sampling):
    """The candidate's request parameters (``Sampling``) and how many answers per question."""

    frequency_penalty: float | None = None
    seed: int | None = None
    samples: int = 1  # answers per question (sample_index 0..samples-1)

    def more(self, sample_index: int) -> dict[str, object]:
        """What a candidate's request sends besides ``Sampling``'s: a seed per sample."""
        return {"frequency_penalty": self.frequency_penalty,
                "seed": None if self.seed is None else self.seed + sample_index}


@dataclass
class BenchmarkProgress:
    total: int
    done: int = 0
    cached: int = 0
    errors: int = 0
    tokens: int = 0


@dataclass
class Progress:
    """Counters the CLI renders; plain ints so the hot path stays cheap."""

    benchmarks: dict[str, BenchmarkProgress] = field(default_factory=dict)
    calls: int = 0
    failed: int = 0  # calls that failed for good this session
    failures: Counter[str] = field(default_factory=Counter)  # why, by error


@dataclass
class _Work:
    question: Question
    sample_index: int
    messages: list[dict[str, Any]]
    request_hash: str
    calls: int  # this row's call count once this call is made
    attempts_before: int
    earlier: list[str]  # the model's answers to the earlier turns of this conversation


def plan_calls(
    questions: Iterable[Question], model: str, endpoint: str, config: GenerationConfig,
    existing: dict[rows.AnswerKey, tuple], rerun: bool, retry_errors: int, progress: Progress,
    earlier: Callable[[Question, int], list[str] | None] = lambda q, s: [], by_key: bool = False,
) -> Iterator[_Work]:
    """Yield the calls still needed, lazily, counting reused rows as it goes. ``endpoint``: the base URL, or what
    is served there (see the resume rule). ``by_key``: a stored row is the answer to its (question, sample)
    whatever request made it (an ensemble cache's identity)."""
    for q in questions:
        stats = progress.benchmarks[q.benchmark]
        for s in range(config.samples):
            history = earlier(q, s)
            if history is None:
                continue  # an earlier turn failed: recorded as an error row by _next_turns
            messages = generation_messages(q, history)
            body = encode(model, messages, config, **config.more(s))
            digest = hashlib.sha256(b"%s\n%s\n%d" % (endpoint.encode(), body, s)).hexdigest()[:32]
            old = existing.get(rows.AnswerKey(q.benchmark, q.question_id, s))
            calls, attempts = 1, 0
            if old is not None and (old[0] == digest or by_key) and not rerun:
                _, error, old_calls, old_attempts = old
                if error is None or old_calls >= 1 + retry_errors:
                    stats.done += 1
                    stats.cached += error is None
                    stats.errors += error is not None
                    continue
                calls, attempts = old_calls + 1, old_attempts
            yield _Work(q, s, messages, digest, calls, attempts, history)


async def generate(
    store: Store,
    run_id: str,
    model: str,
    datasets: list[Dataset],
    client: ChatClient,
    config: GenerationConfig,
    *,
    rerun: bool = False,
    retry_errors: int = 2,
    progress: Progress | None = None,
    batch_rows: int = 4000,
    by_key: bool = False,
    served_as: str | None = None,
) -> Progress:
    """Answer what is missing; return the counters (also updated live in ``progress``). ``served_as``: what is
    served at the client's base URL on a port picked for it (``RunRequest.served_as``).

    Later turns of a conversation (questions with ``extra.previous``) go in a second phase, once the
    turns they continue have answers: the model's own earlier answers are part of their request.
    """
    progress = progress or Progress()
    for ds in datasets:
        progress.benchmarks[ds.benchmark] = BenchmarkProgress(total=len(ds.questions) * config.samples)
    existing = existing_answers(store, run_id)
    questions = [q for ds in datasets for q in ds.questions]
    first = [q for q in questions if "previous" not in q.extra]
    later = [q for q in questions if "previous" in q.extra]
    journal = store.journal(run_id, batch_rows=batch_rows)
    try:
        transports = batch_journal.bind([client], store, journal, run_id, "generation")
        stop = asyncio.Event()
        ticker = asyncio.create_task(_flush_when_due(journal, stop))
        record = functools.partial(_record, journal, run_id, model, progress)
        plan = functools.partial(plan_calls, model=model, endpoint=served_as or client.base_url, config=config,
                                 existing=existing,
                                 rerun=rerun, retry_errors=retry_errors, progress=progress, by_key=by_key)
        def ask(item: _Work) -> Awaitable[Completion]:
            return client.chat(model, item.messages, config, **config.more(item.sample_index))

        try:
            await Dispatcher(plan(first), ask, record, client.max_in_flight).run()
            previous = {(q.benchmark, q.question_id): q.extra["previous"] for q in later}
            while later:  # one phase per turn depth
                journal.flush()
                earlier = _earlier_answers(_contents(store, run_id), previous)
                now, later = _next_turns(later, earlier, journal, run_id, model, progress, config.samples)
                await Dispatcher(plan(now, earlier=earlier), ask, record, client.max_in_flight).run()
        except errors.BudgetSpent:
            batch_journal.collected(journal, run_id, transports, "generation", finished=False)
            raise
        else:
            batch_journal.collected(journal, run_id, transports, "generation")
        finally:
            stop.set()
            await ticker
    finally:
        journal.close()
    if existing or len(store.parts("answers", run_id)) > 16:
        store.compact("answers", run_id)  # drop rows superseded by this session's calls
    store.compact("token_usage", run_id)
    return progress


def existing_answers(store: Store, run_id: str) -> dict[rows.AnswerKey, tuple]:
    """The model's stored answers: (request_hash, error, calls, attempts) by key."""
    stored = store.read("answers", run_id, [*rows.ANSWER_COLUMNS, "request_hash", "error", "calls", "attempts"])
    return {rows.AnswerKey.of(r): (r["request_hash"], r["error"], r["calls"] or 1, r["attempts"] or 0)
            for r in stored.to_pylist() if not r["strategy"]}


def _contents(store: Store, run_id: str) -> dict[rows.AnswerKey, str | None]:
    """The model's stored answer texts by key, None for an error answer."""
    stored = store.read("answers", run_id, [*rows.ANSWER_COLUMNS, "content", "error"])
    return {rows.AnswerKey.of(r): None if r["error"] else r["content"] for r in stored.to_pylist() if not r["strategy"]}


def _earlier_answers(contents: Mapping[rows.AnswerKey, str | None], previous: dict[tuple[str, str], str]
                     ) -> Callable[[Question, int], list[str] | None]:
    """For a later turn: the model's answers to the turns before it, oldest first; None if one failed."""

    def earlier(q: Question, sample: int) -> list[str] | None:
        chain, key = [], previous.get((q.benchmark, q.question_id))
        while key is not None:
            text = contents.get(rows.AnswerKey(q.benchmark, key, sample))
            if text is None:
                return None
            chain.append(text)
            key = previous.get((q.benchmark, key))
        return chain[::-1]

    return earlier


def _next_turns(later: list[Question], earlier: Callable[[Question, int], list[str] | None], journal: Journal,
                run_id: str, model: str, progress: Progress, samples: int) -> tuple[list[Question], list[Question]]:
    """Split later turns into those to plan now (their previous turn is no longer pending) and those whose
    previous turn is itself still to be generated. A failed previous turn gives an error row, no call;
    the next run retries both."""
    pending = {(q.benchmark, q.question_id) for q in later}
    now, wait = [], []
    for q in later:
        if (q.benchmark, q.extra["previous"]) in pending:
            wait.append(q)
            continue
        now.append(q)
        for s in range(samples):
            if earlier(q, s) is None:
                journal.append("answers", rows.answer(
                    run_id, rows.AnswerKey(q.benchmark, q.question_id, s), model,
                    error=f"turn {q.extra['previous']} has no answer", error_type="dependency", attempts=0, calls=0))
                progress.benchmarks[q.benchmark].done += 1
                progress.benchmarks[q.benchmark].errors += 1
    return now, wait


async def _flush_when_due(journal: Journal, stop: asyncio.Event) -> None:
    while not stop.is_set():
        if journal.due():
            journal.flush()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.5)


def _record(journal: Journal, run_id: str, model: str, progress: Progress, item: _Work, done: Completion | None,
            exc: errors.LLMError | None) -> None:
    """Journal one finished call (answer row and its token usage, in one write) and count it."""
    q = item.question
    key = rows.AnswerKey(q.benchmark, q.question_id, item.sample_index)
    if done is None:
        assert exc is not None
        row = rows.answer(run_id, key, model, request_hash=item.request_hash, calls=item.calls, error=str(exc)[:2000],
                          error_type=exc.error_type, attempts=item.attempts_before + exc.attempts)
        usage = rows.token_usage(run_id, "generation", q.benchmark, model, requests=exc.attempts)
        progress.failed += 1
        progress.failures[f"{exc.error_type}: {str(exc)[:120]}"] += 1
        tokens = 0
    else:
        content, reasoning = split_reasoning(done.content, done.reasoning)
        row = rows.answer(run_id, key, model, request_hash=item.request_hash, calls=item.calls, content=content or "",
                          raw_content=done.content if content != done.content else None,
                          answer_hash=conversation_hash(item.earlier, content), reasoning=reasoning,
                          finish_reason=done.finish_reason, attempts=item.attempts_before + done.attempts,
                          latency_ms=done.latency_ms, prompt_tokens=done.prompt_tokens,
                          completion_tokens=done.completion_tokens, reasoning_tokens=done.reasoning_tokens,
                          cached_prompt_tokens=done.cached_tokens, **batch_journal.via(done))
        usage = rows.token_usage(run_id, "generation", q.benchmark, model, requests=done.attempts,
                                 prompt_tokens=done.prompt_tokens, completion_tokens=done.completion_tokens,
                                 reasoning_tokens=done.reasoning_tokens, cached_prompt_tokens=done.cached_tokens,
                                 batch=done.batch_id is not None)
        tokens = done.prompt_tokens + done.completion_tokens
    journal.append_many([("answers", row), ("token_usage", usage)])
    stats = progress.benchmarks[q.benchmark]
    stats.done += 1
    stats.errors += done is None
    stats.tokens += tokens
    progress.calls += 1


def write_questions(store: Store, run_id: str, datasets: list[Dataset]) -> None:
    """The run's questions: this invocation's written as loaded, every other one kept — a run re-run with
    ``--limit`` never loses the questions its answers belong to (built column-wise: fast)."""
    qs = [q for d in datasets for q in d.questions]
    old = store.read("questions", run_id)
    fresh = pa.array(sorted(f"{q.benchmark}\0{q.question_id}" for q in qs))
    keys = pc.binary_join_element_wise(old["benchmark"], old["question_id"], "\0")
    kept = old.filter(pc.invert(pc.is_in(keys, fresh)))
    new = pa.table(
        {
            "run_id": [run_id] * len(qs),
            "benchmark": [q.benchmark for q in qs],
            "question_id": [q.question_id for q in qs],
            "turns": [q.turns for q in qs],
            "reference": [q.reference for q in qs],
            "criteria": [q.criteria for q in qs],
            "category": [q.category for q in qs],
            "extra": [orjson.dumps(q.extra).decode() if q.extra else None for q in qs],
            "created_at": [now_us()] * len(qs),
        },
        schema=TABLES["questions"].schema,
    )
    store.replace("questions", run_id, pa.concat_tables([kept, new]))
