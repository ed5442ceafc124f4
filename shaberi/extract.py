"""Score extraction from a judge's reply, and nothing else: never from the prompt or the answer.

Rules are tried in order; the first that yields a value inside the benchmark's scale wins and names
``parse_method``. A value outside the scale is rejected (and said so in the reason), not clamped.
Values are rounded half to even. Replies are NFKC-normalised first, so full-width digits, colons and
brackets (``ＦＩＮＡＬ ＳＣＯＲＥ：８``, ``［［４］］``) read like their ASCII forms.

    final_score   the last ``FINAL SCORE: n`` in the reply (the format our prompts ask for)
    score_tag     the last ``<score>n</score>``
    brackets      the last ``評価：[[n]]``, ``[[n]]``, ``評価：[n]`` or ``【n】``
    bare_number   the reply's last non-empty line is only a number (older ELYZA judges)
    slash_ten     the mean of every ``n/10`` mention (older Rakuda judges scoring each aspect)
"""

from __future__ import annotations

import re
import statistics
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["COMMON_RULES", "RULES", "Extraction", "extract"]

_NUM = r"(-?\d+(?:\.\d+)?)"
_FINAL = re.compile(rf"FINAL\s*SCORE\s*:?\s*[*_`\[]*\s*{_NUM}", re.I)
_TAG = re.compile(rf"<score>\s*{_NUM}\s*</score>", re.I)
_BRACKETS = re.compile(
    rf"評価\s*:?\s*\[\[\s*{_NUM}\s*\]\]|\[\[\s*{_NUM}\s*\]\]|評価\s*:?\s*\[\s*{_NUM}\s*\]|【\s*{_NUM}\s*(?:点)?\s*】"
)
_BARE = re.compile(rf"^\s*[*_`]*{_NUM}\s*(?:点)?[*_`]*\s*$")
_SLASH_TEN = re.compile(rf"(?<![\d.]){_NUM}\s*/\s*10(?![\d.])")


def _last(pattern: re.Pattern[str]) -> Callable[[str], float | None]:
    def rule(text: str) -> float | None:
        found = None
        for m in pattern.finditer(text):
            found = next(g for g in m.groups() if g is not None)
        return float(found) if found is not None else None

    return rule


def _bare_number(text: str) -> float | None:
    lines = [line for line in text.splitlines() if line.strip()]
    m = _BARE.match(lines[-1]) if lines else None
    return float(m.group(1)) if m else None


def _slash_ten(text: str) -> float | None:
    values = [float(v) for v in _SLASH_TEN.findall(text)]
    return statistics.fmean(values) if values else None


RULES: dict[str, Callable[[str], float | None]] = {
    "final_score": _last(_FINAL),
    "score_tag": _last(_TAG),
    "brackets": _last(_BRACKETS),
    "bare_number": _bare_number,
    "slash_ten": _slash_ten,
}
COMMON_RULES = ("final_score", "score_tag", "brackets")


@dataclass(frozen=True)
class Extraction:
    score: float | None
    method: str | None  # the rule that produced the score
    reason: str | None  # why there is no score

    @property
    def ok(self) -> bool:
        return self.score is not None


def extract(reply: str | None, scale: tuple[int, int], rules: tuple[str, ...] = COMMON_RULES) -> Extraction:
    """The score in a judge reply, or None with the reason."""
    if not reply or not reply.strip():
        return Extraction(None, None, "empty judge reply")
    text = unicodedata.normalize("NFKC", reply)
    low, high = scale
    rejected = []
    for name in rules:
        value = RULES[name](text)
        if value is None:
            continue
        rounded = float(round(value))  # round() is half-to-even
        if low <= rounded <= high:
            return Extraction(rounded, name, None)
        rejected.append(f"{name} gave {value:g}, outside {low}-{high}")
    return Extraction(None, None, "; ".join(rejected) or "no score in the judge reply")
