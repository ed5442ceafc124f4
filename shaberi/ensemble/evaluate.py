"""quick-eval: strategies over a seeded sample of cached questions, graded, paired with the baseline.

Per dataset: the cache entry of the model (zero generation calls), a seeded sample of its questions
(``random.Random(f"{seed}:{dataset}")`` over the sorted question ids; a sample larger than the dataset
is all of it), every member answer graded, each strategy's consensus answer for every sampled question,
graded too. The single-model baseline is sample 0 of the same entry, or of a separate entry
(``baseline``: e.g. a temperature-0 run cached the same way). Consensus answers and grades are stored
in the entry's tables (``answers`` rows with ``strategy`` set, ``judgements`` rows), keyed by what
they depend on, so evaluating again with another seed or sample size only computes what is new.
The outcome is a plain ``Result`` (saved as JSON by the CLI) that ``gate`` and ``report`` read.

A grade is 1, 0 or None: None when the llm grader could not read its judge's reply (``unparsed``) or the
grading call failed (``judge_error``). None is no grade, never a wrong one: accuracies are over the readable
grades, a question without a readable grade on either side of a paired comparison is left out of it (and
counted: ``Comparison.excluded``), and ``DatasetOutcome.graders`` counts, per grader, the grades of this
evaluation and the unreadable ones, as the ``judgements`` table holds them.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import NamedTuple

import orjson

from ..benchmarks import Question
from ..errors import LLMError, UsageError
from ..lineage import answer_hash
from ..llm.client import LLM, Completion
from ..llm.dispatch import Dispatcher
from ..prompts import template_hash
from ..tables.rows import AnswerKey, RunRecord, decoded, token_usage
from ..tables.rows import answer as answer_row
from ..tables.rows import judgement as judgement_row
from ..tables.store import Journal, Store
from . import cache
from .gate import ALPHA, Comparison, compare, gate
from .graders import GRADERS, Grader, ModelGrader
from .graders.llm import GRADES
from .strategies import STRATEGIES, Context, Strategy

__all__ = ["UNREADABLE", "Result", "accuracy", "attempted_lines", "comparisons", "coverage_lines", "excluded_lines",
           "failures", "given_attempted", "grader_rows", "quick_eval", "refuse_bad_request", "sample_ids",
           "unreadable_lines", "verdicts"]

# parse_method values of a response no rule or judge could read (rule graders count it wrong, the llm
# grader leaves it without a grade).
UNREADABLE = ("none", "hedged", "unparsed", "timeout")


@dataclass
class StrategyOutcome:
    correct: list[int | None]  # None: no readable grade
    attempted: list[int | None]
    reused: int = 0
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failed: int = 0  # consensus calls that failed (no answer, no grade: left out, never counted wrong)
    error: str = ""  # the first failure's message


@dataclass
class DatasetOutcome:
    cache: str  # run id of the cache entry
    n_members: int
    question_ids: list[str]
    baseline: list[int | None]  # None: no readable grade
    baseline_attempted: list[int | None]
    samples_mean: list[float | None]  # over the members' readable grades; None when there is none
    strategies: dict[str, StrategyOutcome] = field(default_factory=dict)
    member_accuracy: list[float | None] = field(default_factory=list)  # over readable grades
    # grader -> {"graded", "unreadable", "no_grade"} over this evaluation's grades (members, baseline,
    # strategies), from the judgements table
    graders: dict[str, dict[str, int]] = field(default_factory=dict)
    # what the cache could give: questions of the dataset, with some answer, with all N; and asked for
    questions: int = 0
    available: int = 0
    complete: int = 0
    asked: int = 0


@dataclass
class Result:
    model: str
    seed: int
    sample: int
    strategies: list[str]
    datasets: dict[str, DatasetOutcome] = field(default_factory=dict)
    # the multiple-comparison family this job belongs to (``gate``): its α and its number of tests (0: this
    # job's own comparisons are the family), and what it is, in words
    alpha: float = ALPHA
    family_tests: int = 0
    family: str = ""

    def to_json(self) -> bytes:
        return orjson.dumps(asdict(self), option=orjson.OPT_INDENT_2)

    @classmethod
    def from_json(cls, data: bytes) -> Result:
        raw = orjson.loads(data)
        sets = {}
        for name, d in raw["datasets"].items():
            d["strategies"] = {s: StrategyOutcome(**o) for s, o in d["strategies"].items()}
            sets[name] = DatasetOutcome(**d)
        return cls(raw["model"], raw["seed"], raw["sample"], raw["strategies"], sets, raw.get("alpha", ALPHA),
                   raw.get("family_tests", 0), raw.get("family", ""))

    def tests(self) -> int:
        """Tests in this job's family: ``family_tests``, or both tests of each of its comparisons."""
        return self.family_tests or max(1, 2 * sum(len(d.strategies) for d in self.datasets.values()))


def given_attempted(correct: list[int | None], attempted: list[int | None]) -> tuple[int, float | None]:
    """(questions attempted, accuracy among them): SimpleQA's second number, for judge-graded datasets.
    A question without a readable grade is neither attempted nor not."""
    tried = [c for c, a in zip(correct, attempted, strict=True) if a and c is not None]
    return len(tried), (sum(tried) / len(tried) if tried else None)


def accuracy(grades: list[int | None]) -> float | None:
    """Over the readable grades; None when there is none."""
    readable = [g for g in grades if g is not None]
    return sum(readable) / len(readable) if readable else None


def attempted_lines(result: Result) -> list[str]:
    """One line per dataset where some answer was NOT_ATTEMPTED or has no readable grade: attempted share and
    accuracy given attempted (and how many had no grade)."""
    lines = []
    for name, d in result.datasets.items():
        series = {"baseline": (d.baseline, d.baseline_attempted)} | {
            s: (o.correct, o.attempted) for s, o in d.strategies.items()}
        if all(all(a) for _, a in series.values()):
            continue
        parts = []
        for label, (correct, attempted) in series.items():
            tried, given = given_attempted(correct, attempted)
            unread = sum(c is None for c in correct)
            parts.append(f"{label} attempted {tried}/{len(attempted)}"
                         + (f" ({unread} without a readable grade)" if unread else "")
                         + ", accuracy given attempted " + ("-" if given is None else f"{given:.1%}"))
        lines.append(f"{name}: " + "; ".join(parts))
    return lines


def grader_rows(result: Result) -> list[tuple[str, str, int, int, int]]:
    """(dataset, grader, grades, unreadable, without a grade) per dataset and grader of this evaluation."""
    return [(name, grader, c.get("graded", 0), c.get("unreadable", 0), c.get("no_grade", 0))
            for name, d in result.datasets.items() for grader, c in d.graders.items()]


def excluded_lines(result: Result) -> list[str]:
    """The comparisons that left questions out for want of a readable grade, and the consensus calls that
    failed (a strategy left uncompared altogether is a failure: ``failures``)."""
    lines = [f"{c.dataset}: {c.strategy}: {c.excluded} question(s) without a readable grade on some side left out "
             f"of the comparison (n = {c.n})" for c in comparisons(result) if c.excluded]
    for name, d in result.datasets.items():
        for s, o in d.strategies.items():
            if o.failed:
                lines.append(f"{name}: {s}: {o.failed:,} of {len(o.correct):,} consensus calls failed (left out, not "
                             f"counted wrong; run again to retry them): {o.error}")
    return lines


def failures(result: Result) -> list[str]:
    """The strategies × datasets asked for that could not be compared at all (n = 0 paired questions), and why:
    every consensus call failed, or no question has a readable grade on every side (a judge whose every reply
    is unreadable). The work ran but failed: a CI job's red like a regression, never a green "not compared"."""
    found = []
    for name, d in result.datasets.items():
        for s, o in d.strategies.items():
            if o.failed and o.failed == len(o.correct):
                found.append(f"{s} on {name}: every consensus call failed ({o.error})")
            elif not _paired(d, o):
                found.append(f"{s} on {name}: not compared, {_why_unpaired(d, s, o)}")
    return found


def _why_unpaired(d: DatasetOutcome, strategy: str, o: StrategyOutcome) -> str:
    """Why no question of a dataset pairs a readable grade of the baseline, the strategy and the samples."""
    n = len(d.question_ids)
    if not n:
        return "no question was sampled (the cache holds no answer to any)"
    readable: dict[str, list] = {"baseline": d.baseline, strategy: o.correct, "samples": d.samples_mean}
    grades = "; ".join(f"grader {g}: {c.get('unreadable', 0):,} of {c.get('graded', 0):,} grades unreadable, "
                       f"{c.get('no_grade', 0):,} without a grade" for g, c in d.graders.items())
    return ("no question has a readable grade on every side (readable: "
            + ", ".join(f"{k} {sum(v is not None for v in vs)} of {n}" for k, vs in readable.items()) + ")"
            + (f"; {grades}" if grades else ""))


def unreadable_lines(result: Result) -> list[str]:
    """Per dataset and grader, the responses graded and how many were unreadable; then ``excluded_lines``."""
    return [f"{dataset}: grader {grader}: {graded:,} graded, {unread:,} unreadable ({unread / graded:.1%})"
            + (f", {no_grade:,} without a grade (left out of the accuracies)" if no_grade else "")
            for dataset, grader, graded, unread, no_grade in grader_rows(result) if graded] + excluded_lines(result)


def sample_ids(ids: list[str], sample: int, seed: int, dataset: str) -> list[str]:
    ordered = sorted(ids, key=lambda q: (len(q), q))  # natural order for numeric ids
    if sample >= len(ordered):
        return ordered
    return sorted(random.Random(f"{seed}:{dataset}").sample(ordered, sample), key=lambda q: (len(q), q))


def _paired(d: DatasetOutcome, o: StrategyOutcome) -> list[tuple[int, int, float]]:
    return [(b, c, m) for b, c, m in zip(d.baseline, o.correct, d.samples_mean, strict=True)
            if b is not None and c is not None and m is not None]


def comparisons(result: Result, alpha: float | None = None) -> list[Comparison]:
    """Each strategy against the baseline, over the questions with a readable grade on every side (the others
    counted in ``excluded``); a strategy with no such question is not compared (``failures`` says why).
    The detectable regression is at the family's per-test level, α ÷ its tests."""
    level = (result.alpha if alpha is None else alpha) / result.tests()
    found = []
    for name, d in result.datasets.items():
        for s, o in d.strategies.items():
            paired = _paired(d, o)
            if paired:
                c = compare(name, s, [p[0] for p in paired], [p[1] for p in paired], [p[2] for p in paired], level)
                c.excluded = len(o.correct) - len(paired)
                found.append(c)
    return found


def verdicts(result: Result, alpha: float | None = None) -> list[Comparison]:
    """The job's comparisons gated in its own family (``gate``), at its α or ``alpha``: the verdicts the job
    gave, re-derived from its result file alone."""
    alpha = result.alpha if alpha is None else alpha
    return gate(comparisons(result, alpha), alpha, result.tests())


def coverage_lines(result: Result) -> list[str]:
    """Datasets whose cache could not give every question asked for with all N answers."""
    lines = []
    for name, d in result.datasets.items():
        if d.complete < d.asked or d.available < d.questions:
            lines.append(f"{name}: the cache holds answers to {d.available:,} of {d.questions:,} questions "
                         f"({d.complete:,} with all {d.n_members} and no error); sampled {len(d.question_ids):,} of "
                         f"the {d.asked:,} asked")
    return lines


def refuse_bad_request(strategies: list[str], sample: int, has_consensus: bool) -> None:
    """Bad input to an evaluation, refused before anything is read or graded."""
    if sample < 1:
        raise UsageError(f"--sample {sample} is out of range: it must be at least 1")
    if (needs := [s for s in strategies if STRATEGIES[s].templates]) and not has_consensus:
        raise UsageError(f"strategy {', '.join(needs)} calls a model: give --consensus-model MODEL[@BASE_URL]")


async def quick_eval(results_dir: Path, model: str, strategies: list[str], datasets: list[str], sample: int,
                     seed: int, *, n: int | None = None, temperature: float | None = None,
                     consensus: LLM | None = None, judge: LLM | None = None,
                     baseline: tuple[str, int | None, float | None] | None = None, alpha: float = ALPHA,
                     family_tests: int = 0, family: str = "", require_complete: bool = False) -> Result:
    """``baseline``: (model, n, temperature) of a separate cache entry whose sample 0 is the baseline.
    Datasets are evaluated concurrently: the consensus and judge clients' limits are shared by all of them.
    ``require_complete``: refuse (before anything is graded) a cache that cannot give ``sample`` questions
    (or all of them) with all N answers."""
    refuse_bad_request(strategies, sample, consensus is not None)
    store = Store(results_dir)
    result = Result(model, seed, sample, strategies, alpha=alpha, family_tests=family_tests, family=family)
    work = []
    for name in datasets:
        entry = cache.find(results_dir, model, name, n, temperature)
        base = cache.find(results_dir, baseline[0], name, baseline[1], baseline[2], baseline=True) if baseline \
            else None
        cached = _Entry(store, entry.run_id)
        if require_complete and (short := cached.short_of(entry, sample, seed)):
            raise UsageError(f"{name}: {short}; complete it with generate-cache (or drop --require-complete)")
        work.append((name, entry, base, cached))

    async def one(name: str, entry: cache.CacheEntry, base: cache.CacheEntry | None, cached: _Entry
                  ) -> DatasetOutcome:
        with store.lock(entry.run_id, f"quick-eval of {model!r} on {name!r}"):
            return await _dataset(store, entry, base, cached, strategies, sample, seed, consensus, judge)

    outcomes = await asyncio.gather(*(one(*w) for w in work))
    result.datasets = dict(zip(datasets, outcomes, strict=True))
    return result


class _Entry:
    """One cache entry's questions, member answers and stored grades and consensus answers."""

    def __init__(self, store: Store, run_id: str) -> None:
        self.run_id = run_id
        self.questions = {q["question_id"]: Question(q["benchmark"], q["question_id"], q["turns"], q["reference"],
                                                     q["criteria"], q["category"], q["extra"])
                          for q in map(partial(decoded, "questions"), store.read("questions", run_id).to_pylist())}
        # member texts stay in Arrow until a sampled question asks for them (12,032 questions × 5 long answers
        # as Python strings would be half a gigabyte for a sample of 500)
        answers = store.read("answers", run_id, ["question_id", "sample_index", "strategy", "content", "error",
                                                 "request_hash"])
        self._texts = answers.column("content")
        self.members: dict[str, dict[int, int | None]] = defaultdict(dict)  # qid -> sample -> row (None: error)
        self.failed = 0  # member rows that are errors
        self.consensus: dict[tuple[str, str], tuple[str | None, str | None]] = {}
        columns = [answers.column(c).to_pylist() for c in ("question_id", "sample_index", "strategy", "error",
                                                            "request_hash")]
        for row, (qid, index, strategy, error, request_hash) in enumerate(zip(*columns, strict=True)):
            if strategy:
                self.consensus[(qid, strategy)] = (request_hash, self._texts[row].as_py())
            else:
                self.members[qid][index] = None if error else row
                self.failed += bool(error)
        self.grades = {(j["question_id"], j["sample_index"], j["strategy"], j["judge"], j["answer_hash"],
                        _How(j["prompt_hash"], j["grader_version"])): (j["score"], j["parse_method"])
                       for j in store.read("judgements", run_id, ["question_id", "sample_index", "strategy", "judge",
                                                                  "answer_hash", "prompt_hash", "grader_version",
                                                                  "score", "parse_method"]).to_pylist()}

        datasets = store.read("runs", run_id).to_pylist()
        provenance: dict = next(iter(RunRecord.of(datasets[0]).datasets.values()), {}) if datasets else {}
        self.size = max(int(provenance.get("rows") or 0), len(self.questions))  # the dataset's, --limit or not

    def responses(self, qid: str) -> list[str | None]:
        got = self.members.get(qid, {})
        rows = [got.get(i) for i in range(max(got) + 1)] if got else []
        return [None if row is None else self._texts[row].as_py() for row in rows]

    def whole(self, qid: str, n: int) -> bool:
        """Whether the question has all ``n`` answers, none an error."""
        got = self.members.get(qid, {})
        return all(got.get(i) is not None for i in range(n))

    def coverage(self, n: int, sample: int) -> tuple[int, int, int]:
        """(questions with some answer, with all ``n`` and none an error, asked for: ``sample`` or the whole
        dataset)."""
        return (sum(1 for q in self.questions if q in self.members),
                sum(1 for q in self.questions if self.whole(q, n)), min(sample, self.size))

    def short_of(self, entry: cache.CacheEntry, sample: int, seed: int) -> str | None:
        """Why this cache cannot give ``sample`` questions with all N answers (every question the seeded sample
        draws, and as many as asked), or None."""
        available, complete, asked = self.coverage(entry.n, sample)
        drawn = sample_ids([q for q in self.questions if q in self.members], sample, seed, entry.dataset)
        if len(drawn) >= asked and all(self.whole(q, entry.n) for q in drawn):
            return None
        short = sum(1 for q in drawn if not self.whole(q, entry.n))
        return (f"{asked:,} questions asked, the cache {entry.run_id} holds all {entry.n} answers for {complete:,} of "
                f"the dataset's {self.size:,} (some answer for {available:,}; {self.failed:,} answers are errors), "
                f"and {short:,} of the {len(drawn):,} the seed draws lack some")


async def _dataset(store: Store, entry: cache.CacheEntry, base: cache.CacheEntry | None, cached: _Entry,
                   strategies: list[str], sample: int, seed: int, consensus: LLM | None, judge: LLM | None
                   ) -> DatasetOutcome:
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
        outcome.available, outcome.complete, outcome.asked = cached.coverage(entry.n, sample)
        outcome.questions = cached.size
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
            base_grading = grading
            base_grades = [grading.get(qid, 0, "") for qid in ids]
        outcome.baseline = [g[0] for g in base_grades]
        outcome.baseline_attempted = [g[1] for g in base_grades]
        per_member = [[grading.get(qid, i, "")[0] for qid in ids if i < len(members[qid])] for i in range(width)]
        outcome.member_accuracy = [accuracy(m) for m in per_member]
        outcome.samples_mean = [accuracy([grading.get(qid, i, "")[0] for i in range(len(members[qid]))])
                                for qid in ids]
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
    separate = base.run_id if base is not None and base.run_id != entry.run_id else None
    outcome.graders = _grader_counts(store, entry.run_id, ids, strategies, separate,
                                     grading.judges | (base_grading.judges if separate else {}))
    return outcome


def _grader_counts(store: Store, run_id: str, ids: list[str], strategies: list[str], base_run: str | None,
                   judges: dict[str, str]) -> dict[str, dict[str, int]]:
    """Per grader (``judges``: judge name -> grader label), the grades that count (the ``judgements`` view) of
    this evaluation's answers by its graders: every member and strategy answer of the sampled questions, and
    the separate baseline's sample 0."""
    from ..tables.sql import connect

    con = connect(store.root, run_ids=[run_id] + ([base_run] if base_run else []), upto="lineage")
    rows = con.execute(
        f"""SELECT judge, count(*), count(*) FILTER (WHERE parse_method IN {UNREADABLE}),
                   count(*) FILTER (WHERE score IS NULL)
            FROM judgements
            WHERE question_id IN (SELECT unnest($ids)) AND judge IN (SELECT unnest($judges)) AND (
                  (run_id = $run AND strategy IN (SELECT unnest($strategies)))
                  OR (run_id = $base AND strategy = '' AND sample_index = 0))
            GROUP BY 1""",
        {"ids": ids, "judges": sorted(judges), "run": run_id, "strategies": ["", *strategies],
         "base": base_run or ""}).fetchall()
    return {judges[judge]: {"graded": n, "unreadable": unread, "no_grade": null}
            for judge, n, unread, null in sorted(rows, key=lambda r: judges[r[0]])}


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
        rules = GRADERS.get(question.extra.get("grader", ""))
        ctx = Context(rules if isinstance(rules, Grader) else None, llm.model if llm else None,
                      llm.client if llm else None)
        found = await strat.combine(question, responses, ctx)
        return found.content, found.detail, ctx

    def record(work: tuple[str, list[str], str], outcome: tuple[str, dict, Context] | None,
               error: LLMError | None) -> None:
        qid, _, identity = work
        key = AnswerKey(question_of[qid].benchmark, qid, 0, strat.name)
        if outcome is None:
            done[qid] = None
            done.outcome.failed += 1
            done.outcome.error = done.outcome.error or str(error)[:200]
            journal.append("answers", answer_row(cached.run_id, key, model, request_hash=identity, calls=1,
                                                 error=str(error)[:2000],
                                                 error_type=error.error_type if error else "error"))
            return
        content, detail, ctx = outcome
        row = answer_row(cached.run_id, key, model, request_hash=identity, calls=1, content=content,
                         reasoning=orjson.dumps(detail).decode(), attempts=ctx.requests,
                         prompt_tokens=ctx.prompt_tokens, completion_tokens=ctx.completion_tokens)
        done[qid] = content
        o = done.outcome
        o.requests += ctx.requests
        o.prompt_tokens += ctx.prompt_tokens
        o.completion_tokens += ctx.completion_tokens
        rows = [("answers", row)]
        if ctx.requests:
            rows.append(("token_usage", token_usage(cached.run_id, "consensus", question_of[qid].benchmark, model,
                                                    requests=ctx.requests, prompt_tokens=ctx.prompt_tokens,
                                                    completion_tokens=ctx.completion_tokens)))
        journal.append_many(rows)

    workers = llm.client.max_in_flight if (llm and uses_model) else 1
    await Dispatcher(iter(todo), call, record, workers).run()
    return done


class _How(NamedTuple):
    """How a grade was made, part of its identity: a grade made otherwise is made again."""

    prompt_hash: str | None  # a judge-model grader: what the judge was asked ("<grader>:<hash>")
    grader_version: str | None  # a rule grader: its rules' version


class _Graded(NamedTuple):
    """How one grader's grades are made and stored."""

    rules: Grader | None  # a rule grader, or
    model: ModelGrader | None  # one that asks the judge model
    judge: str  # the judgements' judge
    how: _How
    label: str  # what the counts call it: the rule grader's name, or <grader>:<judge model>


class _Ask(NamedTuple):
    """An answer text a judge-model grader is to grade."""

    question: Question
    sample_index: int
    strategy: str
    graded: _Graded
    a_hash: str
    text: str


class _Grading:
    """Grades of one entry's answers: stored ones reused (same answer text, same grader version), the rest
    computed (rule graders) or asked (a judge-model grader), journaled as ``judgements`` rows."""

    def __init__(self, cached: _Entry, judge: LLM | None) -> None:
        self.cached, self.judge = cached, judge
        self.judges: dict[str, str] = {}  # the judge names this grading used -> their grader labels
        self.graders: dict[str, _Graded] = {}
        self.results: dict[tuple[str, int, str], tuple[int | None, int | None]] = {}
        # The same text for the same question is graded once, whichever member or strategy wrote it.
        self.by_text: dict[tuple[str, str, _How, str], tuple[int | None, str, str | None]] = {
            (qid, judge_name, how, a_hash): (_score(score, method), method, None)
            for (qid, _, _, judge_name, a_hash, how), (score, method) in cached.grades.items()}

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
                self.graders[kind] = _Graded(None, grader, self.judge.model, _How(f"{kind}:{grader.prompt_hash()}",
                                                                                 None), f"{kind}:{self.judge.model}")
            else:
                self.graders[kind] = _Graded(grader, None, f"exact:{kind}", _How(None, grader.version), kind)
        return self.graders[kind]

    async def grade(self, items: list[tuple[str, int, str, str | None]], journal: Journal) -> None:
        asks = []
        for qid, index, strategy, text in items:
            question = self.cached.questions[qid]
            graded = self._grader(question)
            self.judges[graded.judge] = graded.label
            a_hash = answer_hash(text)
            old = self.cached.grades.get((qid, index, strategy, graded.judge, a_hash, graded.how))
            if old is not None and old[1] not in ("judge_error", "consensus_error"):  # failed calls: again
                self.results[(qid, index, strategy)] = _outcome(_score(*old), old[1])
                continue
            same = self.by_text.get((qid, graded.judge, graded.how, a_hash))
            if text is None and strategy:  # the strategy's model call failed: no grade, not a wrong one
                self._store(journal, question, index, strategy, graded, a_hash, None, "consensus_error", None)
            elif text is None:  # a member's error answer: wrong, and never sent to a judge
                self._store(journal, question, index, strategy, graded, a_hash, 0, "answer_error", None)
            elif same is not None and same[1] not in ("judge_error", "answer_error"):
                self._store(journal, question, index, strategy, graded, a_hash, same[0], same[1], same[2])
            elif graded.rules is None:
                asks.append(_Ask(question, index, strategy, graded, a_hash, text))
            else:
                right, found = graded.rules.grade(text, question)
                self._store(journal, question, index, strategy, graded, a_hash, int(right), found.method,
                            found.answer)
        if asks:
            await self._ask(asks, journal)

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
                self._store(journal, question, index, strategy, graded, a_hash, None, "judge_error", None,
                            error=f"judge_error: {error}")
                return
            grade, reply = outcome
            self._store(journal, question, index, strategy, graded, a_hash, grader(ask).score(grade), grade,
                        reply.content, tokens=(reply.prompt_tokens, reply.completion_tokens))
            journal.append("token_usage", token_usage(
                self.cached.run_id, "judging", question.benchmark, model, requests=reply.attempts,
                prompt_tokens=reply.prompt_tokens, completion_tokens=reply.completion_tokens))

        unique: dict[tuple[str, str], _Ask] = {}
        for ask in asks:  # one call per distinct text; the repeats copy its grade afterwards
            unique.setdefault((ask.question.question_id, ask.a_hash), ask)
        await Dispatcher(iter(unique.values()), call, record, client.max_in_flight).run()
        for ask in asks:
            question, index, strategy, graded, a_hash, _ = ask
            if (question.question_id, index, strategy) not in self.results:
                score, method, output = self.by_text[(question.question_id, graded.judge, graded.how, a_hash)]
                self._store(journal, question, index, strategy, graded, a_hash, score, method, output)

    def _store(self, journal: Journal, question: Question, index: int, strategy: str, graded: _Graded, a_hash: str,
               score: int | None, method: str, output: str | None, error: str | None = None,
               tokens: tuple[int, int] | None = None) -> None:
        self.results[(question.question_id, index, strategy)] = _outcome(score, method)
        self.by_text[(question.question_id, graded.judge, graded.how, a_hash)] = (score, method, output)
        journal.append("judgements", judgement_row(
            self.cached.run_id, AnswerKey(question.benchmark, question.question_id, index, strategy), graded.judge,
            (0, 1), graded.how.prompt_hash, a_hash, grader_version=graded.how.grader_version,
            score=None if score is None else float(score), parse_method=method, judge_output=output,
            prompt_tokens=tokens[0] if tokens else None, completion_tokens=tokens[1] if tokens else None,
            error=error or _ERRORS.get(method)))


_ERRORS = {"answer_error": "answer_error", "judge_error": "judge_error", "consensus_error": "consensus_error",
           "unparsed": f"unparseable: the judge's reply is none of A, B, C, {', '.join(GRADES)}"}


def _score(score: float | None, method: str) -> int | None:
    """A stored score as a grade: None stays None, and so does an unreadable judge reply stored as 0 before
    issue 14."""
    return None if score is None or method in ("unparsed", "judge_error", "consensus_error") else int(score)


def _outcome(score: int | None, method: str) -> tuple[int | None, int | None]:
    """(correct, attempted): both None without a grade."""
    return (None, None) if score is None else (score, int(method != "NOT_ATTEMPTED"))
