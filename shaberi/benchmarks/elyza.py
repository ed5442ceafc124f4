"""ELYZA-tasks-100: 100 instructions with a reference answer and per-task grading notes.

Upstream columns: ``input`` (the task), ``output`` (reference answer), ``eval_aspect`` (criteria).
Question ids are the 1-based row order, as in the original Shaberi result files. Judged 1–5; the
benchmark score is the mean × 2 so that it sits on the same 0–10 scale as the others.

Templates: prompts/generation/elyza.jinja, prompts/judging/elyza/{primary,fallback}.jinja.
"""

from collections.abc import Iterator
from typing import Any

from ..extract import COMMON_RULES
from . import BENCHMARKS, BUILTIN_PROMPTS, Question, _text

# Its data entry: where the file is under --data-dir, where it comes from, the columns it needs.
DATA = {
    "title": "ELYZA-tasks-100",
    "file": "ja/elyza_tasks_100",  # under --data-dir, .jsonl, .json, .csv or .parquet
    "hf_repo": "elyza/ELYZA-tasks-100",  # where `shaberi data pull` fetches it from
    "hf_revision": "main",
    "hf_file": "test.csv",
    "columns": ["input", "output", "eval_aspect"],
    "sha256": ["366f1d7aec21eb059d67f4af3d66ff08aec8f87ef04440b6d50dae5d5ae950f5"],  # the versions checked
    "legacy_folder": "elyza__ELYZA-tasks-100",
    "leaderboard_column": "ELYZA 100",
}


@BENCHMARKS.register("elyza", rules=(*COMMON_RULES, "bare_number"), scale=(1, 5), data=DATA, prompts=BUILTIN_PROMPTS)
def convert(rows: list[dict[str, Any]]) -> Iterator[Question]:
    for i, row in enumerate(rows, start=1):
        yield Question(
            benchmark="elyza",
            question_id=str(i),
            turns=[str(row["input"])],
            reference=_text(row["output"]),
            criteria=_text(row["eval_aspect"]),
        )
