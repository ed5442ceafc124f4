"""numeric (GSM8K): the final number of a response, compared with the gold as an exact fraction.

The text is NFKC-normalised (full-width digits read as digits), then the rules are tried in order, the last
match of the first rule that matches (``parse_method`` names it):

1. ``####``: a line ``#### n`` (GSM8K's own format; a unit word may follow, a Markdown heading
   ``#### 1. Understand the problem`` is no answer);
2. ``boxed``: in the last ``\\boxed{…}``, the first number after its last ``=``, else its first number
   (``\\boxed{\\frac{3}{4}}``, ``\\boxed{\\$18}``, ``\\boxed{x = 18}``, ``\\boxed{18 \\text{ apples}}``);
3. ``answer_is``: after "answer is" / "Answer:" / 答え(は) (``**``, ``$``, ``\\(`` allowed between), the
   statement up to its sentence's end: the first number after its last ``=`` ("The answer is 20 - 2 = 18"),
   else its first number;
4. ``last_number``: the last number in the text.

A number is read as an exact ``Fraction``: an optional sign (``-``, or the Unicode minus ``−``, not when it
joins two numbers as in ``5-3``), an optional ``$``, digits with thousands separators only in groups of three
(``1,234,567``; ``1,2`` is a list of two numbers), an optional decimal part, and an optional ``/integer``
(``3/4``), a mixed number (``18 1/2``, ``1½``, ``1\\frac{1}{2}``), or a LaTeX ``\\frac{a}{b}`` / ``\\dfrac`` /
``\\tfrac``; LaTeX thousands separators (``1{,}000``, ``18\\,000``) read as commas. Units and signs after
it (``12 dollars``, ``15 cm``, ``50%``) are ignored. The extraction is the fraction's canonical text
(``12.50`` → ``12.5``, ``\\frac{6}{8}`` → ``0.75``, ``1/3`` → ``1/3``), so equal strings mean equal numbers,
as ``majority`` needs; the comparison with the gold is numeric.
"""

from __future__ import annotations

import re
import unicodedata
from fractions import Fraction

from ...benchmarks import Question
from . import GRADERS, Extraction

__all__ = ["RULES", "extract", "parse", "same"]

_MINUS = "-\u2212"  # hyphen-minus, Unicode minus sign
_SIGN = rf"(?:(?<![\w.)\]}}])[{_MINUS}])?"
_DECIMAL = r"(?:\d{1,3}(?:,\d{3})+(?!\d|,\d)|\d+)(?:\.\d+)?|\.\d+"
_INT = rf"[{_MINUS}]?\d+"
NUMBER = (rf"{_SIGN}(?:\d+\s*)?\\[dt]?frac\{{\s*{_INT}\s*\}}\{{\s*{_INT}\s*\}}"  # \frac{3}{4}, 1\frac{1}{2}
          rf"|{_SIGN}\d+[ \t]+\d+/\d+(?!\d|[.,]\d)"  # a mixed number: 18 1/2
          rf"|{_SIGN}(?:\\?\$\s?)?{_SIGN}(?:{_DECIMAL})(?:/\d+(?!\d|[.,]\d))?(?!\d)")
_NUMBER = re.compile(NUMBER)
_LEAD = r"[\s*_:$]*(?:\\\(|\\\[)?[\s$]*"
RULES = [
    ("####", re.compile(rf"^[ \t]*####[ \t]*({NUMBER})(?:[ \t]*[a-z%]+){{0,2}}[ \t.。]*$", re.M)),  # not a heading
    ("boxed", re.compile(r"\\boxed\{((?:[^{}]|\{(?:[^{}]|\{[^{}]*\})*\})*)\}")),
    ("answer_is", re.compile(rf"(?:(?i:answer)(?:\*\*)?(?:\s+(?i:is)\b|\s*:)|(?:答え|正解)\s*(?:は|[:：])){_LEAD}"
                             rf"({NUMBER})")),
    ("last_number", re.compile(f"({NUMBER})")),
]


def parse(text: str) -> Fraction | None:
    """One number as matched by ``NUMBER`` (``-$1,234.50``, ``−5``, ``3/4``, ``\\dfrac{-3}{4}``, ``18 1/2``,
    ``1\\frac{1}{2}``), exactly."""
    text = text.replace("\u2212", "-").replace("\\$", "").replace("$", "").replace(",", "").strip()
    if m := re.fullmatch(r"(-?)(\d+)[ \t]+(\d+)/(\d+)", text):  # a mixed number
        sign, whole, num, den = m.groups()
        part = _fraction(num, den)
        return None if part is None else (-1 if sign else 1) * (int(whole) + part)
    text = text.replace(" ", "")
    if m := re.fullmatch(r"(-?)(\d*)\\[dt]?frac\{(-?\d+)\}\{(-?\d+)\}", text):
        sign, whole, num, den = m.groups()
        value = _fraction(num, den)
        if value is not None and whole:
            value += int(whole)
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


def same(found: Extraction, question: Question) -> bool:
    """Numerically equal to the gold, read the same way (``18``, ``#### 18``, ``$18.00`` are one answer)."""
    gold = extract(question.reference or "", question).answer
    return found.answer is not None and gold is not None and parse(found.answer) == parse(gold)


_VULGAR = re.compile(r"(\d?)[ \t]*([\u00bc-\u00be\u2150-\u215e])")
_GROUPED = re.compile(r"(?<=\d)(?:\{,\}|\\,)(?=\d{3})")  # LaTeX thousands: 1{,}000, 18\,000


def _plain(text: str) -> str:
    """``text`` NFKC-normalised, with vulgar fractions as ``n/d`` (``1½`` is the mixed number ``1 1/2``, not
    11/2), LaTeX thousands separators as commas, and a sign after ``####`` joined to its number."""
    text = _VULGAR.sub(lambda m: f"{m.group(1)} {unicodedata.normalize('NFKC', m.group(2))}".strip(), text)
    text = unicodedata.normalize("NFKC", text).replace("\u2044", "/")
    text = _GROUPED.sub(",", text)
    return re.sub(r"(####[ \t]*)[-\u2212][ \t]+(?=\d)", r"\1-", text)


def _result(segment: str) -> Fraction | None:
    """The first number of ``segment`` after its last ``=`` (the result of "20 - 2 = 18"), else its first."""
    tail = segment.rsplit("=", 1)[-1]
    for match in _NUMBER.finditer(tail):
        if (value := parse(match.group(0))) is not None:
            return value
    return None


@GRADERS.register("numeric", same=same, version="3")
def extract(text: str, question: Question) -> Extraction:
    text = _plain(text)
    for method, pattern in RULES:
        matches = list(pattern.finditer(text))
        if not matches:
            continue
        last = matches[-1]
        if method == "boxed":
            value = _result(last.group(1))
        elif method == "answer_is":  # the statement up to its sentence's end: "The answer is 20 - 2 = 18."
            value = _result(re.split(r"\n|[.。](?:\s|$)", text[last.start(1):], maxsplit=1)[0])
        else:
            value = parse(last.group(1))
        if value is not None:
            return Extraction(canonical(value), method)
    return Extraction(None, "none")
