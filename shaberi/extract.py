"""A judge's verdict, read from what the judge itself wrote: never from the prompt, never from the answer.

The grammar, applied in this order:

1. **Normalise.** The reply is NFKC-normalised, so full-width digits, colons and brackets
   (``ＦＩＮＡＬ ＳＣＯＲＥ：８``, ``［［４］］``) read as their ASCII forms.
2. **Set aside what the judge did not say in its own voice.** Quotations (「…」 『…』 “…” ‘…’, and "…" or
   '…' within a line; an apostrophe inside a word is not a quote), fenced code blocks, ```code spans```
   and blockquote lines (``> …``) are masked. So is a *restatement of the answer*: a verdict copied from
   the answer being judged, with the words before it on its line or with the line before it (see
   ``_restates``).
3. **Find the verdicts.** A verdict is one of these *stated formats*, anywhere in what remains:

       final_score  ``FINAL SCORE: n``           the line our prompts ask for
       score_tag    ``<score>n</score>``
       brackets     ``評価：[[n]]``, ``[[n]]``, ``評価：[n]``, ``評価：【n】``, ``【n点】``

   ``n`` is a number as written, decimals included; it may be bold, and may be written ``n/MAX`` or
   ``n out of MAX`` (MAX the top of the benchmark's scale) or ``n点``. After ``FINAL SCORE: n`` nothing but
   closing markup, a punctuation mark and digit-free words, a digit-free parenthesis or a closing phrase
   (です, とします) may follow on the line. Anything
   else makes the verdict *ambiguous*: arithmetic (``10 - 2 = 8``), a range (``1-5のうち4``), prose
   carrying another number (``10 would be too generous; I give 6``), a bracket holding more than a number
   (``[[7-8]]``), ``/MAX`` that is not the scale's top. A bare ``【1】`` is a section header, never a verdict.

   A benchmark may add *legacy formats*, read only when no stated format appears at all:

       bare_number  the reply's last non-empty line is only a number (older ELYZA judges)
       slash_ten    the mean of every aspect's ``n/10`` (older Rakuda judges scoring each aspect)

4. **Decide.** Every verdict found must be valid, inside the scale and equal: then that value is the score,
   stored as the judge wrote it (4.5 stays 4.5) and named by the format of the last one. Otherwise, no
   verdict, an ambiguous one, one out of scale or several that disagree, there is no score, with the reason
   why; the judge stage then asks the fallback prompt. A weaker format is never tried after a stronger
   one found something it could not accept.
"""

from __future__ import annotations

import re
import statistics
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["COMMON_RULES", "RULES", "Extraction", "extract", "own_words"]

COMMON_RULES = ("final_score", "score_tag", "brackets")
LEGACY_RULES = ("bare_number", "slash_ten")
RULES = (*COMMON_RULES, *LEGACY_RULES)

_NUM = r"-?\d+(?:\.\d+)?"
_VALUE = re.compile(rf"\s*(?P<n>{_NUM})\s*(?:/\s*(?P<max>\d+(?:\.\d+)?))?\s*点?\s*")  # inside a bracket or tag
_FINAL = re.compile(r"FINAL\s*SCORE\b[ \t]*:?[ \t]*\n?(?P<line>[^\n]*)", re.I)
_FINAL_VALUE = re.compile(rf"[*_\[]*[ \t]*(?P<n>{_NUM})(?!\d)"
                          r"(?:[ \t]*(?:/|out of)[ \t]*(?P<max>\d+(?:\.\d+)?))?[ \t]*点?[ \t]*[*_\]]*(?P<tail>.*)")
_TAIL_OK = re.compile(r"\s*(?:[.。!,、;:]\D*|[(（][^\d()（）]*[)）]\s*[.。]?"
                      r"|(?:です|とします|と評価します|とする|である)[。.]?)?\s*")
_TAG = re.compile(r"<score>(?P<inner>[^<\n]{0,40})</score>", re.I)
_BRACKETS = re.compile(r"(?:評価\s*:?\s*)?\[\[(?P<inner>[^\[\]\n]{0,40})\]\]"
                       r"|評価\s*:?\s*[\[【](?P<single>[^\[\]【】\n]{0,40})[\]】]|【(?P<points>\s*\d+(?:\.\d+)?\s*点\s*)】")
_BARE = re.compile(rf"^\s*[*_`]*(?P<n>{_NUM})\s*点?[*_`]*\s*$")
_SLASH_TEN = re.compile(rf"(?<![\d.])(?P<n>{_NUM})\s*/\s*10(?![\d.])")

_MASK = "\x1a"  # stands in for each masked character; lines keep their length and their breaks
_FENCE = re.compile(r"^[ \t]*(```|~~~)[^\n]*\n.*?(?:^[ \t]*\1[^\n]*$|\Z)", re.M | re.S)
_QUOTE_LINE = re.compile(r"^[ \t]*>[^\n]*", re.M)
_CODE_SPAN = re.compile(r"`[^`\n]+`")
_PAIRS = {"「": "」", "『": "』", "“": "”", "《": "》"}
_INLINE_QUOTES = [
    re.compile(r'"[^"\n]*"'),
    re.compile(r"(?<![A-Za-z0-9])'(?=\S)[^'\n]*?(?<=\S)'(?![A-Za-z0-9])"),
    re.compile(r"‘[^\n]*?’(?![A-Za-z])"),
]
_LEADER = " \t>*-_#・"


@dataclass(frozen=True)
class Extraction:
    score: float | None
    method: str | None  # the format of the verdict that gave the score
    reason: str | None  # why there is no score

    @property
    def ok(self) -> bool:
        return self.score is not None


@dataclass(frozen=True)
class _Verdict:
    rule: str
    text: str  # as the judge wrote it, for the reason
    value: float | None  # None: ambiguous
    start: int
    end: int


def extract(reply: str | None, scale: tuple[int, int], rules: tuple[str, ...] = COMMON_RULES,
            answer: str | None = None) -> Extraction:
    """The score the judge gave in ``reply``, or None with the reason. ``answer`` is the judged text, so that
    a verdict the judge merely copied from it is not taken for the judge's own."""
    if not reply or not reply.strip():
        return Extraction(None, None, "empty judge reply")
    text = own_words(unicodedata.normalize("NFKC", reply))
    found = [v for v in _stated(text, scale) if v.rule in rules]
    restated = [v for v in found if answer and _restates(text, v, answer)]
    found = [v for v in found if v not in restated]
    if not found and not restated:
        found = _legacy(text, scale, rules)
    if not found:
        why = "no verdict in the judge's own words"
        return Extraction(None, None, why + (f" ({_listed(restated)} copied from the answer)" if restated else ""))
    low, high = scale
    if bad := [v for v in found if v.value is None]:
        return Extraction(None, None, f"ambiguous verdict: {_listed(bad)}")
    if bad := [v for v in found if not low <= v.value <= high]:  # type: ignore[operator]
        return Extraction(None, None, f"{_listed(bad)} outside {low}-{high}")
    if len({v.value for v in found}) > 1:
        return Extraction(None, None, f"verdicts disagree: {_listed(found)}")
    return Extraction(found[-1].value, found[-1].rule, None)


def own_words(text: str) -> str:
    """``text`` with quotations, code and blockquotes masked (same length, same line breaks)."""
    for pattern in (_FENCE, _QUOTE_LINE, _CODE_SPAN):
        text = pattern.sub(_blank, text)
    text = _mask_paired(text)
    for pattern in _INLINE_QUOTES:
        text = pattern.sub(_blank, text)
    return text


def _blank(m: re.Match[str]) -> str:
    return re.sub(r"[^\n]", _MASK, m.group(0))


def _mask_paired(text: str) -> str:
    """Mask 「…」, 『…』, “…” and 《…》, nested or not; a quote left open ends at its paragraph's end."""
    out, start = list(text), 0
    stack: list[str] = []
    for i, ch in enumerate(text):
        if ch in _PAIRS:
            if not stack:
                start = i
            stack.append(_PAIRS[ch])
        elif stack and ch in stack:
            while stack.pop() != ch:
                pass
            if not stack:
                out[start:i + 1] = _blank_chars(text[start:i + 1])
        elif stack and text.startswith("\n\n", i):
            out[start:i] = _blank_chars(text[start:i])
            stack = []
    if stack:
        out[start:] = _blank_chars(text[start:])
    return "".join(out)


def _blank_chars(span: str) -> list[str]:
    return [c if c == "\n" else _MASK for c in span]


def _stated(text: str, scale: tuple[int, int]) -> Iterator[_Verdict]:
    """Every verdict in a stated format, in the order written."""
    found = []
    for m in _FINAL.finditer(text):
        line = m.group("line")
        v = _FINAL_VALUE.match(line)
        if v and _TAIL_OK.fullmatch(v.group("tail")):
            value = _value(v.group("n"), v.group("max"), scale)
        elif re.search(r"\d", line):
            value = None  # a number is there, but not as a verdict can be written
        else:
            continue  # "FINAL SCORE" in passing, e.g. the format named in prose
        found.append(_Verdict("final_score", _shown(m.group(0)), value, m.start(), m.end()))
    for rule, pattern in (("score_tag", _TAG), ("brackets", _BRACKETS)):
        for m in pattern.finditer(text):
            inner = next(g for g in m.groups() if g is not None)
            v = _VALUE.fullmatch(inner)
            if v:
                value = _value(v.group("n"), v.group("max"), scale)
            elif re.search(r"\d", inner):
                value = None
            else:
                continue  # "[[rating]]": the format itself, named in prose
            found.append(_Verdict(rule, _shown(m.group(0)), value, m.start(), m.end()))
    return iter(sorted(found, key=lambda v: v.start))


def _value(n: str, out_of: str | None, scale: tuple[int, int]) -> float | None:
    """The number as given; ``n/MAX`` only when MAX is the scale's top (otherwise it is not on our scale)."""
    if out_of is not None and float(out_of) != scale[1]:
        return None
    return float(n)


def _legacy(text: str, scale: tuple[int, int], rules: tuple[str, ...]) -> list[_Verdict]:
    """The first legacy format the benchmark accepts that appears in the reply."""
    for rule in (r for r in rules if r in LEGACY_RULES):
        if rule == "bare_number":
            lines = [line for line in text.splitlines() if line.strip()]
            if lines and (m := _BARE.match(lines[-1])):
                return [_Verdict(rule, lines[-1].strip(), float(m.group("n")), 0, 0)]
        elif rule == "slash_ten":
            values = [float(m.group("n")) for m in _SLASH_TEN.finditer(text)]
            if values:
                shown = ", ".join(f"{v:g}/10" for v in values)
                return [_Verdict(rule, f"mean of {shown}", statistics.fmean(values), 0, 0)]
    return []


def _restates(text: str, verdict: _Verdict, answer: str) -> bool:
    """Is the verdict copied from the answer? Yes when its line, from the start through the verdict, is in
    the answer and has words before the verdict (``自己評価 FINAL SCORE: 10``), or when the verdict stands
    alone on its line but that line and the one before it are two consecutive lines of the answer. A verdict
    alone on its line after the judge's own words is the judge's, even if the answer holds the same text."""
    line_start = text.rfind("\n", 0, verdict.start) + 1
    line = _squeeze(text[line_start:verdict.end]).strip(_LEADER)
    copied = "\n".join(_squeeze(x).strip(_LEADER) for x in unicodedata.normalize("NFKC", answer).splitlines())
    if not line or line not in copied:
        return False
    if line != _squeeze(text[verdict.start:verdict.end]).strip(_LEADER):
        return True
    before = [x for x in (_squeeze(y).strip(_LEADER) for y in text[:line_start].splitlines()) if x]
    return bool(before) and f"{before[-1]}\n{line}" in copied


def _squeeze(text: str) -> str:
    return " ".join(text.split())


def _shown(matched: str) -> str:
    return _squeeze(matched)[:60]


def _listed(verdicts: list[_Verdict]) -> str:
    return ", ".join(f"{v.text!r} ({v.rule})" for v in verdicts)
