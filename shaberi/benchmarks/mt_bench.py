"""Japanese MT-Bench, first turn only: the 60 questions without coding and math (ids 11–30, 41–80).

Upstream (shisa-ai/ja-mt-bench-1shot) columns: ``id``, ``category``, ``Question``. The Stability-AI
``question_full.jsonl`` layout (``question_id``, ``category``, ``turns``) is accepted too; its coding and
math questions are dropped by id. Judged 1–10.
"""

from collections.abc import Iterator

from . import Question, _text, benchmark

QUESTION_IDS = frozenset([*range(11, 31), *range(41, 81)])


@benchmark("mt_bench", scale=(1, 10))
def convert(rows: list[dict]) -> Iterator[Question]:
    for row in rows:
        qid = int(row["id"] if "id" in row else row["question_id"])
        if qid not in QUESTION_IDS:
            continue
        text = row["Question"] if "Question" in row else row["turns"][0]
        yield Question(
            benchmark="mt_bench",
            question_id=str(qid),
            turns=[str(text)],
            category=_text(row.get("category")),
        )
