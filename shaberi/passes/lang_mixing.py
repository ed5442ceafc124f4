"""lang_mixing: text in a Japanese answer that is not Japanese.

Flagged: characters that exist only in simplified Chinese (in GB 2312 but not in JIS X 0213, the full
Japanese kanji repertoire: 东 们 这 说 …); Hangul, Cyrillic, Thai, Arabic and other scripts (Greek only
as words of three letters or more, since single letters are formula symbols); runs of Latin-script prose
(five words or more, at least half of them lower case; names, terms and abbreviations such as AI, SNS,
"machine learning" are not prose). Not looked at: code blocks and inline code, URLs and e-mail
addresses, formulas, numbers, punctuation; spans quoted from the question; and the scripts of a
language the question asks for (「英語に翻訳して」 allows Latin prose, 「韓国語で」 Hangul).

Ambiguous, and left unflagged unless a model is asked (``detector=MODEL[@URL]``): kanji in both GB 2312
and JIS X 0213 but not in everyday Japanese (JIS X 0208), such as 你 开 关, and Latin runs of three or
four lower-case words. The model reads ``prompts/passes/lang_mixing/detection.jinja`` and answers
``VERDICT: MIXED`` or ``VERDICT: JAPANESE``.

The mixing ratio is the flagged letters over all letters outside the exempt parts. Penalty ``auto``:
10 % of the score range plus the ratio, at most half the range (one stray 东 in a 1–10 answer costs
0.9; an answer half in English 4.5). ``min_ratio`` ignores mixing below that share.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any, ClassVar

from ..llm.client import LLM, Completion
from ..llm.params import Sampling
from ..prompts import render, template_hash
from . import PASSES, Consulting, Finding, Item
from ._text import mask

__all__ = ["LangMixing", "foreign_spans"]

SCRIPTS = {  # Unicode blocks of the scripts flagged as a whole
    "Hangul": "\u1100-\u11ff\u3130-\u318f\ua960-\ua97f\uac00-\ud7af",
    "Cyrillic": "\u0400-\u052f",
    "Thai": "\u0e00-\u0e7f",
    "Arabic": "\u0600-\u06ff\u0750-\u077f",
    "Hebrew": "\u0590-\u05ff",
    "Devanagari": "\u0900-\u097f",
    "Bengali": "\u0980-\u09ff",
    "Tamil": "\u0b80-\u0bff",
    "Lao": "\u0e80-\u0eff",
    "Myanmar": "\u1000-\u109f",
    "Khmer": "\u1780-\u17ff",
    "Georgian": "\u10a0-\u10ff",
    "Armenian": "\u0530-\u058f",
    "Bopomofo": "\u3100-\u312f\u31a0-\u31bf",
}
_SCRIPT_RUNS = {name: re.compile(rf"[{r}]+(?:[ \t]+[{r}]+)*") for name, r in SCRIPTS.items()}
_GREEK_WORDS = re.compile(r"[\u0370-\u03ff]{3,}(?:[ \t]+[\u0370-\u03ff]+)*")
_LATIN_WORD = r"[A-Za-zÀ-ÖØ-öø-ɏ][A-Za-zÀ-ÖØ-öø-ɏ'’-]*+"  # possessive: a word never gives letters back
# A run starts at a word's start (not inside one), so a long unbroken word is read once: linear, not quadratic.
_LATIN_RUNS = re.compile(rf"(?<![A-Za-zÀ-ÖØ-öø-ɏ'’-]){_LATIN_WORD}(?:[ \t,;:.!?\"()/&-]++{_LATIN_WORD})+")
_WORDS = re.compile(_LATIN_WORD)
_NOT_LETTERS = re.compile(r"[\W\d_]+")
DETECTION = "passes/lang_mixing/detection.jinja"

# A question asking for another language allows its script (「英語に翻訳」, 「韓国語で」, "in English").
REQUESTS = {
    "Latin": re.compile(r"英訳|英語[にでへ]|英文[にで]|English|ローマ字|"
                        r"(?:フランス|ドイツ|スペイン|イタリア|ポルトガル|ラテン|オランダ|ベトナム|インドネシア)語[にでへ]"),
    "Chinese": re.compile(r"中国語[にでへ]|中文|簡体字|繁体字|中訳|Chinese"),
    "Hangul": re.compile(r"韓国語[にでへ]|朝鮮語|ハングル|Korean"),
    "Cyrillic": re.compile(r"ロシア語[にでへ]|Russian|キリル文字"),
    "Greek": re.compile(r"ギリシ[ャア]語|Greek"),
    "Thai": re.compile(r"タイ語[にでへ]|Thai"),
    "Arabic": re.compile(r"アラビア語|Arabic"),
    "Hebrew": re.compile(r"ヘブライ語|Hebrew"),
    "Devanagari": re.compile(r"ヒンディー語|サンスクリット|Hindi"),
}
_REQUEST_OF = {"Latin prose": "Latin", "Simplified Chinese": "Chinese", "Greek": "Greek"} | {s: s for s in SCRIPTS}


def _encodes(ch: str, codec: str) -> bool:
    try:
        ch.encode(codec)
        return True
    except UnicodeEncodeError:
        return False


@cache
def _han() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """(simplified-only kanji, ambiguous kanji) as character-class patterns, from the codecs' tables."""
    only, ambiguous = [], []
    for cp in range(0x4E00, 0xA000):
        ch = chr(cp)
        if _encodes(ch, "gb2312"):
            if not _encodes(ch, "euc_jis_2004"):
                only.append(ch)
            elif not _encodes(ch, "cp932"):
                ambiguous.append(ch)
    return re.compile(f"[{''.join(only)}]+"), re.compile(f"[{''.join(ambiguous)}]+")


def foreign_spans(text: str, question: str = "") -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """(flagged spans, ambiguous spans, exemptions) of ``text``; a span is {text, script, start, letters}."""
    masked, exempt = mask(text)
    allowed = sorted(name for name, pattern in REQUESTS.items() if pattern.search(question))
    simplified, ambiguous_han = _han()
    flagged: list[dict[str, Any]] = []
    unsure: list[dict[str, Any]] = []

    def add(target: list[dict[str, Any]], match: re.Match[str], script: str) -> None:
        span = match.group().strip()
        if _REQUEST_OF.get(script) in allowed:
            exempt["requested"] = exempt.get("requested", 0) + 1
        elif len(span) > 1 and span in question:
            exempt["quoted"] = exempt.get("quoted", 0) + 1
        else:
            target.append({"text": span[:80], "script": script, "start": match.start(),
                           "letters": len(_NOT_LETTERS.sub("", span))})

    for m in simplified.finditer(masked):
        add(flagged, m, "Simplified Chinese")
    for m in ambiguous_han.finditer(masked):
        add(unsure, m, "Simplified Chinese")
    for name, pattern in _SCRIPT_RUNS.items():
        for m in pattern.finditer(masked):
            add(flagged, m, name)
    for m in _GREEK_WORDS.finditer(masked):
        add(flagged, m, "Greek")
    for m in _LATIN_RUNS.finditer(masked):
        words = _WORDS.findall(m.group())
        lower = sum(w.islower() for w in words)
        if lower * 2 >= len(words) and len(words) >= 5:
            add(flagged, m, "Latin prose")
        elif lower * 2 >= len(words) and len(words) >= 3:
            add(unsure, m, "Latin prose")
    exempt["letters"] = len(_NOT_LETTERS.sub("", masked))
    if allowed:
        exempt["allowed"] = allowed  # type: ignore[assignment]
    return sorted(flagged, key=lambda s: s["start"]), sorted(unsure, key=lambda s: s["start"]), exempt


@PASSES.register("lang_mixing")
class LangMixing(Consulting):
    version = "1"
    options: ClassVar[dict[str, str]] = {"penalty": "auto", "min_ratio": "0", "detector": ""}
    llm_option = "detector"

    def check(self, item: Item) -> Finding:
        if not item.content:
            return Finding(detail={"ratio": 0.0})
        flagged, unsure, exempt = foreign_spans(item.content, item.question)
        return self._finding(item, flagged, unsure, exempt)

    def _finding(self, item: Item, flagged: list[dict[str, Any]], unsure: list[dict[str, Any]], exempt: dict[str, Any],
                 extra: dict[str, Any] | None = None) -> Finding:
        letters = exempt.pop("letters")
        foreign = sum(s["letters"] for s in flagged)
        ratio = foreign / letters if letters else 0.0
        detail = {"ratio": round(ratio, 6), "foreign_letters": foreign, "letters": letters,
                  "spans": flagged[:20], "ambiguous": unsure[:20], "exempt": exempt} | (extra or {})
        if not flagged or ratio < self.number("min_ratio"):
            return Finding(0.0, f"ambiguous: {_summary(unsure)}" if unsure else "", detail)
        delta = self.penalty(item, min(0.5, 0.1 + ratio))
        return Finding(delta, f"{_summary(flagged)}: {ratio:.1%} of letters", detail)

    def needs_llm(self, finding: Finding) -> bool:
        return bool(finding.detail.get("ambiguous"))

    async def consult(self, item: Item, finding: Finding, llm: LLM) -> tuple[dict[str, Any], Completion]:
        spans = [s["text"] for s in finding.detail["ambiguous"]]
        messages = [{"role": "user", "content": render(DETECTION, question=item.question, answer=item.content or "",
                                                       spans=spans)}]
        reply = await llm.client.chat(llm.model, messages, Sampling(0, 512))
        verdict = {"model": llm.model, "prompt_hash": template_hash(DETECTION),
                   "verdict": _verdict(reply.content or ""), "reply": reply.content}
        return verdict, reply

    def decide(self, item: Item, finding: Finding, verdict: dict[str, Any]) -> Finding:
        assert item.content is not None
        flagged, unsure, exempt = foreign_spans(item.content, item.question)
        if verdict.get("verdict") == "MIXED":
            flagged = sorted(flagged + [s | {"script": f"{s['script']} (model)"} for s in unsure],
                             key=lambda s: s["start"])
            unsure = []
        return self._finding(item, flagged, unsure, exempt, {"detector": verdict})

    def reusable(self, verdict: dict[str, Any]) -> bool:
        return super().reusable(verdict) and verdict.get("prompt_hash") == template_hash(DETECTION)


def _verdict(reply: str) -> str | None:
    found = re.findall(r"VERDICT\s*[:：]\s*(MIXED|JAPANESE)", reply.upper())
    return found[-1] if found else None


def _summary(spans: list[dict[str, Any]]) -> str:
    by_script: dict[str, list[str]] = {}
    for s in spans:
        by_script.setdefault(s["script"], []).append(s["text"])
    return "; ".join(f"{script} {', '.join(repr(t[:20]) for t in texts[:3])}"
                     f"{f' (+{len(texts) - 3})' if len(texts) > 3 else ''}" for script, texts in by_script.items())
