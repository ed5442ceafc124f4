"""The ensemble cache: N answers per question, generated once (or imported), evaluated many times.

A cache entry is a run whose identity is (model, dataset, N, temperature) and nothing else: its tag is
``ensemble-<dataset>-n<N>-t<temperature>`` (``-recorded`` for imported responses), so any sample size
or seed of a later evaluation reads the same rows. Members are ``answers`` rows with ``sample_index``
0…N−1 and ``strategy = ''``; sample 0 is the single-model baseline. Generation goes through the same
resumable stage as the chat benchmarks (``shaberi.generate``): a killed run resumes, nothing is paid
twice. The cache is the Parquet tables of a results root (``--results-dir``; a few MB per dataset),
which a team can commit next to its code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..benchmarks import Dataset, read_rows
from ..errors import DataError, UsageError
from ..generate import GenerationConfig, Progress, generate, write_questions
from ..lineage import answer_hash
from ..llm.client import ChatClient, endpoint_limits
from ..prompts import generation_template, template_hash
from ..run import RunInfo, validate_name
from ..tables.rows import AnswerKey, answer
from ..tables.selection import find_runs
from ..tables.store import Store, now_us

__all__ = ["CacheEntry", "entries", "find", "generate_cache", "import_responses", "tag_for"]

_TAG = re.compile(r"^ensemble-(?P<dataset>.+)-n(?P<n>\d+)-(?:t(?P<temperature>[\d.]+)|recorded)$")


def tag_for(dataset: str, n: int, temperature: float | None) -> str:
    return f"ensemble-{dataset}-n{n}-" + ("recorded" if temperature is None else f"t{temperature:g}")


@dataclass(frozen=True)
class CacheEntry:
    run_id: str
    model: str
    dataset: str
    n: int
    temperature: float | None  # None: imported responses


def entries(results_dir: Path, model: str | None = None) -> list[CacheEntry]:
    found = []
    for r in find_runs(results_dir, "ensemble-", match="prefix"):
        run_id, run_model, tag = r.run_id, r.model, r.tag
        m = _TAG.match(tag)
        if m and (model is None or run_model == model):
            t = m["temperature"]
            found.append(CacheEntry(run_id, run_model, m["dataset"], int(m["n"]), None if t is None else float(t)))
    return found


def find(results_dir: Path, model: str, dataset: str, n: int | None = None,
         temperature: float | None = None) -> CacheEntry:
    """The cache entry of a model and dataset; ``n`` and ``temperature`` choose among several."""
    candidates = [e for e in entries(results_dir, model) if e.dataset == dataset and (n is None or e.n == n)
                  and (temperature is None or e.temperature == temperature)]
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        have = sorted({(e.model, e.dataset) for e in entries(results_dir)})
        raise UsageError(f"no ensemble cache for model {model!r} and dataset {dataset!r} under {results_dir}; "
                         "make one with: shaberi ensemble generate-cache (or import-responses); present: "
                         + (", ".join(f"{m}/{d}" for m, d in have) or "none"))
    raise UsageError(f"several caches for {model!r} on {dataset!r}: "
                     + ", ".join(f"--n {e.n} --temperature {e.temperature}" for e in candidates) + "; choose one")


def _info(model: str, dataset: Dataset, n: int, temperature: float | None, base_url: str, api_key: str | None,
          config: dict) -> RunInfo:
    return RunInfo(model=model, tag=tag_for(dataset.benchmark, n, temperature), base_url=base_url, api_key=api_key,
                   generation_config=config | {"ensemble": {"dataset": dataset.benchmark, "n": n,
                                                            "temperature": temperature}},
                   benchmarks=[dataset.benchmark], datasets={dataset.benchmark: dataset.provenance()},
                   prompt_hashes={generation_template(dataset.benchmark): template_hash(
                       generation_template(dataset.benchmark))})


async def generate_cache(results_dir: Path, model: str, dataset: Dataset, client: ChatClient, n: int,
                         temperature: float, max_tokens: int = 2048, progress: Progress | None = None) -> str:
    """N answers to every question of ``dataset``; resumable. Returns the cache entry's run id."""
    validate_name("model", model)
    if n < 1:
        raise UsageError("--n must be at least 1")
    config = GenerationConfig(temperature=temperature, max_tokens=max_tokens, samples=n)
    info = _info(model, dataset, n, temperature, client.base_url, None, {"temperature": temperature,
                                                                        "max_tokens": max_tokens})
    store = Store(results_dir)
    with store.lock(info.run_id, f"ensemble cache {model!r} {dataset.benchmark!r}"):
        store.replace("runs", info.run_id, [info.row("running")])
        write_questions(store, info.run_id, [dataset])
        await generate(store, info.run_id, model, [dataset], client, config, progress=progress)
        store.replace("runs", info.run_id, [info.row("ok", None, endpoint_limits([client]))])
    return info.run_id


def import_responses(results_dir: Path, model: str, dataset: Dataset, files: list[Path]) -> tuple[str, list[int]]:
    """Pre-recorded responses as ensemble members: one JSONL file (question_id, response) per member, in the
    order given (the first is the baseline). A question a file lacks becomes an error row. Importing the
    same files again replaces the rows with the same ones. Returns the run id and the rows per member."""
    validate_name("model", model)
    if not files:
        raise UsageError("give at least one response file (JSON Lines with question_id and response)")
    ids = {q.question_id for q in dataset.questions}
    info = _info(model, dataset, len(files), None, "", None, {"files": [str(f) for f in files]})
    rows, counts, at = [], [], now_us()
    for index, path in enumerate(files):
        records = read_rows(path)
        if records and not {"question_id", "response"} <= set(records[0]):
            raise DataError(f"{path} should have question_id and response columns (it has {', '.join(records[0])})")
        by_id = {str(r["question_id"]): r for r in records}
        unknown = sorted(set(by_id) - ids)
        if unknown:
            raise DataError(f"{path}: {len(unknown)} question ids that {dataset.benchmark} does not have, e.g. "
                            f"{unknown[0]}; is it the right --dataset?")
        counts.append(len(by_id))
        for q in dataset.questions:
            r = by_id.get(q.question_id)
            member = (r or {}).get("model") or path.stem
            key, recorded = AnswerKey(dataset.benchmark, q.question_id, index), f"recorded:{path.name}"
            if r is None or r.get("response") is None:
                rows.append(answer(info.run_id, key, str(member), calls=0, attempts=0, request_hash=recorded,
                                   created_at=at, error=f"no response in {path.name}", error_type="missing"))
            else:
                rows.append(answer(info.run_id, key, str(member), calls=0, attempts=0, request_hash=recorded,
                                   created_at=at, content=str(r["response"]),
                                   answer_hash=answer_hash(str(r["response"])), finish_reason="recorded"))
    store = Store(results_dir)
    with store.lock(info.run_id, f"import of {model!r} {dataset.benchmark!r}"):
        store.replace("runs", info.run_id, [info.row("ok")])
        write_questions(store, info.run_id, [dataset])
        store.replace("answers", info.run_id, rows)
    return info.run_id, counts
