"""``shaberi run`` end to end: check every input, then run the requested stages under the run's lock.

Everything that can be wrong with the input (names, benchmarks, dataset files, API key, endpoint) is
checked before the first row is written, so bad input never leaves partial rows behind.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from . import benchmarks as bm
from .client import ChatClient, ClientConfig
from .errors import UsageError
from .generate import GenerationConfig, Progress, generate
from .prompts import generation_template, template_hash
from .run import RunInfo, validate_name
from .schema import TABLES
from .store import Store, now_us

__all__ = ["STAGES", "RunRequest", "execute", "run"]

STAGES = ("generate",)
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
    stages: str = "generate"
    generation: GenerationConfig = field(default_factory=GenerationConfig)
    client: ClientConfig = field(default_factory=ClientConfig)
    rerun: bool = False
    retry_errors: int = 2


def is_loopback(base_url: str) -> bool:
    host = urlparse(base_url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def resolve_api_key(base_url: str, env_var: str | None) -> str | None:
    """The key from the named variable; a loopback endpoint may do without one unless a variable is named."""
    name = env_var or DEFAULT_KEY_ENV
    key = os.environ.get(name)
    if key:
        return key
    if env_var is None and is_loopback(base_url):
        return None
    raise UsageError(
        f"environment variable {name} is not set; export your API key in it or name another variable "
        "with --api-key-env"
    )


def parse_stages(spec: str) -> list[str]:
    stages = [s.strip() for s in spec.split(",") if s.strip()]
    unknown = [s for s in stages if s not in STAGES]
    if unknown or not stages:
        raise UsageError(f"unknown stage {', '.join(unknown) or repr(spec)}; choose from: {', '.join(STAGES)}")
    return stages


def _check_base_url(base_url: str) -> None:
    parsed = urlparse(base_url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise UsageError(f"--base-url {base_url!r} is not an http(s) URL such as http://127.0.0.1:8000/v1")


async def run(
    req: RunRequest, on_start: Callable[[Progress, ChatClient], object] | None = None
) -> tuple[RunInfo, Progress]:
    """Validate, then generate; returns the run and its counters. Raises UsageError on bad input."""
    validate_name("model", req.model)
    validate_name("tag", req.tag)
    _check_base_url(req.base_url)
    stages = parse_stages(req.stages)
    names = bm.resolve(req.benchmark)
    if req.limit is not None and req.limit < 1:
        raise UsageError("--limit must be at least 1")
    datasets = [bm.load(n, req.data_dir, req.limit) for n in names]
    api_key = resolve_api_key(req.base_url, req.api_key_env)
    client = ChatClient(req.base_url, api_key, req.client)
    try:
        await client.check()
        info = RunInfo(
            model=req.model,
            tag=req.tag,
            base_url=client.base_url,
            api_key=api_key,
            generation_config=asdict(req.generation),
            benchmarks=names,
            datasets={d.benchmark: d.provenance() for d in datasets},
            prompt_hashes={generation_template(n): template_hash(generation_template(n)) for n in names},
        )
        store = Store(req.results_dir)
        with store.lock(info.run_id, f"run {req.model!r} tag {req.tag!r}"):
            _merge_previous(store, info)
            progress = Progress()
            if on_start:
                on_start(progress, client)
            try:
                store.replace("runs", info.run_id, [info.row("running")])
                _write_questions(store, info.run_id, datasets)
                if "generate" in stages:
                    await generate(store, info.run_id, req.model, datasets, client, req.generation,
                                   rerun=req.rerun, retry_errors=req.retry_errors, progress=progress)
            except BaseException as exc:
                store.replace("runs", info.run_id, [info.row("failed", f"{type(exc).__name__}: {exc}",
                                                              client.limiter.history)])
                raise
            store.replace("runs", info.run_id, [info.row("complete", None, client.limiter.history)])
        return info, progress
    finally:
        await client.aclose()


def execute(req: RunRequest, on_start: Callable[[Progress, ChatClient], object] | None = None
            ) -> tuple[RunInfo, Progress]:
    """``run`` on a fresh event loop."""
    return asyncio.run(run(req, on_start))


def _merge_previous(store: Store, info: RunInfo) -> None:
    """A resumed or extended run keeps its creation time and the benchmarks it already covered."""
    old = store.read("runs", info.run_id).to_pylist()
    if not old:
        return
    prev = old[0]
    info.created_at = int(prev["created_at"].timestamp() * 1_000_000)
    info.benchmarks = list(dict.fromkeys([*(prev["benchmarks"] or []), *info.benchmarks]))
    info.datasets = orjson.loads(prev["datasets"] or "{}") | info.datasets
    info.prompt_hashes = orjson.loads(prev["prompt_hashes"] or "{}") | info.prompt_hashes


def _write_questions(store: Store, run_id: str, datasets: list[bm.Dataset]) -> None:
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
