"""TruthfulQA MC1 (truthfulqa/truthful_qa multiple_choice, ``mc_task.json``): one true answer among
``mc1_targets``. Upstream lists the true answer first, so the options are shuffled with a fixed seed per
question before lettering; the question id is the 1-based row order."""

from collections.abc import Iterator
from typing import Any

from ...benchmarks import Question
from . import DATASETS, lettered, mcq, shuffled


@DATASETS.register("truthfulqa", path="truthfulqa/mc_task", columns=("question", "mc1_targets"), grader="mcq",
                   source="https://github.com/sylinrl/TruthfulQA (data/mc_task.json)")
def convert(rows: list[dict[str, Any]]) -> Iterator[Question]:
    for i, row in enumerate(rows, start=1):
        targets = row["mc1_targets"]
        true = next(option for option, value in targets.items() if value == 1)
        options = shuffled(f"truthfulqa:{i}", list(targets))
        prompt, labels = lettered(str(row["question"]), options)
        yield mcq("truthfulqa", i, prompt, labels, labels[options.index(true)])
