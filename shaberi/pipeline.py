"""``shaberi run`` end to end: check every input, then run the requested stages under the run's lock.

Everything that can be wrong with the input (names, benchmarks, dataset files, API keys, endpoints) is
checked before the first row is written, so bad input never leaves partial rows behind.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from urllib.parse import urlparse

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from . import benchmarks as bm
from .client import LLM, ChatClient, ClientConfig
from .errors import UsageError
from .export import export_connection, export_run, export_summary, write_manifest, write_progress_manifest
from .generate import GenerationConfig, Progress, generate
from .judge import Judge, JudgeConfig, JudgeProgress, judge, reprocess
from .lease import EndpointLease
from .passes import Pass
from .passes import build as build_passes
from .passes.runner import PassProgress, run_passes
from .prompts import generation_template, judging_hash, template_hash
from .run import RunInfo, run_id_for, validate_name
from .schema import TABLES
from .store import Store, now_us

__all__ = ["STAGES", "Outcome", "RunRequest", "check_base_url", "execute", "parse_judge", "repeated", "reprocess_run",
           "resolve_api_key", "run", "shared_llm", "write_questions"]

STAGES = ("generate", "judge", "passes")
DEFAULT_KEY_ENV = "OPENAI_API_KEY"


@dataclass
class RunRequest:
    model: str
    base_url: str
    results_dir: Path
    data_dir: Path
    benchmark: str = "all"
    tag: str = "default"
    api_key_env: str | None = None  # None: OPENAI_API_KEY, optional for a loopback endpoint
    limit: int | None = None
    stages: str | None = None  # None: generate, and judge when there are judges
    generation: GenerationConfig = field(default_factory=GenerationConfig)
    client: ClientConfig = field(default_factory=ClientConfig)
    rerun: bool = False
    retry_errors: int = 2
    judges: list[str] = field(default_factory=list)  # "MODEL" or "MODEL@BASE_URL"
    judge_base_url: str | None = None  # for judges without @URL; default: the candidate's base URL
    judge_api_key_env: str | None = None  # default: the candidate's key variable
    judge_concurrency: int | None = None  # default: the candidate's maximum
    judging: JudgeConfig = field(default_factory=JudgeConfig)
    rejudge: bool = False
    passes: str | None = None  # "lang_mixing,repetition": run after the other stages (or alone: --stages passes)
    pass_options: list[str] = field(default_factory=list)  # "NAME.KEY=VALUE"
    export: bool = True  # manifest and JSONL artifacts at the end (the benchmarks time the stages without)


@dataclass
class Outcome:
    """What a run did, updated live while it runs (the CLI's progress display reads it)."""

    info: RunInfo
    generation: Progress = field(default_factory=Progress)
    judging: JudgeProgress = field(default_factory=JudgeProgress)
    passes: PassProgress = field(default_factory=PassProgress)
    clients: list[ChatClient] = field(default_factory=list)


def is_loopback(base_url: str) -> bool:
    host = urlparse(base_url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def resolve_api_key(base_url: str, env_var: str | None, option: str = "--api-key-env") -> str | None:
    """The key from the named variable; a loopback endpoint may do without one unless a variable is named."""
    name = env_var or DEFAULT_KEY_ENV
    key = os.environ.get(name)
    if key:
        return key
    if env_var is None and is_loopback(base_url):
        return None
    raise UsageError(
        f"environment variable {name} is not set; export your API key in it or name another variable "
        f"with {option}"
    )


def parse_stages(spec: str | None, have_judges: bool, have_passes: bool = False) -> list[str]:
    if spec is None:
        return ["generate", *(["judge"] if have_judges else []), *(["passes"] if have_passes else [])]
    stages = [s.strip() for s in spec.split(",") if s.strip()]
    unknown = [s for s in stages if s not in STAGES]
    if unknown or not stages:
        raise UsageError(f"unknown stage {', '.join(unknown) or repr(spec)}; choose from: {', '.join(STAGES)}")
    if "judge" in stages and not have_judges:
        raise UsageError("--stages judge needs at least one --judge MODEL (or MODEL@BASE_URL)")
    if "passes" in stages and not have_passes:
        raise UsageError("--stages passes needs --passes, e.g. --passes lang_mixing,repetition,format_validation")
    return [s for s in STAGES if s in stages]


def parse_judge(spec: str, default_url: str) -> tuple[str, str]:
    """``MODEL`` or ``MODEL@BASE_URL`` -> (model, base URL)."""
    name, sep, url = spec.partition("@")
    if not name.strip() or (sep and not url.strip()):
        raise UsageError(f"--judge {spec!r} should be MODEL or MODEL@BASE_URL, e.g. gpt-4.1@https://api.openai.com/v1")
    validate_name("judge", name)
    return name, (url if sep else default_url).rstrip("/")


def check_base_url(base_url: str) -> None:
    parsed = urlparse(base_url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise UsageError(f"--base-url {base_url!r} is not an http(s) URL such as http://127.0.0.1:8000/v1")


async def run(req: RunRequest, on_start: Callable[[Outcome], object] | None = None) -> Outcome:
    """Validate, then generate, judge and run the passes as asked; returns what was done. Raises UsageError on
    bad input."""
    validate_name("model", req.model)
    validate_name("tag", req.tag)
    stages = parse_stages(req.stages, bool(req.judges), bool(req.passes))
    if stages == ["passes"]:
        return await _passes_only(req, on_start)
    check_base_url(req.base_url)
    names = bm.resolve(req.benchmark)
    if req.limit is not None and req.limit < 1:
        raise UsageError("--limit must be at least 1")
    datasets = [bm.load(n, req.data_dir, req.limit) for n in names]
    api_key = resolve_api_key(req.base_url, req.api_key_env)
    candidate = ChatClient(req.base_url, api_key, req.client)
    judge_clients: dict[tuple[str, str | None], ChatClient] = {}
    clients = [candidate]
    try:
        judges = _judges(req, judge_clients) if "judge" in stages else []
        pass_list = _passes(req, judge_clients) if "passes" in stages else []
        clients += [c for c in judge_clients.values() if c not in clients]
        for client in clients:
            await client.check()
        info = RunInfo(
            model=req.model,
            tag=req.tag,
            base_url=candidate.base_url,
            api_key=api_key,
            generation_config=asdict(req.generation) | {"judging": asdict(req.judging)},
            benchmarks=names,
            datasets={d.benchmark: d.provenance() for d in datasets},
            prompt_hashes={generation_template(n): template_hash(generation_template(n)) for n in names}
            | {f"judging/{n}": judging_hash(n) for n in names},
            judges=tuple(f"{j.name}@{j.client.base_url}" for j in judges),
            passes=tuple(f"{p.name}@{p.version}" for p in pass_list),
            pass_config={p.name: p.config for p in pass_list},
        )
        outcome = Outcome(info, clients=clients)
        store = Store(req.results_dir)
        with store.lock(info.run_id, f"run {req.model!r} tag {req.tag!r}"):
            _merge_previous(store, info)
            if on_start:
                on_start(outcome)
            progress_of = dict.fromkeys(stages, "pending")
            try:
                store.replace("runs", info.run_id, [info.row("running")])
                write_questions(store, info.run_id, datasets)
                for stage in stages:
                    progress_of[stage] = "running"
                    write_progress_manifest(req.results_dir, info.row("running"), progress_of,
                                            _counts(datasets, outcome.generation))
                    if stage == "generate":
                        await generate(store, info.run_id, req.model, datasets, candidate, req.generation,
                                       rerun=req.rerun, retry_errors=req.retry_errors, progress=outcome.generation)
                    elif stage == "judge":
                        await judge(store, info.run_id, judges, req.judging, rejudge=req.rejudge,
                                    progress=outcome.judging)
                    else:
                        await run_passes(store, info.run_id, pass_list, outcome.passes)
                    progress_of[stage] = "done"
            except BaseException as exc:
                error = f"{type(exc).__name__}: {exc}"
                store.replace("runs", info.run_id, [info.row("failed", error, candidate.limiter.history)])
                progress_of = {k: "failed" if v == "running" else v for k, v in progress_of.items()}
                write_manifest(req.results_dir, info.run_id, progress_of, error)
                raise
            store.replace("runs", info.run_id, [info.row("complete", None, candidate.limiter.history)])
            if req.export:
                con = export_connection(req.results_dir, info.run_id)  # one DuckDB for manifest and export
                write_manifest(req.results_dir, info.run_id, progress_of, con=con)
                export_run(req.results_dir, info.run_id, con=con)
                if info.base_tag != req.tag:
                    export_summary(req.results_dir, info.base_tag, req.model)
        return outcome
    finally:
        for client in clients:
            await client.aclose()


def _judges(req: RunRequest, clients: dict[tuple[str, str | None], ChatClient]) -> list[Judge]:
    """One Judge per --judge. Judges on one endpoint (and key) share a client: one limiter, and one lease
    of that endpoint's slots with every other shaberi process on this machine (see ``lease``)."""
    key_env = req.judge_api_key_env or req.api_key_env
    top = req.judge_concurrency or req.client.aimd.max
    aimd = replace(req.client.aimd, start=min(req.client.aimd.start, top), min=min(req.client.aimd.min, top), max=top)
    judges = []
    for spec in dict.fromkeys(req.judges):
        name, url = parse_judge(spec, (req.judge_base_url or req.base_url).rstrip("/"))
        check_base_url(url)
        key = resolve_api_key(url, key_env, "--judge-api-key-env")
        if (url, key) not in clients:
            clients[(url, key)] = client = ChatClient(url, key, replace(req.client, aimd=aimd))
            client.lease = EndpointLease(url, top)
        judges.append(Judge(name, clients[(url, key)]))
    return judges


def shared_llm(spec: str, default_url: str | None, key_env: str | None, config: ClientConfig,
               clients: dict[tuple[str, str | None], ChatClient], what: str,
               key_option: str = "--judge-api-key-env") -> LLM:
    """``MODEL`` or ``MODEL@BASE_URL`` as an LLM on a client shared by everything on that endpoint and key
    (``clients`` maps (URL, key) to the client). ``what`` names the option in error messages."""
    if "@" not in spec and not default_url:
        raise UsageError(f"{what}={spec!r} needs MODEL@BASE_URL (no --base-url given)")
    name, url = parse_judge(spec, (default_url or "").rstrip("/"))
    check_base_url(url)
    key = resolve_api_key(url, key_env, key_option)
    if (url, key) not in clients:
        clients[(url, key)] = ChatClient(url, key, config)
    return LLM(name, clients[(url, key)])


def _passes(req: RunRequest, clients: dict[tuple[str, str | None], ChatClient]) -> list[Pass]:
    """The requested passes; one that consults a model (``lang_mixing.detector=MODEL[@URL]``) gets a client,
    shared with the judges on the same endpoint."""
    passes = build_passes(req.passes or "", req.pass_options)
    for p in passes:
        if spec := p.settings.get(p.llm_option or "", ""):
            p.llm = shared_llm(spec, req.judge_base_url or req.base_url, req.judge_api_key_env or req.api_key_env,
                               req.client, clients, f"--pass-option {p.name}.{p.llm_option}")
    return passes


async def _passes_only(req: RunRequest, on_start: Callable[[Outcome], object] | None) -> Outcome:
    """``--stages passes``: the passes over a stored run; no generation, no judging, no call unless a pass
    consults a model."""
    clients: dict[tuple[str, str | None], ChatClient] = {}
    try:
        pass_list = _passes(req, clients)
        store = Store(req.results_dir)
        run_id = run_id_for(req.model, req.tag)
        old = store.read("runs", run_id).to_pylist()
        if not old:
            raise UsageError(f"no run for model {req.model!r} tag {req.tag!r} under {req.results_dir}; --stages "
                             "passes needs a run with answers (check --model, --tag and --results-dir)")
        for client in clients.values():
            await client.check()
        row = old[0]
        info = RunInfo(model=req.model, tag=req.tag, base_url=row["base_url"] or "", api_key=None,
                       generation_config={}, benchmarks=[], datasets={}, prompt_hashes={},
                       passes=tuple(f"{p.name}@{p.version}" for p in pass_list),
                       pass_config={p.name: p.config for p in pass_list})
        outcome = Outcome(info, clients=list(clients.values()))
        with store.lock(run_id, f"passes of run {req.model!r} tag {req.tag!r}"):
            if on_start:
                on_start(outcome)
            await run_passes(store, run_id, pass_list, outcome.passes)
            _merge_passes(info, row)
            store.replace("runs", run_id, [row | {"passes": list(info.passes),
                                                  "pass_config": orjson.dumps(info.pass_config).decode(),
                                                  "updated_at": now_us()}])
            if req.export:
                con = export_connection(req.results_dir, run_id)
                write_manifest(req.results_dir, run_id, {"passes": "done"}, con=con)
                export_run(req.results_dir, run_id, con=con)
        return outcome
    finally:
        for client in clients.values():
            await client.aclose()


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


async def reprocess_run(results_dir: Path, model: str, tag: str) -> int:
    """Re-parse a run's stored judge replies with the current rules: zero API calls."""
    validate_name("model", model)
    validate_name("tag", tag)
    store = Store(results_dir)
    run_id = run_id_for(model, tag)
    if not store.parts("runs", run_id):
        raise UsageError(f"no run for model {model!r} tag {tag!r} under {results_dir}; check --model, --tag and "
                         "--results-dir")
    with store.lock(run_id, f"run {model!r} tag {tag!r}"):
        return reprocess(store, run_id)


def execute(req: RunRequest, on_start: Callable[[Outcome], object] | None = None) -> Outcome:
    """``run`` on a fresh event loop."""
    return asyncio.run(run(req, on_start))


def _counts(datasets: list[bm.Dataset], progress: Progress) -> dict[str, dict]:
    return {d.benchmark: {"questions": len(d.questions),
                          "answers": progress.benchmarks[d.benchmark].done if d.benchmark in progress.benchmarks else 0,
                          "answer_errors": progress.benchmarks[d.benchmark].errors
                          if d.benchmark in progress.benchmarks else 0} for d in datasets}


def _merge_previous(store: Store, info: RunInfo) -> None:
    """A resumed or extended run keeps its creation time and the benchmarks and judges it already had."""
    old = store.read("runs", info.run_id).to_pylist()
    if not old:
        return
    prev = old[0]
    info.created_at = int(prev["created_at"].timestamp() * 1_000_000)
    info.benchmarks = list(dict.fromkeys([*(prev["benchmarks"] or []), *info.benchmarks]))
    info.datasets = orjson.loads(prev["datasets"] or "{}") | info.datasets
    info.prompt_hashes = orjson.loads(prev["prompt_hashes"] or "{}") | info.prompt_hashes
    info.judges = tuple(dict.fromkeys([*(prev["judges"] or []), *info.judges]))
    _merge_passes(info, prev)


def _merge_passes(info: RunInfo, prev: dict) -> None:
    """Passes that ran before stay listed; one that runs again replaces its own entry."""
    names = {p.partition("@")[0] for p in info.passes}
    info.passes = tuple(p for p in prev.get("passes") or [] if p.partition("@")[0] not in names) + info.passes
    info.pass_config = orjson.loads(prev.get("pass_config") or "{}") | info.pass_config


def write_questions(store: Store, run_id: str, datasets: list[bm.Dataset]) -> None:
    """The run's questions: this invocation's benchmarks replaced, others kept (built column-wise: fast)."""
    fresh = {d.benchmark for d in datasets}
    old = store.read("questions", run_id)
    kept = old.filter(pc.invert(pc.is_in(old["benchmark"], pa.array(sorted(fresh)))))
    qs = [q for d in datasets for q in d.questions]
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
