"""GSM8K (openai/gsm8k, test): grade-school word problems; the gold number follows ``####`` in ``answer``.
Upstream rows have no id: the 1-based row order is the question id."""

from collections.abc import Iterator
from typing import Any

from ...benchmarks import Question
from . import DATASETS


@DATASETS.register("gsm8k", path="gsm8k/test", columns=("question", "answer"), grader="numeric",
                   source="https://huggingface.co/datasets/openai/gsm8k (main/test)")
def convert(rows: list[dict[str, Any]]) -> Iterator[Question]:
    for i, row in enumerate(rows, start=1):
        gold = str(row["answer"]).rsplit("####", 1)[-1].strip().replace(",", "")
        yield Question("gsm8k", str(i), [str(row["question"])], reference=gold, extra={"grader": "numeric"})
