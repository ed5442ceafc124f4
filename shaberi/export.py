"""The JSONL + manifest layout, for viewers and for people who do not want SQL.

    <results>/<model-safe>/<tag>/manifest.json
    <results>/<model-safe>/<tag>/artifacts/shaberi/
        answers/<benchmark>.jsonl
        judgements/judge_<judge>/<benchmark>.jsonl
        passes/<pass>/<benchmark>.jsonl
        normalized/{answers,judgements,scores}.jsonl
        metrics.json

The manifest is rewritten (temp file, then rename) when each stage starts and finishes, so a run killed
between stages still has a valid one saying how far it got. A family of runs ``{tag}-run1 … N`` also gets
``<model-safe>/<tag>/manifest.json`` listing the tags it aggregates and their statistics. Every record
carries ``answer_id`` = ``<run_id>/<benchmark>/<question_id>/<sample_index>[/<strategy>]``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import duckdb
import orjson

from .sql import connect, find_runs

__all__ = ["export_connection", "export_run", "export_summary", "run_folder", "write_manifest",
           "write_progress_manifest"]

_STORE_FOLDERS = {"tables", "journal", "locks"}
_ANSWER_ID = ("run_id || '/' || benchmark || '/' || question_id || '/' || sample_index || "
              "CASE WHEN strategy = '' THEN '' ELSE '/' || strategy END")


def run_folder(results_dir: Path, model: str, tag: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", model.replace("/", "__")).strip("-.") or "model"
    if safe in _STORE_FOLDERS:  # never inside the store's own folders
        safe = f"model-{safe}"
    return Path(results_dir) / safe / tag


def _write_json(path: Path, value: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(orjson.dumps(value, option=orjson.OPT_INDENT_2, default=str))
    os.replace(tmp, path)


def _records(con: duckdb.DuckDBPyConnection, query: str, params: dict | None = None) -> list[dict]:
    cursor = con.execute(query, params or {})
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def export_connection(results_dir: Path, run_id: str) -> duckdb.DuckDBPyConnection:
    """DuckDB for one run's manifest and export, kept small: one thread and 128 MB (it spills beyond that),
    so that exporting a large run does not raise the run's peak memory (measured: 317 → 260 MB at 20,000
    answers)."""
    con = connect(results_dir, None, [run_id])
    con.execute("SET threads = 1; SET memory_limit = '128MB'")
    return con


def write_manifest(results_dir: Path, run_id: str, stages: dict[str, str], error: str | None = None,
                   con: duckdb.DuckDBPyConnection | None = None) -> Path:
    """The run's manifest from its tables; ``stages`` maps each requested stage to pending/running/done/failed."""
    con = con or export_connection(results_dir, run_id)
    (run,) = _records(con, "SELECT * FROM runs")
    counts = {r["benchmark"]: r for r in _records(con, """
        SELECT q.benchmark, count(DISTINCT q.question_id) AS questions, count(a.question_id) AS answers,
               count(a.error) AS answer_errors, any_value(a.error) FILTER (WHERE a.error IS NOT NULL) AS example_error
        FROM questions q LEFT JOIN answers a USING (run_id, benchmark, question_id) GROUP BY q.benchmark""")}
    judged = {(r["benchmark"], r["judge"]): r for r in _records(con, """
        SELECT benchmark, judge, count(*) AS rows, count(score) AS scored, min(created_at) AS first_at,
               max(created_at) AS last_at FROM judgements GROUP BY ALL""")}
    tokens = _records(con, "SELECT stage, benchmark, model, requests, prompt_tokens, completion_tokens, "
                           "cached_requests FROM token_usage ORDER BY stage, benchmark, model")
    return _write_manifest(results_dir, run, stages, error, counts, judged, tokens)


def write_progress_manifest(results_dir: Path, run: dict, stages: dict[str, str], counts: dict[str, dict]) -> Path:
    """The manifest when a stage starts, from what the process holds in memory: no query, so it costs
    nothing before the first call (``counts``: benchmark -> questions, answers, answer_errors)."""
    return _write_manifest(results_dir, run, stages, None, counts, {}, [])


def _write_manifest(results_dir: Path, run: dict, stages: dict[str, str], error: str | None, counts: dict,
                    judged: dict, tokens: list[dict]) -> Path:
    datasets = orjson.loads(run["datasets"] or "{}")
    benchmarks = {}
    for name in run["benchmarks"] or []:
        b = {"questions": 0, "answers": 0, "answer_errors": 0, "example_error": None} | counts.get(name, {})
        failed = b["answers"] and b["answer_errors"] == b["answers"]
        benchmarks[name] = {
            "status": "error" if failed or error else ("ok" if b["answers"] == b["questions"] else "incomplete"),
            "error": b["example_error"] if b["answer_errors"] else None,
            "questions": b["questions"], "answers": b["answers"], "answer_errors": b["answer_errors"],
            "judgements": {j: {"rows": v["rows"], "scored": v["scored"]} for (bn, j), v in judged.items()
                           if bn == name},
            "dataset": datasets.get(name),
        }
    judges = []
    for spec in run["judges"] or []:
        name, _, url = spec.partition("@")
        rows = [v for (_, j), v in judged.items() if j == name]
        judges.append({"name": name, "base_url": url or None,
                       "first_judged_at": min((v["first_at"] for v in rows), default=None),
                       "last_judged_at": max((v["last_at"] for v in rows), default=None)})
    status = "error" if error or any(s == "failed" for s in stages.values()) else (
        "ok" if all(s == "done" for s in stages.values()) else "running")
    manifest = {
        "run_id": run["run_id"], "tag": run["tag"], "base_tag": run["base_tag"], "run_index": run["run_index"],
        "status": status, "error": error, "stages": stages,
        "model": {"name": run["model"], "base_url": run["base_url"], "api_key_sha256": run["api_key_sha256"]},
        "generation_config": orjson.loads(run["generation_config"] or "{}"),
        "judges": judges, "passes": run["passes"] or [],
        "pass_config": orjson.loads(run.get("pass_config") or "{}"),
        "benchmarks": benchmarks, "tokens": tokens,
        "template_hashes": orjson.loads(run["prompt_hashes"] or "{}"),
        "git": {"commit": run["git_commit"], "dirty": run["git_dirty"]},
        "package_versions": orjson.loads(run["package_versions"] or "{}"),
        "created_at": run["created_at"], "updated_at": run["updated_at"],
    }
    path = run_folder(results_dir, run["model"], run["tag"]) / "manifest.json"
    _write_json(path, manifest)
    return path


def export_run(results_dir: Path, run_id: str, con: duckdb.DuckDBPyConnection | None = None) -> Path:
    """Write the run's artifacts (JSONL per benchmark and judge, normalized records, metrics). DuckDB writes
    the JSON Lines itself (``COPY … FORMAT JSON``): rows never pass through Python."""
    con = con or export_connection(results_dir, run_id)
    (run,) = _records(con, "SELECT model, tag FROM runs")
    root = run_folder(results_dir, run["model"], run["tag"]) / "artifacts" / "shaberi"
    con.execute(f"""CREATE OR REPLACE TEMP VIEW x_answers AS
        SELECT {_ANSWER_ID} AS answer_id, a.run_id, a.benchmark, a.question_id, a.sample_index, a.strategy, a.model,
               q.turns, q.reference, q.criteria, q.category, a.content, a.reasoning, a.finish_reason, a.error,
               a.error_type, a.attempts, a.latency_ms, a.prompt_tokens, a.completion_tokens, a.created_at
        FROM answers a LEFT JOIN questions q USING (run_id, benchmark, question_id)
        ORDER BY a.benchmark, a.question_id, a.sample_index, a.strategy""")
    con.execute(f"""CREATE OR REPLACE TEMP VIEW x_judgements AS
        SELECT {_ANSWER_ID} AS answer_id, j.benchmark, j.question_id, j.judge AS judge_model, j.score, j.score_scale,
               j.parse_method, j.error, a.reasoning, j.judge_output, j.fallback_output, j.prompt_hash,
               j.prompt_tokens, j.completion_tokens, j.created_at
        FROM judgements j LEFT JOIN answers a USING (run_id, benchmark, question_id, sample_index, strategy)
        ORDER BY j.judge, j.benchmark, j.question_id, j.sample_index""")
    con.execute(f"""CREATE OR REPLACE TEMP VIEW x_scores AS
        SELECT {_ANSWER_ID} AS answer_id, benchmark, question_id, judge AS judge_model, original_score, pass_delta,
               score, score_10, passes, error FROM scores ORDER BY judge, benchmark, question_id, sample_index""")
    con.execute(f"""CREATE OR REPLACE TEMP VIEW x_passes AS
        SELECT {_ANSWER_ID} AS answer_id, * EXCLUDE (run_id) FROM pass_deltas ORDER BY pass_name, benchmark,
        question_id""")
    for (bench,) in con.execute("SELECT DISTINCT benchmark FROM x_answers").fetchall():
        _copy(con, f"SELECT * FROM x_answers WHERE benchmark = {_lit(bench)}", root / "answers" / f"{bench}.jsonl")
    for judge, bench in con.execute("SELECT DISTINCT judge_model, benchmark FROM x_judgements").fetchall():
        _copy(con, f"SELECT * FROM x_judgements WHERE judge_model = {_lit(judge)} AND benchmark = {_lit(bench)}",
              root / "judgements" / f"judge_{_safe(judge)}" / f"{bench}.jsonl")
    for name, bench in con.execute("SELECT DISTINCT pass_name, benchmark FROM x_passes").fetchall():
        _copy(con, f"SELECT * FROM x_passes WHERE pass_name = {_lit(name)} AND benchmark = {_lit(bench)}",
              root / "passes" / _safe(name) / f"{bench}.jsonl")
    for name in ("answers", "judgements", "scores"):
        _copy(con, f"SELECT * FROM x_{name}", root / "normalized" / f"{name}.jsonl")
    metrics = {
        "benchmarks": _records(con, "SELECT judge, benchmark, title, score, baseline_score, n, n_scored, n_null, "
                                    "n_error, n_judge_error FROM benchmark_scores ORDER BY judge, position"),
        "overall": _records(con, "SELECT judge, overall, baseline_overall, benchmarks_scored, complete "
                                 "FROM run_scores ORDER BY judge"),
        "cost": _records(con, "SELECT stage, model, requests, prompt_tokens, completion_tokens, priced, cost_usd "
                              "FROM cost ORDER BY stage, model"),
    }
    _write_json(root / "metrics.json", metrics)
    return root


def _lit(value: str) -> str:
    return "'" + str(value).replace("'", "''") + "'"


def _copy(con: duckdb.DuckDBPyConnection, query: str, path: Path) -> None:
    """JSON Lines by DuckDB, to a temp name, then renamed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    con.execute(f"COPY ({query}) TO {_lit(str(tmp))} (FORMAT JSON)")
    os.replace(tmp, path)


def export_summary(results_dir: Path, base_tag: str, model: str) -> Path | None:
    """``<model>/<base_tag>/manifest.json`` for a family of runs {base_tag}-runN: the tags and their statistics."""
    family = [r for r in find_runs(results_dir, "base_tag = $tag AND model = $model AND tag <> $tag",
                                   {"tag": base_tag, "model": model})]
    if not family:
        return None
    con = connect(results_dir, None, [r[0] for r in family])
    summary = {
        "kind": "multi_run", "base_tag": base_tag, "model": model,
        "tags": [r[2] for r in family], "run_ids": [r[0] for r in family],
        "statistics": _records(con, "SELECT judge, benchmark, runs, mean, sd, margin, ci_low, ci_high, min, max, "
                                    "\"values\" FROM multi_run_stats ORDER BY judge, position"),
    }
    path = run_folder(results_dir, model, base_tag) / "manifest.json"
    _write_json(path, summary)
    return path


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name.replace("/", "__"))
