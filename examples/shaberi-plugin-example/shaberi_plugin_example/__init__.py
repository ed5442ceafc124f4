"""An example shaberi plugin: one of each kind of extension, registered when this module is imported.

    kotowaza     benchmark: explain a Japanese proverb, judged 1–10 (opt-in; data/ja/kotowaza.jsonl)
    capitals     ensemble dataset: name a country's capital, graded by ``exact``
    exact        grader: the whole reply, normalised, is the gold answer
    shortest     strategy: the shortest member response, no model call
    exclamation  pass: an answer that shouts (more than ``max`` exclamation marks) loses a tenth of the range
    prompts/     its templates: generation/kotowaza.jinja, generation/capitals.jinja, judging/kotowaza/

pyproject.toml lists this module once, in entry point group ``shaberi``; each item registers with its
registry's ``register(name, …)``, exactly as shaberi's built-ins do.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

from shaberi.benchmarks import BENCHMARKS, Question
from shaberi.ensemble.datasets import DATASETS
from shaberi.ensemble.graders import GRADERS, Extraction
from shaberi.ensemble.strategies import STRATEGIES, Consensus, Context, Strategy
from shaberi.passes import PASSES, Finding, Item, Pass
from shaberi.prompts import PROMPTS

TEMPLATES = Path(__file__).parent / "prompts"
PROMPTS.register("shaberi-plugin-example", TEMPLATES)  # for the benchmark's and the dataset's templates


@BENCHMARKS.register("kotowaza", scale=(1, 10), prompts=TEMPLATES, data={
    "title": "Kotowaza (example plugin)",
    "file": "ja/kotowaza",  # under --data-dir, .jsonl, .json, .csv or .parquet
    "columns": ["id", "proverb"],
    "id_columns": ["id"],
    "opt_in": True,  # not part of --benchmark all
    "source": "examples/shaberi-plugin-example/data/ja/kotowaza.jsonl",
})
def kotowaza(rows: list[dict]) -> Iterator[Question]:
    for row in rows:
        yield Question("kotowaza", str(row["id"]), [f"「{row['proverb']}」ということわざの意味を説明してください。"])


@DATASETS.register("capitals", path="capitals/capitals", columns=("country", "capital"), grader="exact",
                   source="examples/shaberi-plugin-example/data/gt/capitals/capitals.jsonl")
def capitals(rows: list[dict]) -> Iterator[Question]:
    for i, row in enumerate(rows, start=1):
        yield Question("capitals", str(i), [f"What is the capital of {row['country']}?"],
                       reference=str(row["capital"]), extra={"grader": "exact"})


def _normal(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", unicodedata.normalize("NFKC", text).casefold()).split())


@GRADERS.register("exact")
def exact(text: str, question: Question) -> Extraction:
    """The whole reply, NFKC-normalised, case-folded, punctuation dropped; right when it equals the gold read
    the same way."""
    answer = _normal(text)
    return Extraction(answer or None, "whole_reply" if answer else "none")


@STRATEGIES.register("shortest")
class Shortest(Strategy):
    """The shortest member response (ties: the first given)."""

    async def combine(self, question: Question, responses: list[str], ctx: Context) -> Consensus:
        best = min(range(len(responses)), key=lambda i: (len(responses[i].strip()), i))
        return Consensus(responses[best], {"winner": best, "lengths": [len(r.strip()) for r in responses]})


@PASSES.register("exclamation")
class Exclamation(Pass):
    """More than ``max`` exclamation marks (! or ！): a tenth of the score range off (``penalty`` auto)."""

    version = "1"
    options: ClassVar[dict[str, str]] = {"penalty": "auto", "max": "3"}

    def check(self, item: Item) -> Finding:
        count = sum((item.content or "").count(mark) for mark in "!！")
        if count <= self.number("max"):
            return Finding(detail={"count": count})
        return Finding(self.penalty(item, 0.1), f"{count} exclamation marks", {"count": count})
