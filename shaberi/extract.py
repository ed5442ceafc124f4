"""A judge's verdict, read from what the judge itself wrote: never from the prompt, never from the answer.

The grammar, applied in this order:

1. **Finished replies only.** A reply cut off at the judge's token limit is not read (its verdict may be
   a draft). The reply is NFKC-normalised, so full-width digits, colons and brackets read as ASCII.
2. **Set aside what the judge did not say in its own voice**: a leading ``<think>`` block (or ``<thinking>``,
   ``<reasoning>``, ``<thought>``; closed or not); closed
   quotations (「…」 『…』 “…” 《…》, and "…" or '…' within a line; an apostrophe inside a word is not a
   quote); closed fenced code blocks, inline code and blockquote lines (``> …``). A quotation or fence
   left open hides nothing, so an answer that plants an unmatched 「 or ``` cannot hide the judge's verdict.
3. **Find the verdicts**, in these *stated formats*:

       final_score  ``FINAL SCORE: n``         the line our prompts ask for (``**FINAL SCORE**: n`` too, or
                                               the label with ``n`` alone on the next line)
       score_tag    ``<score>n</score>``
       brackets     ``[[n]]`` ending its line, after a label (評価, 点数, スコア, Rating, Score) or alone at
                    the line's start; ``評価：[n]``, ``評価：【n】`` ending its line (評価 on the same line)

   ``n`` is a number as written, decimals included; bold, ``n/MAX`` or ``n out of MAX`` (MAX the top of
   the benchmark's scale), ``n点`` or ``n points`` are fine (``FINAL SCORE = n`` too, the label's scale in a
   parenthesis, ``FINAL SCORE (1-10): n``, and the number alone on a line below). After ``FINAL SCORE: n`` the line
   may hold only closing markup and punctuation, a parenthesis stating the scale's top ("(out of 10)", "（10点満点）")
   or a closing phrase (です, とします, をつけます). Anything else makes the verdict *ambiguous*: arithmetic
   (``10 - 2 = 8``), a range (``1-5のうち4``), words (``10 would be too generous; I give 6``, "(if fixed)",
   "（参考回答）", "→ 下方修正"), a bracket holding more than a number (``[[7-8]]``), a MAX that is not the scale's
   top. The format's placeholder echoed (``FINAL SCORE: <1から10までの整数>``) is no verdict. A bare ``【1】`` or
   ``【3点】`` is a section header or a rubric item, never a verdict; ``[[1]]`` mid-sentence is a citation.
   Invisible characters (zero-width spaces, soft hyphens) are dropped before reading.
4. **A value the answer states itself is not the judge's.** The answer is read with the same formats (as
   written and with its quotes masked, an ambiguous one by its first number, the legacy ones too); a
   verdict of the judge's with a value the answer states (``FINAL SCORE: 10`` in the answer, 10 in the
   reply) may be a copy, so the reply gets no score and the fallback is asked. The fallback's reply is the
   judge's answer to a direct question and is taken as given.
5. **Legacy formats**, which a benchmark may add, are read only when the reply holds no stated format at
   all, quoted or not:

       bare_number  the last non-empty line is only a number, not after a line ending in a colon (ELYZA)
       slash_ten    aspect lines ``観点：n/10`` (words may follow): an overall line (総合, 全体, 合計, Overall,
                    Total; ``n/10`` or ``n点``) if any, else the mean of two or more aspects (older Rakuda
                    judges)

   Rakuda's lines may name an overall anywhere in their label (``モデル回答の総合：6/10``). A reply that mentions a
   reference answer (参考回答, 模範解答, 基準解答, "reference") is read by a candidate's overall line only: which
   answer the other lines score cannot be told, and a reference's score is never averaged in.

6. **Decide.** Every verdict found must be valid, inside the scale and equal: then that value is the score,
   stored as the judge wrote it (4.5 stays 4.5) and named by the format of the last one. Otherwise (no
   verdict, an ambiguous one, one out of scale, several that disagree) there is no score, with the reason
   why, and the judge stage asks the fallback prompt. A weaker format is never tried after a stronger one
   found something it could not accept.

7. **The verdict must be the judge's last word on the candidate** (``_doubt``), else the fallback is asked:

   - a stated verdict ends the reply: only markup, a closing line (以上です), the scale or the number again may
     follow it (a revision comes in any words: 「再考して6点とします」, 「一つ下げます」, "full marks", 『5点』);
   - its line before it, and a heading just above it (``#``, ■, 【, a bold line, a line ending in a colon, a setext
     heading), name only the verdict or the candidate's answer (``_VERDICT_HEAD``: 評価, 総合, 結論, "Final",
     回答の…): never the reference answer, a turn, a question, one candidate of several ("参考回答：FINAL SCORE: 10",
     "Turn 1 Rating: [[9]]", "回答Bの評価：FINAL SCORE: 9"); nor may the paragraph it ends speak of another answer;
   - no score line above it holds another value ("Score: 7", ``評価：6点（10点満点）``, a table's overall row, even in
     a fence or a blockquote), and no scale but the benchmark's is said (「5段階で評価します」 on 1–10);
   - a value finer than half a point (0.7 on 0–10: another scale?) is no verdict;
   - prose before a stated verdict is the judge's reasoning (per-item points, 「基本5点から2点減」, "a 10 would need…");
   - a legacy reading, the weakest, is in doubt beside any number in a line of prose that speaks of a score
     (「総じて…3点です」, "I'd award it a 5", 「判定：4」); Rakuda's lines are averaged only when every label names a
     quality (正確性, Fluency, …) or an overall (総合, 総評, 最終評価, "Final rating": then that one counts) and no
     other candidate is named; ELYZA's last-line number only after a sentence that announces nothing (not after a
     label, a list item, a count, 「答えは次のとおりです。」).

**Choices** (``choose``: which of two answers is better, for pairwise judging) are read by rules 1, 2 and 4 the
same way, in these stated formats: a line ``FINAL VERDICT: A`` (or ``B`` or ``TIE``; ``WINNER:`` and ``勝者：``
too, the letter ending its line, a parenthesis after it allowed: "WINNER: A and B are equal" is none), or
MT-Bench's ``[[A]]``, ``[[B]]``, ``[[C]]`` (a tie) alone at the end of a line. Every one found must agree, and
none may be a choice an answer states itself; else there is no choice, with the reason, and the fallback is
asked. No choice is never read as a tie: a tie is what the judge said, or two orders that disagree.
"""

from __future__ import annotations

import re
import statistics
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["AS_PUBLISHED_MARK", "COMMON_RULES", "LEGACY_RULES", "MASK", "RULES", "THINK_TAGS", "Choice", "Extraction",
           "choose", "extract", "own_words", "without_thinking"]

# A score set aside (null) that the original tooling counted: an off-scale legacy score (``legacy.py``), an
# original evaluator's reading off the scale (``judging.stage``). Its error ends with this and the value counted, as
# text that reads back as the same double ("legacy: score -7 outside the 1–10 scale; as published: -7");
# ``leaderboard --as-published`` averages it.
AS_PUBLISHED_MARK = "; as published: "
COMMON_RULES = ("final_score", "score_tag", "brackets")
LEGACY_RULES = ("bare_number", "slash_ten")
RULES = (*COMMON_RULES, *LEGACY_RULES)

_NUM = r"-?\d+(?:\.\d+)?"
_VALUE = re.compile(rf"\s*(?P<n>{_NUM})\s*(?:/\s*(?P<max>\d+(?:\.\d+)?))?\s*点?\s*")  # inside a bracket or tag
_RANGE = (r"(?:[(（][ \t]*(?:\d+[ \t]*(?:[-–〜~～]|から|to)[ \t]*\d+[ \t]*点?|(?i:out of)[ \t]*\d+|\d+[ \t]*点満点)"
          r"[ \t]*[)）])?")  # a scale: "FINAL SCORE (1-10): 7"
_FINAL = re.compile(rf"(?<![A-Za-z])(?:FINAL[ \t]*SCORE|(?i:final[ \t]*score)(?=[*_]*[ \t]*{_RANGE}[ \t]*(?::|\n|$)))\b"
                    rf"[*_]*[ \t]*{_RANGE}[ \t]*[:=]?[*_]*[ \t]*(?P<line>[^\n]*)(?=\n\s*(?P<next>[^\n]*))?")
_FINAL_VALUE = re.compile(rf"[*_\[]*[ \t]*(?P<n>{_NUM})(?!\d)[*_]*"
                          r"(?:[ \t]*(?:点|points?|pts\.?)(?=[ \t]*(?:/|out of)))?"  # "8 points out of 10"
                          r"(?:[ \t]*(?:/|out of)[ \t]*(?P<max>\d+(?:\.\d+)?))?[ \t]*(?:点|points?|pts\.?)?[ \t]*"
                          r"[*_\]]*(?P<tail>.*)")
_TAIL_OK = re.compile(r"\s*(?:(?P<paren>[(（][^()（）]*[)）])|(?:です|とします|と評価します|とする|である|をつけます|"
                      r"になります|を与えます))?\s*[.。!]?\s*")  # after the number: a scale, a closing phrase
_TAG = re.compile(r"<score>(?P<inner>[^<\n]{0,40})</score>", re.I)
_BRACKETS = re.compile(r"(?:(?:評価|点数|得点|スコア|(?i:rating|score|grade))[*_]*[ \t]*:?[*_]*[ \t]*|^[ \t>*_#-]*)"
                       r"\[\[(?P<inner>[^\[\]\n]{0,40})\]\](?=[ \t*_.。]*$)"
                       r"|評価[ \t]*:?[ \t]*[\[【](?P<single>[^\[\]【】\n]{0,40})[\]】](?=[ \t*_.。]*$)", re.M)
_BARE = re.compile(rf"^\s*[*_`]*(?P<n>{_NUM})\s*点?[*_`]*\s*$")
_ASPECT = re.compile(rf"^[ \t]*[-*・]?[ \t]*(?P<label>[^\n:：|]{{1,20}}?)[ \t]*[:：][ \t]*[*_]*(?P<n>{_NUM})"
                     r"[ \t]*/[ \t]*10(?!\d|\.\d)[^\n\d]*$", re.M)  # "正確性：8/10（やや不正確）"
_OVERALL_LABEL = r"(?:総合(?:評価|点)?|全体(?:評価)?|合計|(?i:overall|total)(?:[ \t]+(?i:score))?)"
_OVERALL = re.compile(rf"^[ \t]*[-*・]?[ \t]*[*_]*{_OVERALL_LABEL}[*_]*[ \t]*[:：][ \t]*[*_]*(?P<n>{_NUM})"
                      r"[ \t]*(?:/[ \t]*10|点)(?!\d|\.\d)[^\n\d]*$",
                      re.M)
# What may follow a stated verdict: nothing but markup, a closing line, the scale, or the number again (``_doubt``)
_CLOSING = re.compile(rf"[\s*_`~=\-—]*(?:(?:以上(?:です|となります)?|終わり|(?i:end(?: of (?:the )?evaluation)?))"
                      r"[。.!！]?"
                      rf"|[(（][ \t]*(?:(?P<top>\d+)[ \t]*点満点|(?i:out of)[ \t]*(?P<top2>\d+))[ \t]*[)）]"
                      rf"|(?P<again>{_NUM})[ \t]*点?)?[\s*_`~=\-—]*")
# What a verdict's line may hold before it, and a heading above it: words that name the verdict itself, or the
# candidate's answer (never another answer, a turn, a condition, a candidate by letter or number)
_HEAD_WORD = (r"評価|採点|総合|結論|最終|まとめ|スコア|点数|得点|判定|総評|結果|所見|"
              r"(?i:final|score|verdict|rating|grade|evaluation|conclusion|summary|overall|result|assessment|judge?ment)|"
              r"(?:この|本|評価対象の)?(?:アシスタントの)?回答(?![A-Za-z0-9例])|(?i:(?:the )?(?:assistant's )?"
              r"(?:answer|response)(?:'s)?)(?![ \t]*[A-Za-z0-9]\b)")
_VERDICT_HEAD = re.compile(rf"[\s#■□●◆◇▼▶【】\[\]*_|:：、,.。・\-–—=（）()0-9]*"
                           rf"(?:(?:{_HEAD_WORD})[\s#【】\[\]*_|:：、,.。・の\-–—=（）()]*)*")
_STATED_HINT = re.compile(r"(?i:final[ \t]*score)|\[\[|<score>")  # a quoted stated verdict: the answer's, not a line
_HEADING = re.compile(r"[#■□●◆◇▼▶【<]|\*\*.*\*\*$|.*[:：]$")  # a line that heads what follows
_SEPARATOR = re.compile(r"[-=_*~ \t]+")
_SCALE_SAID = re.compile(r"(?P<n>\d+)[ \t]*(?:点満点で(?:採点|評価)|段階(?:評価|で(?:採点|評価)))"
                         r"|(?i:on an? (?:(?P<k>\d+)[- ]point )?scale (?:of|from) (?:\d+ (?:to|-) )?(?P<m>\d+)?)"
                         r"|(?i:(?P<j>\d+)[- ]point scale)")  # the scale the judge says it used
_NUMBER_WORD = (r"[〇一二三四五六七八九十]+[ \t]*点|(?i:\b(?:zero|one|two|three|four|five|six|seven|eight|nine|ten|"
                r"eleven|twelve)\b)")  # 六点, "six": a number a digit pattern misses
# A line of prose that speaks of a score, and the numbers in it: read beside a legacy verdict (``_doubt``)
_SCORE_TALK = re.compile(r"点|評価|採点|スコア|総合|全体|最終|結論|総じて|総評|まとめ|妥当|判定|相当|段階|トータル|"
                         r"をつけ|を付け|(?i:\b(?:score|rating|grade|overall|total|give|gave|award|mark|deserve|merit|"
                         r"worth|rate)\w*)")
_DENOMINATOR = re.compile(r"(?:/|(?i:out of))[ \t]*\d+|\d+[ \t]*点?[ \t]*(?:満点|中)")  # "/10", "out of 5", "5点満点"
_SPOKEN_NUMBER = re.compile(rf"(?<![\d.年])(?P<n>{_NUM})(?!\d|\.\d)|(?P<word>{_NUMBER_WORD})")
_SCORE_LINE = [re.compile(p, re.M) for p in (  # a line that is a score and its label only (``_doubt``)
    r"^[ \t>*_#-]*(?:(?:この|本)?(?:アシスタントの)?回答の|最終|総合|(?i:final|overall|total)[ \t]*)?"
    r"(?:評価|点数|得点|スコア|総合|合計|計|判定|総評|(?i:score|rating|grade|overall|total))"
    rf"[*_]*[ \t]*[:：][ \t]*[*_]*(?P<n>{_NUM})[ \t]*(?:点|/[ \t]*\d+)?[*_]*[ \t]*(?:[(（][^\n]*[)）])?[ \t]*[。.]?"
    r"[ \t]*$",  # "Score: 6/10", "評価：6点（10点満点）", "最終スコア：6", "計：6点"
    rf"^[ \t]*\|[ \t]*[*_]*[^|\n]*(?:総合|合計|全体|(?i:overall|total))[^|\n]*\|(?:[^|\n]*\|)*?[ \t]*[*_]*"
    rf"(?P<n>{_NUM})[ \t]*(?:点|/[ \t]*\d+)?[*_]*[ \t]*\|(?:[^\d|\n]*\|)*[ \t]*$",  # "| 合計 | 10 | 8 |": its last
)]
_REFERENCE = re.compile(r"参考|參考|模範|基準(?:回答|解答)|正解例|解答例|回答例|お手本|リファレンス|参照|"
                        r"(?i:\b(?:reference|gold|ideal|expected)\b)")
_OVERALL_IN = re.compile(r"総合|全体評価|合計|総評|最終|まとめ|(?i:overall|total|final|summary)")  # an overall label
# the qualities an older Rakuda judge scores, one per "観点：n/10" line; a label that is none of them (nor an
# overall) may be another answer's ("Assistant 1: 8/10"), so the lines are not averaged
_ASPECT_NAME = re.compile(r"有用|役立|正確|詳細|詳し|日本語|流暢|自然|関連|創造|独創|深さ|簡潔|明確|明瞭|論理|一貫|"
                          r"網羅|完全|"
                          r"具体|わかりやす|分かりやす|読みやす|構成|表現|文法|丁寧|妥当|適切|安全|情報|質問への|"
                          r"(?i:help|accura|detail|fluen|relevan|creativ|depth|concis|clari|clear|coheren|complete|"
                          r"logic|specific|correct|quality|style|grammar|natural|readab|structur|useful|informat)")
_CANDIDATE = re.compile(r"[A-ZＡ-Ｚ1-9][ \t]*(?:の|$)|(?i:assistant|model)[ \t]*[A-Z0-9]|アシスタント[ \t]*[A-Z0-9]")
# another answer than the candidate: the reference, or one of several candidates ("回答B", "Assistant 2")
_ANOTHER = re.compile(rf"{_REFERENCE.pattern}|(?:アシスタント|回答|モデル)[ \t]*[A-ZＡ-Ｚ1-9１-９](?![A-Za-z0-9])"
                      r"|(?i:\b(?:assistant|answer|response|model)[ \t]+[A-Z1-9]\b)")
_ANNOUNCING = re.compile(r"次の(?:とおり|通り)|以下|下記|答えは|正解は|正答は|結果は|(?i:as follows|the answer is)")
_VERDICT_HINT = re.compile(r"(?i:score)|評価|\[\[")  # a cheap test before reading an answer for stated formats
MASK = "\x1a"  # stands in for each masked character (``own_words``); lines keep their length and their breaks
THINK_TAGS = "think|thinking|reasoning|thought"  # a reasoner's tags (``generate.split_reasoning`` too)
_THINK = re.compile(rf"\A\s*<({THINK_TAGS})>.*?(?:</\1>|\Z)|\A(?:(?!<(?:{THINK_TAGS})>).)*?</(?:{THINK_TAGS})>",
                    re.S | re.I)  # leading only
_FENCE = re.compile(r"^[ \t]*(```|~~~)[^\n]*\n.*?^[ \t]*\1[ \t]*$", re.M | re.S)
_QUOTE_LINE = re.compile(r"^[ \t]*>[^\n]*", re.M)
_CODE_SPAN = re.compile(r"`[^`\n]+`")
_PAIRS = {"「": "」", "『": "』", "“": "”", "《": "》"}
_QUOTE_MARKS = re.compile(r"[「」『』“”《》]|\n\n")
_INLINE_QUOTES = [
    re.compile(r'"[^"\n]*"'),
    re.compile(r"(?<![A-Za-z0-9])'(?=\S)[^'\n]*?(?<=\S)'(?![A-Za-z0-9])"),
    re.compile(r"‘[^\n]*?’(?![A-Za-z])"),
]


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
    first: float | None = None  # the first number written, ambiguous or not


def extract(reply: str | None, scale: tuple[int, int], rules: tuple[str, ...] = COMMON_RULES,
            answer: str | None = None, cut_off: bool = False) -> Extraction:
    """The score the judge gave in ``reply``, or None with the reason. ``answer`` is the judged text: a
    verdict whose value the answer itself states may be a copy, so it is not taken for the judge's own.
    ``cut_off``: the reply ended at the token limit, so whatever it says is unfinished and is not read."""
    if not reply or not reply.strip():
        return Extraction(None, None, "empty judge reply")
    if cut_off:
        return Extraction(None, None, "the judge's reply was cut off at its token limit")
    raw = _THINK.sub(_blank, _visible(reply), count=1)  # thinking aloud is not a verdict
    text = own_words(raw)
    found = [v for v in _stated(text, scale) if v.rule in rules]
    if not found and not any(v.rule in rules for v in _stated(raw, scale)):
        found = _legacy(text, rules)  # only a reply with no stated verdict anywhere, quoted or not
    claimed = _claimed(answer, scale, rules)
    if copied := [v for v in found if v.value is not None and v.value in claimed]:
        return Extraction(None, None, f"{_listed(copied)}: a value the answer states itself (the judge may have "
                                      "copied it)")
    if not found:
        return Extraction(None, None, "no verdict in the judge's own words")
    low, high = scale
    if bad := [v for v in found if v.value is None]:
        return Extraction(None, None, f"ambiguous verdict: {_listed(bad)}")
    if bad := [v for v in found if not low <= v.value <= high]:  # type: ignore[operator]
        return Extraction(None, None, f"{_listed(bad)} outside {low}-{high}")
    if len({v.value for v in found}) > 1:
        return Extraction(None, None, f"verdicts disagree: {_listed(found)}")
    if why := _doubt(raw, text, found[-1], scale):  # a revision after it, another answer's score, a count
        return Extraction(None, None, why)
    return Extraction(found[-1].value, found[-1].rule, None)


@dataclass(frozen=True)
class Choice:
    value: str | None  # "A", "B" or "TIE"
    reason: str | None  # why there is none

    @property
    def ok(self) -> bool:
        return self.value is not None


_CHOICE = re.compile(r"(?P<text>(?:FINAL[ \t]*VERDICT|(?i:final[ \t]*verdict|winner)|勝者|判定)[*_]*[ \t]*"
                     r"[:=：—-]?[ \t]*[*_\"'\[「]*[ \t]*(?:(?i:answer|response|assistant)[ \t]*|回答)?"
                     r"(?P<v>A|B|TIE|(?i:tie))"
                     r"[*_\"'\]」]*[ \t]*(?:[(（][^()（）\n\d]*[)）])?[ \t]*[.。]?)[ \t]*$", re.M)
_CHOICE_BRACKETS = re.compile(r"(?P<text>\[\[(?P<v>[ABC])\]\])[ \t*_.。]*$", re.M)


def choose(reply: str | None, answers: tuple[str, ...] = (), cut_off: bool = False) -> Choice:
    """Which answer the judge chose in ``reply`` ("A", "B" or "TIE"), or None with the reason. ``answers`` are the
    judged texts: a choice one of them states itself may be a copy, so it is not taken for the judge's own."""
    if not reply or not reply.strip():
        return Choice(None, "empty judge reply")
    if cut_off:
        return Choice(None, "the judge's reply was cut off at its token limit")
    found = _choices(own_words(_THINK.sub(_blank, _visible(reply), count=1)))
    if not found:
        return Choice(None, "no verdict in the judge's own words")
    claimed = {v for answer in answers for t in (_visible(answer), own_words(_visible(answer))) for _, v in _choices(t)}
    if copied := [(text, v) for text, v in found if v in claimed]:
        return Choice(None, f"{', '.join(repr(t) for t, _ in copied)}: a choice an answer states itself (the judge may "
                            "have copied it)")
    if len({v for _, v in found}) > 1:
        return Choice(None, f"verdicts disagree: {', '.join(repr(t) for t, _ in found)}")
    return Choice(found[-1][1], None)


def _choices(text: str) -> list[tuple[str, str]]:
    """Every choice in a stated format in ``text``: (as written, "A" | "B" | "TIE"), in the order written."""
    found = [(m.start(), _shown(m.group("text")), m.group("v").upper()) for m in _CHOICE.finditer(text)]
    found += [(m.start(), m.group("text"), {"C": "TIE"}.get(m.group("v"), m.group("v")))
              for m in _CHOICE_BRACKETS.finditer(text)]
    return [(t, v) for _, t, v in sorted(found)]


def own_words(text: str) -> str:
    """``text`` with quotations, code and blockquotes masked (same length, same line breaks). Only closed
    quotations and fences are masked: an opening mark without its close (which an answer can plant) hides
    nothing."""
    for pattern in (_FENCE, _QUOTE_LINE, _CODE_SPAN):
        text = pattern.sub(_blank, text)
    text = _mask_paired(text)
    for pattern in _INLINE_QUOTES:
        text = pattern.sub(_blank, text)
    return text


def without_thinking(reply: str) -> str:
    """``reply`` without its leading ``<think>`` block (closed or not) or a reasoner's output that ends in
    ``</think>``: what every reader of a model's verdict sets aside. A ``<think>`` the reply mentions later is
    text like any other, and what follows it is still read."""
    return _THINK.sub("", reply, count=1)


def _blank(m: re.Match[str]) -> str:
    return re.sub(r"[^\n]", MASK, m.group(0))


def _mask_paired(text: str) -> str:
    """Mask 「…」, 『…』, “…” and 《…》 pairs, nested or not, within a paragraph; unpaired marks stay."""
    spans: list[tuple[int, int]] = []
    opened: list[tuple[str, int]] = []  # (expected close, position)
    for m in _QUOTE_MARKS.finditer(text):
        ch, i = m.group(), m.start()
        if ch in _PAIRS:
            opened.append((_PAIRS[ch], i))
        elif ch == "\n\n":
            opened = []  # a paragraph ends every quotation left open in it
        elif any(close == ch for close, _ in opened):
            while opened:
                close, start = opened.pop()
                if close == ch:
                    spans.append((start, i + 1))  # inner pairs too: an outer one may never close
                    break
    out = list(text)
    for start, end in spans:
        out[start:end] = [c if c == "\n" else MASK for c in text[start:end]]
    return "".join(out)


def _stated(text: str, scale: tuple[int, int]) -> Iterator[_Verdict]:
    """Every verdict in a stated format, in the order written."""
    found = []
    for m in _FINAL.finditer(text):
        line = m.group("line")
        end = m.end()
        if not line.strip(" \t*_:=") and m.group("next") is not None:
            v = _FINAL_VALUE.match(m.group("next").strip())
            if v is None or v.group("tail").strip(" .。"):
                continue  # a heading, then something else ("### Final Score\n1. Accuracy: …")
            line, end = m.group("next"), m.end("next")  # "FINAL SCORE:" with the number alone on a line below
        line = line.strip()
        v = _FINAL_VALUE.match(line)
        if v and (tail := _TAIL_OK.fullmatch(v.group("tail"))) and _paren_ok(tail.group("paren"), scale):
            value = _value(v.group("n"), v.group("max"), scale)
        elif line.startswith(("<", "‹", "[")) and not re.match(r"\[+\s*\d", line):
            continue  # the format's placeholder echoed: "FINAL SCORE: <1から10までの整数>"
        elif re.search(r"\d", line):
            value = None  # a number is there, but not as a verdict can be written
        else:
            continue  # "FINAL SCORE" in passing, e.g. the format named in prose
        first = re.search(_NUM, line)
        found.append(_Verdict("final_score", _shown(m.group(0).split("\n")[0]), value, m.start(), end,
                              float(first.group()) if first else None))
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
            first = re.search(_NUM, inner)
            found.append(_Verdict(rule, _shown(m.group(0)), value, m.start(), m.end(),
                                  float(first.group()) if first else None))
    return iter(sorted(found, key=lambda v: v.start))


def _paren_ok(paren: str | None, scale: tuple[int, int]) -> bool:
    """A parenthesis after the number may state the scale's top only ("(out of 10)", "（10点満点）")."""
    if paren is None:
        return True
    m = re.fullmatch(r"[(（][ \t]*(?:(?i:out of)[ \t]*(?P<a>\d+)|(?P<b>\d+)[ \t]*点満点(?:中)?|/[ \t]*(?P<c>\d+))"
                     r"[ \t]*[)）]", paren)
    return m is not None and float(m.group("a") or m.group("b") or m.group("c")) == scale[1]


def _value(n: str, out_of: str | None, scale: tuple[int, int]) -> float | None:
    """The number as given; ``n/MAX`` only when MAX is the scale's top (otherwise it is not on our scale)."""
    if out_of is not None and float(out_of) != scale[1]:
        return None
    return float(n)


def _visible(text: str) -> str:
    """``text`` NFKC-normalised, without the invisible characters (format, combining) a reader skips."""
    table = {ord(ch): None for ch in set(text) if unicodedata.category(ch) in ("Cf", "Mn", "Me")}
    return unicodedata.normalize("NFKC", text.translate(table) if table else text)


def _claimed(answer: str | None, scale: tuple[int, int], rules: tuple[str, ...]) -> set[float]:
    """Every value the answer itself writes in a verdict format, read both as written and with its quotes
    set aside, an ambiguous one by its first number (as a self-score, or to steer the judge)."""
    text = _visible(answer or "")
    if not _VERDICT_HINT.search(text):
        return {v.value for v in _legacy(text, rules) if v.value is not None}
    found = [v for t in (text, own_words(text)) for v in [*_stated(t, scale), *_legacy(t, rules)] if v.rule in rules]
    return {n for v in found if (n := v.value if v.first is None else v.first) is not None}


def _doubt(raw: str, text: str, last: _Verdict, scale: tuple[int, int]) -> str | None:
    """Why the last verdict may not be the judge's final one on the candidate, or None. ``raw``: the reply as read
    (quotations, code and blockquotes kept: a revision quoted for emphasis is still said), ``text``: its own words.
    A stated verdict is the reply's last word (``_CLOSING`` may follow); its line, and a heading above it, name the
    verdict or the candidate's answer only (``_VERDICT_HEAD``); no score line above it holds another value; and no
    scale but the benchmark's is stated. A legacy verdict is in doubt beside any number in a line of prose that
    speaks of a score (``_SCORE_TALK``); ELYZA's last-line number is read only after a sentence that announces
    nothing (not after a label, a list item, a count or 「答えは次のとおり」)."""
    if last.value is not None and (2 * last.value) % 1:  # 0.7 on 0–10: a 0–1 scale? judges score in halves at most
        return f"{_listed([last])}: finer than half a point (another scale?)"
    if last.rule in COMMON_RULES:
        after = _CLOSING.fullmatch(raw[last.end:])
        if after is None or (after.group("again") and float(after.group("again")) != last.value) or any(
                t and float(t) != scale[1] for t in (after.group("top"), after.group("top2"))):
            return (f"{_listed([last])}, then {_shown(raw[last.end:].strip())!r}: the verdict is not the reply's "
                    "last word")
        line_start = raw.rfind("\n", 0, last.start) + 1
        if not _VERDICT_HEAD.fullmatch(before := raw[line_start:last.start]):
            return f"{_listed([last])}: its line names something else ({_shown(before)!r})"
        if (head := _heading_above(raw, line_start)) is not None and not _VERDICT_HEAD.fullmatch(head):
            return f"{_listed([last])}: under a heading naming something else ({_shown(head)!r})"
        if _ANOTHER.search(closes := raw[raw.rfind("\n\n", 0, line_start) + 1:line_start]):
            return f"{_listed([last])}: the paragraph it ends speaks of another answer ({_shown(closes)!r})"
        if lines := sorted({_shown(m.group(0)) for p in _SCORE_LINE for m in p.finditer(raw[:line_start])
                            if float(m.group("n")) != last.value and not _STATED_HINT.search(m.group(0))}):
            return f"verdicts disagree: {_listed([last])}, {', '.join(repr(x) for x in lines)} (a score line above)"
        tops = [(m.group(0), m.group("n") or m.group("m") or m.group("k") or m.group("j"))
                for m in _SCALE_SAID.finditer(text)]
        if said := [shown for shown, top in tops if top and float(top) != scale[1]]:
            return f"{_listed([last])}: on another scale ({', '.join(repr(x) for x in said)}; this one is {scale})"
        return None
    if last.rule == "slash_ten":  # the n/10 lines are the verdict's own
        text = _OVERALL.sub(_blank, _ASPECT.sub(_blank, text))
    lines = [line for line in text.splitlines() if line.strip()]
    prose = lines[:-1] if last.rule == "bare_number" else lines  # ELYZA's last line is the verdict
    found = [_shown(line) for line in prose if _SCORE_TALK.search(line) and any(
        m.group("word") or float(m.group("n")) != last.value
        for m in _SPOKEN_NUMBER.finditer(_DENOMINATOR.sub(" ", line)))]
    if last.rule == "bare_number" and len(lines) > 1:
        above = lines[-2].strip().rstrip("*_ ")
        if not above.endswith(("。", ".", "！", "!", "？", "?", "）", ")")) or _ANNOUNCING.search(above):
            return (f"{_listed([last])}: after {_shown(above)!r}, which does not end a judgement (a label, a list, "
                    "a count?)")
    if found:
        return f"{_listed([last])}, beside {', '.join(repr(f) for f in found[:3])}: another score in the judge's words"
    return None


def _heading_above(raw: str, line_start: int) -> str | None:
    """The line heading the verdict's line, if the nearest line above (past blank and rule lines; a rule under it
    makes it a setext heading) is one: ``#``, ■, 【, bold alone, or a line ending in a colon."""
    underlined = False
    for line in reversed(raw[:line_start].splitlines()):
        if not line.strip():
            continue
        if _SEPARATOR.fullmatch(line):
            underlined = True
            continue
        line = line.strip()
        return line if underlined or (_HEADING.match(line) and not re.search(r"\d", re.sub(r"^[#\s]*\d+[.)．]", "",
                                                                                           line))) else None
    return None


def _legacy(text: str, rules: tuple[str, ...]) -> list[_Verdict]:
    """The first legacy format the benchmark accepts that appears in the reply."""
    for rule in (r for r in rules if r in LEGACY_RULES):
        if rule == "bare_number":
            lines = [line for line in text.splitlines() if line.strip()]
            if lines and (m := _BARE.match(lines[-1])) and not (len(lines) > 1 and lines[-2].rstrip(" *_").endswith(
                    (":", "："))):  # "正しい答えは次の通り：\n3" is not a score
                return [_Verdict(rule, lines[-1].strip(), float(m.group("n")), 0, 0)]
        elif rule == "slash_ten":
            marked = list(_ASPECT.finditer(text))
            labels = [m.group("label") for m in marked]
            if (_ANOTHER.search(text) and not _REFERENCE.search(text)) or any(
                    _CANDIDATE.search(label) or not (_ASPECT_NAME.search(label) or _OVERALL_IN.search(label))
                    for label in labels):
                return []  # several candidates, or a label that names no quality: whose lines? nothing is averaged
            # A reference answer scored beside the candidate: only an overall that is not the reference's counts
            # (whose aspects the other lines are cannot be told).
            if _REFERENCE.search(text):
                overall = [float(m.group("n")) for m in marked
                           if _OVERALL_IN.search(m.group("label")) and not _REFERENCE.search(m.group("label"))]
                return [_Verdict(rule, f"overall {n:g}/10", n, 0, 0) for n in overall]
            overall = [float(m.group("n")) for m in _OVERALL.finditer(text)]
            overall += [float(m.group("n")) for m in marked if _OVERALL_IN.search(m.group("label"))
                        and not _OVERALL.match(m.group(0))]  # "モデル回答の総合：6/10", "総評：5/10"
            if overall:  # the verdict; aspects its reasons
                return [_Verdict(rule, f"overall {n:g}/10", n, 0, 0) for n in overall]
            aspects = [float(m.group("n")) for m in marked]
            if len(aspects) >= 2:  # one "割合：3/10" line is no rubric
                shown = ", ".join(f"{n:g}/10" for n in aspects)
                return [_Verdict(rule, f"mean of {shown}", statistics.fmean(aspects), 0, 0)]
    return []


def _squeeze(text: str) -> str:
    return " ".join(text.split())


def _shown(matched: str) -> str:
    return _squeeze(matched.replace(MASK, "…"))[:60]


def _listed(verdicts: list[_Verdict]) -> str:
    return ", ".join(f"{v.text!r} ({v.rule})" for v in verdicts)
