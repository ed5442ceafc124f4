"""Jinja2 templates under ``prompts/``, and the hashes that make a prompt change visible in the tables."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from functools import cache

import jinja2

from .benchmarks import Question
from .resources import resource_dir

__all__ = [
    "MARKERS",
    "generation_messages",
    "judge_fallback",
    "judge_messages",
    "judging_hash",
    "render",
    "template_hash",
    "untrusted",
]

# What our templates put around a model's text (【回答】…【回答終了】, 【質問開始】, <answer>…</answer>, …):
# any of these brackets around 回答 or 質問 (with 過去の, 開始, 終了), and our tag names. Spaces and invisible
# characters may sit anywhere in a marker, since a judge reads past those.
_GAP = "[\\s\u200b-\u200f\u2060\ufeff]*"
MARKERS = re.compile(
    "[【〖〔［\\[<＜《〈]" + _GAP + f"((?:{_GAP.join('過去の')})?(?:{_GAP.join('回答')}|{_GAP.join('質問')})"
    f"(?:{_GAP}{_GAP.join('開始')}|{_GAP}{_GAP.join('終了')})?)" + _GAP + "[】〗〕］\\]>＞》〉]"
    + "|<" + _GAP + "(/?" + _GAP + "(?:answer|critique|rebuttal)(?:\\s[^<>\\n]*)?>)", re.I)


def untrusted(text: object) -> str:
    """A model's text made safe to place between our markers: every marker-like sequence inside it is
    rewritten (【回答終了】 becomes 《本文中の表記：回答終了》, ``</answer>`` becomes ``‹/answer>``), so the text
    can neither close its block nor open one of its own, as Inspect does for its ``[END DATA]``. The
    templates also tell the judge that instructions inside a block are part of what it judges."""
    def defang(m: re.Match[str]) -> str:
        if m.group(1) is not None:
            return f"《本文中の表記：{re.sub(_GAP, '', m.group(1))}》"
        return f"‹{m.group(2)}"

    return MARKERS.sub(defang, str(text))


@cache
def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(resource_dir("prompts")),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        auto_reload=False,  # templates do not change during a run; skips a stat() per render
    )
    env.filters["untrusted"] = untrusted
    return env


@cache
def template_hash(name: str) -> str:
    """sha256 prefix of a template's source, stored with every row it produced."""
    source, _, _ = _env().loader.get_source(_env(), name)  # type: ignore[union-attr]
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def generation_template(benchmark: str) -> str:
    return f"generation/{benchmark}.jinja"


def generation_messages(question: Question, earlier_answers: Sequence[str] = ()) -> list[dict[str, str]]:
    """System message (the template's ``system`` variable), then for a multi-turn question each earlier user
    turn followed by the model's own answer to it, then the rendered current turn."""
    messages = _messages(generation_template(question.benchmark), {"question": question})
    earlier = [m for user, answer in zip(question.turns[:-1], earlier_answers, strict=True)
               for m in ({"role": "user", "content": user}, {"role": "assistant", "content": answer})]
    return [*messages[:-1], *earlier, messages[-1]]


@cache
def judging_hash(benchmark: str) -> str:
    """One hash over every template a benchmark's judging reads (its folder and the shared ``_*.jinja``)."""
    root = resource_dir("prompts") / "judging"
    files = sorted([*root.glob("_*.jinja"), *(root / benchmark).glob("*.jinja")])
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    digest.update(MARKERS.pattern.encode())  # what ``untrusted`` rewrites shapes the prompt too
    return digest.hexdigest()[:16]


def judge_messages(benchmark: str, question: Mapping, answer: str, scale: tuple[int, int],
                   history: Sequence[Mapping[str, str]] = ()) -> list[dict[str, str]]:
    """The primary judging prompt: system instructions, then question, reference, criteria and the answer;
    for a later turn of a conversation, ``history`` holds the earlier turns ({user, assistant})."""
    context = {"question": question, "answer": answer, "scale": scale, "history": list(history)}
    return _messages(f"judging/{benchmark}/primary.jinja", context)


def judge_fallback(benchmark: str, scale: tuple[int, int]) -> str:
    """The follow-up asking only for the score, sent after the judge's unparseable reply."""
    return _env().get_template(f"judging/{benchmark}/fallback.jinja").render(scale=scale).strip()


def render(template: str, **context: object) -> str:
    """A template under ``prompts/`` rendered as plain text (the passes' prompts)."""
    return _env().get_template(template).render(**context).strip()


def _messages(template: str, context: dict) -> list[dict[str, str]]:
    module = _env().get_template(template).make_module(context)
    messages = []
    system = str(getattr(module, "system", "") or "").strip()
    if system:
        messages.append({"role": "system", "content": system})
    messages.append({"role": "user", "content": str(module).strip()})
    return messages
