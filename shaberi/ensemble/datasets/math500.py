"""MATH-500 (HuggingFaceH4/MATH-500): competition problems with a LaTeX ``answer``, graded by math-verify."""

from collections.abc import Iterator
from typing import Any

from ...benchmarks import Question
from . import DATASETS


@DATASETS.register("math500", path="math500/test", columns=("problem", "answer"), grader="math",
                   source="https://huggingface.co/datasets/HuggingFaceH4/MATH-500")
def convert(rows: list[dict[str, Any]]) -> Iterator[Question]:
    for i, row in enumerate(rows, start=1):
        yield Question("math500", str(row.get("unique_id") or i), [str(row["problem"])], reference=str(row["answer"]),
                       category=row.get("subject"), extra={"grader": "math", "level": row.get("level")})
