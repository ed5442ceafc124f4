"""format_validation: empty answers, error answers, and explicit format requests the answer ignores.

Requests recognised in the question (the turn being answered), checked without a model:

- JSON (「JSON形式で」「JSON文字列として」「JSON辞書」, "in JSON"): the answer holds a JSON object or array
  that parses (in a code block or not);
- a numbered list (「番号付きリスト」) or a list (「箇条書き」): two lines or more that start with an item marker;
- a number of items, two or more (「5つ挙げて」「3個教えて」): when the answer numbers its items (``1.``,
  ``### 2.``, ``**3.**``, ①), as many as asked; an answer without a numbered list is left unchecked
  (items in prose or bullets mixed with sub-points cannot be counted by a rule);
- a number of sentences (「1つの文を書いて」「一文で答えて」「3文で説明して」; not 「一文で始まる」): that many
  sentences (ended by 。！？ or a line end; a lead-in line ending in a colon is not counted);
- a length (「100文字以内」「200字以上」「50文字程度」): characters without whitespace, at most, at least,
  or within half to one and a half times the number.

Penalty ``auto``: a fifth of the score range when a request is ignored; ``empty_penalty`` ``auto``: the
whole range for an empty answer (the score drops to the scale's minimum). An error answer gets the same
row, but its score stays null in the views: a failed call is never a 0.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any, ClassVar

from . import PASSES, Finding, Item, Pass

__all__ = ["FormatValidation", "requests"]

_KANJI_NUMBERS = {"一": 1, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9, "十": 10}
_N = r"(\d+|[一二三四五六七八九十])"
_JSON = re.compile(r"JSON\s*(?:形式|フォーマット|文字列|辞書|オブジェクト|配列|データ|で|として|に)|(?:in|as) JSON",
                   re.I)
_NUMBERED = re.compile(r"番号付き(?:の)?(?:リスト|箇条書き)|番号を(?:付け|振)")
_BULLETED = re.compile(r"箇条書き|リスト形式|リストで")
_ITEMS = re.compile(r"(?<!につき)" + _N + r"\s*(?:つ|個|点)(?:の[^\s、。]{1,8})?を?"
                    r"(?:挙げ|あげ|教え|提案|考え|示し|列挙|書き出|紹介|リストアップ)")
_SENTENCES = re.compile(_N + r"\s*(?:つの)?文(?:だけ)?(?:で(?:書|答|説明|表|まとめ|要約|述べ|回答)|を(?:書|作))")
_LENGTH = re.compile(r"(\d+)\s*(?:文字|字)\s*(以内|以下|未満|まで|以上|程度|前後|くらい|ぐらい|ほど)")
# "1.", "### 2.", "**3.**", "④" at the start of a line
_NUMBERED_LINE = re.compile(r"^ {0,3}(?:#{1,6}\s*)?(?:\*\*)?(?:(\d+)\s*[.)．）:]|([①-⑳]))", re.M)
_ITEM_LINE = re.compile(r"^\s*(?:\d+\s*[.)．）:]|[①-⑳]|[-*・•●])\s*\S", re.M)
_SENTENCE_END = re.compile(r"[。！？!?]+|\n+")


def _number(text: str) -> int:
    return int(text) if text.isdigit() else _KANJI_NUMBERS[text]


def requests(prompt: str) -> list[tuple[str, int | str | None]]:
    """The format requests of a question: (kind, parameter)."""
    prompt = unicodedata.normalize("NFKC", prompt)
    found: list[tuple[str, int | str | None]] = []
    if _JSON.search(prompt):
        found.append(("json", None))
    if _NUMBERED.search(prompt):
        found.append(("numbered_list", None))
    elif _BULLETED.search(prompt):
        found.append(("list", None))
    if (m := _ITEMS.search(prompt)) and _number(m.group(1)) >= 2:  # 「一つ挙げて…説明」: a list may be the explanation
        found.append(("items", _number(m.group(1))))
    if m := _SENTENCES.search(prompt):
        found.append(("sentences", _number(m.group(1))))
    for m in _LENGTH.finditer(prompt):
        word = m.group(2)
        bound = "min" if word == "以上" else "max" if word in ("以内", "以下", "未満", "まで") else "about"
        found.append((f"chars_{bound}", int(m.group(1))))
    return found


def _has_json(text: str) -> bool:
    decoder = json.JSONDecoder()
    starts = [m.start() for m in re.finditer(r"[{\[]", text)][:200]
    for start in starts:
        try:
            value, _ = decoder.raw_decode(text, start)
        except ValueError:
            continue
        if isinstance(value, dict | list) and value:
            return True
    return False


def _numbered_items(text: str) -> int:
    """The length of the first top-level numbered sequence 1, 2, 3, … (0 when there is none)."""
    expected = 1
    for m in _NUMBERED_LINE.finditer(text):
        value = int(m.group(1)) if m.group(1) else ord(m.group(2)) - ord("①") + 1
        if value == expected:
            expected += 1
        elif expected > 1 and value == 1:
            break  # a second list starts: the first one is the answer's
    return expected - 1


def _sentences(text: str) -> int:
    lines = [line for line in text.splitlines() if line.strip() and not line.rstrip().endswith((":", "："))]
    return sum(1 for s in _SENTENCE_END.split("\n".join(lines)) if s.strip(" 「」『』\"'"))


def violations(prompt: str, content: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(requests with what was observed, the ignored ones)."""
    checked, ignored = [], []
    chars = len(re.sub(r"\s", "", content))
    for kind, want in requests(prompt):
        if kind == "json":
            got: object = _has_json(content)
            ok = bool(got)
        elif kind == "numbered_list":
            got = _numbered_items(content)
            ok = got >= 2
        elif kind == "list":
            got = len(_ITEM_LINE.findall(content))
            ok = got >= 2
        elif kind == "items":
            got = _numbered_items(content)
            ok = got in (0, want)  # no numbered list: the items may be in prose or bullets, which no rule can tell
        elif kind == "sentences":
            got = _sentences(content)
            ok = got == want
        else:
            got = chars
            assert isinstance(want, int)
            ok = {"chars_max": chars <= want, "chars_min": chars >= want,
                  "chars_about": want * 0.5 <= chars <= want * 1.5}[kind]
        entry = {"request": kind, "asked": want, "observed": got, "ok": ok}
        checked.append(entry)
        if not ok:
            ignored.append(entry)
    return checked, ignored


@PASSES.register("format_validation")
class FormatValidation(Pass):
    version = "1"
    options: ClassVar[dict[str, str]] = {"penalty": "auto", "empty_penalty": "auto"}

    def check(self, item: Item) -> Finding:
        if item.content is None or item.error:
            return Finding(self.penalty(item, 1.0, "empty_penalty"), f"error answer: {item.error or 'no content'}",
                           {"kind": "error"})
        if not item.content.strip():
            return Finding(self.penalty(item, 1.0, "empty_penalty"), "empty answer", {"kind": "empty"})
        checked, ignored = violations(item.prompt, item.content)
        detail = {"kind": "format", "requests": checked}
        if not ignored:
            return Finding(0.0, "", detail)
        reason = "; ".join(f"asked {v['request']}{'' if v['asked'] is None else ' ' + str(v['asked'])}, "
                           f"got {'none' if v['observed'] is False else v['observed']}" for v in ignored)
        return Finding(self.penalty(item, 0.2), reason, detail)
