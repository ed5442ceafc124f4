"""numeric (GSM8K): the final number of a response, compared with the gold as an exact fraction.

The text is NFKC-normalised (full-width digits read as digits), then the rules are tried in order, the last
match of the first rule that matches (``parse_method`` names it):

1. ``####``: the number after ``####`` (GSM8K's own format);
2. ``boxed``: the last number inside the last ``\\boxed{…}`` (``\\boxed{\\frac{3}{4}}``, ``\\boxed{\\$18}``);
3. ``answer_is``: the number right after "answer is" / "Answer:" / 答え(は) (``**``, ``$``, ``\\(`` allowed
   between);
4. ``last_number``: the last number in the text.

A number is read as an exact ``Fraction``: an optional sign (``-``, or the Unicode minus ``−``, not when it
joins two numbers as in ``5-3``), an optional ``$``, digits with thousands separators only in groups of three
(``1,234,567``; ``1,2`` is a list of two numbers), an optional decimal part, and an optional ``/integer``
(``3/4``), or a LaTeX ``\\frac{a}{b}`` / ``\\dfrac`` / ``\\tfrac``. Units and signs after it (``12 dollars``,
``15 cm``, ``50%``) are ignored. The extraction is the fraction's canonical text (``12.50`` → ``12.5``,
``\\frac{6}{8}`` → ``0.75``, ``1/3`` → ``1/3``), so equal strings mean equal numbers, as ``majority`` needs;
the comparison with the gold is numeric.
"""

from __future__ import annotations

import re
import unicodedata
from fractions import Fraction

from ...benchmarks import Question
from . import Extraction, grader

__all__ = ["RULES", "extract", "parse", "same"]

_MINUS = "-\u2212"  # hyphen-minus, Unicode minus sign
_SIGN = rf"(?:(?<![\w.)\]}}])[{_MINUS}])?"
_DECIMAL = r"(?:\d{1,3}(?:,\d{3})+(?!\d|,\d)|\d+)(?:\.\d+)?|\.\d+"
_INT = rf"[{_MINUS}]?\d+"
NUMBER = (rf"{_SIGN}\\[dt]?frac\{{\s*{_INT}\s*\}}\{{\s*{_INT}\s*\}}"  # \frac{3}{4}
          rf"|{_SIGN}(?:\\?\$\s?)?{_SIGN}(?:{_DECIMAL})(?:/\d+(?!\d|[.,]\d))?(?!\d)")
_NUMBER = re.compile(NUMBER)
_LEAD = r"[\s*_:$]*(?:\\\(|\\\[)?[\s$]*"
RULES = [
    ("####", re.compile(rf"####\s*({NUMBER})")),
    ("boxed", re.compile(r"\\boxed\{((?:[^{}]|\{(?:[^{}]|\{[^{}]*\})*\})*)\}")),
    ("answer_is", re.compile(rf"(?:(?i:answer)(?:\*\*)?(?:\s+(?i:is)\b|\s*:)|(?:答え|正解)\s*(?:は|[:：])){_LEAD}"
                             rf"({NUMBER})")),
    ("last_number", re.compile(f"({NUMBER})")),
]


def parse(text: str) -> Fraction | None:
    """One number as matched by ``NUMBER`` (``-$1,234.50``, ``−5``, ``3/4``, ``\\dfrac{-3}{4}``), exactly."""
    text = text.replace("\u2212", "-").replace("\\$", "").replace("$", "").replace(",", "").replace(" ", "")
    if m := re.fullmatch(r"(-?)\\[dt]?frac\{(-?\d+)\}\{(-?\d+)\}", text):
        sign, num, den = m.groups()
        value = _fraction(num, den)
        return -value if value is not None and sign else value
    if text.startswith("--"):
        return None
    num, _, den = text.partition("/")
    return _fraction(num, den or "1")


def _fraction(num: str, den: str) -> Fraction | None:
    try:
        value = Fraction(num) / Fraction(den)
    except (ValueError, ZeroDivisionError):
        return None
    return value


def canonical(value: Fraction) -> str:
    """``12``, ``12.5``, ``-0.75``, ``1/3``: the exact decimal when there is one, else ``p/q``."""
    if value.denominator == 1:
        return str(value.numerator)
    d = value.denominator
    for p in (2, 5):
        while d % p == 0:
            d //= p
    if d != 1:
        return f"{value.numerator}/{value.denominator}"
    whole, rest = divmod(abs(value.numerator), value.denominator)
    digits = []
    while rest:
        digit, rest = divmod(rest * 10, value.denominator)
        digits.append(str(digit))
    return f"{'-' if value < 0 else ''}{whole}.{''.join(digits)}"


def _last(text: str) -> Fraction | None:
    for match in reversed(list(_NUMBER.finditer(text))):
        if (value := parse(match.group(0))) is not None:
            return value
    return None


def same(found: Extraction, question: Question) -> bool:
    """Numerically equal to the gold, read the same way (``18``, ``#### 18``, ``$18.00`` are one answer)."""
    gold = extract(question.reference or "", question).answer
    return found.answer is not None and gold is not None and parse(found.answer) == parse(gold)


@grader("numeric", same=same, version="2")
def extract(text: str, question: Question) -> Extraction:
    text = unicodedata.normalize("NFKC", text).replace("\u2044", "/")  # ½ → 1⁄2 → 1/2
    for method, pattern in RULES:
        matches = pattern.findall(text)
        if not matches:
            continue
        value = _last(matches[-1]) if method == "boxed" else parse(matches[-1])
        if value is not None:
            return Extraction(canonical(value), method)
    return Extraction(None, "none")
