"""repetition: degenerate looping, and answers cut off by the token limit.

Looping is any of: half or more of the text's 10-character sequences are repeats of others
(``ngram_repeat`` ≥ 0.5, answers of 200 characters or more); the last 1,000 characters repeating the
same way (≥ 0.6: a loop that starts late); zlib compressing the text below a tenth of its size; one line
of ten letters or more written four times or more. Code blocks are left out (code is
legitimately repetitive), whitespace is collapsed first. Truncation is ``finish_reason = length``.

Penalty ``auto``: half the score range for looping; ``truncation_penalty`` ``auto``: a tenth of it for a
truncated answer that does not loop (a loop usually runs into the limit: it is not charged twice).
Thresholds were set on the legacy trees' real answers (``bench/passes.py``).
"""

from __future__ import annotations

import re
import zlib
from collections import Counter
from typing import Any, ClassVar

from . import PASSES, Finding, Item, Pass
from ._text import EXEMPT

__all__ = ["Repetition", "signals"]

GRAM = 10
_LETTERS = re.compile(r"[\W\d_]+")


def _repeat(text: str) -> float:
    grams = [text[i:i + GRAM] for i in range(len(text) - GRAM + 1)]
    return 1 - len(set(grams)) / len(grams) if grams else 0.0


def signals(content: str) -> dict[str, Any]:
    """The looping measures of a text, and which of them crossed their threshold (``looping``)."""
    code = EXEMPT["code"].sub(" ", content)
    flat = re.sub(r"\s+", " ", code).strip()
    found: dict[str, Any] = {"chars": len(flat), "looping": []}
    if len(flat) >= 200:
        found["ngram_repeat"] = round(_repeat(flat), 4)
        raw = flat.encode()
        found["compression"] = round(len(zlib.compress(raw)) / len(raw), 4)
        if found["ngram_repeat"] >= 0.5:
            found["looping"].append("ngram_repeat")
        if found["compression"] < 0.1:
            found["looping"].append("compression")
    if len(flat) >= 1500:
        found["tail_repeat"] = round(_repeat(flat[-1000:]), 4)
        if found["tail_repeat"] >= 0.6:
            found["looping"].append("tail_repeat")
    lines = Counter(s for line in code.splitlines() if len(_LETTERS.sub("", s := line.strip())) >= 10)
    if lines:
        line, count = lines.most_common(1)[0]
        if count >= 4:
            found["repeated_line"] = {"text": line[:80], "count": count}
            found["looping"].append("repeated_line")
    return found


@PASSES.register("repetition")
class Repetition(Pass):
    version = "1"
    options: ClassVar[dict[str, str]] = {"penalty": "auto", "truncation_penalty": "auto"}

    def check(self, item: Item) -> Finding:
        truncated = item.finish_reason == "length"
        if not item.content:
            return Finding(detail={"truncated": truncated, "looping": []})
        detail = signals(item.content) | {"truncated": truncated}
        if detail["looping"]:
            return Finding(self.penalty(item, 0.5), f"looping ({', '.join(detail['looping'])})"
                           f"{'; cut off by the token limit' if truncated else ''}", detail)
        if truncated:
            return Finding(self.penalty(item, 0.1, "truncation_penalty"), "cut off by the token limit", detail)
        return Finding(0.0, "", detail)
