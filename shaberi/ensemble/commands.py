"""What the ``shaberi ensemble …`` commands do, beyond parsing: inputs checked, clients made, stages run."""

from __future__ import annotations

from pathlib import Path

import orjson

from ..errors import DataError, UsageError
from ..generate import Progress
from ..llm.client import ChatClient, ClientConfig
from ..llm.endpoints import check_base_url, resolve_api_key, shared_llm
from . import cache
from . import datasets as gt
from .evaluate import Result, quick_eval
from .strategies import resolve as resolve_strategies

__all__ = ["check", "evaluate", "generate", "load_baselines"]


async def generate(results_dir: Path, data_dir: Path, model: str, base_url: str, datasets: str, n: int,
                   temperature: float, max_tokens: int, api_key_env: str | None, client_config: ClientConfig,
                   limit: int | None = None, progress: Progress | None = None) -> list[str]:
    check_base_url(base_url)
    names = gt.resolve(datasets)
    loaded = [gt.load(name, data_dir, limit) for name in names]
    client = ChatClient(base_url, resolve_api_key(base_url, api_key_env), client_config)
    try:
        await client.check()
        return [await cache.generate_cache(results_dir, model, d, client, n, temperature, max_tokens, progress)
                for d in loaded]
    finally:
        await client.aclose()


async def evaluate(results_dir: Path, model: str, strategy: str, sample: int, seed: int, datasets: str | None,
                   *, n: int | None = None, temperature: float | None = None, consensus_model: str | None = None,
                   judge: str | None = None, base_url: str | None = None, api_key_env: str | None = None,
                   baseline_model: str | None = None, client_config: ClientConfig | None = None) -> Result:
    strategies = resolve_strategies(strategy)
    names = gt.resolve(datasets) if datasets else sorted({e.dataset for e in cache.entries(results_dir, model)})
    if not names:
        raise UsageError(f"no ensemble cache for model {model!r} under {results_dir}; make one with: shaberi "
                         "ensemble generate-cache, or import-responses")
    clients: dict = {}
    config = client_config or ClientConfig()
    try:
        consensus = shared_llm(consensus_model, base_url, api_key_env, config, clients, "--consensus-model",
                               "--api-key-env") \
            if consensus_model else None
        grader = shared_llm(judge, base_url, api_key_env, config, clients, "--judge",
                            "--api-key-env") if judge else None
        for client in clients.values():
            await client.check()
        baseline = (baseline_model, None, None) if baseline_model else None
        return await quick_eval(results_dir, model, strategies, names, sample, seed, n=n, temperature=temperature,
                                consensus=consensus, judge=grader, baseline=baseline)
    finally:
        for client in clients.values():
            await client.aclose()


def load_baselines(path: Path, model: str) -> dict:
    """The committed gate configuration of a model: datasets, strategies, sample, seed (and, for the record,
    the accuracies accepted last)."""
    try:
        config = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise DataError(f"cannot read the baseline file {path}: {exc}") from None
    entry = config.get("models", {}).get(model)
    if entry is None:
        raise UsageError(f"{path} has no entry for model {model!r}; models there: "
                         f"{', '.join(config.get('models', {})) or 'none'}")
    return {"alpha": config.get("alpha", 0.10)} | entry


async def check(results_dir: Path, baseline_file: Path, model: str, *, consensus_model: str | None = None,
                judge: str | None = None, base_url: str | None = None, api_key_env: str | None = None,
                strategies: list[str] | None = None, datasets: list[str] | None = None) -> tuple[Result, dict]:
    """The configured evaluation of ``model``; ``strategies``/``datasets``: one CI job's slice of it (each must
    be configured: a job cannot check what the committed file does not)."""
    entry = load_baselines(baseline_file, model)
    for what, asked in (("strategies", strategies), ("datasets", datasets)):
        if unknown := [x for x in asked or [] if x not in entry[what]]:
            raise UsageError(f"{baseline_file} configures {what} {', '.join(entry[what])} for {model!r}, not "
                             f"{', '.join(unknown)}")
    result = await evaluate(results_dir, model, ",".join(strategies or entry["strategies"]), entry["sample"],
                            entry["seed"], ",".join(datasets or entry["datasets"]), consensus_model=consensus_model,
                            judge=judge, base_url=base_url, api_key_env=api_key_env)
    return result, entry
