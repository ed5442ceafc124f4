"""numeric (GSM8K): the number after the last ``####``, else in the last ``\\boxed{}``, else after "answer
is", else the last number in the text. Thousands separators, ``$``, ``%`` and trailing zeros are
dropped, so ``$1,234.50`` and ``1234.5`` are the same answer."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from ...benchmarks import Question
from . import Extraction, grader

_NUMBER = r"-?\$?\s?\d(?:[\d,]*\d)?(?:\.\d+)?"
RULES = [
    ("####", re.compile(rf"####\s*({_NUMBER})")),
    ("boxed", re.compile(rf"\\boxed\{{\s*\\?\$?({_NUMBER})")),
    ("answer_is", re.compile(rf"answer(?: is|:)\s*\**\s*({_NUMBER})", re.I)),
    ("last_number", re.compile(f"({_NUMBER})")),
]


def normalise(text: str) -> str | None:
    try:
        value = Decimal(text.replace(",", "").replace("$", "").replace(" ", ""))
    except InvalidOperation:
        return None
    return format(value.normalize(), "f") if value != 0 else "0"


@grader("numeric")
def extract(text: str, question: Question) -> Extraction:
    for method, pattern in RULES:
        found = pattern.findall(text)
        if found and (value := normalise(found[-1])) is not None:
            return Extraction(value, method)
    return Extraction(None, "none")
