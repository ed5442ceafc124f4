"""``shaberi run`` end to end: check every input, then run the requested stages under the run's lock.

Everything that can be wrong with the input (names, benchmarks, dataset files, API keys, endpoints) is
checked before the first row is written, so bad input never leaves partial rows behind.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from . import benchmarks as bm
from .errors import BudgetSpent, StorageError, UsageError
from .generate import GenerationConfig, Progress, generate, write_questions
from .judging import Judge, JudgeConfig, JudgeProgress, judge, rejudge_since, reprocess
from .judging.promptsets import SHABERI, PromptSet
from .llm.batch_api import BATCH_SIZE, BatchTransport
from .llm.client import ChatClient, ClientConfig, endpoint_limits
from .llm.control import ControlConfig
from .llm.endpoints import ModelAt, check_base_url, resolve_api_key, shared_llm
from .llm.lease import EndpointLease, Lease
from .llm.spending import free_note, open_budget, spent_usd
from .llm.transport import AiohttpTransport, Transport
from .passes import Pass
from .passes.runner import PassProgress, run_passes
from .prompts import check_generation, generation_template, template_hash
from .reports.export import (
    EXPORT_ERRORS,
    export_connection,
    export_failure,
    export_run,
    export_summary,
    write_manifest,
    write_progress_manifest,
)
from .run_info import RunInfo, run_id_for, validate_name
from .status import (
    StageCalls,
    benchmark_statuses,
    combined,
    describe,
    partial_reasons,
    run_status,
    stage_status,
    top_error,
    worst,
)
from .tables.rows import RunRecord, runs
from .tables.selection import RunRef, parse_selectors, select
from .tables.sql import connect, read_prices, reattach
from .tables.store import Store, now_us

__all__ = ["STAGES", "Outcome", "RunRequest", "check_stored", "execute", "parse_stages", "repeated", "reprocess_run",
           "run"]

STAGES = ("generate", "judge", "passes")


@dataclass
class RunRequest:
    """One run, as typed values: the command line parses its grammar ("all", "a,b", ``MODEL@URL``,
    ``NAME.KEY=VALUE``) into one (``cli.run``), and so can a script."""

    model: str
    base_url: str  # "" when the candidate is not called (no generate stage)
    results_dir: Path
    data_dir: Path
    benchmarks: list[str] | None = None  # None: all, when generating; the run's own benchmarks otherwise
    tag: str = "default"
    api_key_env: str | None = None  # None: OPENAI_API_KEY, optional for a loopback endpoint
    limit: int | None = None
    stages: list[str] | None = None  # None: generate, judge when there are judges, passes when there are passes
    generation: GenerationConfig = field(default_factory=GenerationConfig)
    client: ClientConfig = field(default_factory=ClientConfig)
    rerun: bool = False
    retry_errors: int = 2
    judges: list[ModelAt] = field(default_factory=list)
    judge_api_key_env: str | None = None  # default: the candidate's key variable
    judge_concurrency: int | None = None  # default: the candidate's maximum
    batch: bool = False  # the candidate's calls through its endpoint's Batch API (``llm.batch_api``)
    judge_batch: bool = False  # judge calls through the judges' Batch API
    batch_poll: float = 15.0  # seconds between looks at a batch in progress
    batch_size: int = BATCH_SIZE  # requests a batch holds at most
    judging: JudgeConfig = field(default_factory=JudgeConfig)
    max_cost: float | None = None  # USD: no call whose worst case could take the run's spend past it (``budget``)
    pricing: Path | None = None  # the price table for max_cost [default: data/pricing.toml]
    rejudge: bool = False
    judge_prompts: PromptSet = SHABERI  # the judging prompt set (``--judge-prompts``: promptsets.load)
    passes: list[Pass] = field(default_factory=list)  # run after the other stages (or alone: stages ["passes"])
    model_base_url: str | None = None  # a pass option's model given without @URL [default: base_url]
    export: bool = True  # manifest and JSONL artifacts at the end (the benchmarks time the stages without)
    compact: bool = False  # the export's normalized judgements: reasoning trimmed, a pointer to the transcript
    transport: Transport | None = None  # every client of the run sends through it [default: aiohttp, one each]
    judge_lease: Callable[[str, int], Lease] | None = None  # slots of a judge endpoint [default: EndpointLease]
    owner: str | None = None  # the work this run is part of (a sweep's task): its retry takes the lock over
    # What is served at base_url when its port was picked for it (a sweep's serve command, the local model): the
    # requests' identity, instead of the URL, so that the same model on another port is asked the same requests.
    served_as: str | None = None

    def __post_init__(self) -> None:
        if (isinstance(self.benchmarks, str) or any(not isinstance(j, ModelAt) for j in self.judges)
                or any(isinstance(p, str) for p in self.passes)):
            raise TypeError("RunRequest takes typed values: benchmarks a list of names, judges ModelAt(name, "
                            "base_url) (endpoints.parse_judge reads MODEL@URL), passes built by passes.build")
        if self.limit is not None and self.limit < 1:
            raise UsageError("--limit must be at least 1")
        if self.benchmarks is not None and (unknown := [b for b in self.benchmarks if b not in bm.BENCHMARKS]):
            raise UsageError(f"unknown benchmark {', '.join(unknown)}; choose from: {', '.join(bm.BENCHMARKS)}")
        self.stages = parse_stages(self.stages, bool(self.judges), bool(self.passes), self.rejudge)


@dataclass
class Outcome:
    """What a run did, updated live while it runs (the CLI's progress display reads it)."""

    info: RunInfo
    generation: Progress = field(default_factory=Progress)
    judging: JudgeProgress = field(default_factory=JudgeProgress)
    passes: PassProgress = field(default_factory=PassProgress)
    clients: list[ChatClient] = field(default_factory=list)
    calls: dict[str, StageCalls] = field(default_factory=dict)  # per stage run by this invocation
    status: str = "running"  # the run's status once it finished: ok | partial | failed
    stages: dict[str, dict[str, Any]] = field(default_factory=dict)  # this invocation's stages, as they ended
    export_error: str | None = None  # the export failed (the run's status is its stages'; ``shaberi export`` retries)
    stopped: BudgetSpent | None = None  # why --max-cost stopped it (no call that could pass the limit was sent)
    spent: float | None = None  # with max_cost: the run's cost (the ``cost`` view) when it ended
    counted: float | None = None  # with max_cost: what the limit counts as spent then (``Budget.spent``)

    @property
    def failed_stages(self) -> dict[str, dict[str, Any]]:
        """Stages of this invocation that the tables say failed (nothing usable of them): exit code 1."""
        return {name: r for name, r in self.stages.items() if r.get("status") == "failed"}

    @property
    def vain_stages(self) -> dict[str, dict[str, Any]]:
        """Stages of this invocation whose every call failed, though the tables hold usable work of them (a resume
        retrying errors in vain): said, and the state, the status and the exit code stay as they were."""
        return {name: r for name, r in self.stages.items()
                if r.get("status") != "failed" and name in self.calls and self.calls[name].all_failed}

    @property
    def failed(self) -> bool:
        """The command fails (exit 1): a stage it ran holds nothing usable, or the whole run does, or its export
        could not be written, or the spending limit stopped it before the work was done."""
        return (bool(self.failed_stages) or self.status == "failed" or self.export_error is not None
                or self.stopped is not None)


def parse_stages(spec: str | list[str] | None, have_judges: bool, have_passes: bool = False, rejudge: bool = False
                 ) -> list[str]:
    """The stages to run, in order, from ``--stages a,b`` (or a list of names; None: what the other options
    ask for). ``--rejudge`` judges stored answers again: it never generates."""
    if rejudge and not have_judges:
        raise UsageError("--rejudge calls the judges again on the stored answers: give at least one --judge MODEL "
                         "(or MODEL@BASE_URL)")
    if spec is None:
        return [*([] if rejudge else ["generate"]), *(["judge"] if have_judges else []),
                *(["passes"] if have_passes else [])]
    stages = [s.strip() for s in (spec.split(",") if isinstance(spec, str) else spec) if s.strip()]
    unknown = [s for s in stages if s not in STAGES]
    if unknown or not stages:
        raise UsageError(f"unknown stage {', '.join(unknown) or repr(spec)}; choose from: {', '.join(STAGES)}")
    if "judge" in stages and not have_judges:
        raise UsageError("--stages judge needs at least one --judge MODEL (or MODEL@BASE_URL)")
    if "passes" in stages and not have_passes:
        raise UsageError("--stages passes needs --passes, e.g. --passes lang_mixing,repetition,format_validation")
    if rejudge and ("generate" in stages or "judge" not in stages):
        raise UsageError("--rejudge judges the stored answers again and never generates: use it with --stages judge "
                         "(or judge,passes), or without --stages")
    return [s for s in STAGES if s in stages]


async def run(req: RunRequest, on_start: Callable[[Outcome], object] | None = None) -> Outcome:
    """Validate, then generate, judge and run the passes as asked; returns what was done. Raises UsageError on
    bad input, before anything is written. Without the generate stage (``--rejudge``, ``--stages
    judge|passes``) the candidate is never called and the run's answers, questions and generation config stay as
    they are. ``--benchmark`` scopes every stage."""
    validate_name("model", req.model)
    validate_name("tag", req.tag)
    stages = req.stages or []
    generating = "generate" in stages
    if generating:
        check_base_url(req.base_url)
    scope = _to_generate(req) if generating else check_stored(req, stages)
    if generating:
        check_generation(q for d in scope.datasets for q in d.questions)
    api_key = resolve_api_key(req.base_url, req.api_key_env) if generating else None
    candidate = _candidate(req, api_key) if generating else None
    if candidate:
        candidate.models.add(req.model)
    shared: dict[tuple[str, str | None], ChatClient] = {}
    clients = [candidate] if candidate else []
    try:
        judges = _judges(req, shared) if "judge" in stages else []
        pass_list = _passes(req, shared) if "passes" in stages else []
        clients += [c for c in shared.values() if c not in clients]
        store = Store(req.results_dir)
        run_id = run_id_for(req.model, req.tag)
        judged = scope.judged(bool(judges))
        if judges:
            req.judge_prompts.check(judged, scope.questions_by_benchmark(store, run_id), [j.name for j in judges])
        if req.max_cost is not None:  # an unpriced model is bad input, before anything is written
            budget = open_budget(req.max_cost, req.results_dir, req.pricing, [run_id],
                                 [(m, c.batched, c.base_url) for c in clients for m in sorted(c.models)])
            for client in clients:
                client.budget = budget
                client.notes += [free_note(m, url) for m, url in budget.free.items() if m in client.models]
        for client in clients:
            await client.check()
        info = RunInfo(
            model=req.model,
            tag=req.tag,
            base_url=candidate.base_url if candidate else "",
            api_key=api_key,
            generation_config=asdict(req.generation) | {"judging": asdict(req.judging)},
            benchmarks=[d.benchmark for d in scope.datasets],
            datasets={d.benchmark: d.provenance() for d in scope.datasets},
            prompt_hashes={generation_template(d.benchmark): template_hash(generation_template(d.benchmark))
                           for d in scope.datasets} | _judging_hashes(req.judge_prompts, judged),
            judges=tuple(f"{req.judge_prompts.judge(j.name)}@{j.client.base_url}" for j in judges),
            passes=tuple(f"{p.name}@{p.version}" for p in pass_list),
            pass_config={p.name: p.config for p in pass_list},
            judge_prompts=_provenance(req.judge_prompts) if judges else {},
            pricing=read_prices(req.pricing) if req.pricing else {},
        )
        outcome = Outcome(info, clients=clients)
        with store.lock(run_id, f"run {req.model!r} tag {req.tag!r}", owner=req.owner):
            stored = store.read("runs", run_id).to_pylist()  # as it is now, under the lock
            before = RunRecord.of(stored[0]) if stored else None
            now = info.record("running")
            if before is None and not generating:  # removed since check_stored found it
                raise UsageError(f"run {run_id} is gone from {req.results_dir}: generate its answers again")
            if before is not None and not generating:  # the candidate's side of the row stays as it was generated
                judging = {"judging": now.generation_config["judging"]} if judges else {}  # what judges were sent
                now = before.replace(judges=now.judges, passes=now.passes, pass_config=now.pass_config,
                                     judge_prompts=now.judge_prompts, prompt_hashes=now.prompt_hashes,
                                     pricing=now.pricing,
                                     generation_config=before.generation_config | judging)
            record = _merged(before, now)
            if on_start:
                on_start(outcome)
            tracker = _Stages(req.results_dir, store, run_id, stages, before.stages if before else {},
                              rejudge=req.rejudge, benchmarks=scope.benchmarks,
                              judges=[req.judge_prompts.judge(j.name) for j in judges])
            limits_before = before.concurrency_history if before else {}

            def updated() -> RunRecord:  # this invocation's endpoint limits after those stored before
                return record.replace(concurrency_history=endpoint_limits(clients, limits_before))

            async def do(stage: str) -> None:
                if stage == "generate":
                    assert candidate is not None
                    await generate(store, run_id, req.model, scope.datasets, candidate, req.generation,
                                   rerun=req.rerun, retry_errors=req.retry_errors, progress=outcome.generation,
                                   served_as=req.served_as)
                elif stage == "judge":
                    await judge(store, run_id, judges, req.judging, rejudge=req.rejudge, benchmarks=scope.benchmarks,
                                questions=scope.questions, progress=outcome.judging, prompts=req.judge_prompts,
                                rejudged_since=rejudge_since(before) if before and not generating else None)
                else:
                    await run_passes(store, run_id, pass_list, outcome.passes, benchmarks=scope.benchmarks,
                                     questions=scope.questions)

            with tracker.running(updated, lambda: _counts(scope.datasets, outcome.generation)):
                if generating:
                    write_questions(store, run_id, scope.datasets)
                await tracker.run(do, outcome)
                outcome.status, outcome.stages = tracker.finish(scope.benchmarks, req.export, req.compact,
                                                                info.base_tag != req.tag, req.model, info.base_tag)
                outcome.export_error = tracker.export_error
            if outcome.stopped is not None:
                outcome.spent = spent_usd(req.results_dir, req.pricing, [run_id])
                outcome.counted = next(c.budget.spent for c in clients if c.budget)
        return outcome
    finally:
        for client in clients:
            await client.aclose()


def _candidate(req: RunRequest, api_key: str | None) -> ChatClient:
    """The candidate's client: through its endpoint's Batch API with ``batch`` (every call at once into the
    batch's queue: no rate to control)."""
    if not req.batch:
        return ChatClient(req.base_url, api_key, req.client, transport=req.transport)
    return ChatClient(req.base_url, api_key, replace(req.client, control=_BATCHED),
                      transport=_batches(req, req.base_url))


_BATCHED = ControlConfig(BATCH_SIZE, BATCH_SIZE, BATCH_SIZE)  # a batched client's window: everything at once


def _batches(req: RunRequest, url: str) -> BatchTransport:
    return BatchTransport(req.transport or AiohttpTransport(), url, size=req.batch_size, poll=req.batch_poll)


def _judges(req: RunRequest, clients: dict[tuple[str, str | None], ChatClient]) -> list[Judge]:
    """One Judge per --judge. Judges on one endpoint (and key) share a client: one controller, and one lease
    of that endpoint's slots with every other shaberi process on this machine (see ``lease``)."""
    key_env = req.judge_api_key_env or req.api_key_env
    top = req.judge_concurrency or req.client.control.max
    c = req.client.control
    control = replace(c, start=min(c.start, top), min=min(c.min, top), max=top)
    judges: list[Judge] = []
    for name, url in dict.fromkeys(req.judges):
        check_base_url(url, f"--judge {f'{name}@{url}'!r}: its URL")
        if clash := next((j for j in judges if j.name == name), None):  # judgements are keyed by judge name
            raise UsageError(f"--judge {name!r} is given twice, at {clash.client.base_url} and {url}; a judge's "
                             "judgements are kept under its name: judge with one of them per run")
        key = resolve_api_key(url, key_env, "--judge-api-key-env")
        if (url, key) not in clients:
            transport, window = req.transport, control
            if req.judge_batch:  # every call at once into the batch's queue: no rate to control, no slot to share
                transport = _batches(req, url)
                window = _BATCHED
            clients[(url, key)] = client = ChatClient(url, key, replace(req.client, control=window),
                                                      transport=transport, option=f"--judge {name}@{url}",
                                                      key_option="--judge-api-key-env")
            if not req.judge_batch:
                client.lease = (req.judge_lease or EndpointLease)(url, top)
        clients[(url, key)].models.add(name)
        judges.append(Judge(name, clients[(url, key)]))
    return judges


def _passes(req: RunRequest, clients: dict[tuple[str, str | None], ChatClient]) -> list[Pass]:
    """The requested passes; one that consults a model (``lang_mixing.detector=MODEL[@URL]``) gets a client,
    shared with the judges on the same endpoint."""
    for p in req.passes:
        if spec := p.settings.get(p.llm_option or "", ""):
            p.llm = shared_llm(spec, req.model_base_url or req.base_url, req.judge_api_key_env or req.api_key_env,
                               req.client, clients, f"--pass-option {p.name}.{p.llm_option}", transport=req.transport)
    return req.passes


@dataclass(frozen=True)
class _Scope:
    """What a run works on: the benchmarks (None: every one it has) and questions in scope (None: all of them);
    the datasets it generates from (none on stored answers); the benchmarks it has answers for."""

    benchmarks: list[str] | None
    questions: set[tuple[str, str]] | None
    datasets: list[bm.Dataset] = field(default_factory=list)
    have: frozenset[str] = frozenset()

    def judged(self, judging: bool) -> list[str]:
        """The benchmarks whose judging prompts the run records (a run on stored answers: only when judging)."""
        if self.datasets:
            return [d.benchmark for d in self.datasets]
        return [n for n in (self.benchmarks or sorted(self.have)) if judging and n in bm.BENCHMARKS]

    def questions_by_benchmark(self, store: Store, run_id: str) -> dict[str, list[dict[str, Any]]]:
        """The questions the judges' prompts are checked against: the datasets', else the run's stored ones."""
        if self.datasets:
            return {d.benchmark: [asdict(q) for q in d.questions] for d in self.datasets}
        stored: dict[str, list[dict[str, Any]]] = {}
        for q in store.read("questions", run_id).to_pylist():
            stored.setdefault(q["benchmark"], []).append(q)
        return stored


def _to_generate(req: RunRequest) -> _Scope:
    names = req.benchmarks or bm.resolve("all")
    datasets = [bm.load(n, req.data_dir, req.limit) for n in names]
    scope = _question_keys(datasets) if req.limit is not None else None  # --limit scopes every stage alike
    return _Scope(names, scope, datasets)


def check_stored(req: RunRequest, stages: list[str]) -> _Scope:
    """A run on stored answers (``--rejudge``, ``--stages judge|passes``) needs them: checked for every run of
    a ``--runs N`` family before any is touched."""
    what = "--rejudge" if req.rejudge else f"--stages {','.join(stages)}"
    store = Store(req.results_dir)
    run_id = run_id_for(req.model, req.tag)
    old = store.read("runs", run_id).to_pylist()
    have = set(store.read("answers", run_id, ["benchmark"]).column("benchmark").to_pylist()) if old else set()
    if not have:
        raise UsageError(f"no stored answers for model {req.model!r} tag {req.tag!r} under {req.results_dir}; "
                         f"{what} works on stored answers: generate them first (shaberi run without {what}), or "
                         "check --model, --tag and --results-dir")
    names = req.benchmarks
    if names is not None and (missing := [n for n in names if n not in have]):
        raise UsageError(f"run {req.tag!r} has no answers for {', '.join(missing)}; it has "
                         f"{', '.join(sorted(have))}")
    questions = None
    if req.limit is not None:  # the same first N questions of each file as when they were generated
        names = names or [n for n in bm.registry() if n in have and n in bm.BENCHMARKS]
        questions = _question_keys([bm.load(n, req.data_dir, req.limit) for n in names])
    return _Scope(names, questions, have=frozenset(have))


def _calls(stage: str, outcome: Outcome) -> StageCalls:
    """What a stage of this invocation called, and what failed."""
    if stage == "generate":
        g = outcome.generation
        return StageCalls(stage, g.calls, g.failed, g.failures)
    if stage == "judge":
        j = outcome.judging
        return StageCalls(stage, j.judged, j.failed, j.failures)
    p = outcome.passes  # a reply whose verdict no one could read checked nothing: said as the stage's failure
    unread = Counter({f"{name}: verdict unreadable": n for name, n in p.unreadable.items() if n})
    return StageCalls(stage, p.consulted + p.failed, p.failed, p.failures + unread)


class _Stages:
    """The run's row and manifest while its stages run: each stage's status when it starts and ends, the run's
    status at the end (this invocation's calls and the tables: ``status``), ``failed`` with the error when an
    exception ends it. Earlier invocations' stage records are kept (``runs.stages``)."""

    def __init__(self, results_dir: Path, store: Store, run_id: str, stages: list[str], previous: dict[str, Any],
                 rejudge: bool = False, benchmarks: list[str] | None = None, judges: list[str] | None = None) -> None:
        self.results_dir, self.store, self.run_id, self.stages = results_dir, store, run_id, stages
        self.rejudge = rejudge
        # What each stage works on, kept in its record with its start: the rows in scope made before it started
        # are the ones it reused (the ``reused`` view). None: every benchmark.
        self.scope = {"benchmarks": benchmarks, "judges": judges or []}
        self.export_error: str | None = None
        self.stopped: str | None = None  # what the spending limit refused (BudgetSpent): the stages after are not run
        self.stopped_in: str | None = None  # the stage it stopped
        self.state: dict[str, dict[str, Any]] = dict(previous) | {s: {"status": "pending"} for s in stages}
        self.counts: Callable[[], dict[str, dict[str, Any]]] = dict
        self.make_row: Callable[[], RunRecord] | None = None

    def _row(self, status: str, error: str | None = None) -> dict[str, Any]:
        assert self.make_row is not None
        return runs(self.make_row().replace(stages=self.state, status=status, error=error))

    @contextlib.contextmanager
    def running(self, make_row: Callable[[], RunRecord], counts: Callable[[], dict[str, dict[str, Any]]]
                ) -> Iterator[None]:
        self.make_row, self.counts = make_row, counts
        self.store.replace("runs", self.run_id, [self._row("running")])
        try:
            yield
        except BaseException as exc:
            # Ctrl-C, or what the disk or the object store did (a corrupt part, a full disk): the run stopped, and
            # resumes with the same command once that is fixed; it did not fail.
            by_user = isinstance(exc, KeyboardInterrupt | asyncio.CancelledError)
            stopped = by_user or isinstance(exc, StorageError)
            error = ("stopped by the user (Ctrl-C): re-run the same command to resume" if by_user
                     else str(exc) if stopped else f"{type(exc).__name__}: {exc}")
            for name in self.stages:
                status = self.state[name].get("status")
                if status in ("running", "pending"):
                    self.state[name]["status"] = ("interrupted" if stopped else "failed") if status == "running" \
                        else "not run"
            try:
                self.store.replace("runs", self.run_id, [self._row("interrupted" if stopped else "failed", error)])
                write_manifest(self.results_dir, self.run_id)
            except StorageError:
                if not isinstance(exc, StorageError):
                    raise
            raise

    async def run(self, do: Callable[[str], Awaitable[None]], outcome: Outcome) -> None:
        """Each stage in turn, recorded in the run's row (and manifest) when it starts and when it ends: what a
        reader finds if this process dies meanwhile."""
        for name in self.stages:
            begun = {"started_at": now_us(), "benchmarks": self.scope["benchmarks"],
                     **({"judges": self.scope["judges"]} if name == "judge" else {}),
                     **({"rejudge": True} if name == "judge" and self.rejudge else {})}
            self.state[name] = {"status": "running", **begun}
            row = self._row("running")
            self.store.replace("runs", self.run_id, [row])
            write_progress_manifest(self.results_dir, row, self.counts())
            try:
                await do(name)
            except BudgetSpent as exc:  # nothing more is sent; what was paid for is recorded
                outcome.stopped, self.stopped, self.stopped_in = exc, str(exc), name
            outcome.calls[name] = _calls(name, outcome)
            self.state[name] = begun | outcome.calls[name].record() | {"finished_at": now_us()} | (
                {"stopped": self.stopped} if self.stopped else {})
            self.store.replace("runs", self.run_id, [self._row("running")])
            if self.stopped:
                for later in self.stages[self.stages.index(name) + 1:]:
                    self.state[later] = {"status": "not run", "stopped": self.stopped}
                return

    def finish(self, scoped: list[str] | None, export: bool, compact: bool, family: bool, model: str, base_tag: str
               ) -> tuple[str, dict[str, dict[str, Any]]]:
        """The run's status from the tables and this invocation's calls, recorded; then the manifest and the export.
        An export that fails (``export_error``) leaves the run's status as its stages made it: the tables hold
        everything, and ``shaberi export`` writes the export again."""
        # The statuses need only the coverage views; the export needs them all (one connection either way). What
        # the export's connection computes up front failing fails the export only, never the run's status.
        self.export_error, con = None, None
        if export:
            try:
                con = export_connection(self.results_dir, self.run_id)
            except EXPORT_ERRORS as exc:
                self.export_error, export = export_failure(exc), False
        if con is None:
            con = connect(self.results_dir, None, [self.run_id], upto="coverage", memo=False)
        benchmarks = benchmark_statuses(con, self.run_id)
        for name in self.stages:
            in_scope = [b for n, b in benchmarks.items() if scoped is None or n in scoped]
            record = self.state[name]
            # What the tables hold, not how this invocation's calls went (they are in the record beside it): a
            # resume whose retries all fail again leaves the stage, and the exit code, as they were.
            record["status"] = combined([stage_status(b, name) for b in in_scope])
            if name == self.stopped_in:  # a limit refuses only work still to do: a rejudge stopped before any call
                record["status"] = worst([record["status"], "partial"])  # leaves old judgements, not an ok stage
            if record["status"] == "failed" and not record.get("error"):  # nothing usable, though no call failed now
                record["error"], record["error_count"] = top_error(in_scope, name)
        failed = [name for name in self.stages if self.state[name]["status"] == "failed"]
        status = run_status([b["status"] for b in benchmarks.values()])
        if self.stopped:
            status = worst([status, "partial"])
        error = "; ".join([*(describe(name, self.state[name]) for name in failed),
                           *([f"stopped: {self.stopped}"] if self.stopped else [])]) or None
        if error is None and status == "partial":  # a partial run says why: what is short, and where
            error = partial_reasons(benchmarks)
        # The run's status is its stages'; the export comes after it, and a failed export fails only itself.
        self.store.replace("runs", self.run_id, [self._row(status, error)])
        if export:
            try:
                reattach(con, self.results_dir, "runs", [self.run_id])
                write_manifest(self.results_dir, self.run_id, con=con)
                export_run(self.results_dir, self.run_id, con=con, compact=compact)
                if family:
                    export_summary(self.results_dir, base_tag, model)
            except EXPORT_ERRORS as exc:
                self.export_error = export_failure(exc)
        return status, {name: self.state[name] for name in self.stages}


def repeated(req: RunRequest, runs: int) -> list[RunRequest]:
    """``--runs N``: N independent runs tagged ``{tag}-run1 … {tag}-runN``, each with its own seed
    (``--seed`` + i, or i), which ``multi_run_stats`` and ``view --runs`` then aggregate."""
    if runs < 1:
        raise UsageError("--runs must be at least 1")
    if runs == 1:
        return [req]
    base_seed = req.generation.seed or 0
    return [replace(req, tag=f"{req.tag}-run{i}", generation=replace(req.generation, seed=base_seed + i))
            for i in range(1, runs + 1)]


def members(req: RunRequest, runs: int | None) -> list[RunRequest]:
    """The runs one command works on. Generating: ``repeated``. On stored answers (no generate stage): the runs the
    selector ``--tag`` names (``tables.selection``: the run tagged so, else its family ``{tag}-run1 … N``, the first N
    with ``--runs N``; ``MODEL@TAG``; comma lists), of ``--model`` when given, else of every model they hold: the
    seed's ``--rejudge`` / ``--stages passes`` / ``--reprocess`` of a family by its base tag."""
    if "generate" in (req.stages or []):
        if not req.model:
            raise UsageError("--model is required to generate (the model name sent to --base-url)")
        return repeated(req, 1 if runs is None else runs)
    return [replace(req, model=r.model, tag=r.tag) for r in stored_runs(req.results_dir, req.tag, req.model, runs)]


def stored_runs(results_dir: Path, tag: str, model: str | None, runs: int | None = None) -> list[RunRef]:
    """The stored runs ``--tag`` (a selector) names, of ``model`` when given (``members``); ``runs``: a family's
    first N members (``--runs 1`` is its first run alone, unset is every member)."""
    if runs is not None and runs < 1:
        raise UsageError("--runs must be at least 1")
    if not (results_dir / "tables").exists():  # the likeliest slip: another directory's (empty) results
        named = f"model {model!r} tag {tag!r}" if model else f"tag {tag!r}"
        raise UsageError(f"no stored answers for {named} under {results_dir.resolve()} (no tables/ there): generate "
                         "them first, or give --results-dir DIR (or set SHABERI_RESULTS_DIR) where shaberi run wrote "
                         "them")
    return list({r.run_id: r for s in parse_selectors(results_dir, tag, model or None)
                 for r in select(results_dir, s, runs).runs}.values())


async def reprocess_run(results_dir: Path, model: str, tag: str, prompts: PromptSet = SHABERI) -> int:
    """Re-parse a run's stored judge replies with the current rules (an original clone's judgements: with that
    clone, ``prompts``): zero API calls."""
    validate_name("model", model)
    validate_name("tag", tag)
    store = Store(results_dir)
    run_id = run_id_for(model, tag)
    if not store.parts("runs", run_id):
        raise UsageError(f"no run for model {model!r} tag {tag!r} under {results_dir}; check --model, --tag and "
                         "--results-dir")
    with store.lock(run_id, f"run {model!r} tag {tag!r}"):
        return reprocess(store, run_id, prompts)


def execute(req: RunRequest, on_start: Callable[[Outcome], object] | None = None) -> Outcome:
    """``run`` on a fresh event loop."""
    return asyncio.run(run(req, on_start))


def _question_keys(datasets: list[bm.Dataset]) -> set[tuple[str, str]]:
    return {(q.benchmark, q.question_id) for d in datasets for q in d.questions}


def _counts(datasets: list[bm.Dataset], progress: Progress) -> dict[str, dict[str, Any]]:
    return {d.benchmark: {"questions": len(d.questions),
                          "answers": progress.benchmarks[d.benchmark].done if d.benchmark in progress.benchmarks else 0,
                          "answer_errors": progress.benchmarks[d.benchmark].errors
                          if d.benchmark in progress.benchmarks else 0} for d in datasets}


def _judging_hashes(prompts: PromptSet, names: list[str]) -> dict[str, str]:
    """``runs.prompt_hashes``' judging entries: ``judging/<benchmark>``, qualified by a prompt set's label."""
    suffix = f" [{prompts.label}]" if prompts.label else ""
    return {f"judging/{n}{suffix}": prompts.prompt_hash(n) for n in names}


def _provenance(prompts: PromptSet) -> dict[str, dict[str, Any]]:
    """``runs.judge_prompts``' entry for the prompt set judged with (``shaberi`` for Shaberi's own)."""
    return {prompts.label or "shaberi": prompts.provenance()}


def _merged(before: RunRecord | None, now: RunRecord) -> RunRecord:
    """The row an invocation writes: ``now`` (this invocation's), keeping what the run had (its creation time,
    its benchmarks, datasets, judges and prompt sets; passes that ran before, a pass run again replacing its own
    entry; the --pricing entries it was given before). A second folder of templates under a prompt set's label
    would take the first one's judgements over: bad input, one line."""
    if before is None:
        return now
    for label, entry in now.judge_prompts.items():
        if before.judge_prompts.get(label, {}).get("folder") not in (None, entry.get("folder")):
            raise UsageError(f"--judge-prompts {entry.get('path')}: this run's prompt set {label} is the folder "
                             f"{before.judge_prompts[label]['folder']}; rename one of the two folders (a folder's "
                             "name labels its judgements)")
    again = {p.partition("@")[0] for p in now.passes}
    return now.replace(
        created_at=before.created_at,
        benchmarks=list(dict.fromkeys([*before.benchmarks, *now.benchmarks])),
        datasets=before.datasets | now.datasets,
        prompt_hashes=before.prompt_hashes | now.prompt_hashes,
        judge_prompts=before.judge_prompts | {  # a prompt set judged with again keeps its other judges' requests
            label: entry | ({"requests": before.judge_prompts[label].get("requests", {}) | entry["requests"]}
                            if "requests" in entry and label in before.judge_prompts else {})
            for label, entry in now.judge_prompts.items()},
        judges=list(dict.fromkeys([*before.judges, *now.judges])),
        passes=[p for p in before.passes if p.partition("@")[0] not in again] + now.passes,
        pass_config=before.pass_config | now.pass_config,
        pricing=before.pricing | now.pricing)  # an entry given again replaces its own
