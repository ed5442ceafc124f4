"""Jinja2 templates under ``prompts/``, and the hashes that make a prompt change visible in the tables."""

from __future__ import annotations

import hashlib
from functools import cache

import jinja2

from .benchmarks import Question
from .resources import resource_dir

__all__ = ["generation_messages", "template_hash"]


@cache
def _env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(resource_dir("prompts")),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        auto_reload=False,  # templates do not change during a run; skips a stat() per render
    )


@cache
def template_hash(name: str) -> str:
    """sha256 prefix of a template's source, stored with every row it produced."""
    source, _, _ = _env().loader.get_source(_env(), name)  # type: ignore[union-attr]
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def generation_template(benchmark: str) -> str:
    return f"generation/{benchmark}.jinja"


def generation_messages(question: Question) -> list[dict[str, str]]:
    """System message (the template's ``system`` variable) and the rendered user turn."""
    module = _env().get_template(generation_template(question.benchmark)).make_module({"question": question})
    messages = []
    system = str(getattr(module, "system", "") or "").strip()
    if system:
        messages.append({"role": "system", "content": system})
    messages.append({"role": "user", "content": str(module).strip()})
    return messages
