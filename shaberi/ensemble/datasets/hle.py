"""Humanity's Last Exam (cais/hle, gated: the user's own copy): text-only questions (rows with an image
are skipped). ``answer_type`` ``multipleChoice`` carries its options in the question and a letter as the
answer (graded by rule); ``exactMatch`` answers are graded by the LLM judge."""

from collections.abc import Iterator
from typing import Any

from ...benchmarks import Question
from . import DATASETS, letters


@DATASETS.register("hle", path="hle/test", columns=("id", "question", "answer", "answer_type"), grader="llm",
                   source="your own copy of https://huggingface.co/datasets/cais/hle (gated), as gt/hle/test.parquet")
def convert(rows: list[dict[str, Any]]) -> Iterator[Question]:
    for row in rows:
        if row.get("image"):
            continue
        if row["answer_type"] == "multipleChoice":
            yield Question("hle", str(row["id"]), [str(row["question"])], reference=str(row["answer"]).strip(),
                           category=row.get("category"), extra={"grader": "mcq", "labels": letters(26)})
        else:
            yield Question("hle", str(row["id"]), [str(row["question"])], reference=str(row["answer"]),
                           category=row.get("category"), extra={"grader": "llm"})
