"""What the ``shaberi ensemble …`` commands do, beyond parsing: inputs checked, clients made, stages run."""

from __future__ import annotations

import asyncio
import math
import sys
import tempfile
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from ..errors import BudgetSpent, DataError, UsageError
from ..generate import BenchmarkProgress, Progress
from ..llm.client import ChatClient, ClientConfig
from ..llm.config import MAX_COUNT
from ..llm.endpoints import check_base_url, resolve_api_key, shared_llm
from ..llm.spending import free_note, open_budget
from . import cache
from . import datasets as gt
from .evaluate import quick_eval, refuse_bad_request
from .gate import ALPHA
from .result import Result, accuracy
from .strategies import resolve as resolve_strategies

__all__ = ["Baselines", "Imported", "Made", "check", "evaluate", "family_name", "generate", "import_responses",
           "load_baselines", "regenerate_baseline"]


class Made(NamedTuple):
    """One cache entry generated: what this call did, where it was written, and how many questions have all N
    members byte-identical (``identical`` of the ``complete`` ones with all N answered)."""

    run_id: str
    dataset: str
    done: BenchmarkProgress
    path: Path | None
    identical: int
    complete: int
    stopped: BudgetSpent | None = None  # the spending limit stopped it (``budget``): the entry is partial
    counted: float | None = None  # with max_cost: what the limit (over every entry made) counts as spent


async def generate(results_dir: Path, data_dir: Path, model: str, base_url: str, datasets: str, n: int,
                   temperature: float, max_tokens: int, api_key_env: str | None, client_config: ClientConfig,
                   limit: int | None = None, progress: Progress | None = None, cache_dir: Path | None = None,
                   max_cost: float | None = None, pricing: Path | None = None) -> list[Made]:
    """Every dataset at once through one client, so its limit is shared: a fast dataset's free slots go to a
    slow one. With ``cache_dir``: its files are read first (what they hold is not asked again) and written
    after. ``max_cost`` (USD): a spending limit over the entries made (``budget``), priced from ``pricing``."""
    check_base_url(base_url)
    for option, ok, want in (("--n", 1 <= n <= MAX_COUNT, f"between 1 and {MAX_COUNT:,}"),
                             ("--max-tokens", 1 <= max_tokens <= MAX_COUNT, f"between 1 and {MAX_COUNT:,}"),
                             ("--temperature", math.isfinite(temperature) and 0 <= temperature <= 2,
                              "between 0 and 2")):
        if not ok:
            value = {"--n": n, "--max-tokens": max_tokens, "--temperature": temperature}[option]
            raise UsageError(f"{option} {value if isinstance(value, int) else f'{value:g}'} is out of range: it must "
                             f"be {want}")
    names = gt.resolve(datasets)
    loaded = [gt.load(name, data_dir, limit) for name in names]
    if cache_dir is not None:
        cache.check_writable(cache_dir, model)
        if cache_dir.is_dir():
            cache.materialize(results_dir, cache_dir, data_dir, [model])
    client = ChatClient(base_url, resolve_api_key(base_url, api_key_env), client_config)
    try:
        client.models.add(model)
        if max_cost is not None:  # an unpriced model is bad input, before anything is written
            run_ids = [cache.cache_info(model, d, n, temperature, client.base_url, max_tokens).run_id for d in loaded]
            client.budget = open_budget(max_cost, results_dir, pricing, run_ids, [(model, False, client.base_url)])
            for m, url in client.budget.free.items():
                print(f"note: {free_note(m, url)}", file=sys.stderr)
        await client.check()
        made = await asyncio.gather(*(cache.generate_cache(results_dir, model, d, client, n, temperature,
                                                           max_tokens, progress) for d in loaded))
    finally:
        await client.aclose()
    counted = None if client.budget is None else client.budget.spent
    return [Made(run_id, d.benchmark, done, None if cache_dir is None else cache.export(
        results_dir, cache.CacheEntry(run_id, model, d.benchmark, n, temperature), cache_dir),
        *cache.identical_members(results_dir, run_id, n), stopped, counted)
        for d, (run_id, done, stopped) in zip(loaded, made, strict=True)]


class Imported(NamedTuple):
    """One import of recorded responses: the entry's run id, the responses per member (every member answers
    the same questions), the dataset's questions (more than answered: only those answered are evaluated), and
    ``cache.identical_members`` of it."""

    run_id: str
    counts: list[int]
    questions: int
    identical: int
    complete: int


def import_responses(results_dir: Path, data_dir: Path, model: str, dataset: str, files: list[Path],
                     cache_dir: Path | None = None) -> Imported:
    (name,) = gt.resolve(dataset)
    if cache_dir is not None:
        cache.check_writable(cache_dir, model)
    loaded = gt.load(name, data_dir)
    run_id, counts = cache.import_responses(results_dir, model, loaded, files)
    if cache_dir is not None:
        cache.export(results_dir, cache.CacheEntry(run_id, model, name, len(files), None), cache_dir)
    return Imported(run_id, counts, len(loaded.questions), *cache.identical_members(results_dir, run_id, len(files)))


async def evaluate(results_dir: Path, model: str, strategy: str, sample: int, seed: int, datasets: str | None,
                   *, n: int | None = None, temperature: float | None = None, consensus_model: str | None = None,
                   judge: str | None = None, base_url: str | None = None, api_key_env: str | None = None,
                   baseline_model: str | None = None, client_config: ClientConfig | None = None,
                   alpha: float = ALPHA, family_tests: int = 0, family: str = "", require_complete: bool = False,
                   cache_dir: Path | None = None, data_dir: Path | None = None) -> Result:
    if not 0 < alpha < 1:
        raise UsageError(f"--significance {alpha:g} is out of range: it must be between 0 and 1, e.g. 0.1")
    strategies = resolve_strategies(strategy)
    refuse_bad_request(strategies, sample, bool(consensus_model))
    if datasets:
        gt.resolve(datasets)  # bad input is refused before a cache file is read in
    if cache_dir is not None:
        if data_dir is None:
            raise UsageError("--cache-dir needs --data-dir (the datasets the cached answers answer)")
        cache.materialize(results_dir, cache_dir, data_dir, [model] + ([baseline_model] if baseline_model else []))
    names = gt.resolve(datasets) if datasets else sorted({e.dataset for e in cache.entries(results_dir, model)})
    if not names:
        raise UsageError(f"no ensemble cache for model {model!r} under {results_dir}; make one with: shaberi "
                         "ensemble generate-cache, or import-responses")
    clients: dict[tuple[str, str | None], ChatClient] = {}
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
                                consensus=consensus, judge=grader, baseline=baseline, alpha=alpha,
                                family_tests=family_tests, family=family, require_complete=require_complete)
    finally:
        for client in clients.values():
            await client.aclose()


class Baselines:
    """The committed gate configuration (``baselines/quick-eval.json``): per model, the datasets, strategies,
    sample and seed it is checked on (and optionally ``baseline_model``: a separately cached single-model run
    as the baseline), at the file's α, and the accuracies accepted last."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.config = orjson.loads(path.read_bytes())
        except (OSError, orjson.JSONDecodeError) as exc:
            raise DataError(f"cannot read the baseline file {path}: {exc}") from None

    def models(self) -> dict[str, Any]:
        """The file's entries by model; a file that holds none in that shape is bad input (one line, exit 2)."""
        models = self.config.get("models") if isinstance(self.config, dict) else None
        if not isinstance(models, dict):
            raise DataError(f'{self.path} should be a JSON object with "models": {{MODEL: {{"datasets": [...], '
                            '"strategies": [...], "sample": N, "seed": N}}}}')
        return models

    def entry(self, model: str) -> dict[str, Any]:
        """The model's entry, checked: a malformed file is bad input (one line, exit 2), not a crash."""
        models = self.models()
        entry = models.get(model)
        if entry is None:
            raise UsageError(f"{self.path} has no entry for model {model!r}; models there: "
                             f"{', '.join(models) or 'none'}")
        entry = {"alpha": self.config.get("alpha", ALPHA)} | (entry if isinstance(entry, dict) else {})
        for key, ok, want in (
            ("datasets", lambda v: isinstance(v, list) and v and all(isinstance(x, str) for x in v), "a list of names"),
            ("strategies", lambda v: isinstance(v, list) and v and all(isinstance(x, str) for x in v),
             "a list of names"),
            ("sample", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1, "a whole number ≥ 1"),
            ("seed", lambda v: isinstance(v, int) and not isinstance(v, bool), "a whole number"),
            ("alpha", lambda v: isinstance(v, int | float) and not isinstance(v, bool) and 0 < v < 1,
             "a number between 0 and 1"),
            ("baseline_model", lambda v: v is None or isinstance(v, str), "a model name"),
            ("accuracy", lambda v: v is None or (isinstance(v, dict) and all(
                isinstance(a, dict) and all(x is None or isinstance(x, int | float) for x in a.values())
                for a in v.values())), "an object of datasets' accuracies, e.g. {\"gsm8k\": {\"baseline\": 0.8}}"),
        ):
            if not ok(entry.get(key)):
                raise DataError(f"{self.path}: models.{model}.{key} should be {want}, not "
                                f"{orjson.dumps(entry.get(key)).decode()}")
        return entry

    @classmethod
    def empty(cls, path: Path) -> Baselines:
        """A configuration file not written yet (``regenerate-baseline`` adds its first entry)."""
        made = cls.__new__(cls)
        made.path, made.config = path, {"alpha": ALPHA, "models": {}}
        return made

    def save(self) -> None:
        scratch = self.path.with_suffix(".tmp")
        scratch.write_bytes(orjson.dumps(self.config, option=orjson.OPT_INDENT_2) + b"\n")
        scratch.replace(self.path)


def load_baselines(path: Path, model: str) -> dict[str, Any]:
    return Baselines(path).entry(model)


async def check(results_dir: Path, baseline_file: Path, model: str, *, consensus_model: str | None = None,
                judge: str | None = None, base_url: str | None = None, api_key_env: str | None = None,
                strategies: list[str] | None = None, datasets: list[str] | None = None,
                significance: float | None = None, require_complete: bool = False, cache_dir: Path | None = None,
                data_dir: Path | None = None) -> tuple[Result, dict[str, Any]]:
    """The configured evaluation of ``model``; ``strategies``/``datasets``: one CI job's slice of it (each must
    be configured: a job cannot check what the committed file does not). The family is the whole
    configuration (``gate``), whichever slice this job checks."""
    entry = load_baselines(baseline_file, model)
    for what, asked in (("strategies", strategies), ("datasets", datasets)):
        if unknown := [x for x in asked or [] if x not in entry[what]]:
            raise UsageError(f"{baseline_file} configures {what} {', '.join(entry[what])} for {model!r}, not "
                             f"{', '.join(unknown)}")
    tests = 2 * len(entry["strategies"]) * len(entry["datasets"])
    result = await evaluate(results_dir, model, ",".join(strategies or entry["strategies"]), entry["sample"],
                            entry["seed"], ",".join(datasets or entry["datasets"]), consensus_model=consensus_model,
                            judge=judge, base_url=base_url, api_key_env=api_key_env,
                            baseline_model=entry.get("baseline_model"),
                            alpha=entry["alpha"] if significance is None else significance, family_tests=tests,
                            family=family_name(model, entry), require_complete=require_complete,
                            cache_dir=cache_dir, data_dir=data_dir)
    return result, entry


def family_name(model: str, entry: dict[str, Any]) -> str:
    """The family in words, and its identity in the report: the model's configuration, not the file's path
    (each CI job has its own)."""
    return (f"{model}: {', '.join(entry['strategies'])} × {', '.join(entry['datasets'])}, sample {entry['sample']}, "
            f"seed {entry['seed']}")


async def regenerate_baseline(results_dir: Path, baseline_file: Path, model: str, *, significance: float | None = None,
                              datasets: list[str] | None = None, strategies: list[str] | None = None,
                              sample: int | None = None, seed: int | None = None, cache_dir: Path | None = None,
                              data_dir: Path | None = None, **options: object
                              ) -> tuple[Result, dict[str, Any], dict[str, Any]]:
    """Evaluate the whole configuration of ``model`` afresh and make its accuracies the accepted ones (and
    ``significance``, when given, the file's α). ``datasets``, ``strategies``, ``sample``, ``seed``: the entry's
    configuration, replaced (a model the file lacks gets an entry; a file that does not exist yet is made).
    Afresh: in a scratch results root, from the cache's member answers alone (``cache_dir``, or the entries of
    ``results_dir`` exported to a scratch cache), so every consensus answer and grade is made again: a changed
    strategy is measured, never read back from an earlier run. Nothing is written on bad input. Returns the
    result, the old accuracies and the new."""
    if not baseline_file.parent.is_dir():
        raise UsageError(f"--baseline-file {baseline_file}: its folder {baseline_file.parent} does not exist")
    if sample is not None and sample < 1:  # the option's fault, not the file's (which entry() would blame)
        raise UsageError(f"--sample {sample}: give the questions to draw per dataset, a whole number of 1 or more")
    if significance is not None and not 0 < significance < 1:
        raise UsageError(f"--significance {significance:g}: give a level between 0 and 1, e.g. 0.05")
    baselines = Baselines(baseline_file) if baseline_file.exists() else Baselines.empty(baseline_file)
    models = baselines.models()
    old_entry: dict = models[model] if isinstance(models.get(model), dict) else {}
    given = {"datasets": datasets and list(dict.fromkeys(datasets)),  # each once: a repeat would double the family
             "strategies": strategies and list(dict.fromkeys(strategies)), "sample": sample, "seed": seed}
    if not old_entry and (missing := [f"--{k}" for k in ("datasets", "strategies") if not given[k]]):
        raise UsageError(f"{baseline_file} has no entry for model {model!r}: give {' and '.join(missing)} (and "
                         "--sample, --seed) to add one")
    if datasets:
        gt.resolve(",".join(datasets))
    if strategies:
        resolve_strategies(",".join(strategies))
    defaults = {} if old_entry else {"sample": 500, "seed": 0}
    mine = defaults | {k: v for k, v in old_entry.items() if k != "accuracy"} \
        | {k: v for k, v in given.items() if v is not None}
    models[model] = mine
    entry = baselines.entry(model)  # the new configuration, checked before anything runs
    with tempfile.TemporaryDirectory(prefix="shaberi-baseline-") as scratch:
        draft = Path(scratch) / "quick-eval.json"
        draft.write_bytes(orjson.dumps(baselines.config))
        cached = cache_dir
        if cached is None:  # the results root's member answers, as a cache file each
            cached = Path(scratch) / "cache"
            for name in entry["datasets"]:
                for who, baseline in ((model, False), *(((entry["baseline_model"], True),)
                                                       if entry.get("baseline_model") else ())):
                    found = cache.find(results_dir, who, name, baseline=baseline)
                    cache.export(results_dir, found, cached)
        result, entry = await check(Path(scratch) / "results", draft, model, significance=significance,
                                    cache_dir=cached, data_dir=data_dir, **options)  # type: ignore[arg-type]
    new = {name: {"baseline": accuracy(d.baseline)} | {s: accuracy(o.correct) for s, o in d.strategies.items()}
           for name, d in result.datasets.items()}
    new = {name: {k: None if v is None else round(v, 6) for k, v in values.items()} for name, values in new.items()}
    old = old_entry.get("accuracy") or {}
    mine["accuracy"] = new
    if significance is not None:  # where the model's α is read from: its own entry, else the file's
        (mine if "alpha" in mine else baselines.config)["alpha"] = significance
    baselines.save()
    return result, old, new
