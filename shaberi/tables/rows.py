"""Rows of the persisted tables, built in one place from typed values.

``schema.TABLES`` declares the columns; the builders here are the only code that spells a row out, so a
stage cannot write a column the schema lacks (``ValueError``) or forget ``created_at``. ``AnswerKey`` is an
answer's identity within a run: the columns every table that refers to an answer starts with (after
``run_id``), and the key the stages look answers up by.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, NamedTuple

from .schema import TABLES
from .store import now_us

__all__ = ["ANSWER_COLUMNS", "AnswerKey", "Stage", "answer", "judgement", "pass_delta", "question", "token_usage"]

Stage = Literal["generation", "judging", "passes", "consensus"]


class AnswerKey(NamedTuple):
    """Which answer of a run: ``strategy`` is "" for a model's own answers, a consensus strategy's name
    otherwise; ``sample_index`` numbers the answers of one question (ensemble members)."""

    benchmark: str
    question_id: str
    sample_index: int = 0
    strategy: str = ""

    @classmethod
    def of(cls, row: Mapping[str, object]) -> AnswerKey:
        """The key of a row of any table that refers to an answer."""
        return cls(row["benchmark"], row["question_id"], row["sample_index"], row["strategy"])  # type: ignore[arg-type]


ANSWER_COLUMNS: tuple[str, ...] = AnswerKey._fields
if TABLES["answers"].key != ("run_id", *ANSWER_COLUMNS):  # the schema is the contract: say so at import
    raise AssertionError(f"AnswerKey {ANSWER_COLUMNS} is not the answers key {TABLES['answers'].key}")


def _row(table: str, values: dict[str, object]) -> dict[str, object]:
    if unknown := sorted(set(values) - set(TABLES[table].columns)):
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


def token_usage(run_id: str, stage: Stage, benchmark: str, model: str, *, requests: int = 0, prompt_tokens: int = 0,
                completion_tokens: int = 0, reasoning_tokens: int = 0, cached_prompt_tokens: int = 0
                ) -> dict[str, object]:
    """A ``token_usage`` increment (rows are summed): HTTP requests sent, retries included, and their tokens
    (of which reasoning, and prompt tokens the provider's cache served). The rows a stage reused instead of
    calling are counted from the tables (the ``token_usage`` view), never written: a resume would add them
    again."""
    return _row("token_usage", {"run_id": run_id, "stage": stage, "benchmark": benchmark, "model": model,
                                "requests": requests, "prompt_tokens": prompt_tokens,
                                "completion_tokens": completion_tokens, "reasoning_tokens": reasoning_tokens,
                                "cached_prompt_tokens": cached_prompt_tokens, "cached_requests": 0})
