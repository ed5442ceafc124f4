"""MMLU-Pro (TIGER-Lab/MMLU-Pro, test): up to ten options lettered A–J; gold is the ``answer`` letter
(upstream's question 3983 has a letter that disagrees with ``answer_index``: the letter is used, as the
published leaderboards do)."""

from collections.abc import Iterator
from typing import Any

from ...benchmarks import Question
from . import DATASETS, lettered, mcq


@DATASETS.register("mmlu_pro", path="mmlu_pro/test", columns=("question_id", "question", "options", "answer"),
                   grader="mcq", source="https://huggingface.co/datasets/TIGER-Lab/MMLU-Pro (test)")
def convert(rows: list[dict[str, Any]]) -> Iterator[Question]:
    for row in rows:
        prompt, labels = lettered(str(row["question"]), list(row["options"]))
        yield mcq("mmlu_pro", row["question_id"], prompt, labels, str(row["answer"]).strip(), row.get("category"))
