"""mcq: the chosen option letter, over the question's label set (A–D, A–J, …).

The text is NFKC-normalised (full-width ``Ｃ`` and ``（`` read as ``C`` and ``(``), then an ordered chain of
rules is tried, strongest first; the answer is the **last** match of the **first** rule that matches at all
(``parse_method`` names that rule):

1. ``answer``: an answer statement, then the letter: "The answer is X", "answer is: X", "answer is (X)",
   "Answer: X", "Answer: (X)", "**Answer: X**", "**Answer:** X", "answer is **X**",
   "answer is option X"; Japanese 答え / 正解 / 解答 followed by は or a colon ("正解は：D", "答えは（B）").
   The word "answer" is matched in any case ("ANSWER:"), the letter is not.
2. ``boxed``: ``\\boxed{X}``, ``\\boxed{\\text{X}}``, ``\\boxed{(X)}``, ``\\boxed{X. …}``.
3. ``bold``: a bold letter on its own: ``**X**``, ``**(X)**``, ``**X.**``.
4. ``parenthesised``: ``(X)`` standing alone: not right after a letter, digit, ``\\``, ``'`` or closing
   bracket (``P(D)``, ``det(A)``, ``f(B)``, ``\\det(A)`` are formulas, not choices), and not an operand
   (``(E) = 30 psi``, ``(A) + (B)``).
5. ``bare``: a reply that is only the letter ("B", "B.").

Everywhere the letter is case-sensitive (a lowercase "a" is the article: "the answer is a combination …";
"(a)" labels a sub-question), must end its word ("answer is Avogadro's" is not A) and is no operand of a
formula ("answer is: (E → F) ∨ …", "A - B = …"). A letter merely mentioned ("I think A is wrong") is never
an answer: it has to sit in one of the forms above. Nothing found: method ``none``, graded wrong.

Version 2 (issue 14) made the letter case-sensitive, read "answer is: X", and refused formulas; measured on
the 60,160 recorded MMLU-Pro responses by ``bench/graders_mmlu_pro.py``.
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache

from ...benchmarks import Question
from . import Extraction, grader

__all__ = ["RULES", "extract", "rules"]

RULES = ("answer", "boxed", "bold", "parenthesised", "bare")

# The letter ends its word and is not an operand: "answer is A combination", "(E → F)", "(E) = 30 psi" are no choice.
_OPERATOR = "[-+*/=^<>→←↔⇒∨∧|&×·]"
_OPERAND = r"(?!\s*[=^<>→←↔⇒∨∧|&×·/])(?![ \t]*[-+][ \t]*[A-Z(](?![a-z]))"
_END = rf"(?![A-Za-z0-9_]){_OPERAND}"


@cache
def rules(labels: str) -> tuple[tuple[str, re.Pattern[str]], ...]:
    """The ordered (method, pattern) chain for one label set; group 1 of each pattern is the letter."""
    x = f"[{re.escape(labels)}]"
    english = r"(?i:answer)(?:\*\*|__)?(?:\s+(?i:is)\b\s*:?|\s*:)"
    japanese = r"(?:答え|正解|解答)\s*(?:は\s*[:：]?|[:：])"
    lead = r"[\s*_]*(?:(?i:option|choice)\s+)?[(\[「]?"
    return (
        ("answer", re.compile(rf"(?:{english}|{japanese}){lead}({x}){_END}")),
        ("boxed", re.compile(rf"\\boxed\{{\s*(?:\\text(?:bf)?\{{\s*)?\(?({x}){_END}\)?"
                             r"(?=[.:]?\s*\}|[.:]\s|\s+[^-+*/=^\s])")),
        ("bold", re.compile(rf"\*\*\s*\(?({x})\)?[.:]?\s*\*\*")),
        ("parenthesised", re.compile(rf"(?<![\w\\)\]}}'])(?<!{_OPERATOR})(?<![+/=^<>→∨∧×·] )\(({x})\)(?![\w(])"
                                     rf"{_OPERAND}")),  # not "- (F)": a list item
        ("bare", re.compile(rf"^[\W_]*({x})[\W_]*$")),
    )


@grader("mcq", same=lambda found, q: found.answer == (q.reference or "").strip().upper(), version="2")
def extract(text: str, question: Question) -> Extraction:
    labels = "".join(question.extra.get("labels") or "ABCD")
    text = unicodedata.normalize("NFKC", text).strip()
    for method, pattern in rules(labels):
        found = pattern.findall(text)
        if found:
            return Extraction(found[-1], method)
    return Extraction(None, "none")
