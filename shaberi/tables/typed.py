"""The rows stages read back row by row, typed: one ``TypedDict`` per table (its columns as ``schema.py`` declares
them; a test keeps the two in step). ``total=False``: a read names the columns it needs, so a row holds those only.
Keys are never null; what a column may leave empty is ``| None``."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any, TypedDict, TypeVar, cast

import pyarrow as pa

from .rows import AnswerKey, decoded

__all__ = ["AnswerRow", "BatchRow", "JudgementRow", "PairwiseRow", "QuestionKey", "QuestionRow", "Questions", "Texts",
           "questions", "rows"]


class QuestionRow(TypedDict, total=False):
    run_id: str
    benchmark: str
    question_id: str
    turns: list[str]
    reference: str | None
    criteria: str | None
    category: str | None
    extra: Any  # JSON text as stored; a mapping once ``rows.decoded``
    created_at: dt.datetime


class AnswerRow(TypedDict, total=False):
    run_id: str
    benchmark: str
    question_id: str
    sample_index: int
    strategy: str
    model: str
    content: str | None
    raw_content: str | None
    japanese_chars: int | None
    letter_chars: int | None
    reasoning: str | None
    finish_reason: str | None
    error: str | None
    error_type: str | None
    attempts: int | None
    calls: int | None
    latency_ms: float | None
    prompt_tokens: int | None
    completion_tokens: int | None
    reasoning_tokens: int | None
    cached_prompt_tokens: int | None
    request_hash: str | None
    answer_hash: str | None
    via: str | None
    batch_id: str | None
    created_at: dt.datetime


class JudgementRow(TypedDict, total=False):
    run_id: str
    benchmark: str
    question_id: str
    sample_index: int
    strategy: str
    judge: str
    score: float | None
    shaberi_score: float | None
    score_scale: str | None
    parse_method: str | None
    judge_output: str | None
    fallback_output: str | None
    finish_reason: str | None
    fallback_finish_reason: str | None
    prompt_hash: str
    prompt_set: str | None
    grader_version: str | None
    answer_hash: str
    prompt_tokens: int | None
    completion_tokens: int | None
    reasoning_tokens: int | None
    cached_prompt_tokens: int | None
    error: str | None
    via: str | None
    batch_id: str | None
    created_at: dt.datetime


class PairwiseRow(TypedDict, total=False):
    run_id: str
    benchmark: str
    question_id: str
    run_a: str
    run_b: str
    judge: str
    prompt_hash: str
    answer_hash_a: str
    answer_hash_b: str
    verdict: str | None
    judge_output: str | None
    fallback_output: str | None
    finish_reason: str | None
    fallback_finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    reasoning_tokens: int | None
    cached_prompt_tokens: int | None
    error: str | None
    created_at: dt.datetime


class BatchRow(TypedDict, total=False):
    run_id: str
    batch_id: str
    endpoint: str
    stage: str
    custom_ids: list[str] | None
    status: str
    created_at: dt.datetime


QuestionKey = tuple[str, str]  # (benchmark, question_id)
Questions = Mapping[QuestionKey, QuestionRow]  # a run's questions, ``extra`` parsed (``rows.decoded``)
Texts = Mapping[AnswerKey, "str | None"]  # each answer's content, for the earlier turns of a conversation

T = TypeVar("T", QuestionRow, AnswerRow, JudgementRow, PairwiseRow, BatchRow)


def rows(table: pa.Table, kind: type[T]) -> list[T]:
    """A table read back (``Store.read``), as rows of ``kind``."""
    return cast(list[T], table.to_pylist())


def questions(table: pa.Table) -> dict[QuestionKey, QuestionRow]:
    """A run's questions read back, by (benchmark, question_id), ``extra`` parsed."""
    return {(q["benchmark"], q["question_id"]): cast(QuestionRow, decoded("questions", q))
            for q in rows(table, QuestionRow)}
