"""Tengu-Bench: 120 business-style tasks with rubric criteria whose points sum to 10.

Upstream columns: ``Category``, ``Question``, ``Answer`` (reference, null in 43 rows), ``Criteria``.
Question ids are the 1-based row order unless the file has an ``id`` column. Ids 61–65 (the
倫理的制御 "ethical control" category) are excluded from scoring, leaving 115. Judged 0–10.

Templates: prompts/generation/tengu.jinja, prompts/judging/tengu/{primary,fallback}.jinja.
"""

from collections.abc import Iterator
from typing import Any

from . import BENCHMARKS, BUILTIN_PROMPTS, Question, _text

EXCLUDED_IDS = frozenset({61, 62, 63, 64, 65})


# Its data entry: where the file is under --data-dir, where it comes from, the columns it needs.
DATA = {
    "title": "Tengu-Bench",
    "file": "ja/tengu_bench",
    "hf_repo": "lightblue/tengu_bench",
    "hf_revision": "main",
    "hf_file": "data/test-00000-of-00001.parquet",
    "columns": ["Category", "Question", "Answer", "Criteria"],
    "nullable": ["Answer"],  # no reference answer for 43 questions upstream
    "id_columns": ["id"],  # optional: row order otherwise
    "sha256": ["16079b3255aff59a9580471a8dc7c0827d6be845fe3617fb34c885915fca1f5f"],
    "legacy_folder": "lightblue__tengu_bench",
    "leaderboard_column": "Tengu",
}


@BENCHMARKS.register("tengu", scale=(0, 10), excluded=EXCLUDED_IDS, data=DATA, prompts=BUILTIN_PROMPTS)
def convert(rows: list[dict[str, Any]]) -> Iterator[Question]:
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
