"""HellaSwag (Rowan/hellaswag, validation): pick the ending of ``ctx`` among four ``endings``; ``label`` 0–3."""

from collections.abc import Iterator
from typing import Any

from ...benchmarks import Question
from . import DATASETS, lettered, mcq


@DATASETS.register("hellaswag", path="hellaswag/hellaswag_val.parsed", columns=("ctx", "endings", "label"),
                   grader="mcq", source="https://huggingface.co/datasets/Rowan/hellaswag (validation)")
def convert(rows: list[dict[str, Any]]) -> Iterator[Question]:
    for i, row in enumerate(rows):
        qid = row.get("ind", row.get("idx", i))
        prompt, labels = lettered(f"Choose the most likely continuation.\n\n{row['ctx']}", list(row["endings"]))
        yield mcq("hellaswag", qid, prompt, labels, labels[int(row["label"])], row.get("activity_label"))
