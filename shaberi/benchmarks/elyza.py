"""ELYZA-tasks-100: 100 instructions with a reference answer and per-task grading notes.

Upstream columns: ``input`` (the task), ``output`` (reference answer), ``eval_aspect`` (criteria).
Question ids are the 1-based row order, as in the original Shaberi result files. Judged 1–5; the
benchmark score is the mean × 2 so that it sits on the same 0–10 scale as the others.
"""

from collections.abc import Iterator

from ..extract import COMMON_RULES
from . import Question, _text, benchmark


@benchmark("elyza", rules=(*COMMON_RULES, "bare_number"), scale=(1, 5))
def convert(rows: list[dict]) -> Iterator[Question]:
    for i, row in enumerate(rows, start=1):
        yield Question(
            benchmark="elyza",
            question_id=str(i),
            turns=[str(row["input"])],
            reference=_text(row["output"]),
            criteria=_text(row["eval_aspect"]),
        )
