"""The JSONL + manifest layout, for viewers and for people who do not want SQL.

    <results>/<model>/<tag>/manifest.json
    <results>/<model>/<tag>/artifacts/shaberi/
        answers/<benchmark>.jsonl
        judgements/judge_<judge>/<benchmark>.jsonl
        passes/<pass>/<benchmark>.jsonl
        normalized/{answers,judgements,scores}.jsonl
        metrics.json
    <results>/<model>/<base tag>/family.json        a family of runs {tag}-run1 … N

Folder names are the model and tag percent-encoded (``org/m`` is ``org%2Fm``, ``a/`` is ``a%2F``), so two
names never share a folder and every folder name reads back to its name. The manifest is rewritten (temp
file, then rename) when each stage starts and when the run ends, so a run killed between stages still has a
valid one saying how far it got; readers show a run whose writer died as interrupted. A family's summary
is a file of its own, which no run's manifest can be, rewritten whenever a member's scores change. Every
record carries ``answer_id`` = ``<run_id>/<benchmark>/<question_id>/<sample_index>[/<strategy>]``.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import duckdb
import orjson
import pyarrow as pa

from ..status import benchmark_statuses
from ..tables.failures import converted
from ..tables.location import Root, as_root, publish, published, write_bytes
from ..tables.rows import RunRecord
from ..tables.selection import find_runs
from ..tables.sql import connect, query, shown_status
from ..tables.store import Store
from ..tables.stream import copy_json, locate, with_texts

__all__ = ["COMPACT_REASONING", "EXPORT_ERRORS", "export_connection", "export_failure", "export_run", "export_summary",
           "family_path", "run_folder", "write_manifest", "write_progress_manifest"]

# What writing an export can raise that is no bug of ours: the disk, the object store, memory.
EXPORT_ERRORS: tuple[type[BaseException], ...] = (duckdb.Error, OSError, pa.ArrowException, MemoryError)
_STORE_FOLDERS = {"tables", "journal", "locks", "quick-eval"}
_COMPUTED_ONCE = ("answer_coverage", "judge_coverage", "pass_coverage", "scores", "token_usage")


def export_failure(exc: BaseException) -> str:
    """Why an export could not be written, in one line. What is the user's to fix (a corrupt part, a read-only
    root) is raised again, for the CLI to say as bad input (exit 2)."""
    found = converted(exc)
    if found is not None and found.exit_code == 2:
        raise found from exc
    return str(found) if found else f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:300]}"


FOLDER_BYTES = 200  # a folder name's longest (file systems allow 255 bytes; a temporary's suffix needs some)


def folder_name(name: str) -> str:
    """A name as one folder: percent-encoded (reversible with ``urllib.parse.unquote``), never ``.``, ``..`` or
    one of the results root's own folders. A name too long so (35 Japanese characters encode to 315 bytes) keeps
    its encoded start and ends in ``~`` and 16 hex digits of its sha256: one name, one folder, and its manifest
    says the name whole."""
    safe = quote(name, safe=" -_+=,@~")
    if safe.startswith(".") or safe in _STORE_FOLDERS:
        safe = f"%{ord(safe[0]):02X}{safe[1:]}"
    if len(safe) > FOLDER_BYTES:
        start = re.sub(r"%[0-9A-F]?$", "", safe[:FOLDER_BYTES - 17])  # never half an escape
        safe = f"{start}~{hashlib.sha256(name.encode()).hexdigest()[:16]}"
    return safe


def run_folder(results_dir: Path, model: str, tag: str) -> Path:
    return as_root(results_dir) / folder_name(model) / folder_name(tag)


def family_path(results_dir: Path, model: str, base_tag: str) -> Path:
    return run_folder(results_dir, model, base_tag) / "family.json"


def _write_json(path: Root, value: object) -> None:
    write_bytes(path, orjson.dumps(value, option=orjson.OPT_INDENT_2, default=str))


def _records(con: duckdb.DuckDBPyConnection, query: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    cursor = con.execute(query, params or {})
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def export_connection(results_dir: Path, run_id: str) -> duckdb.DuckDBPyConnection:
    """DuckDB for one run's manifest and export, kept small: one thread and 128 MB (it spills beyond that, to
    a temp folder rather than the working directory), so that exporting a large run does not raise the run's
    peak memory (measured: 317 → 260 MB at 20,000 answers). The views the statuses, the manifest and the export
    each read again are computed once (``connect``'s cache): none holds a text, and none reads what a run's end
    rewrites in its row (the statuses and errors of it and its stages; ``reused`` reads when and on what each
    stage started)."""
    con = duckdb.connect(config={"threads": 1, "memory_limit": "128MB", "temp_directory": _spill_dir()})
    return connect(results_dir, None, [run_id], upto="run_scores", con=con, cache=_COMPUTED_ONCE, memo=False)


def _spill_dir() -> str:
    """This process's own (DuckDB removes the folder it created when it closes; two processes must not share
    one)."""
    return str(Path(tempfile.gettempdir()) / f"shaberi-duckdb-{os.getpid()}")


def write_manifest(results_dir: Path, run_id: str, con: duckdb.DuckDBPyConnection | None = None,
                   holding_lock: bool = False) -> Path:
    """The run's manifest from its tables: statuses per run, stage and benchmark, counts, tokens with totals.
    ``holding_lock``: the caller holds the run's lock, so a run still marked running has no writer."""
    con = con or export_connection(results_dir, run_id)
    (run,) = _records(con, query("export.run"))
    statuses = benchmark_statuses(con)
    examples = dict(con.execute(query("export.answer_errors")).fetchall())
    judged = {(r["benchmark"], r["judge"]): r for r in _records(con, query("export.judged"))}
    tokens, totals = _tokens(con)
    benchmarks = {}
    datasets = RunRecord.of(run).datasets
    for name in dict.fromkeys([*(run["benchmarks"] or []), *statuses]):
        b = statuses.get(name) or {"status": "not run", "generate": {"questions": 0, "answers": 0, "answer_errors": 0,
                                                                    "missing": 0}, "judge": {}, "passes": {}}
        g = b["generate"]
        benchmarks[name] = {
            "status": b["status"], "questions": g["questions"], "answers": g["answers"],
            "answer_errors": g["answer_errors"], "missing": g["missing"], "error": examples.get(name),
            "generate": g.get("status", "not run"), "judge": b["judge"], "passes": b["passes"],
            "judgements": {j: {"rows": v["rows"], "scored": v["scored"]} for (bn, j), v in judged.items()
                           if bn == name},
            "dataset": datasets.get(name),
        }
    # The run's writer: this process when it holds the lock (shaberi export), else as the connection found it.
    alive = False if holding_lock else (con.execute(query("export.writer_alive")).fetchone() or [None])[0]
    records = RunRecord.of(run).stages
    stages = {name: shown_status(con, r.get("status", "pending"), alive) for name, r in records.items()}
    return _write_manifest(results_dir, run | {"status": shown_status(con, run["stored_status"], alive)}, benchmarks,
                           judged, tokens, totals, stages)


def write_progress_manifest(results_dir: Path, run: dict[str, Any], counts: dict[str, dict[str, Any]]) -> Path:
    """The manifest when a stage starts, from what the process holds in memory: no query, so it costs
    nothing before the first call (``counts``: benchmark -> questions, answers, answer_errors)."""
    benchmarks = {name: {"status": "running", "questions": 0, "answers": 0, "answer_errors": 0} | counts.get(name, {})
                  for name in run["benchmarks"] or []}
    stages = {name: r.get("status", "pending") for name, r in RunRecord.of(run).stages.items()}
    return _write_manifest(results_dir, run, benchmarks, {}, [], {}, stages)  # its writer is alive: this process


def _tokens(con: duckdb.DuckDBPyConnection) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The run's token rows (per stage, benchmark and model), and their totals with the estimated cost per stage,
    per benchmark, per pass and for the whole run: sums of the same rows, added here rather than asked of
    ``token_usage`` once per grouping."""
    tokens = _records(con, query("export.tokens"))
    cost = dict(con.execute(query("export.cost_by_stage")).fetchall())
    counts = ("requests", "prompt_tokens", "completion_tokens", "cached_requests")

    def summed(by: str | None) -> dict[Any, dict[str, Any]]:
        found: dict[Any, dict[str, Any]] = {}
        for row in tokens:
            entry = found.setdefault(row[by] if by else None, dict.fromkeys(counts, 0))
            for c in counts:
                entry[c] += row[c]
        return {k: found[k] for k in sorted(found, key=lambda k: (k is None, k))}

    by_stage = {stage: entry | {"cost_usd": cost.get(stage, 0.0)} for stage, entry in summed("stage").items()}
    by_pass = {r.pop("pass_name"): r for r in _records(con, query("export.pass_tokens"))}
    run = summed(None).get(None, dict.fromkeys(counts, 0)) | {"cost_usd": sum(cost.values()) or 0}
    return tokens, {"by_stage": by_stage, "by_benchmark": summed("benchmark"), "by_pass": by_pass, "run": run}


def _write_manifest(results_dir: Path, run: dict[str, Any], benchmarks: dict[str, Any],
                    judged: dict[tuple[str, str], dict[str, Any]], tokens: list[dict[str, Any]],
                    totals: dict[str, Any], stages: dict[str, str]) -> Path:
    record = RunRecord.of(run)
    judges = []
    for spec in run["judges"] or []:
        name, _, url = spec.partition("@")
        rows = [v for (_, j), v in judged.items() if j == name]
        judges.append({"name": name, "base_url": url or None,
                       "first_judged_at": min((v["first_at"] for v in rows), default=None),
                       "last_judged_at": max((v["last_at"] for v in rows), default=None)})
    manifest = {
        "run_id": run["run_id"], "tag": run["tag"], "base_tag": run["base_tag"], "run_index": run["run_index"],
        "status": run["status"], "error": run.get("error"), "stages": stages,
        "stage_detail": record.stages,
        "model": {"name": run["model"], "base_url": run["base_url"], "api_key_sha256": run["api_key_sha256"]},
        "generation_config": record.generation_config,
        "judges": judges, "passes": run["passes"] or [],
        "pass_config": record.pass_config,
        "benchmarks": benchmarks, "tokens": tokens, "token_totals": totals,
        "template_hashes": record.prompt_hashes,
        "judge_prompts": record.judge_prompts,
        "git": {"commit": run["git_commit"], "dirty": run["git_dirty"]},
        "package_versions": record.package_versions,
        "created_at": run["created_at"], "updated_at": run["updated_at"],
    }
    path = run_folder(results_dir, run["model"], run["tag"]) / "manifest.json"
    _write_json(path, manifest)
    return path


def export_run(results_dir: Path, run_id: str, con: duckdb.DuckDBPyConnection | None = None,
               compact: bool = False) -> Path:
    """Write the run's artifacts (JSONL per benchmark and judge, normalized records, metrics). Answers and
    judgements, whose texts can be megabytes each (a reasoning model's), are streamed (``tables.stream``);
    the short records are written by DuckDB itself (``COPY … FORMAT JSON``). ``compact``: the normalized
    judgements keep the judge's reasoning trimmed to ``COMPACT_REASONING`` characters and, instead of the judge's
    replies, where the full transcript is (``transcript``: the judge's file under ``artifacts/shaberi/`` and the
    line of it)."""
    con = con or export_connection(results_dir, run_id)
    (run,) = _records(con, query("export.run_names"))
    root = run_folder(results_dir, run["model"], run["tag"]) / "artifacts" / "shaberi"
    store = Store(results_dir)
    answers = _stream(con, store.parts("answers", run_id), "answers", query("export.answers"),
                      query("export.answers_order"), ["content", "reasoning"], _ANSWER_FIELDS)
    _write_grouped(answers, root / "normalized" / "answers.jsonl",
                   lambda r: root / "answers" / f"{r['benchmark']}.jsonl")
    judgements = _stream(con, store.parts("judgements", run_id), "judgements", query("export.judgements"),
                         query("export.judgements_order"), ["judge_output", "fallback_output"], _JUDGEMENT_FIELDS,
                         _judge_reasoning)
    _write_grouped(judgements, root / "normalized" / "judgements.jsonl",
                   lambda r: root / "judgements" / f"judge_{folder_name(r['judge_model'])}" / f"{r['benchmark']}.jsonl",
                   _compact_judgement(root) if compact else None)
    con.execute(query("export.scores_view"))
    con.execute(query("export.passes_view"))
    for name, bench in con.execute(query("export.pass_files")).fetchall():
        _copy(con, query("export.pass_rows"), root / "passes" / folder_name(name) / f"{bench}.jsonl",
              {"name": name, "bench": bench})
    _copy(con, query("export.score_rows"), root / "normalized" / "scores.jsonl")
    metrics = {
        "benchmarks": _records(con, query("export.metrics_benchmarks")),
        "overall": _records(con, query("export.metrics_overall")),
        "cost": _records(con, query("export.metrics_cost")),
        "tokens": _tokens(con)[1],
    }
    _write_json(root / "metrics.json", metrics)
    return root


# The short fields of an exported answer and judgement, in this order (the texts follow them).
_ANSWER_FIELDS = ["answer_id", "run_id", "benchmark", "question_id", "sample_index", "strategy", "model", "turns",
                  "reference", "criteria", "category", "finish_reason", "error", "error_type", "attempts",
                  "latency_ms", "answer_prompt_tokens", "answer_completion_tokens", "answer_hash", "created_at"]
_JUDGEMENT_FIELDS = ["answer_id", "benchmark", "question_id", "judge_model", "score", "shaberi_score", "score_scale",
                     "parse_method", "error", "judge_finish_reason", "prompt_set", "prompt_hash", "answer_hash",
                     "answer_prompt_tokens", "answer_completion_tokens", "judge_prompt_tokens",
                     "judge_completion_tokens", "created_at"]
_SCORE_LINE = re.compile(r"\s*FINAL SCORE\s*[:：]\s*[^\n]*\s*\Z")


def _judge_reasoning(texts: dict[str, Any]) -> dict[str, Any]:
    """The judge's reasoning: its reply without the closing score line (``judge_output`` keeps all of it)."""
    return {"reasoning": _SCORE_LINE.sub("", texts["judge_output"] or "", count=1).strip() or None}


def _stream(con: duckdb.DuckDBPyConnection, parts: list[Root], table: str, rows: str, order: str, texts: list[str],
            fields: list[str], derive: Callable[[dict[str, Any]], dict[str, Any]] | None = None
            ) -> Iterator[tuple[dict[str, Any], bytes]]:
    """The named query ``rows``' rows in ``order`` with ``table``'s long ``texts`` (``tables.stream``): each row,
    and its JSON line (``fields``, then the texts). ``{located}`` and ``{match:X}`` in it are filled by
    ``tables.stream.locate``."""
    if not parts:
        return iter(())
    found = with_texts(con, locate(rows, table, parts), order, parts, texts, derive)
    # The texts' JSON object spliced in after the short fields: never parsed and serialized again.
    return ((row, orjson.dumps({f: row[f] for f in fields})[:-1] + b"," + blob[1:] + b"\n") for row, blob in found)


# The judge's reasoning a compact export keeps in normalized/judgements.jsonl (its transcript has all of it).
COMPACT_REASONING = 500


def _compact_judgement(root: Root) -> Callable[[dict[str, Any], bytes, Root, int], bytes]:
    """A normalized judgement's line as ``--compact`` writes it: the short fields, the reasoning trimmed, and the
    path (from the run's folder: ``artifacts/shaberi/judgements/…``) and 1-based line of the full record in its
    judge's file."""
    folder = str(root.parent.parent)

    def line(row: dict[str, Any], full: bytes, target: Root, number: int) -> bytes:
        record = orjson.loads(full)
        reasoning = record.pop("reasoning", None) or ""
        for text in ("judge_output", "fallback_output"):
            record.pop(text, None)
        cut = len(reasoning) > COMPACT_REASONING
        record |= {"reasoning": (reasoning[:COMPACT_REASONING] + "…" if cut else reasoning) or None,
                   "reasoning_trimmed": cut,
                   "transcript": {"path": str(target).removeprefix(folder).lstrip("/"), "line": number}}
        return orjson.dumps(record) + b"\n"

    return line


def _write_grouped(lines: Iterator[tuple[dict[str, Any], bytes]], every: Root, path: Callable[[dict[str, Any]], Root],
                   short: Callable[[dict[str, Any], bytes, Root, int], bytes] | None = None) -> None:
    """Each line into ``every`` and into its group's file ``path(row)`` (rows come grouped); ``short``: what
    ``every`` gets instead, from the row, its line, its group's file and its line number there."""
    with published(every) as all_tmp, open(all_tmp, "wb") as all_fh:
        for target, group in itertools.groupby(lines, key=lambda pair: path(pair[0])):
            with published(target) as tmp, open(tmp, "wb") as fh:
                for number, (row, line) in enumerate(group, start=1):
                    fh.write(line)
                    all_fh.write(short(row, line, target, number) if short else line)


def _copy(con: duckdb.DuckDBPyConnection, rows: str, path: Root, params: dict[str, Any] | None = None) -> None:
    """JSON Lines by DuckDB, to a local temp file, then renamed or uploaded whole (``location.publish``)."""
    publish(path, lambda tmp: copy_json(con, rows, params or {}, tmp))


def export_summary(results_dir: Path, base_tag: str, model: str) -> Path | None:
    """``<model>/<base_tag>/family.json`` for a family of runs {base_tag}-runN: every member with its status
    and completeness (for every judge; ``complete_for``: the judges it is complete for) and its tokens and cost,
    the statistics over the complete ones (``multi_run_stats``, per judge; ``without_passes``: the same before
    pass deltas), and the family's tokens and cost."""
    family = find_runs(results_dir, base_tag, match="family", model=model)
    if not family:
        return None
    con = connect(results_dir, None, [r.run_id for r in family])
    complete = {(r, j): (c, b) for r, j, c, b in con.execute(query("export.completeness")).fetchall()}
    used = {r.pop("run_id"): r for r in _records(con, query("export.family_tokens"))}
    members = []
    for r in family:
        done, missing = complete.get((r.run_id, "*"), (True, []))
        members.append({"tag": r.tag, "run_id": r.run_id, "run_index": r.run_index, "status": r.status,
                        "complete": done, "incomplete_benchmarks": missing or [],
                        "complete_for": sorted(j for (run, j), (c, _) in complete.items()  # judge by judge
                                               if run == r.run_id and j != "*" and c),
                        "tokens": used.get(r.run_id)})
    summary = {
        "kind": "multi_run", "base_tag": base_tag, "model": model,
        "tags": [m["tag"] for m in members], "run_ids": [m["run_id"] for m in members], "members": members,
        "statistics": _records(con, query("export.family_statistics")),
        "tokens": used.get(None),  # every member's calls together, and what they cost
    }
    path = family_path(results_dir, model, base_tag)
    _write_json(path, summary)
    return path
