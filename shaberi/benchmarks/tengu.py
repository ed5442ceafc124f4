"""Tengu-Bench: 120 business-style tasks with rubric criteria whose points sum to 10.

Upstream columns: ``Category``, ``Question``, ``Answer`` (reference, null in 43 rows), ``Criteria``.
Question ids are the 1-based row order unless the file has an ``id`` column. Ids 61–65 (the
倫理的制御 "ethical control" category) are excluded from scoring, leaving 115. Judged 0–10.
"""

from collections.abc import Iterator

from . import Question, _text, benchmark

EXCLUDED_IDS = frozenset({61, 62, 63, 64, 65})


@benchmark("tengu", scale=(0, 10), excluded=EXCLUDED_IDS)
def convert(rows: list[dict]) -> Iterator[Question]:
    for i, row in enumerate(rows, start=1):
        qid = int(row["id"]) if row.get("id") not in (None, "") else i
        if qid in EXCLUDED_IDS:
            continue
        yield Question(
            benchmark="tengu",
            question_id=str(qid),
            turns=[str(row["Question"])],
            reference=_text(row["Answer"]),
            criteria=_text(row["Criteria"]),
            category=_text(row["Category"]),
        )
