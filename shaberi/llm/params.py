"""What a chat request asks besides its messages: sampling, the completion limit, reasoning effort, a
provider's extra fields, shaped for the model's family (``data/model_families.toml``).

One function builds every body (candidate, judge, a pass's model, a consensus strategy, a grader), called by the
client only (``ChatClient.chat`` takes the model, the messages and a ``Sampling``), so a family rule such as
"OpenAI's reasoning models take ``max_completion_tokens`` and no temperature" holds wherever that model is asked.
With no option given the body is exactly what it always was: stored request hashes stay valid.
"""

from __future__ import annotations

import fnmatch
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..resources import resource_dir

__all__ = ["EFFORTS", "Family", "Sampling", "Verbatim", "chat_body", "family_for", "family_note", "load_families",
           "parse_extra_body"]

EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")  # reasoning_effort values providers accept


@dataclass(frozen=True)
class Family:
    name: str
    models: tuple[str, ...]
    tokens_field: str | None = None
    omit: tuple[str, ...] = ()
    why: str = ""

    def matches(self, model: str) -> bool:
        names = {model.lower(), model.rsplit("/", 1)[-1].lower()}
        return any(fnmatch.fnmatchcase(n, p.lower()) for n in names for p in self.models)


@dataclass(frozen=True)
class Sampling:
    """The request parameters a user chooses (None: not sent). ``tokens_field`` names the limit's field."""

    temperature: float | None = 0.2
    max_tokens: int = 6000
    tokens_field: str = "max_tokens"
    top_p: float | None = None
    reasoning_effort: str | None = None
    extra_body: str | None = None  # a JSON object, merged into the body last
    families: str | None = None  # the family table's file (None: the built-in one)


@dataclass(frozen=True)
class Verbatim:
    """Fields sent exactly as another program sends them (the original Shaberi's judge requests): no default and
    no family rule changes them, or the scores would not be the original's. ``api``: ``chat`` (chat completions)
    or ``responses`` (the Responses API: the messages go as ``input``)."""

    fields: Mapping[str, object] = field(default_factory=dict)
    api: str = "chat"


@cache
def load_families(path: str | None = None) -> tuple[Family, ...]:
    """The family table: ``path``, or ``data/model_families.toml``; checked whole, so a broken one is bad
    input before any call."""
    file = Path(path) if path else resource_dir("data") / "model_families.toml"
    try:
        with open(file, "rb") as fh:
            table = tomllib.load(fh)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"cannot read model families file {file}: {exc}") from None
    return tuple(_family(file, name, entry) for name, entry in table.items())


def _family(file: Path, name: str, entry: object) -> Family:
    def strings(key: str) -> tuple[str, ...]:
        value = entry.get(key, []) if isinstance(entry, dict) else None
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise UsageError(f"model families file {file}: [{name}] {key} must be a list of strings, e.g. "
                             f'{key} = ["o3*"]')
        return tuple(value)

    models, omit = strings("models"), strings("omit")
    field = entry.get("tokens_field") if isinstance(entry, dict) else None
    if not models or field not in (None, "max_tokens", "max_completion_tokens") or {"model", "messages"} & set(omit):
        raise UsageError(f"model families file {file}: [{name}] needs models = [patterns], tokens_field "
                         "max_tokens or max_completion_tokens (or none), and cannot omit model or messages")
    return Family(name, models, field, omit, str(entry.get("why", "")) if isinstance(entry, dict) else "")


def family_for(model: str, families: str | None = None) -> Family | None:
    return next((f for f in load_families(families) if f.matches(model)), None)


def parse_extra_body(option: str, text: str | None) -> str | None:
    """``--extra-body``'s JSON object, checked at the edge and kept as compact text (hashable, storable)."""
    if text is None:
        return None
    import orjson

    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise UsageError(f"{option} is not JSON ({exc}); give an object, e.g. "
                         """'{"chat_template_kwargs": {"enable_thinking": false}}'""") from None
    if not isinstance(value, dict):
        raise UsageError(f"{option} must be a JSON object, got {type(value).__name__}")
    if reserved := sorted({"model", "messages", "stream"} & value.keys()):
        raise UsageError(f"{option} cannot set {', '.join(reserved)}: shaberi sends those itself")
    return orjson.dumps(value).decode()


def chat_body(model: str, messages: list[dict[str, Any]], s: Sampling | Verbatim, **more: object) -> dict[str, Any]:
    """The request body: the user's parameters, ``more`` (frequency_penalty, seed: sent when not None), then
    the family's rules, then the extra body. Only the client calls this (it encodes what it sends)."""
    if isinstance(s, Verbatim):
        return {"model": model, "input" if s.api == "responses" else "messages": messages, **s.fields}
    body: dict[str, Any] = {"model": model, "messages": messages}
    if s.temperature is not None:
        body["temperature"] = s.temperature
    body[s.tokens_field] = s.max_tokens
    body |= {k: v for k, v in more.items() if v is not None}
    if s.top_p is not None:
        body["top_p"] = s.top_p
    if s.reasoning_effort is not None:
        body["reasoning_effort"] = s.reasoning_effort
    if family := family_for(model, s.families):
        if family.tokens_field and s.tokens_field in body:
            body[family.tokens_field] = body.pop(s.tokens_field)
        for name in family.omit:
            body.pop(name, None)
    if s.extra_body:
        import orjson

        body |= orjson.loads(s.extra_body)
    return body


def family_note(model: str, s: Sampling) -> str | None:
    """One line saying how the family table changes what ``model`` is sent, or None."""
    family = family_for(model, s.families)
    if family is None:
        return None
    given = {"temperature": s.temperature, "top_p": s.top_p, "reasoning_effort": s.reasoning_effort,
             "frequency_penalty": getattr(s, "frequency_penalty", None), "seed": getattr(s, "seed", None)}
    changes = [f"{name} not sent" for name in family.omit if given.get(name) is not None]
    if family.tokens_field and family.tokens_field != s.tokens_field:
        changes.append(f"{s.tokens_field} sent as {family.tokens_field}")
    if not changes:
        return None
    return f"{model} is in model family {family.name!r} ({family.why}): {', '.join(changes)} (--model-families)"
