"""The ensemble cache: N answers per question, generated once (or imported), evaluated many times.

A cache entry is a run whose identity is (model, dataset, N, temperature) and nothing else: its tag is
``ensemble-<dataset>-n<N>-t<temperature>`` (``-recorded`` for imported responses), so any sample size
or seed of a later evaluation reads the same rows. Members are ``answers`` rows with ``sample_index``
0…N−1 and ``strategy = ''``; sample 0 is the single-model baseline. Generation goes through the same
resumable stage as the chat benchmarks (``shaberi.generate``): a killed run resumes, nothing is paid
twice. Member i is asked with seed i, so an endpoint that honours seeds (a deterministic one included)
gives N samples rather than one answer N times; ``identical_members`` counts the questions where the N
answers are the same bytes anyway, which the CLI warns about.

The cache lives in the tables of a results root (``--results-dir``, git-ignored). To **commit** it, give
``--cache-dir`` (e.g. ``.cache/ensemble``): ``export`` writes one compact Parquet file per entry there,
``<dir>/<model>/<dataset>-n<N>-t<T>.parquet`` (``-recorded`` for imports), holding only the member answers
(question id, sample index, member model, text or error, finish reason) in question order, with nothing
that depends on where or when they were made (no endpoint, request hash, timestamp or latency), so that
answering unchanged questions again writes the same bytes and a git diff shows only what changed.
``materialize`` reads such files back into the results root (zero calls) before an evaluation, and before a
generation so that a committed cache is extended, not paid for again. A single-model baseline cached the
same way (``--n 1 --temperature 0``) goes in a directory of its own (e.g. ``.cache/baselines``); readers
scan every file below the directory they are given.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..benchmarks import Dataset, read_located
from ..errors import BudgetSpent, DataError, UsageError
from ..generate import BenchmarkProgress, GenerationConfig, Progress, generate, write_questions
from ..lineage import answer_hash
from ..llm.client import ChatClient, endpoint_limits
from ..prompts import check_generation, generation_template, template_hash
from ..resources import sha256_file
from ..run_info import RunInfo, run_id_for, validate_name
from ..tables.rows import AnswerKey, RunRecord, answer, runs
from ..tables.schema import TABLES
from ..tables.selection import find_runs
from ..tables.store import Store, now_us

__all__ = ["CacheEntry", "cache_files", "cache_info", "check_writable", "entries", "export", "find", "generate_cache",
           "identical_members", "import_responses", "materialize", "tag_for"]

# the member columns a cache file keeps, in this order: nothing that depends on where or when they were made
_COLUMNS = ("question_id", "sample_index", "model", "content", "error", "error_type", "finish_reason")

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
         temperature: float | None = None, baseline: bool = False) -> CacheEntry:
    """The cache entry of a model and dataset; ``n`` and ``temperature`` choose among several, and so does the
    role when they are not given: an ensemble is the one entry with N > 1, a separate ``baseline`` the one
    with N = 1 (the same model cached both ways)."""
    candidates = [e for e in entries(results_dir, model) if e.dataset == dataset and (n is None or e.n == n)
                  and (temperature is None or e.temperature == temperature)]
    if len(candidates) > 1 and n is None and len(by_role := [e for e in candidates if (e.n == 1) == baseline]) == 1:
        return by_role[0]
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
          config: dict[str, Any]) -> RunInfo:
    return RunInfo(model=model, tag=tag_for(dataset.benchmark, n, temperature), base_url=base_url, api_key=api_key,
                   generation_config=config | {"ensemble": {"dataset": dataset.benchmark, "n": n,
                                                            "temperature": temperature}},
                   benchmarks=[dataset.benchmark], datasets={dataset.benchmark: dataset.provenance()},
                   prompt_hashes={generation_template(dataset.benchmark): template_hash(
                       generation_template(dataset.benchmark))})


async def generate_cache(results_dir: Path, model: str, dataset: Dataset, client: ChatClient, n: int,
                         temperature: float, max_tokens: int = 2048, progress: Progress | None = None
                         ) -> tuple[str, BenchmarkProgress, BudgetSpent | None]:
    """N answers to every question of ``dataset``, member i asked with ``seed`` i, so that an endpoint that
    honours a seed samples each member afresh instead of repeating one answer N times (the seed is in the
    request body, hence in its ``request_hash``). Resumable: a stored answer to a (question, sample) is kept
    whatever endpoint or request options made it (the entry's identity is its model, dataset, N and
    temperature), so the seed never makes a cache made without it be paid for again. Returns the cache
    entry's run id, what this call did (done, reused, errors), and why the spending limit stopped it (the
    client's ``budget``: the entry is left ``partial``), if it did."""
    validate_name("model", model)
    if n < 1:
        raise UsageError("--n must be at least 1")
    check_generation(dataset.questions)
    config = GenerationConfig(temperature=temperature, max_tokens=max_tokens, samples=n, seed=0)
    info = cache_info(model, dataset, n, temperature, client.base_url, max_tokens)
    store = Store(results_dir)
    progress = progress or Progress()
    stopped: BudgetSpent | None = None
    with store.lock(info.run_id, f"ensemble cache {model!r} {dataset.benchmark!r}"):
        store.replace("runs", info.run_id, [info.row("running")])
        write_questions(store, info.run_id, [dataset])
        try:
            await generate(store, info.run_id, model, [dataset], client, config, progress=progress, by_key=True)
        except BudgetSpent as exc:  # what was paid for is recorded; the same command with a higher limit goes on
            stopped = exc
        store.replace("runs", info.run_id, [info.row("partial" if stopped else "ok",
                                                     f"stopped: {stopped}" if stopped else None,
                                                     endpoint_limits([client]))])
    return info.run_id, progress.benchmarks[dataset.benchmark], stopped


def cache_info(model: str, dataset: Dataset, n: int, temperature: float, base_url: str, max_tokens: int
               ) -> RunInfo:
    """The run of a generated cache entry (its run id names the entry)."""
    return _info(model, dataset, n, temperature, base_url, None, {"temperature": temperature,
                                                                 "max_tokens": max_tokens, "seed": "sample_index"})


def identical_members(results_dir: Path, run_id: str, n: int) -> tuple[int, int]:
    """(questions whose N members are all answered and byte-identical, questions whose N members are all
    answered) in a cache entry: where they are identical, a vote or any consensus over them measures nothing
    (an endpoint that ignores seed and temperature, or one file imported N times)."""
    answers = Store(results_dir).read("answers", run_id, ["question_id", "strategy", "content", "error"])
    members = answers.filter(pc.and_(pc.equal(answers["strategy"], ""), pc.is_null(answers["error"])))
    if n < 2 or members.num_rows == 0:
        return 0, 0
    per = members.group_by("question_id").aggregate([("content", "count"), ("content", "count_distinct")])
    whole = pc.equal(per["content_count"], n)
    return (int(pc.sum(pc.and_(whole, pc.equal(per["content_count_distinct"], 1))).as_py() or 0),
            int(pc.sum(whole).as_py() or 0))


def import_responses(results_dir: Path, model: str, dataset: Dataset, files: list[Path]) -> tuple[str, list[int]]:
    """Pre-recorded responses as ensemble members: one JSONL file (question_id, response) per member, in the
    order given (the first is the baseline). Every member must answer the same questions; a question no file
    answers is not an answer, so no row is written for it: quick-eval samples from the answered questions
    only and states the coverage (a score over what was answered, as lm-evaluation-harness reports one).
    Refused before anything is written: an empty file, a row without question_id or response, a repeated
    question_id (a later line would silently replace the member's answer), a response that is not text (a
    number, null, an object: never made into a text), an id the dataset does not have, members that answer
    different questions. Importing the same files again replaces the rows with the same ones. Returns the
    run id and the rows per member."""
    validate_name("model", model)
    if not files:
        raise UsageError("give at least one response file (JSON Lines with question_id and response)")
    ids = {q.question_id for q in dataset.questions}
    members = [_responses(path, dataset.benchmark, ids) for path in files]
    first = set(members[0])
    for path, by_id in zip(files[1:], members[1:], strict=True):
        if set(by_id) != first:
            lacks, extra = sorted(first - set(by_id), key=_natural), sorted(set(by_id) - first, key=_natural)
            said = (f"lacks {len(lacks):,} question(s) that {files[0]} answers (e.g. {lacks[0]})" if lacks else
                    f"answers {len(extra):,} question(s) that {files[0]} does not (e.g. {extra[0]})")
            raise DataError(f"{path} {said}: every member must answer the same questions; add them, or leave them "
                            "out of every file (a question no file answers is not evaluated)")
    info = _info(model, dataset, len(files), None, "", None, {"files": [str(f) for f in files]})
    rows, at = [], now_us()
    for index, (path, by_id) in enumerate(zip(files, members, strict=True)):
        for q in dataset.questions:
            if (r := by_id.get(q.question_id)) is None:
                continue  # not answered: no row, never a wrong answer
            text = r["response"]
            rows.append(answer(info.run_id, AnswerKey(dataset.benchmark, q.question_id, index),
                               str(r.get("model") or path.stem), calls=0, attempts=0,
                               request_hash=f"recorded:{path.name}", created_at=at, content=text,
                               answer_hash=answer_hash(text), finish_reason="recorded"))
    store = Store(results_dir)
    with store.lock(info.run_id, f"import of {model!r} {dataset.benchmark!r}"):
        store.replace("runs", info.run_id, [info.row("ok")])
        write_questions(store, info.run_id, [dataset])
        store.replace("answers", info.run_id, rows or TABLES["answers"].schema.empty_table())
    return info.run_id, [len(m) for m in members]


def _responses(path: Path, benchmark: str, ids: set[str]) -> dict[str, dict[str, Any]]:
    """One member file's rows by question id, every row checked (``import_responses``)."""
    records, where = read_located(path)
    if not records:
        raise DataError(f"{path} holds no responses (an empty member file): give one JSON Lines row "
                        '{"question_id": ..., "response": "..."} per question the member answered')
    by_id: dict[str, dict[str, Any]] = {}
    first: dict[str, str] = {}
    for r, at in zip(records, where, strict=True):
        if not isinstance(r, dict) or not {"question_id", "response"} <= set(r):
            has = ", ".join(r) if isinstance(r, dict) else type(r).__name__
            raise DataError(f"{at}: a row should have question_id and response (it has {has or 'nothing'})")
        qid = r["question_id"]
        if not ((isinstance(qid, str) and qid.strip()) or (isinstance(qid, int) and not isinstance(qid, bool))):
            raise DataError(f"{at}: question_id {_json(qid)} is not an id (text or a whole number)")
        qid = str(qid)
        if qid in by_id:
            raise DataError(f"{at}: question_id {qid} is given again (first at {first[qid]}): a member answers each "
                            "question once; keep the line that is its answer")
        if not isinstance(r["response"], str):
            raise DataError(f"{at}: the response to question {qid} is {_json(r['response'])}, not text: give the "
                            'reply as a string ("" for an empty one), or leave the question out of the file')
        if r.get("model") is not None and not isinstance(r["model"], str):
            raise DataError(f"{at}: model {_json(r['model'])} is not a name")
        by_id[qid], first[qid] = r, at
    if unknown := sorted(set(by_id) - ids, key=_natural):
        raise DataError(f"{path}: {len(unknown)} question ids that {benchmark} does not have, e.g. {unknown[0]}; "
                        "is it the right --dataset?")
    return by_id


def _json(value: object) -> str:
    """A value as the file has it, short, for a message."""
    try:
        text = orjson.dumps(value).decode()
    except TypeError:
        text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def _natural(qid: str) -> tuple[int, str]:
    return len(qid), qid


def check_writable(cache_dir: Path, model: str) -> None:
    """Refuse, before any call is paid for, a --cache-dir the entries could not be written to."""
    for place in (cache_dir, cache_dir / model.replace("/", "__")):
        if place.exists() and not place.is_dir():
            raise UsageError(f"--cache-dir {cache_dir}: {place} is a file, not a directory; give a directory")


def cache_path(cache_dir: Path, entry: CacheEntry) -> Path:
    name = f"{entry.dataset}-n{entry.n}-" + ("recorded" if entry.temperature is None else f"t{entry.temperature:g}")
    return cache_dir / entry.model.replace("/", "__") / f"{name}.parquet"


def export(results_dir: Path, entry: CacheEntry, cache_dir: Path) -> Path:
    """Write the entry's member answers to its file under ``cache_dir`` (rewritten only when its rows change: the
    same rows from another pyarrow version, whose bytes differ, leave the committed file alone) and record the
    file's digest on the run, so ``materialize`` knows the two agree."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    store = Store(results_dir)
    rows = [r for r in store.read("answers", entry.run_id, [*_COLUMNS, "strategy"]).to_pylist() if not r["strategy"]]
    rows.sort(key=lambda r: (_natural(r["question_id"]), r["sample_index"]))
    run = store.read("runs", entry.run_id).to_pylist()[0]
    provenance: dict[str, Any] = next(iter(RunRecord.of(run).datasets.values()), {})
    schema = pa.schema([("question_id", pa.string()), ("sample_index", pa.int32()), ("model", pa.string()),
                        ("content", pa.string()), ("error", pa.string()), ("error_type", pa.string()),
                        ("finish_reason", pa.string())],
                       metadata={"shaberi.ensemble": orjson.dumps({
                           "model": entry.model, "dataset": entry.dataset, "n": entry.n,
                           "temperature": entry.temperature, "dataset_sha256": provenance.get("sha256")},
                           option=orjson.OPT_SORT_KEYS)})
    table = pa.Table.from_pylist([{c: r[c] for c in _COLUMNS} for r in rows], schema=schema)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd", compression_level=9, write_statistics=False,
                   row_group_size=1 << 20)
    data = sink.getvalue().to_pybytes()
    path = cache_path(cache_dir, entry)
    if path.is_file() and path.read_bytes() != data and _same(path, table):
        data = path.read_bytes()  # the same rows written by another pyarrow: keep the committed bytes
    if not path.is_file() or path.read_bytes() != data:
        path.parent.mkdir(parents=True, exist_ok=True)
        scratch = path.with_suffix(".parquet.tmp")
        scratch.write_bytes(data)
        os.replace(scratch, path)
    _note_digest(store, entry.run_id, hashlib.sha256(data).hexdigest())
    return path


def _same(path: Path, table: pa.Table) -> bool:
    """Whether the file at ``path`` holds exactly ``table`` (rows, types and metadata), however encoded."""
    try:
        there = pq.read_table(path)
    except (OSError, pa.ArrowException):
        return False
    key = b"shaberi.ensemble"
    return there.equals(table) and (there.schema.metadata or {}).get(key) == (table.schema.metadata or {}).get(key)


def _note_digest(store: Store, run_id: str, digest: str) -> None:
    run = RunRecord.of(store.read("runs", run_id).to_pylist()[0])
    if run.generation_config.get("cache_sha256") != digest:
        store.replace("runs", run_id, [runs(run.replace(generation_config=run.generation_config
                                                         | {"cache_sha256": digest}))])


def cache_files(cache_dir: Path, model: str | None = None) -> list[tuple[Path, dict[str, Any]]]:
    """Every cache file below ``cache_dir`` (of ``model``), with what its metadata says it holds (checked)."""
    found = []
    for path in sorted(cache_dir.rglob("*.parquet")):
        try:
            meta = orjson.loads((pq.read_schema(path).metadata or {})[b"shaberi.ensemble"])
            problem = _bad_meta(meta)
        except (OSError, KeyError, ValueError, pa.ArrowException) as exc:
            problem = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
        if problem:
            raise DataError(f"{path} is not an ensemble cache file ({problem}); write one with generate-cache or "
                            "import-responses --cache-dir")
        if model is None or meta["model"] == model:
            found.append((path, meta))
    return found


def _bad_meta(meta: object) -> str | None:
    if not isinstance(meta, dict):
        return "its metadata is not an object"
    t = meta.get("temperature")
    for key, ok in (("model", isinstance(meta.get("model"), str)), ("dataset", isinstance(meta.get("dataset"), str)),
                    ("n", isinstance(meta.get("n"), int) and not isinstance(meta.get("n"), bool) and meta["n"] >= 1),
                    ("temperature", t is None or (isinstance(t, int | float) and not isinstance(t, bool)))):
        if not ok:
            return f"its metadata's {key} is {meta.get(key)!r}"
    return None


def _read_file(path: Path, columns: list[str] | None = None) -> pa.Table:
    """A cache file's member rows (``columns`` of them), refused when they are not what ``export`` writes: a
    column missing or of another type (a ``content`` of numbers is no text), a row without its question or
    sample."""
    try:
        schema = pq.read_schema(path)
        table = pq.read_table(path, columns=columns)
    except (OSError, pa.ArrowException) as exc:
        raise DataError(f"cannot read the cache file {path} ({type(exc).__name__}: {' '.join(str(exc).split())}); "
                        "restore it from git") from None
    again = "write it again with generate-cache or import-responses --cache-dir"
    if missing := [c for c in _COLUMNS if c not in schema.names]:
        raise DataError(f"the cache file {path} lacks the column(s) {', '.join(missing)}; {again}")
    for name in _COLUMNS:
        kind = schema.field(name).type
        ok = pa.types.is_integer(kind) if name == "sample_index" else (
            pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_null(kind))
        if not ok:
            raise DataError(f"the cache file {path}: its column {name} holds {kind}, not "
                            f"{'whole numbers' if name == 'sample_index' else 'text'}; {again}")
    if "sample_index" in table.column_names and (table["sample_index"].null_count or (
            table.num_rows and pc.min(table["sample_index"]).as_py() < 0)):
        raise DataError(f"the cache file {path}: a row without a sample_index ≥ 0; {again}")
    if "question_id" in table.column_names and table["question_id"].null_count:
        raise DataError(f"the cache file {path}: a row without a question_id; {again}")
    return table


def _as_answers(file: pa.Table, run_id: str, benchmark: str, request_hash: str) -> pa.Table:
    """A cache file's rows as ``answers`` rows (columnar: 60,000 long answers stay a few hundred MB)."""
    n, schema = file.num_rows, TABLES["answers"].schema
    hashes = [None if error else answer_hash(content or "") for content, error in
              zip(file["content"].to_pylist(), file["error"].to_pylist(), strict=True)]
    given = {"run_id": pa.array([run_id] * n), "benchmark": pa.array([benchmark] * n),
             "strategy": pa.array([""] * n), "calls": pa.array([1] * n), "attempts": pa.array([0] * n),
             "request_hash": pa.array([request_hash] * n), "answer_hash": pa.array(hashes, pa.string()),
             "created_at": pa.array([now_us()] * n, schema.field("created_at").type)}
    columns = [given.get(f.name, file[f.name] if f.name in file.column_names else pa.nulls(n, f.type))
               for f in schema]
    return pa.Table.from_arrays([c.cast(f.type) for c, f in zip(columns, schema, strict=True)], schema=schema)


def materialize(results_dir: Path, cache_dir: Path, data_dir: Path, models: list[str]) -> list[CacheEntry]:
    """Bring ``models``' cache files into the results root: unchanged files are skipped; a changed one
    replaces the member answers it holds (the file is the committed truth), while members it lacks (paid for
    here, not exported yet), consensus answers and grades stay (those are keyed by the texts they came
    from). Zero calls."""
    from . import datasets as gt

    if not cache_dir.is_dir():
        raise UsageError(f"--cache-dir {cache_dir} is not a directory; write one with generate-cache --cache-dir")
    store, done = Store(results_dir), []
    # (model, file, metadata, run id, run there, digest)
    todo: list[tuple[str, Path, dict[str, Any], str, bool, str]] = []
    loaded: dict[str, Dataset] = {}
    for model in models:  # every file checked before anything is written: a broken one leaves the root as it was
        for path, meta in cache_files(cache_dir, model):
            n, temperature = int(meta["n"]), meta["temperature"]
            run_id = run_id_for(model, tag_for(meta["dataset"], n, temperature))
            done.append(CacheEntry(run_id, model, meta["dataset"], n, temperature))
            located = gt.locate(meta["dataset"], data_dir)
            if meta.get("dataset_sha256") not in (None, current := sha256_file(located)):
                raise DataError(f"{path} answers another version of {meta['dataset']} than {located} (sha256 "
                                f"{str(meta['dataset_sha256'])[:12]}… vs {current[:12]}…)")
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            stored = store.read("runs", run_id).to_pylist()
            if stored and RunRecord.of(stored[0]).generation_config.get("cache_sha256") == digest:
                continue  # this very file is in already
            _read_file(path, ["question_id", "sample_index"])
            if meta["dataset"] not in loaded:
                loaded[meta["dataset"]] = gt.load(meta["dataset"], data_dir)
            todo.append((model, path, meta, run_id, bool(stored), digest))
    for model, path, meta, run_id, there, digest in todo:
        n, temperature = int(meta["n"]), meta["temperature"]
        file = _read_file(path)
        dataset = loaded[meta["dataset"]]
        info = _info(model, dataset, n, temperature, "", None, {"temperature": temperature, "cache_file": path.name})
        with store.lock(run_id, f"materializing {path}"):
            # the runs row, which makes the entry visible, goes last: a kill before it leaves nothing half-read
            if not there or store.read("questions", run_id, ["question_id"]).num_rows == 0:
                write_questions(store, run_id, [dataset])
            filed = _as_answers(file, run_id, dataset.benchmark, f"cache:{path.name}")
            keys = pc.binary_join_element_wise(filed["question_id"], pc.cast(filed["sample_index"], pa.string()),
                                               "\x00")
            here = store.read("answers", run_id)
            here_keys = pc.binary_join_element_wise(here["question_id"], pc.cast(here["sample_index"], pa.string()),
                                                    "\x00")
            # consensus answers, and members paid for here that the file lacks, stay
            kept = here.filter(pc.or_(pc.not_equal(here["strategy"], ""),
                                      pc.invert(pc.is_in(here_keys, value_set=keys))))
            store.replace("answers", run_id, pa.concat_tables([kept.select(filed.column_names), filed]))
            if not there:
                store.replace("runs", run_id, [info.row("ok")])
            _note_digest(store, run_id, digest)
    return done
