"""Prompt sets: which judging prompts a judgement was made with, and how its score was read.

- ``shaberi``: this project's own templates (``prompts/judging/``), read with its verdict grammar
  (``shaberi.extract``); the default.
- ``templates``: a team's own folder laid out like ``prompts/judging/`` (``<benchmark>/primary.jinja`` and
  ``fallback.jinja``, shared ``_*.jinja``; a template it lacks comes from Shaberi's), read with the same grammar.
- ``original``: a clone of the original Shaberi (``judging.original``): its prompts, requests and score reading.

``--judge-prompts PATH`` names one. Judgements under a set other than Shaberi's own are stored under the judge
name qualified by the set's label (``gpt-4.1-2025-04-14 [original:8578939]``, ``judge_label``): every view,
``compare`` and ``leaderboard`` then keep them apart as they keep two judges apart, and a judge's pooled rows
(``*``) never mix prompt sets (``sql/005_status.sql``: ``pooled_judge``). ``runs.judge_prompts`` holds each set's
provenance by label.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UsageError
from .original import Clone, is_clone
from .original import load as load_clone

__all__ = ["SHABERI", "PromptSet", "judge_label", "load"]


@dataclass(frozen=True)
class PromptSet:
    kind: str  # shaberi | templates | original
    label: str | None = None  # None: Shaberi's own (judges keep their bare names)
    folder: str | None = None  # templates: the folder laid out like prompts/judging/
    clone: Clone | None = None  # original
    given: str | None = None  # the path as the user gave it

    def prompt_hash(self, benchmark: str) -> str:
        """The ``prompt_hash`` of this set's judging of ``benchmark`` (part of a judgement's identity)."""
        if self.clone is not None:
            return self.clone.prompt_hash()
        from ..prompts import judging_hash

        return judging_hash(benchmark, self.folder)

    def check(self, benchmarks: Sequence[str], questions: Mapping[str, Sequence[Mapping]],
              judges: Sequence[str]) -> None:
        """Before anything is written: every template is there; a clone judges these benchmarks, renders every
        question, and says what it sends each judge (bad input, one line, otherwise)."""
        for name in benchmarks:
            self.prompt_hash(name)
        if self.clone is not None:
            self.clone.check(benchmarks, questions, judges)
        else:
            self._render(benchmarks, questions)

    def _render(self, benchmarks: Sequence[str], questions: Mapping[str, Sequence[Mapping]]) -> None:
        """The judging templates (a team's, a plugin's, ours), rendered for every question with a stand-in answer:
        one that does not compile, reads what a question lacks or passes a render's bounds (``sandbox``) is bad
        input, named, before any call."""
        import jinja2

        from .. import benchmarks as bm
        from ..prompts import judge_fallback, judge_messages, unrenderable
        from ..tables.rows import decoded

        where = f"--judge-prompts {self.given}: " if self.folder is not None else ""
        for name in benchmarks:
            scale = bm.BENCHMARKS[name].scale
            template = f"{'' if self.folder else 'judging/'}{name}/primary.jinja"
            try:
                for question in questions.get(name, ()):
                    shown = decoded("questions", question)
                    if not judge_messages(name, shown, "（回答）", scale, (), self.folder)[-1]["content"]:
                        raise UsageError(f"{where}{template} renders an empty prompt for {name} question "
                                         f"{question.get('question_id')}")
                template = template.replace("primary.jinja", "fallback.jinja")
                if not judge_fallback(name, scale, self.folder):
                    raise UsageError(f"{where}{template} renders an empty prompt")
            except unrenderable as exc:
                line = f", line {exc.lineno}" if isinstance(exc, jinja2.TemplateSyntaxError) else ""
                raise UsageError(f"{where}{template}{line} cannot be rendered ({type(exc).__name__}: {exc})") from None

    def judge(self, name: str) -> str:
        """The judge's name in the tables under this set."""
        return judge_label(name, self.label)

    def provenance(self) -> dict[str, Any]:
        if self.clone is not None:
            return self.clone.provenance()
        if self.folder is None:
            return {"kind": "shaberi", "label": None}
        files = sorted(Path(self.folder).rglob("*.jinja"))
        return {"kind": "templates", "label": self.label, "path": self.given, "folder": self.folder,
                "templates": {str(f.relative_to(self.folder)): hashlib.sha256(f.read_bytes()).hexdigest()
                              for f in files}}


SHABERI = PromptSet("shaberi")


_TEMPLATE_BYTES = 1 << 20  # a template of more is not a prompt


def _plain_files(folder: Path, given: str) -> None:
    """Every ``*.jinja`` of a templates folder is a regular file inside it, of a prompt's size, in UTF-8: a link
    out of it would send another file's text to the judge (``{% include %}``), a device or a folder named so would
    hang or break the hashing, and an included file that is not text would be blamed on the template including it."""
    inside = folder.resolve()
    for path in sorted(folder.rglob("*.jinja")):
        real = path.resolve()
        what = ("links out of the folder" if not real.is_relative_to(inside) else
                "is not a file" if not real.is_file() else
                "is over 1 MB" if real.stat().st_size > _TEMPLATE_BYTES else
                "is not UTF-8 text" if not _utf8(real) else "")
        if what:
            raise UsageError(f"--judge-prompts {given}: {path.relative_to(folder)} {what}; keep only template files "
                             "in the folder")


def _utf8(path: Path) -> bool:
    try:
        path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def judge_label(name: str, label: str | None) -> str:
    return name if label is None else f"{name} [{label}]"


def load(given: str | None) -> PromptSet:
    """``--judge-prompts PATH``: an original clone or a folder of judging templates; bad input is one line."""
    if given is None:
        return SHABERI
    path = Path(given).expanduser()
    if not path.is_dir():
        what = "not a folder" if path.exists() else "no such folder"
        raise UsageError(f"--judge-prompts {given}: {what}; give a clone of the original Shaberi (git clone "
                         "https://github.com/shisa-ai/shaberi) or a folder of judging templates laid out like "
                         "prompts/judging/")
    if is_clone(path):
        clone = load_clone(path, given)
        return PromptSet("original", clone.label, clone=clone, given=given)
    folder = path / "judging" if (path / "judging").is_dir() else path
    if not any(folder.glob("*/primary.jinja")):
        raise UsageError(f"--judge-prompts {given}: neither a clone of the original Shaberi (no "
                         "evaluation_datasets_config.py) nor a folder of judging templates (no "
                         "<benchmark>/primary.jinja); see docs: prompt sets")
    _plain_files(folder, given)
    name = path.resolve().name
    if not name or any(c in name for c in "[]@"):
        raise UsageError(f"--judge-prompts {given}: name the templates' folder without [, ] or @ (its name labels "
                         "the judgements)")
    return PromptSet("templates", f"templates:{name}", folder=str(folder.resolve()), given=given)
