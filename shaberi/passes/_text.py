"""Text helpers shared by the passes: blanking out the parts of an answer no language rule applies to."""

from __future__ import annotations

import re

__all__ = ["EXEMPT", "mask"]

# What is not prose: its characters say nothing about the language the answer is written in.
EXEMPT: dict[str, re.Pattern[str]] = {
    "code": re.compile(r"```.*?(?:```|\Z)|~~~.*?(?:~~~|\Z)|`[^`\n]+`", re.S),
    # An address starts where a run of its characters starts, and no part gives back what it took: linear
    # in the text, where a search from every position of a long run was quadratic.
    "url": re.compile(r"(?:https?|ftp)://[^\s<>\"'）」』】]++|www\.[^\s<>\"'）」』】]++"
                      r"|(?<![\w.+-])[\w.+-]++@[\w-]++(?:\.[\w-]++)+"),
    "math": re.compile(r"\$\$.*?\$\$|\$[^$\n]+\$|\\\(.*?\\\)|\\\[.*?\\\]", re.S),
}


def mask(text: str) -> tuple[str, dict[str, int]]:
    """``text`` with code, URLs and formulas replaced by spaces (offsets unchanged), and how many of each."""
    counts: dict[str, int] = {}
    for kind, pattern in EXEMPT.items():
        hits = 0

        def blank(match: re.Match[str]) -> str:
            nonlocal hits
            hits += 1
            return re.sub(r"\S", " ", match.group())

        text = pattern.sub(blank, text)
        if hits:
            counts[kind] = hits
    return text, counts
