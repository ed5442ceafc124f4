"""mcq: the chosen option letter, by a chain of rules over the question's label set (A–D, A–J, …), the
last match of the first rule that matches: ``Answer: X`` / "the answer is (X)"; ``\\boxed{X}``; ``(X)``;
a reply that is only the letter."""

from __future__ import annotations

import re
from functools import cache

from ...benchmarks import Question
from . import Extraction, grader


@cache
def _rules(labels: str) -> list[tuple[str, re.Pattern[str]]]:
    x = f"[{re.escape(labels)}]"
    return [
        ("answer", re.compile(rf"(?:answer\s*(?:is|:)|(?:答え|正解)\s*(?:は|[:：])+)\s*\**\s*[\(\[]?({x})(?![A-Za-z])",
                              re.I)),
        ("boxed", re.compile(rf"\\boxed\{{\s*(?:\\text\{{)?\s*\(?({x})\)?\s*\}}")),
        ("parenthesised", re.compile(rf"\(({x})\)")),
        ("bare", re.compile(rf"^\W*({x})\W*$")),
    ]


@grader("mcq", same=lambda found, q: found.answer == (q.reference or "").strip().upper())
def extract(text: str, question: Question) -> Extraction:
    labels = "".join(question.extra.get("labels") or "ABCD")
    for method, pattern in _rules(labels):
        found = pattern.findall(text.strip())
        if found:
            return Extraction(found[-1].upper(), method)
    return Extraction(None, "none")
