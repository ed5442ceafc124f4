"""SimpleQA (openai simple-evals, ``simple_qa_test_set.csv``): short factual questions, graded by an LLM
judge as CORRECT, INCORRECT or NOT_ATTEMPTED; the question id is the 1-based row order."""

from collections.abc import Iterator
from typing import Any

from ...benchmarks import Question
from . import DATASETS


@DATASETS.register("simpleqa", path="simpleqa/simple_qa_test_set", columns=("problem", "answer"), grader="llm",
                   source="https://openaipublic.blob.core.windows.net/simple-evals/simple_qa_test_set.csv")
def convert(rows: list[dict[str, Any]]) -> Iterator[Question]:
    for i, row in enumerate(rows, start=1):
        yield Question("simpleqa", str(i), [str(row["problem"])], reference=str(row["answer"]),
                       extra={"grader": "llm"})
