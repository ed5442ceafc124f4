"""GPQA (Idavidrein/gpqa, gated: the user's own copy, e.g. ``gpqa_diamond.csv``): the correct answer and
three incorrect ones, shuffled with a fixed seed per question and lettered A–D."""

from collections.abc import Iterator
from typing import Any

from ...benchmarks import Question
from . import DATASETS, lettered, mcq, shuffled

COLUMNS = ("Question", "Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3")


@DATASETS.register("gpqa", path="gpqa/gpqa_diamond", columns=COLUMNS, grader="mcq",
                   source="your own copy of https://huggingface.co/datasets/Idavidrein/gpqa (gated), as "
                          "gt/gpqa/gpqa_diamond.csv")
def convert(rows: list[dict[str, Any]]) -> Iterator[Question]:
    for i, row in enumerate(rows, start=1):
        qid = row.get("Record ID") or i
        options = shuffled(f"gpqa:{qid}", [str(row[c]).strip() for c in COLUMNS[1:]])
        prompt, labels = lettered(str(row["Question"]), options)
        yield mcq("gpqa", qid, prompt, labels, labels[options.index(str(row["Correct Answer"]).strip())],
                  row.get("High-level domain"))
