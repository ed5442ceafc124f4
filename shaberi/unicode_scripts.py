"""Which writing system each character of an answer belongs to, counted in bulk.

``japanese_counts`` gives, per text, the Japanese characters (Unicode scripts Hiragana, Katakana and Han,
as ``\\p{Hiragana}\\p{Katakana}\\p{Han}``; the prolonged sound mark ー and ・ are script Common, not
counted) and the letters and digits of any script (``\\p{L}\\p{N}``, Python's ``str.isalnum``). The
leaderboard's ``% JA`` is their ratio. The counts are stored with each answer when it is written, so no
query has to scan every answer's text with a regex (a fifth of a second on a 20-model tree).

Counting is a lookup in a table indexed by code point, over all texts of a batch at once: two to three
times faster than Python's ``re`` over the same texts (0.09 s for subset20's 4 million characters, plus
0.04 s once to build the table), which matters when a legacy tree is imported.
"""

from __future__ import annotations

from functools import cache

import numpy as np

__all__ = ["JAPANESE_RANGES", "japanese_counts"]

# Unicode 15.1 Scripts.txt: Hiragana, Katakana and Han, inclusive ranges.
JAPANESE_RANGES: tuple[tuple[int, int], ...] = (
    (0x2E80, 0x2E99), (0x2E9B, 0x2EF3), (0x2F00, 0x2FD5), (0x3005, 0x3005), (0x3007, 0x3007),
    (0x3021, 0x3029), (0x3038, 0x303B), (0x3041, 0x3096), (0x309D, 0x309F), (0x30A1, 0x30FA),
    (0x30FD, 0x30FF), (0x31F0, 0x31FF), (0x32D0, 0x32FE), (0x3300, 0x3357), (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF), (0xF900, 0xFA6D), (0xFA70, 0xFAD9), (0xFF66, 0xFF6F), (0xFF71, 0xFF9D),
    (0x16FE2, 0x16FE3), (0x16FF0, 0x16FF1), (0x1AFF0, 0x1AFF3), (0x1AFF5, 0x1AFFB), (0x1AFFD, 0x1AFFE),
    (0x1B000, 0x1B122), (0x1B132, 0x1B132), (0x1B150, 0x1B152), (0x1B155, 0x1B155), (0x1B164, 0x1B167),
    (0x1F200, 0x1F200), (0x20000, 0x2A6DF), (0x2A700, 0x2B739), (0x2B740, 0x2B81D), (0x2B820, 0x2CEA1),
    (0x2CEB0, 0x2EBE0), (0x2F800, 0x2FA1D), (0x30000, 0x3134A), (0x31350, 0x323AF),
)
_TOP = 0x32400  # past the last letter of Unicode 15.1; higher code points count as neither


@cache
def _tables() -> tuple[np.ndarray, np.ndarray]:
    letters = np.fromiter((chr(c).isalnum() for c in range(_TOP)), dtype=np.int32, count=_TOP)
    japanese = np.zeros(_TOP, dtype=np.int32)
    for low, high in JAPANESE_RANGES:
        japanese[low:high + 1] = 1
    return japanese, letters


def japanese_counts(texts: list[str | None], chunk: int = 1 << 20) -> tuple[list[int | None], list[int | None]]:
    """(Japanese characters, letters and digits) per text; None for a None text. Texts go through numpy about
    ``chunk`` characters at a time, so memory stays bounded however many (60,000 long answers: about 25 bytes
    per character of a chunk at its peak, not of them all: 25 MB for a million)."""
    japanese, letters = _tables()
    out_japanese: list[int | None] = []
    out_letters: list[int | None] = []
    begin = size = 0
    for i, text in enumerate(texts):
        size += len(text or "")
        if size >= chunk or i == len(texts) - 1:
            counted = _counts(texts[begin:i + 1], japanese, letters)
            out_japanese += counted[0]
            out_letters += counted[1]
            begin, size = i + 1, 0
    return out_japanese, out_letters


def _counts(texts: list[str | None], japanese: np.ndarray, letters: np.ndarray
            ) -> tuple[list[int | None], list[int | None]]:
    present = [t for t in texts if t is not None]
    points = np.minimum(np.frombuffer("".join(present).encode("utf-32-le"), dtype=np.uint32), _TOP - 1)
    ends = np.cumsum([len(t) for t in present], dtype=np.int64)
    starts = ends - np.array([len(t) for t in present], dtype=np.int64)

    def per_text(table: np.ndarray) -> list[int]:
        running = np.concatenate(([0], np.cumsum(table[points], dtype=np.int64)))
        return (running[ends] - running[starts]).tolist()

    counts = iter(zip(per_text(japanese), per_text(letters), strict=True))
    pairs = [next(counts) if t is not None else (None, None) for t in texts]
    return [p[0] for p in pairs], [p[1] for p in pairs]
