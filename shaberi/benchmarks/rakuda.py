"""Rakuda: 40 open questions about Japanese geography, politics, history and society.

Upstream columns: ``category``, ``question_id`` (a string id kept as is), ``text``. Judged 1–10.
"""

from collections.abc import Iterator

from ..extract import COMMON_RULES
from . import Question, _text, benchmark


@benchmark("rakuda", rules=(*COMMON_RULES, "slash_ten"), scale=(1, 10))
def convert(rows: list[dict]) -> Iterator[Question]:
    for row in rows:
        yield Question(
            benchmark="rakuda",
            question_id=str(row["question_id"]),
            turns=[str(row["text"])],
            category=_text(row.get("category")),
        )
