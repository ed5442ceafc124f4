"""The persisted tables, declared once: the contract between stages, SQL views and exports.

Every table is partitioned by ``run_id``. Rows are appended; when a key is written again the row with
the latest ``created_at`` wins (the SQL views and the store's compaction apply the same rule), except
``token_usage``, whose rows are increments and are summed.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

__all__ = ["TABLES", "Table", "table"]

TS = pa.timestamp("us", tz="UTC")
STR = pa.string()
I32 = pa.int32()
I64 = pa.int64()
F64 = pa.float64()


@dataclass(frozen=True)
class Table:
    name: str
    schema: pa.Schema
    key: tuple[str, ...]
    additive: bool = False  # rows are increments to be summed, not versions of a key

    @property
    def columns(self) -> list[str]:
        return self.schema.names


def _t(name: str, key: tuple[str, ...], fields: list[tuple[str, pa.DataType]], additive: bool = False) -> Table:
    return Table(name, pa.schema(fields), key, additive)


# An answer's identity: also the first columns of every table that refers to an answer.
_ANSWER_FIELDS = [("run_id", STR), ("benchmark", STR), ("question_id", STR), ("sample_index", I32), ("strategy", STR)]
_ANSWER_KEY = tuple(name for name, _ in _ANSWER_FIELDS)

TABLES: dict[str, Table] = {
    t.name: t
    for t in [
        _t(
            "runs",
            ("run_id",),
            [
                ("run_id", STR),
                ("tag", STR),
                ("base_tag", STR),
                ("run_index", I32),
                ("model", STR),
                ("base_url", STR),
                ("api_key_sha256", STR),  # first 12 hex digits of sha256(key); never the key
                ("generation_config", STR),  # JSON
                ("benchmarks", pa.list_(STR)),
                ("judges", pa.list_(STR)),
                ("passes", pa.list_(STR)),
                ("datasets", STR),  # JSON: benchmark -> {file, sha256, rows, questions}
                ("prompt_hashes", STR),  # JSON: template path -> sha256 prefix
                ("git_commit", STR),
                ("git_dirty", pa.bool_()),
                ("package_versions", STR),  # JSON
                ("concurrency_history", STR),  # JSON list of [seconds, limit, reason]
                ("status", STR),  # running | complete | failed
                ("error", STR),
                ("created_at", TS),
                ("updated_at", TS),
            ],
        ),
        _t(
            "questions",
            ("run_id", "benchmark", "question_id"),
            [
                ("run_id", STR),
                ("benchmark", STR),
                ("question_id", STR),
                ("turns", pa.list_(STR)),
                ("reference", STR),
                ("criteria", STR),
                ("category", STR),
                ("extra", STR),  # JSON: upstream columns we do not map
                ("created_at", TS),
            ],
        ),
        _t(
            "answers",
            _ANSWER_KEY,
            [
                *_ANSWER_FIELDS,  # strategy is "" for raw answers
                ("model", STR),
                ("content", STR),  # null when the call failed
                ("reasoning", STR),  # stripped <think> text and reasoning_content
                ("finish_reason", STR),
                ("error", STR),
                ("error_type", STR),
                ("attempts", I32),  # HTTP attempts behind this row, summed over resumes
                ("calls", I32),  # times this row was requested (1, then +1 per retry of an error row)
                ("latency_ms", F64),
                ("prompt_tokens", I64),
                ("completion_tokens", I64),
                ("request_hash", STR),
                ("created_at", TS),
            ],
        ),
        _t(
            "judgements",
            (*_ANSWER_KEY, "judge"),
            [
                *_ANSWER_FIELDS,
                ("judge", STR),
                ("score", F64),  # null when unparseable, never 0
                ("score_scale", STR),
                ("parse_method", STR),
                ("judge_output", STR),
                ("fallback_output", STR),
                ("prompt_hash", STR),  # of the benchmark's judging templates
                ("answer_hash", STR),  # of the judged text: a regenerated answer is judged again
                ("prompt_tokens", I64),
                ("completion_tokens", I64),
                ("error", STR),  # answer_error | unparseable: … | judge_error: …
                ("created_at", TS),
            ],
        ),
        _t(
            "pass_deltas",
            (*_ANSWER_KEY, "judge", "pass_name"),
            [
                *_ANSWER_FIELDS,
                ("judge", STR),
                ("pass_name", STR),
                ("pass_version", STR),
                ("delta", F64),
                ("reason", STR),
                ("detail", STR),  # JSON
                ("prompt_tokens", I64),
                ("completion_tokens", I64),
                ("created_at", TS),
            ],
        ),
        _t(
            "token_usage",
            ("run_id", "stage", "benchmark", "model"),
            [
                ("run_id", STR),
                ("stage", STR),  # generation | judging | passes | consensus
                ("benchmark", STR),
                ("model", STR),
                ("requests", I64),  # HTTP requests sent, retries included
                ("prompt_tokens", I64),
                ("completion_tokens", I64),
                ("cached_requests", I64),  # rows reused from an earlier session instead of called
                ("created_at", TS),
            ],
            additive=True,
        ),
    ]
}


def table(name: str) -> Table:
    return TABLES[name]
