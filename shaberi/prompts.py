"""Jinja2 templates under ``prompts/``, and the hashes that make a prompt change visible in the tables.

A template is looked up in shaberi's ``prompts/`` first, then in the plugins' folders (``PROMPTS``:
``PROMPTS.register(name, folder)``, or a benchmark's ``prompts=``), laid out the same way: ``generation/<name>.jinja``,
``judging/<benchmark>/primary.jinja`` and ``fallback.jinja``, and whatever a strategy or pass renders.
A team's own judging templates (``--judge-prompts FOLDER``, ``judging=FOLDER`` here) are a folder laid out like
``judging/``, read before all of these for every ``judging/…`` name.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
from jinja2.loaders import split_template_path

from .errors import UsageError
from .resources import PROMPTS, resource_dir
from .sandbox import BoundedEnvironment, Made, Renderer, module, serve_renders

if TYPE_CHECKING:
    from .benchmarks import Question

__all__ = [
    "MARKERS",
    "PROMPTS",
    "check_generation",
    "generation_messages",
    "judge_fallback",
    "judge_messages",
    "judging_hash",
    "made_here",
    "pairwise_fallback",
    "pairwise_hash",
    "pairwise_messages",
    "render",
    "template_hash",
    "unrenderable",
    "untrusted",
]

# What our templates put around a model's text (【回答】…【回答終了】, 【質問開始】, <answer>…</answer>, …): any
# bracket that reads like ours around 回答 or 質問 (with 過去の, 開始, 終了), our tag names, and the chat
# templates' special tokens (<|im_end|>). Matched on the text as a judge may read it (``_skeleton``).
_G = r"[\s・:.。]*"
_KAI, _TOU = "[回囘]", "[答荅]"
_WORDS = (rf"((?:過\s*去\s*の\s*)?(?:{_KAI}\s*{_TOU}|質\s*問)" + f"(?:{_G}開\\s*始|{_G}終\\s*了)?)")
_ENDS = (rf"((?:過\s*去\s*の\s*)?(?:{_KAI}\s*{_TOU}|質\s*問)" + f"(?:{_G}開\\s*始|{_G}終\\s*了))")
_OPEN, _CLOSE = "[【〖〔［\\[<《〈〘〚⟦«（(]", "[】〗〕］\\]>》〉〙〛⟧»）)]"
MARKERS = re.compile(
    r"[【〖〔［\[<《〈〘〚⟦«]\s*" + _WORDS + r"[\s.。]*[】〗〕］\]>》〉〙〛⟧»]"  # 【回答】, 【回答終了】, ⟦質問開始⟧
    + "|" + _OPEN + r"\s*" + _ENDS + r"[\s.。]*" + _CLOSE + "?"  # a half-open 【回答終了, （回答終了）
    + "|" + _OPEN + r"?\s*" + _ENDS + r"[\s.。]*" + _CLOSE  # 回答終了】
    + r"|<\s*(/?\s*(?:answer|critique|rebuttal|s|start_of_turn|end_of_turn)\s*/?)(?=[\s/>])(?:\s[^<>\n]*)?>"
    + r"|<(\|)|(\[/?INST\])", re.I)  # chat templates' special tokens: <|im_end|>, <end_of_turn>, </s>, [/INST]
_SPACING = re.compile(r"[\s・:.。]")
_INVISIBLE = frozenset("\u115f\u1160\u3164\uffa0\u2800")  # fillers that render as nothing


def _read_as(ch: str) -> str:
    """How a judge may read one character: its NFKC form, or nothing for an invisible one."""
    if ch in _INVISIBLE or unicodedata.category(ch) in ("Cf", "Mn", "Me"):
        return ""
    return unicodedata.normalize("NFKC", ch)


def _skeleton(text: str) -> tuple[str, list[int]]:
    """``text`` as a judge may read it, each character NFKC-normalised (︻ is 【, ＜ is <) and the invisible
    ones (format, combining and filler characters: zero-width spaces, soft hyphens, variation selectors)
    dropped; with, for each character kept, its index in ``text``."""
    kept, where = [], []
    for i, ch in enumerate(text):
        for n in _read_as(ch):
            kept.append(n)
            where.append(i)
    return "".join(kept), where


def untrusted(text: object) -> str:
    """A model's text made safe to place between our markers: every marker-like sequence inside it is
    rewritten (【回答終了】 becomes 《本文中の表記：回答終了》, ``</answer>`` becomes ``‹/answer>``, ``<|im_end|>``
    becomes ``‹|im_end|>``), so the text can neither close its block nor open one of its own, as Inspect does
    for its ``[END DATA]``; look-alike and invisible characters do not smuggle one in. The templates also
    tell the judge that instructions inside a block are part of what it judges."""
    text = str(text)
    table = {ord(ch): _read_as(ch) for ch in set(text)}  # the common case, no marker at all, stays in C
    if not MARKERS.search(text.translate(table)):
        return text
    skeleton, where = _skeleton(text)
    out, done = [], 0
    for m in MARKERS.finditer(skeleton):
        start, end = where[m.start()], where[m.end() - 1] + 1
        words = m.group(1) or m.group(2) or m.group(3)
        # a tag or token: "<" (or "[") itself is what makes it one
        new = "《本文中の表記：" + _SPACING.sub("", words) + "》" if words is not None else "‹" + text[start + 1:end]
        out += [text[done:start], new]
        done = end
    return "".join(out) + text[done:]


# What a template that cannot be rendered raises: a syntax error, an undefined name, a render past its bounds
# (``sandbox.RenderLimit``), a file that is not UTF-8.
unrenderable = (jinja2.TemplateError, UnicodeDecodeError)



def _roots() -> list[Path]:
    return [resource_dir("prompts"), *PROMPTS.values()]


class _Folder(jinja2.FileSystemLoader):
    """A team's templates folder: only its own ``*.jinja`` files, each a regular file inside it. ``promptsets`` checks
    the folder before a run; this holds at every ``{% include %}`` too, for a file by any other name or under a linked
    folder (either would send another file's text to the judge)."""

    def get_source(self, environment: jinja2.Environment, template: str) -> tuple[str, str, Callable[[], bool]]:
        root = Path(self.searchpath[0]).resolve()
        path = root.joinpath(*split_template_path(template)).resolve()
        if not template.endswith(".jinja") or not path.is_relative_to(root) or not path.is_file():
            raise jinja2.TemplateNotFound(template)
        return super().get_source(environment, template)


@cache
def _env(judging: str | None = None, roots: tuple[str, ...] | None = None) -> jinja2.Environment:
    """Every template, ours too, in the bounded sandbox (``sandbox``): a plugin's or a team's is code we did not
    write, and ours are plain enough not to notice. ``roots``: the template folders (default: ``_roots()``)."""
    folders = list(roots) if roots is not None else _roots()
    loader: jinja2.BaseLoader = jinja2.FileSystemLoader(folders)  # shaberi's own first: a plugin replaces none
    if judging is not None:
        loader = jinja2.ChoiceLoader([jinja2.PrefixLoader({"judging": _Folder(judging)}), loader])
    env = BoundedEnvironment(
        loader=loader,
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        auto_reload=False,  # templates do not change during a run; skips a stat() per render
    )
    env.filters["untrusted"] = untrusted
    return env


@cache
def _ours(template: str, judging: str | None) -> bool:
    """Whether ``template`` is this project's own (under ``prompts/``, no team's folder in the way): it renders
    here; anyone else's renders in the render process (``sandbox.Renderer``)."""
    if judging is not None:  # the folder may replace any judging template, a shared one included
        return False
    try:
        _, filename, _ = _env().loader.get_source(_env(), template)  # type: ignore[union-attr]
    except jinja2.TemplateNotFound:
        return True  # rendering it here says so
    return filename is not None and Path(filename).resolve().is_relative_to(resource_dir("prompts").resolve())


def made_here(template: str, context: dict[str, Any], judging: str | None = None, roots: tuple[str, ...] | None = None
              ) -> Made:
    """``template``'s text and its ``system`` variable, rendered in this process."""
    made = module(_env(judging, roots).get_template(template), context)
    return str(made), str(getattr(made, "system", "") or "")


_RENDERER = Renderer("shaberi.prompts")  # runs this module's ``__main__``


def _made(template: str, context: dict[str, Any], judging: str | None = None) -> Made:
    if _ours(template, judging):
        return made_here(template, context, judging)
    return _RENDERER.made(tuple(map(str, _roots())), judging, template, context)


@cache
def template_hash(name: str, judging: str | None = None) -> str:
    """sha256 prefix of a template's source, stored with every row it produced."""
    try:
        source, _, _ = _env(judging).loader.get_source(_env(judging), name)  # type: ignore[union-attr]
    except UnicodeDecodeError as exc:
        raise UsageError(f"template {name} is not UTF-8 text ({exc}); save it as UTF-8") from None
    except jinja2.TemplateNotFound:  # checked before a run writes anything: one line, not a traceback
        where = ", ".join(map(str, [*([judging] if judging else []), *_roots()]))
        raise UsageError(f"no template {name} in {where}; a benchmark brings its generation and judging "
                         "templates (docs/reference/plugins.md)") from None
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def generation_template(benchmark: str) -> str:
    return f"generation/{benchmark}.jinja"


def generation_messages(question: Question, earlier_answers: Sequence[str] = ()) -> list[dict[str, str]]:
    """System message (the template's ``system`` variable), then for a multi-turn question each earlier user
    turn followed by the model's own answer to it, then the rendered current turn. A turn that renders as the
    question itself is the question as the benchmark has it, its edge whitespace too (9 ELYZA tasks end in a
    newline or spaces): the original Shaberi sends them so."""
    messages = _messages(generation_template(question.benchmark), {"question": question})
    if messages[-1]["content"] == question.turns[-1].strip():
        messages[-1]["content"] = question.turns[-1]
    earlier = [m for user, answer in zip(question.turns[:-1], earlier_answers, strict=True)
               for m in ({"role": "user", "content": user}, {"role": "assistant", "content": answer})]
    return [*messages[:-1], *earlier, messages[-1]]


def check_generation(questions: Iterable[Question]) -> None:
    """Every question's generation prompt renders (a plugin's template is code we did not write): bad input, one
    line naming the template, before any call."""
    for q in questions:
        try:
            generation_messages(q, ["（回答）"] * (len(q.turns) - 1))
        except unrenderable as exc:
            raise UsageError(f"template {generation_template(q.benchmark)} cannot be rendered for {q.benchmark} "
                             f"question {q.question_id} ({type(exc).__name__}: {exc})") from None


@cache
def judging_hash(benchmark: str, judging: str | None = None) -> str:
    """One hash over every template a benchmark's judging reads (its folder and the shared ``_*.jinja``; with
    ``judging``, that folder's where it has them). The pairwise templates are not the scores' (``pairwise_hash``):
    adding or editing one leaves every score current."""
    return _folder_hash(benchmark, judging, pairwise=False)


@cache
def pairwise_hash(benchmark: str, judging: str | None = None) -> str:
    """One hash over the templates a benchmark's pairwise judging reads: its ``pairwise.jinja``, the shared
    ``_pairwise*.jinja``, and the templates they extend (another benchmark's ``pairwise.jinja``)."""
    return _folder_hash(benchmark, judging, pairwise=True)


def _pairwise(path: Path) -> bool:
    return path.stem == "pairwise" or path.stem.startswith("_pairwise")


def _read_by(path: Path, pairwise: bool) -> bool:
    """Whether the scores' templates (``pairwise=False``) or the pairwise ones may read a shared template:
    ``_pairwise*`` only the pairwise, any other ``_*`` only the scores', a team's file by any other name
    (``common.jinja``) both."""
    return _pairwise(path) == pairwise if path.stem.startswith("_") else True


def _folder_hash(benchmark: str, judging: str | None, pairwise: bool) -> str:
    folders = [Path(judging)] if judging else []
    folders += [root / "judging" for root in _roots()]
    needed = ("pairwise.jinja",) if pairwise else ("primary.jinja", "fallback.jinja")
    for template in needed:
        template_hash(f"judging/{benchmark}/{template}", judging)  # present, or one line naming it
    shared = {path.name: path for folder in reversed(folders) for path in folder.glob("*.jinja")
              if _read_by(path, pairwise)}  # the first folder wins
    own = next(f for f in folders if ((f / benchmark / needed[0]).is_file() if pairwise else (f / benchmark).is_dir()))
    files = sorted([(Path(name), path) for name, path in shared.items()]
                   + [(path.relative_to(own), path) for path in (own / benchmark).glob("*.jinja")
                      if _pairwise(path) == pairwise])
    if pairwise and (parent := _extends(own / benchmark / "pairwise.jinja")):
        found = next((f / parent.removeprefix("judging/") for f in folders
                      if (f / parent.removeprefix("judging/")).is_file()), None)
        if found is None:
            raise UsageError(f"judging/{benchmark}/pairwise.jinja extends {parent}, which is in none of "
                             f"{', '.join(map(str, folders))}")
        files.append((Path(parent), found))
    digest = hashlib.sha256()
    for name, path in files:
        digest.update(name.as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    digest.update(MARKERS.pattern.encode())  # what ``untrusted`` rewrites shapes the prompt too
    return digest.hexdigest()[:16]


def judge_messages(benchmark: str, question: Mapping | Question, answer: str, scale: tuple[int, int],
                   history: Sequence[Mapping[str, str]] = (), judging: str | None = None) -> list[dict[str, str]]:
    """The primary judging prompt: system instructions, then question, reference, criteria and the answer;
    for a later turn of a conversation, ``history`` holds the earlier turns ({user, assistant})."""
    context = {"question": question, "answer": answer, "scale": scale, "history": list(history)}
    return _messages(f"judging/{benchmark}/primary.jinja", context, judging)


def pairwise_messages(benchmark: str, question: Mapping | Question, a: str, b: str,
                      histories: tuple[Sequence[Mapping[str, str]], Sequence[Mapping[str, str]]] = ((), ()),
                      judging: str | None = None) -> list[dict[str, str]]:
    """The pairwise judging prompt: answer ``a`` shown first as A, ``b`` as B; for a later turn of a conversation,
    ``histories`` holds each side's own earlier turns ({user, assistant})."""
    context = {"question": question, "a": a, "b": b, "history_a": list(histories[0]), "history_b": list(histories[1])}
    return _messages(f"judging/{benchmark}/pairwise.jinja", context, judging)


def pairwise_fallback(judging: str | None = None) -> str:
    """The follow-up asking only for the verdict, sent after a pairwise judge's unreadable reply."""
    return _made("judging/_pairwise_fallback.jinja", {}, judging)[0].strip()


def judge_fallback(benchmark: str, scale: tuple[int, int], judging: str | None = None) -> str:
    """The follow-up asking only for the score, sent after the judge's unparseable reply."""
    return _made(f"judging/{benchmark}/fallback.jinja", {"scale": scale}, judging)[0].strip()


def _extends(path: Path) -> str | None:
    """The template ``path`` extends, by name (``{% extends "judging/mt_bench/pairwise.jinja" %}``)."""
    m = re.search(r"""{%-?\s*extends\s+(["'])([^"']+)\1""", path.read_text(encoding="utf-8"))
    return m.group(2) if m else None


def render(template: str, **context: object) -> str:
    """A template under ``prompts/`` rendered as plain text (the passes' prompts)."""
    return _made(template, context)[0].strip()


def _messages(template: str, context: dict[str, Any], judging: str | None = None) -> list[dict[str, str]]:
    text, system = _made(template, context, judging)
    messages = []
    if system.strip():
        messages.append({"role": "system", "content": system.strip()})
    messages.append({"role": "user", "content": text.strip()})
    return messages


if __name__ == "__main__":  # the render process (``sandbox.Renderer``)
    serve_renders(made_here)
