"""A sweep plan (``shaberi sweep PLAN.toml``), parsed at the edge into typed values::

    tag = "wk48"                     # each model's runs are tagged so ({tag}-run1 … N with runs > 1)
    runs = 3
    benchmarks = ["elyza", "tengu", "mt_bench", "rakuda"]   # default: all
    limit = 20                       # first N questions of each benchmark (optional)
    passes = ["format_validation"]
    judge_concurrency = 8            # per judge endpoint, across the whole cluster
    judge_prompts = "../shaberi-original"   # a prompt set (run --judge-prompts): an original clone or templates
    concurrency = 40                 # each candidate's maximum in flight
    data_dir = "datasets"            # relative paths: to the plan's folder
    results_dir = "s3://team/evals"  # --results-dir overrides

    [[judges]]
    model = "gpt-4.1"
    base_url = "https://api.openai.com/v1"

    [[models]]                       # a model already served
    model = "ckpt-1000"
    base_url = "http://gpu-3:8000/v1"

    [[models]]                       # a checkpoint the worker serves itself: {port} is a free port there
    model = "ckpt-2000"
    serve = "vllm serve /ckpts/2000 --served-model-name ckpt-2000 --port {port}"
    num_gpus = 1                     # Ray resources of its task (num_cpus too)
    ready_timeout = 900              # seconds until /v1/models must answer

API keys are never in a plan: ``api_key_env`` names the variable (default OPENAI_API_KEY), as ``run`` does.
Everything a plan can get wrong (an unknown key, benchmark or pass, a base URL that is no http(s) URL, a judge
listed twice, a value of the wrong type) is one UsageError here, before a cluster is joined or anything written.
"""

from __future__ import annotations

import shlex
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import benchmarks as bm
from ..errors import UsageError
from ..llm.endpoints import ModelAt, check_base_url
from ..run_info import validate_name
from ..tables.location import Root, as_root

__all__ = ["ModelSpec", "Plan", "load_plan"]


@dataclass(frozen=True)
class ModelSpec:
    model: str
    base_url: str | None = None  # an endpoint already serving it, or None with ``serve``
    serve: str | None = None  # the command that serves it on the worker, with {port}
    num_gpus: float = 0
    num_cpus: float = 1
    ready_timeout: float = 600
    api_key_env: str | None = None


@dataclass(frozen=True)
class Plan:
    tag: str
    models: list[ModelSpec]
    data_dir: Path
    results_dir: Root
    runs: int = 1
    benchmarks: list[str] | None = None
    limit: int | None = None
    judges: list[ModelAt] = field(default_factory=list)
    judge_api_key_env: str | None = None
    judge_concurrency: int | None = None
    concurrency: int | None = None
    passes: list[str] = field(default_factory=list)
    judge_prompts: str | None = None  # the prompt set's path (loaded by each task: a loaded clone is no pickle)

    def tags(self) -> list[str]:
        return [self.tag] if self.runs == 1 else [f"{self.tag}-run{i}" for i in range(1, self.runs + 1)]


_TOP = {"tag", "runs", "benchmarks", "limit", "passes", "judge_concurrency", "concurrency", "data_dir", "results_dir",
        "judges", "models", "judge_api_key_env", "judge_prompts"}
_MODEL = {"model", "base_url", "serve", "num_gpus", "num_cpus", "ready_timeout", "api_key_env"}
_JUDGE = {"model", "base_url"}


def load_plan(path: Path, results_dir: Root | None = None, data_dir: Path | None = None) -> Plan:
    """The plan at ``path``; anything wrong is one UsageError naming the key and what it should be."""
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read plan {path}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"plan {path} is not valid TOML: {exc}") from None
    where = f"plan {path}"
    if unknown := sorted(set(raw) - _TOP):
        raise UsageError(f"{where}: unknown key {', '.join(unknown)}; keys are {', '.join(sorted(_TOP))}")
    tag = _get(raw, "tag", str, where, required=True)
    validate_name("tag", tag)
    models = []
    for i, entry in enumerate(_get(raw, "models", list, where, required=True)):
        at = f"{where}: models[{i}]"
        if not isinstance(entry, dict):
            raise UsageError(f"{at} must be a table ([[models]] with model = …)")
        if unknown := sorted(set(entry) - _MODEL):
            raise UsageError(f"{at}: unknown key {', '.join(unknown)}; keys are {', '.join(sorted(_MODEL))}")
        spec = ModelSpec(model=_get(entry, "model", str, at, required=True),
                         base_url=_get(entry, "base_url", str, at), serve=_get(entry, "serve", str, at),
                         num_gpus=float(_get(entry, "num_gpus", (int, float), at) or 0),
                         num_cpus=float(_get(entry, "num_cpus", (int, float), at) or 1),
                         ready_timeout=float(_get(entry, "ready_timeout", (int, float), at) or 600),
                         api_key_env=_get(entry, "api_key_env", str, at))
        if (spec.base_url is None) == (spec.serve is None):
            raise UsageError(f"{at} ({spec.model}): give base_url (a server already running) or serve (a command "
                             "with {port} that the worker runs), not both nor neither")
        if spec.serve is not None and "{port}" not in spec.serve:
            raise UsageError(f"{at} ({spec.model}): serve must contain {{port}}, the free port the worker gives it")
        if spec.serve is not None:
            try:
                shlex.split(spec.serve)  # as the worker splits it
            except ValueError as exc:
                raise UsageError(f"{at} ({spec.model}): serve cannot be read as a command ({exc})") from None
        if spec.base_url is not None:
            check_base_url(spec.base_url, f"{at} ({spec.model}): base_url")
        for key in ("num_gpus", "num_cpus", "ready_timeout"):
            if (value := getattr(spec, key)) < 0 or (key == "ready_timeout" and value == 0):
                raise UsageError(f"{at} ({spec.model}): {key} = {value:g} must be "
                                 f"{'positive' if key == 'ready_timeout' else 'at least 0'}")
        validate_name("model", spec.model)
        models.append(spec)
    if not models:
        raise UsageError(f"{where}: no [[models]] to evaluate")
    if len({m.model for m in models}) < len(models):
        raise UsageError(f"{where}: a model is listed twice; each model's runs are one task")
    judges: list[ModelAt] = []
    for i, entry in enumerate(_get(raw, "judges", list, where) or []):
        at = f"{where}: judges[{i}]"
        if not isinstance(entry, dict):
            raise UsageError(f"{at} must be a table ([[judges]] with model and base_url)")
        if unknown := sorted(set(entry) - _JUDGE):
            raise UsageError(f"{at}: unknown key {', '.join(unknown)}; keys are {', '.join(sorted(_JUDGE))}")
        judge = ModelAt(_get(entry, "model", str, at, required=True),
                        _get(entry, "base_url", str, at, required=True).rstrip("/"))
        validate_name("judge", judge.name)
        check_base_url(judge.base_url, f"{at} ({judge.name}): base_url")
        if (first := next((k for k, j in enumerate(judges) if j.name == judge.name), None)) is not None:
            raise UsageError(f"{where}: judge {judge.name!r} is listed twice (judges[{first}] and judges[{i}]); its "
                             "judgements are kept under its name: list each judge once")
        judges.append(judge)
    benchmarks = _get(raw, "benchmarks", list, where)
    if benchmarks is not None and (unknown := [b for b in benchmarks if b not in bm.BENCHMARKS]):
        raise UsageError(f"{where}: unknown benchmark {', '.join(map(str, unknown))}; choose from: "
                         f"{', '.join(bm.BENCHMARKS)}")
    passes = _get(raw, "passes", list, where) or []
    if not all(isinstance(p, str) for p in passes):
        raise UsageError(f"{where}: passes = {passes!r} should list pass names, e.g. passes = [\"format_validation\"]")
    if passes:
        from ..passes import build  # here: the passes' imports are no cost of every command's start

        try:
            build(passes)
        except UsageError as exc:
            raise UsageError(f"{where}: passes: {exc}") from None
    for key in ("runs", "limit", "judge_concurrency", "concurrency"):
        if (value := _get(raw, key, int, where)) is not None and value < 1:
            raise UsageError(f"{where}: {key} = {value} must be at least 1")
    base = path.resolve().parent
    data = data_dir or (base / _get(raw, "data_dir", str, where) if "data_dir" in raw else None)
    if data is None:
        raise UsageError(f"{where}: data_dir is missing (the folder holding ja/…), or give --data-dir")
    prompts = _get(raw, "judge_prompts", str, where)
    if prompts is not None:
        from ..judging.promptsets import load  # here: checked once before any task, loaded again by each

        prompts = _local(base, prompts)
        try:
            load(prompts)
        except UsageError as exc:
            raise UsageError(f"{where}: judge_prompts: {exc}") from None
    results = results_dir if results_dir is not None else as_root(_local(base, _get(raw, "results_dir", str, where)
                                                                          or "results"))
    return Plan(tag=tag, models=models, data_dir=Path(data), results_dir=results,
                runs=_get(raw, "runs", int, where) or 1, benchmarks=benchmarks, limit=_get(raw, "limit", int, where),
                judges=judges,
                judge_api_key_env=_get(raw, "judge_api_key_env", str, where),
                judge_concurrency=_get(raw, "judge_concurrency", int, where),
                concurrency=_get(raw, "concurrency", int, where), passes=list(passes), judge_prompts=prompts)


def _local(base: Path, value: str) -> str:
    """A plan's relative folder is relative to the plan; a URL is left alone."""
    return value if "://" in value or Path(value).is_absolute() else str(base / value)


def _get(table: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str, required: bool = False) -> Any:
    if key not in table:
        if required:
            raise UsageError(f"{where}: {key} is missing")
        return None
    value = table[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        name = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise UsageError(f"{where}: {key} = {value!r} should be {'a' if name != 'int' else 'an'} {name}")
    return value
