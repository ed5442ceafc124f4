"""quick-eval: strategies over a seeded sample of cached questions, graded, paired with the baseline.

Per dataset: the cache entry of the model (zero generation calls), a seeded sample of its questions
(``random.Random(f"{seed}:{dataset}")`` over the sorted question ids; a sample larger than the dataset
is all of it), every member answer graded, each strategy's consensus answer for every sampled question,
graded too. The single-model baseline is sample 0 of the same entry, or of a separate entry
(``baseline``: e.g. a temperature-0 run cached the same way). Consensus answers and grades are stored
in the entry's tables (``answers`` rows with ``strategy`` set, ``judgements`` rows), keyed by what
they depend on, so evaluating again with another seed or sample size only computes what is new.
The outcome is a plain ``Result`` (saved as JSON by the CLI) that ``gate`` and ``report`` read.
"""

from __future__ import annotations

import hashlib
import random
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

import orjson

from ..benchmarks import Question
from ..client import LLM
from ..dispatch import Dispatcher
from ..errors import LLMError, UsageError
from ..lineage import answer_hash
from ..prompts import template_hash
from ..store import Journal, Store, now_us
from . import cache
from .gate import Comparison, compare
from .graders import GRADERS
from .graders import llm as llm_grader
from .strategies import STRATEGIES, Context, Strategy

__all__ = ["Result", "attempted_lines", "comparisons", "given_attempted", "quick_eval", "sample_ids"]


@dataclass
class StrategyOutcome:
    correct: list[int]
    attempted: list[int]
    reused: int = 0
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass
class DatasetOutcome:
    cache: str  # run id of the cache entry
    n_members: int
    question_ids: list[str]
    baseline: list[int]
    baseline_attempted: list[int]
    samples_mean: list[float]
    strategies: dict[str, StrategyOutcome] = field(default_factory=dict)
    member_accuracy: list[float] = field(default_factory=list)


@dataclass
class Result:
    model: str
    seed: int
    sample: int
    strategies: list[str]
    datasets: dict[str, DatasetOutcome] = field(default_factory=dict)

    def to_json(self) -> bytes:
        return orjson.dumps(asdict(self), option=orjson.OPT_INDENT_2)

    @classmethod
    def from_json(cls, data: bytes) -> Result:
        raw = orjson.loads(data)
        sets = {}
        for name, d in raw["datasets"].items():
            d["strategies"] = {s: StrategyOutcome(**o) for s, o in d["strategies"].items()}
            sets[name] = DatasetOutcome(**d)
        return cls(raw["model"], raw["seed"], raw["sample"], raw["strategies"], sets)


def given_attempted(correct: list[int], attempted: list[int]) -> tuple[int, float | None]:
    """(questions attempted, accuracy among them): SimpleQA's second number, for judge-graded datasets."""
    tried = sum(attempted)
    return tried, (sum(c for c, a in zip(correct, attempted, strict=True) if a) / tried if tried else None)


def attempted_lines(result: Result) -> list[str]:
    """One line per dataset where some answer was NOT_ATTEMPTED: attempted share and accuracy given attempted."""
    lines = []
    for name, d in result.datasets.items():
        series = {"baseline": (d.baseline, d.baseline_attempted)} | {
            s: (o.correct, o.attempted) for s, o in d.strategies.items()}
        if all(all(a) for _, a in series.values()):
            continue
        parts = []
        for label, (correct, attempted) in series.items():
            tried, accuracy = given_attempted(correct, attempted)
            parts.append(f"{label} attempted {tried}/{len(attempted)}, accuracy given attempted "
                         + ("-" if accuracy is None else f"{accuracy:.1%}"))
        lines.append(f"{name}: " + "; ".join(parts))
    return lines


def sample_ids(ids: list[str], sample: int, seed: int, dataset: str) -> list[str]:
    ordered = sorted(ids, key=lambda q: (len(q), q))  # natural order for numeric ids
    if sample >= len(ordered):
        return ordered
    return sorted(random.Random(f"{seed}:{dataset}").sample(ordered, sample), key=lambda q: (len(q), q))


def comparisons(result: Result) -> list[Comparison]:
    return [compare(name, s, d.baseline, o.correct, d.samples_mean)
            for name, d in result.datasets.items() for s, o in d.strategies.items()]


async def quick_eval(results_dir: Path, model: str, strategies: list[str], datasets: list[str], sample: int,
                     seed: int, *, n: int | None = None, temperature: float | None = None,
                     consensus: LLM | None = None, judge: LLM | None = None,
                     baseline: tuple[str, int | None, float | None] | None = None) -> Result:
    """``baseline``: (model, n, temperature) of a separate cache entry whose sample 0 is the baseline."""
    if sample < 1:
        raise UsageError("--sample must be at least 1")
    needs_model = [s for s in strategies if STRATEGIES[s].templates]
    if needs_model and consensus is None:
        raise UsageError(f"strategy {', '.join(needs_model)} calls a model: give --consensus-model MODEL[@BASE_URL]")
    store = Store(results_dir)
    result = Result(model, seed, sample, strategies)
    for name in datasets:
        entry = cache.find(results_dir, model, name, n, temperature)
        base = cache.find(results_dir, baseline[0], name, baseline[1], baseline[2]) if baseline else None
        with store.lock(entry.run_id, f"quick-eval of {model!r} on {name!r}"):
            result.datasets[name] = await _dataset(store, entry, base, strategies, sample, seed, consensus, judge)
    return result


class _Entry:
    """One cache entry's questions, member answers and stored grades and consensus answers."""

    def __init__(self, store: Store, run_id: str) -> None:
        self.run_id = run_id
        self.questions = {q["question_id"]: Question(q["benchmark"], q["question_id"], q["turns"], q["reference"],
                                                     q["criteria"], q["category"], orjson.loads(q["extra"] or "{}"))
                          for q in store.read("questions", run_id).to_pylist()}
        self.members: dict[str, dict[int, str | None]] = defaultdict(dict)
        self.consensus: dict[tuple[str, str], tuple[str | None, str | None]] = {}
        for a in store.read("answers", run_id, ["question_id", "sample_index", "strategy", "content", "error",
                                                "request_hash"]).to_pylist():
            if a["strategy"]:
                self.consensus[(a["question_id"], a["strategy"])] = (a["request_hash"], a["content"])
            else:
                self.members[a["question_id"]][a["sample_index"]] = None if a["error"] else a["content"]
        self.grades = {(j["question_id"], j["sample_index"], j["strategy"], j["judge"], j["answer_hash"],
                        j["prompt_hash"]): (j["score"], j["parse_method"])
                       for j in store.read("judgements", run_id, ["question_id", "sample_index", "strategy", "judge",
                                                                  "answer_hash", "prompt_hash", "score",
                                                                  "parse_method"]).to_pylist()}

    def responses(self, qid: str) -> list[str | None]:
        got = self.members.get(qid, {})
        return [got.get(i) for i in range(max(got) + 1)] if got else []


async def _dataset(store: Store, entry: cache.CacheEntry, base: cache.CacheEntry | None, strategies: list[str],
                   sample: int, seed: int, consensus: LLM | None, judge: LLM | None) -> DatasetOutcome:
    cached = _Entry(store, entry.run_id)
    ids = sample_ids([q for q in cached.questions if q in cached.members], sample, seed, entry.dataset)
    if not ids:
        raise UsageError(f"the cache {entry.run_id} holds no answers yet; run generate-cache again to fill it")
    grading = _Grading(cached, judge)
    journal = store.journal(entry.run_id)
    try:
        members = {qid: cached.responses(qid) for qid in ids}
        width = max((len(r) for r in members.values()), default=0)
        await grading.grade([(qid, i, "", r) for qid in ids for i, r in enumerate(members[qid])], journal)
        outcome = DatasetOutcome(entry.run_id, width, ids, [], [], [])
        if base is not None and base.run_id != entry.run_id:  # its grades go to its own partition
            base_entry = _Entry(store, base.run_id)
            base_grading = _Grading(base_entry, judge)
            with store.lock(base.run_id, f"quick-eval baseline {base.model!r}"):
                base_journal = store.journal(base.run_id)
                try:
                    await base_grading.grade([(qid, 0, "", (base_entry.responses(qid) or [None])[0])
                                              for qid in ids], base_journal)
                finally:
                    base_journal.close()
            base_grades = [base_grading.get(qid, 0, "") for qid in ids]
        else:
            base_grades = [grading.get(qid, 0, "") for qid in ids]
        outcome.baseline = [g[0] for g in base_grades]
        outcome.baseline_attempted = [g[1] for g in base_grades]
        per_member = [[grading.get(qid, i, "")[0] for qid in ids if i < len(members[qid])] for i in range(width)]
        outcome.member_accuracy = [sum(m) / len(m) if m else 0.0 for m in per_member]
        outcome.samples_mean = [sum(grading.get(qid, i, "")[0] for i in range(len(members[qid]))) /
                                max(1, len(members[qid])) for qid in ids]
        for name in strategies:
            done = await _consensus(journal, cached, STRATEGIES[name](), ids, members, consensus)
            await grading.grade([(qid, 0, name, done[qid]) for qid in ids], journal)
            grades = [grading.get(qid, 0, name) for qid in ids]
            outcome.strategies[name] = done.outcome
            done.outcome.correct, done.outcome.attempted = [g[0] for g in grades], [g[1] for g in grades]
    finally:
        journal.close()
    store.compact("answers", entry.run_id)
    store.compact("judgements", entry.run_id)
    return outcome


class _Consensus(dict):
    outcome: StrategyOutcome


async def _consensus(journal: Journal, cached: _Entry, strat: Strategy, ids: list[str],
                     members: dict[str, list[str | None]], llm: LLM | None) -> _Consensus:
    """qid -> consensus text for every sampled question, reusing stored answers with the same identity."""
    done = _Consensus()
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

    async def call(work: tuple[str, list[str], str]) -> tuple[str, dict, Context]:
        qid, responses, _ = work
        question = question_of[qid]
        ctx = Context(GRADERS.get(question.extra.get("grader", "")), llm.model if llm else None,
                      llm.client if llm else None)
        found = await strat.combine(question, responses, ctx)
        return found.content, found.detail, ctx

    def record(work: tuple[str, list[str], str], outcome: tuple[str, dict, Context] | None,
               error: LLMError | None) -> None:
        qid, _, identity = work
        row = {"run_id": cached.run_id, "benchmark": question_of[qid].benchmark, "question_id": qid,
               "sample_index": 0, "strategy": strat.name, "model": model, "request_hash": identity, "calls": 1,
               "created_at": now_us()}
        if outcome is None:
            row |= {"error": str(error)[:2000], "error_type": error.error_type if error else "error"}
            done[qid] = None
            journal.append("answers", row)
            return
        content, detail, ctx = outcome
        row |= {"content": content, "reasoning": orjson.dumps(detail).decode(), "attempts": ctx.requests,
                "prompt_tokens": ctx.prompt_tokens, "completion_tokens": ctx.completion_tokens}
        done[qid] = content
        o = done.outcome
        o.requests += ctx.requests
        o.prompt_tokens += ctx.prompt_tokens
        o.completion_tokens += ctx.completion_tokens
        rows = [("answers", row)]
        if ctx.requests:
            rows.append(("token_usage", {"run_id": cached.run_id, "stage": "consensus",
                                         "benchmark": question_of[qid].benchmark, "model": model,
                                         "requests": ctx.requests, "prompt_tokens": ctx.prompt_tokens,
                                         "completion_tokens": ctx.completion_tokens, "cached_requests": 0,
                                         "created_at": now_us()}))
        journal.append_many(rows)

    workers = llm.client.limiter.config.max if (llm and uses_model) else 1
    await Dispatcher(iter(todo), call, record, workers).run()
    return done


class _Grading:
    """Grades of one entry's answers: stored ones reused (same answer text, same grader version), the rest
    computed (rules) or asked (the llm grader), journaled as ``judgements`` rows."""

    VERSION = "1"

    def __init__(self, cached: _Entry, judge: LLM | None) -> None:
        self.cached, self.judge = cached, judge
        self.results: dict[tuple[str, int, str], tuple[int, int]] = {}
        # The same text for the same question is graded once, whichever member or strategy wrote it.
        self.by_text: dict[tuple[str, str, str, str], tuple[int, str, str | None]] = {
            (qid, judge_name, version, a_hash): (int(score or 0), method, None)
            for (qid, _, _, judge_name, a_hash, version), (score, method) in cached.grades.items()}

    def get(self, qid: str, sample_index: int, strategy: str) -> tuple[int, int]:
        """(correct, attempted) as 0/1."""
        return self.results.get((qid, sample_index, strategy), (0, 0))

    def _judge_name(self, question: Question) -> tuple[str, str]:
        kind = question.extra.get("grader", "mcq")
        if kind == "llm":
            if self.judge is None:
                raise UsageError(f"{question.benchmark} is graded by a judge model: give --judge MODEL[@BASE_URL]")
            return self.judge.model, f"llm:{llm_grader.prompt_hash()}"
        return GRADERS[kind].judge, f"{GRADERS[kind].judge}@{self.VERSION}"

    async def grade(self, items: list[tuple[str, int, str, str | None]], journal: Journal) -> None:
        asks = []
        for qid, index, strategy, text in items:
            question = self.cached.questions[qid]
            judge, version = self._judge_name(question)
            a_hash = answer_hash(text)
            old = self.cached.grades.get((qid, index, strategy, judge, a_hash, version))
            if old is not None and old[1] != "judge_error":  # a failed grading call is asked again
                self.results[(qid, index, strategy)] = (int(old[0] or 0), int(old[1] != "NOT_ATTEMPTED"))
                continue
            same = self.by_text.get((qid, judge, version, a_hash))
            if text is None:  # an error answer: wrong, and never sent to a judge
                self._store(journal, question, index, strategy, judge, version, a_hash, 0, "answer_error", None)
            elif same is not None and same[1] not in ("judge_error", "answer_error"):
                self._store(journal, question, index, strategy, judge, version, a_hash, same[0], same[1], same[2])
            elif question.extra.get("grader") == "llm":
                asks.append((question, index, strategy, judge, version, a_hash, text))
            else:
                right, found = GRADERS[question.extra.get("grader", "mcq")].grade(text, question)
                self._store(journal, question, index, strategy, judge, version, a_hash, int(right), found.method,
                            found.answer)
        if asks:
            await self._ask(asks, journal)

    async def _ask(self, asks: list, journal: Journal) -> None:
        assert self.judge is not None
        client, model = self.judge.client, self.judge.model

        async def call(item: tuple) -> tuple:
            return await llm_grader.ask(client, model, item[0], item[6])

        def record(item: tuple, outcome: tuple | None, error: LLMError | None) -> None:
            question, index, strategy, judge, version, a_hash, _ = item
            if outcome is None:
                self._store(journal, question, index, strategy, judge, version, a_hash, 0, "judge_error",
                            None, error=f"judge_error: {error}")
                return
            grade, reply = outcome
            self._store(journal, question, index, strategy, judge, version, a_hash, int(grade == "CORRECT"), grade,
                        reply.content, tokens=(reply.prompt_tokens, reply.completion_tokens))
            journal.append("token_usage", {"run_id": self.cached.run_id, "stage": "judging",
                                           "benchmark": question.benchmark, "model": model,
                                           "requests": reply.attempts, "prompt_tokens": reply.prompt_tokens,
                                           "completion_tokens": reply.completion_tokens, "cached_requests": 0,
                                           "created_at": now_us()})

        unique: dict[tuple, tuple] = {}
        for item in asks:  # one call per distinct text; the repeats copy its grade afterwards
            unique.setdefault((item[0].question_id, item[5]), item)
        await Dispatcher(iter(unique.values()), call, record, client.limiter.config.max).run()
        for item in asks:
            question, index, strategy, judge, version, a_hash, _ = item
            if (question.question_id, index, strategy) not in self.results:
                score, method, output = self.by_text[(question.question_id, judge, version, a_hash)]
                self._store(journal, question, index, strategy, judge, version, a_hash, score, method, output)

    def _store(self, journal: Journal, question: Question, index: int, strategy: str, judge: str, version: str,
               a_hash: str, score: int, method: str, output: str | None, error: str | None = None,
               tokens: tuple[int, int] | None = None) -> None:
        self.results[(question.question_id, index, strategy)] = (score, int(method != "NOT_ATTEMPTED"))
        self.by_text[(question.question_id, judge, version, a_hash)] = (score, method, output)
        journal.append("judgements", {
            "run_id": self.cached.run_id, "benchmark": question.benchmark, "question_id": question.question_id,
            "sample_index": index, "strategy": strategy, "judge": judge, "score": float(score), "score_scale": "0-1",
            "parse_method": method, "judge_output": output, "prompt_hash": version, "answer_hash": a_hash,
            "prompt_tokens": tokens[0] if tokens else None, "completion_tokens": tokens[1] if tokens else None,
            "error": error or ("answer_error" if method == "answer_error" else None), "created_at": now_us()})



