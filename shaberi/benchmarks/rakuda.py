"""Rakuda: 40 open questions about Japanese geography, politics, history and society.

Upstream columns: ``category``, ``question_id`` (a string id kept as is), ``text``. Judged 1–10.

Templates: prompts/generation/rakuda.jinja, prompts/judging/rakuda/{primary,fallback}.jinja.
"""

from collections.abc import Iterator
from typing import Any

from ..extract import COMMON_RULES
from . import BENCHMARKS, BUILTIN_PROMPTS, Question, _text

# Its data entry: where the file is under --data-dir, where it comes from, the columns it needs.
DATA = {
    "title": "Rakuda",
    "file": "ja/rakuda",
    "hf_repo": "yuzuai/rakuda-questions",
    "hf_revision": "refs/convert/parquet",
    "hf_file": "default/train/0000.parquet",
    "columns": ["category", "question_id", "text"],
    "id_columns": ["question_id"],
    "sha256": ["ce26781dc98acecf1c3d64f07202edb5997811256d8840ced0474db75378960f"],
    "legacy_folder": "yuzuai__rakuda-questions",
    "leaderboard_column": "Rakuda",
}


@BENCHMARKS.register("rakuda", rules=(*COMMON_RULES, "slash_ten"), scale=(1, 10), data=DATA, prompts=BUILTIN_PROMPTS)
def convert(rows: list[dict[str, Any]]) -> Iterator[Question]:
    for row in rows:
        yield Question(
            benchmark="rakuda",
            question_id=str(row["question_id"]),
            turns=[str(row["text"])],
            category=_text(row.get("category")),
        )
