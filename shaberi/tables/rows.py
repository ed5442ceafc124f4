"""Rows of the persisted tables, built in one place from typed values.

``schema.TABLES`` declares the columns; the builders here are the only code that spells a row out, so a
stage cannot write a column the schema lacks (``ValueError``) or forget ``created_at``. ``AnswerKey`` is an
answer's identity within a run: the columns every table that refers to an answer starts with (after
``run_id``), and the key the stages look answers up by. ``RunRecord`` is a ``runs`` row typed, its JSON
columns decoded (``RunRecord.of``) and encoded (``runs``) here and nowhere else.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

import orjson

from ..redact import strip_credentials
from .schema import TABLES
from .store import now_us

__all__ = ["ANSWER_COLUMNS", "JSON_COLUMNS", "AnswerKey", "RunRecord", "Stage", "answer", "batch", "decoded",
           "judgement", "pairwise", "pairwise_rating", "pass_delta", "question", "runs", "token_usage"]

Stage = Literal["generation", "judging", "passes", "consensus", "pairwise"]


class AnswerKey(NamedTuple):
    """Which answer of a run: ``strategy`` is "" for a model's own answers, a consensus strategy's name
    otherwise; ``sample_index`` numbers the answers of one question (ensemble members)."""

    benchmark: str
    question_id: str
    sample_index: int = 0
    strategy: str = ""

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> AnswerKey:
        """The key of a row of any table that refers to an answer."""
        return cls(row["benchmark"], row["question_id"], row["sample_index"], row["strategy"])


ANSWER_COLUMNS: tuple[str, ...] = AnswerKey._fields
if TABLES["answers"].key != ("run_id", *ANSWER_COLUMNS):  # the schema is the contract: say so at import
    raise AssertionError(f"AnswerKey {ANSWER_COLUMNS} is not the answers key {TABLES['answers'].key}")


@dataclass(frozen=True)
class RunRecord:
    """A ``runs`` row as values: JSON columns as what they hold, timestamps in µs. Every stage rewrites the row
    (``dataclasses.replace`` then ``runs``); a reader takes the latest (the ``runs`` view)."""

    run_id: str
    tag: str
    base_tag: str
    run_index: int
    model: str
    base_url: str | None = None
    api_key_sha256: str | None = None
    generation_config: dict[str, Any] = field(default_factory=dict)
    benchmarks: list[str] = field(default_factory=list)
    judges: list[str] = field(default_factory=list)
    passes: list[str] = field(default_factory=list)
    pass_config: dict[str, Any] = field(default_factory=dict)
    datasets: dict[str, Any] = field(default_factory=dict)
    prompt_hashes: dict[str, str] = field(default_factory=dict)
    judge_prompts: dict[str, Any] = field(default_factory=dict)
    pricing: dict[str, dict[str, float]] = field(default_factory=dict)
    git_commit: str | None = None
    git_dirty: bool | None = None
    package_versions: dict[str, str] = field(default_factory=dict)
    # endpoint label -> per invocation
    concurrency_history: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    status: str = "running"
    error: str | None = None
    stages: dict[str, dict[str, Any]] = field(default_factory=dict)
    created_at: int = 0
    updated_at: int = 0

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> RunRecord:
        """The record of a stored row (from ``Store.read``, a view or an older part lacking newer columns)."""
        values = {f.name: row.get(f.name) for f in dataclasses.fields(cls) if f.name in row}
        values |= {name: orjson.loads(values.get(name) or "{}") for name in _JSON}
        if isinstance(values["concurrency_history"], list):  # stored before it was kept per endpoint
            values["concurrency_history"] = {"candidate": [{"history": values["concurrency_history"]}]}
        for name in ("benchmarks", "judges", "passes"):
            values[name] = list(values.get(name) or [])
        for name in ("created_at", "updated_at"):
            if isinstance(stamp := values.get(name), dt.datetime):
                values[name] = int(stamp.timestamp() * 1_000_000)
        return cls(**{k: v for k, v in values.items() if v is not None})

    def replace(self, **changes: Any) -> RunRecord:
        return dataclasses.replace(self, **changes)


# The columns that hold JSON text, per table: decoded by ``decoded`` (and ``RunRecord.of``), encoded by the builders.
JSON_COLUMNS: dict[str, tuple[str, ...]] = {
    "runs": ("generation_config", "pass_config", "datasets", "prompt_hashes", "judge_prompts", "pricing",
             "package_versions", "concurrency_history", "stages"),
    "questions": ("extra",),
    "pass_deltas": ("detail",),
}
_JSON = JSON_COLUMNS["runs"]


def decoded(table: str, row: Mapping[str, Any]) -> dict[str, Any]:
    """``row`` with the JSON columns of ``table`` it holds decoded ({} for none)."""
    return dict(row) | {c: orjson.loads(row[c] or "{}") if isinstance(row[c], str | None) else row[c]
                        for c in JSON_COLUMNS.get(table, ()) if c in row}


def runs(record: RunRecord) -> dict[str, object]:
    """A ``runs`` row: JSON columns encoded, no URL's credentials in what is stored, written now."""
    values = dataclasses.asdict(record)
    for name in _JSON:
        values[name] = orjson.dumps(values[name]).decode()
    for name in ("pass_config", "concurrency_history", "stages"):
        values[name] = strip_credentials(values[name])
    values["base_url"] = record.base_url and strip_credentials(record.base_url)
    values["judges"] = [strip_credentials(j) for j in record.judges]
    values["error"] = record.error and strip_credentials(record.error)
    return _row("runs", values | {"updated_at": now_us()})


def _row(table: str, values: dict[str, object]) -> dict[str, object]:
    if not values.keys() <= (columns := TABLES[table].column_set) and (unknown := sorted(values.keys() - columns)):
        raise ValueError(f"{table} has no column {', '.join(unknown)} (see schema.TABLES)")
    return values | {"created_at": values.get("created_at") or now_us()}


def question(run_id: str, benchmark: str, question_id: str, turns: list[str], **values: object) -> dict[str, object]:
    """A ``questions`` row: what the run asked (``generate.write_questions`` builds the same columns in bulk)."""
    return _row("questions", {"run_id": run_id, "benchmark": benchmark, "question_id": question_id, "turns": turns,
                              **values})


def answer(run_id: str, key: AnswerKey, model: str, **values: object) -> dict[str, object]:
    """An ``answers`` row: a model's answer, or the error that took its place."""
    return _row("answers", {"run_id": run_id, **key._asdict(), "model": model, **values})


def judgement(run_id: str, key: AnswerKey, judge: str, scale: tuple[int, int] | None, prompt_hash: str | None,
              answer_hash: str | None, **values: object) -> dict[str, object]:
    """A ``judgements`` row: one judge's verdict on one answer text under one judging prompt (``scale`` None:
    not recorded, as in legacy imports)."""
    return _row("judgements", {"run_id": run_id, **key._asdict(), "judge": judge,
                               "score_scale": scale and f"{scale[0]}-{scale[1]}", "prompt_hash": prompt_hash,
                               "answer_hash": answer_hash, **values})


def pass_delta(run_id: str, key: AnswerKey, pass_name: str, pass_version: str, delta: float, **values: object
               ) -> dict[str, object]:
    """A ``pass_deltas`` row: what one pass changed (0: checked, nothing to change) on one answer's score."""
    return _row("pass_deltas", {"run_id": run_id, **key._asdict(), "judge": "", "pass_name": pass_name,
                                "pass_version": pass_version, "delta": float(delta), **values})


def pairwise(run_id: str, benchmark: str, question_id: str, run_a: str, run_b: str, judge: str, prompt_hash: str,
             hashes: tuple[str, str], **values: object) -> dict[str, object]:
    """A ``pairwise`` row: one judge's choice between two runs' answers to a question, ``run_a``'s shown first."""
    return _row("pairwise", {"run_id": run_id, "benchmark": benchmark, "question_id": question_id, "run_a": run_a,
                             "run_b": run_b, "judge": judge, "prompt_hash": prompt_hash, "answer_hash_a": hashes[0],
                             "answer_hash_b": hashes[1], **values})


def pairwise_rating(run_id: str, judge: str, benchmark: str, rated_run: str, tag: str, stamp: int,
                    **values: object) -> dict[str, object]:
    """A ``pairwise_ratings`` row: one run's rating in one fit (``stamp``: the fit's time, shared by its rows)."""
    return _row("pairwise_ratings", {"run_id": run_id, "judge": judge, "benchmark": benchmark, "rated_run": rated_run,
                                     "tag": tag, "created_at": stamp, **values})


def batch(run_id: str, batch_id: str, endpoint: str, stage: Stage, custom_ids: list[str], status: str
          ) -> dict[str, object]:
    """A ``batches`` row: a provider batch submitted (``status`` submitted, with its requests) or collected."""
    return _row("batches", {"run_id": run_id, "batch_id": batch_id, "endpoint": strip_credentials(endpoint),
                            "stage": stage, "custom_ids": custom_ids, "status": status})


def token_usage(run_id: str, stage: Stage, benchmark: str, model: str, *, requests: int = 0, prompt_tokens: int = 0,
                completion_tokens: int = 0, reasoning_tokens: int = 0, cached_prompt_tokens: int = 0,
                batch: bool = False) -> dict[str, object]:
    """A ``token_usage`` increment (rows are summed): HTTP requests sent, retries included, and their tokens
    (of which reasoning, and prompt tokens the provider's cache served; ``batch``: all of them through a Batch
    API, priced at its rate). The rows a stage reused instead of calling are counted from the tables (the
    ``token_usage`` view), never written: a resume would add them again."""
    return _row("token_usage", {"run_id": run_id, "stage": stage, "benchmark": benchmark, "model": model,
                                "requests": requests, "prompt_tokens": prompt_tokens,
                                "completion_tokens": completion_tokens, "reasoning_tokens": reasoning_tokens,
                                "cached_prompt_tokens": cached_prompt_tokens,
                                "batch_prompt_tokens": prompt_tokens if batch else 0,
                                "batch_completion_tokens": completion_tokens if batch else 0, "cached_requests": 0})
