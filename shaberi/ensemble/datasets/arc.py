"""ARC Challenge and Easy (allenai/ai2_arc, test): labels are mostly A–D, some 1–4 or A–E; numeric labels
are normalised to letters, in the options and in ``answerKey`` alike."""

from collections.abc import Iterator
from typing import Any

from ...benchmarks import Question
from . import DATASETS, lettered, mcq


def _convert(name: str, rows: list[dict[str, Any]]) -> Iterator[Question]:
    for row in rows:
        choices = row["question"]["choices"]
        raw = [str(c["label"]) for c in choices]
        prompt, labels = lettered(row["question"]["stem"], [c["text"] for c in choices])
        gold = labels[raw.index(str(row["answerKey"]))]
        yield mcq(name, row["id"], prompt, labels, gold)


@DATASETS.register("arc_challenge", path="arc/ARC-Challenge-Test", columns=("id", "question", "answerKey"),
                   grader="mcq", source="https://huggingface.co/datasets/allenai/ai2_arc (ARC-Challenge, test)")
def challenge(rows: list[dict[str, Any]]) -> Iterator[Question]:
    return _convert("arc_challenge", rows)


@DATASETS.register("arc_easy", path="arc/ARC-Easy-Test", columns=("id", "question", "answerKey"), grader="mcq",
                   source="https://huggingface.co/datasets/allenai/ai2_arc (ARC-Easy, test)")
def easy(rows: list[dict[str, Any]]) -> Iterator[Question]:
    return _convert("arc_easy", rows)
