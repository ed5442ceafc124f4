"""HalluMix (quotient-ai/hallumix, the user's own copy): is ``answer`` supported by ``documents``?
Asked as a two-option question, A (supported) or B (hallucinated), from ``hallucination_label`` (1 =
hallucinated); the question id is the 1-based row order."""

from collections.abc import Iterator
from typing import Any

from ...benchmarks import Question
from . import DATASETS, lettered, mcq


@DATASETS.register("hallumix", path="hallumix/test", columns=("documents", "answer", "hallucination_label"),
                   grader="mcq", source="your own copy of https://huggingface.co/datasets/quotient-ai/hallumix, as "
                                        "gt/hallumix/test.jsonl")
def convert(rows: list[dict[str, Any]]) -> Iterator[Question]:
    for i, row in enumerate(rows, start=1):
        documents = row["documents"] if isinstance(row["documents"], list) else [row["documents"]]
        context = "\n\n".join(f"Document {n}:\n{d}" for n, d in enumerate(documents, start=1))
        question = f"{context}\n\nAnswer to check:\n{row['answer']}\n\nIs this answer supported by the documents?"
        prompt, labels = lettered(question, ["Supported by the documents", "Not supported (hallucinated)"])
        yield mcq("hallumix", i, prompt, labels, "B" if int(row["hallucination_label"]) == 1 else "A",
                  row.get("source"))
