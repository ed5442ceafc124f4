"""mcq: the chosen option letter, over the question's label set (A–D, A–J, …).

The text is NFKC-normalised (full-width ``Ｃ`` and ``（`` read as ``C`` and ``(``), then an ordered chain of
rules is tried, strongest first; the answer is the **last** match of the **first** rule that matches at all
(``parse_method`` names that rule):

1. ``answer``: an answer statement, then the letter: "The answer is X", "answer is: X", "answer is (X)",
   "Answer: X", "Answer: (X)", "**Answer: X**", "**Answer:** X", "answer is **X**",
   "answer is option X", "I pick (X)", "we choose X"; Japanese 答え / 正解 / 解答 followed by は or a colon
   ("正解は：D", "答えは（B）"). The word "answer" is matched in any case ("ANSWER:"), the letter is not. A
   letter that is a word of the sentence ("The answer is I believe …", "Answer: A reasonable …") is not
   read; a statement naming more than one letter ("(C) or (B)", "(A) for part a and (B) for part b",
   "(A), (B) and (C)") is no single choice: method ``hedged``, no answer, graded wrong.
2. ``boxed``: ``\\boxed{X}``, ``\\boxed{\\text{X}}``, ``\\boxed{(X)}``, ``\\boxed{X. …}``.
3. ``bold``: a bold letter on its own: ``**X**``, ``**(X)**``, ``**X.**``.
4. ``parenthesised``: ``(X)`` standing alone: not right after a letter, digit, ``\\``, ``'`` or closing
   bracket (``P(D)``, ``det(A)``, ``f(B)``, ``\\det(A)`` are formulas, not choices), and not an operand
   (``(E) = 30 psi``, ``(A) + (B)``); read only in the reply's closing paragraph, and only when that
   paragraph names exactly one such letter (options discussed along the way are not the choice).
5. ``bare``: a reply that is only the letter ("B", "B.").

Everywhere the letter is case-sensitive (a lowercase "a" is the article: "the answer is a combination …";
"(a)" labels a sub-question), must end its word ("answer is Avogadro's" is not A) and is no operand of a
formula ("answer is: (E → F) ∨ …", "A - B = …"). A letter merely mentioned ("I think A is wrong") is never
an answer: it has to sit in one of the forms above. Nothing found: method ``none``, graded wrong.

Version 2 (issue 14) made the letter case-sensitive, read "answer is: X", refused formulas, hedges and
letters named along the way; measured on the 60,160 recorded MMLU-Pro responses by
``bench/graders_mmlu_pro.py``.
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache

from ...benchmarks import Question
from . import GRADERS, Extraction

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
    english = (r"(?i:answer)(?:\*\*|__)?(?:\s+(?i:is)\b\s*:?|\s*:)"
               r"|\b(?:I|[Ww]e)\s+(?:would\s+|will\s+)?(?i:pick|choose|select|go\s+with)")
    japanese = r"(?:答え|正解|解答)\s*(?:は\s*[:：]?|[:：])"
    lead = r"[\s*_]*(?:(?i:option|choice)\s+)?[(\[「]?"
    # "I believe …", "A reasonable …": the letter is a word of the sentence, not the choice.
    word = rf"(?!['’]\w|\s+(?!{_CONNECTIVES}\b)[a-z]+\b)"
    return (
        # the lookahead names the characters a statement can start with: re tries the whole alternation only
        # there (2.7x faster over the recorded responses, the same matches); NFKC leaves no other case of them
        ("answer", re.compile(rf"(?=[AaIWw答正解])(?:{english}|{japanese}){lead}({x}){_END}{word}")),
        ("boxed", re.compile(rf"\\boxed\{{\s*(?:\\text(?:bf)?\{{\s*)?\(?({x}){_END}\)?"
                             r"(?=[.:]?\s*\}|[.:]\s|\s+[^-+*/=^\s])")),
        ("bold", re.compile(rf"\*\*\s*\(?({x})\)?[.:]?\s*\*\*")),
        ("parenthesised", re.compile(rf"(?=\()(?<![\w\\)\]}}'])(?<!{_OPERATOR})(?<![+/=^<>→∨∧×·] )\(({x})\)(?![\w(])"
                                     rf"{_OPERAND}")),  # not "- (F)": a list item
        ("bare", re.compile(rf"^[\W_]*({x})[\W_]*$")),
    )


_CONNECTIVES = "(?:because|since|as|is|was|which|with|for|from|due|given|this|that|here|there|then|so)"


@cache
def _another(x: str) -> re.Pattern[str]:
    """A second letter right after the stated one: "or (B)", ", C", "for part a and (B)"."""
    return re.compile(rf"[)\]」*]*\s*(?:,|/|&|\bor\b|\band\b|\bfor\b[^.]{{0,20}}?\band\b)\s*"
                      rf"(?:(?i:option|choice)\s+)?[(\[]?{x}(?![A-Za-z])")


def _hedged(text: str, m: re.Match[str], x: str) -> bool:
    """Does the stated letter come with another ("(C) or (B)", "(A) for part a and (B) …", "(B, C, G)")?"""
    return bool(_another(x).match(text[m.end(1):m.end(1) + 40].split("\n")[0]))


@GRADERS.register("mcq", same=lambda found, q: found.answer == (q.reference or "").strip().upper(), version="2")
def extract(text: str, question: Question) -> Extraction:
    labels = "".join(question.extra.get("labels") or "ABCD")
    text = unicodedata.normalize("NFKC", text).strip()
    x = f"[{re.escape(labels)}]"
    for method, pattern in rules(labels):
        if method == "parenthesised":  # only in the closing paragraph, and only one letter there
            last = text.split("\n\n")[-1]
            letters = set(pattern.findall(last))
            if len(letters) == 1:
                return Extraction(letters.pop(), method)
            continue
        found = list(pattern.finditer(text))
        if found:
            if _hedged(text, found[-1], x):
                return Extraction(None, "hedged")
            return Extraction(found[-1].group(1), method)
    return Extraction(None, "none")
