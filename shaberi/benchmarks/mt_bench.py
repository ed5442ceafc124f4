"""Japanese MT-Bench, first turn only: the 60 questions without coding and math (ids 11–30, 41–80).

Upstream (shisa-ai/ja-mt-bench-1shot) columns: ``id``, ``category``, ``Question``. The Stability-AI
``question_full.jsonl`` layout (``question_id``, ``category``, ``turns``) is accepted too; its coding and
math questions are dropped by id. Judged 1–10.

Templates: prompts/generation/mt_bench.jinja, prompts/judging/mt_bench/{primary,fallback}.jinja.
"""

from collections.abc import Iterator
from typing import Any

from . import BENCHMARKS, BUILTIN_PROMPTS, Question, _text

QUESTION_IDS = frozenset([*range(11, 31), *range(41, 81)])


# Its data entry: where the file is under --data-dir, where it comes from, the columns it needs.
DATA = {
    "title": "MT-Bench",
    "file": "ja/ja_mt_bench_1shot",
    "hf_repo": "shisa-ai/ja-mt-bench-1shot",
    "hf_revision": "e842e6120148d9400969c3aa3fc847f69763b292",
    "hf_file": "questions-1shot.jsonl",
    "columns": [["id", "question_id"], "category", ["Question", "turns"]],  # or Stability-AI's question_full layout
    "id_columns": ["id", "question_id"],
    "sha256": ["53bc5e9609daddd66a7e5fc00a2ba6baa90b46e3a0860aea2e9600ef67c62f91"],
    "legacy_folder": "shisa-ai__ja-mt-bench-1shot",
    "leaderboard_column": "JA-MT",
}


@BENCHMARKS.register("mt_bench", scale=(1, 10), data=DATA, prompts=BUILTIN_PROMPTS)
def convert(rows: list[dict[str, Any]]) -> Iterator[Question]:
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
