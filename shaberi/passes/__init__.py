"""Score-modifying passes: checks of an answer that write audited deltas, never edit a judgement.

A pass is a ``Pass`` class registered by name with ``@PASSES.register(name)``, as a plugin's is;
``shaberi run --passes a,b`` (or ``--stages passes`` on a stored run) runs it over every answer of the run
(``shaberi.passes.runner``). For each answer it returns one ``Finding``: a delta on the benchmark's own scale
(0 when nothing is wrong), a reason, and a structured detail, all written to ``pass_deltas`` with the pass's
``version``. Every checked answer gets a row, so the table also says what a pass looked at and found fine. The
``scores`` view adds the non-zero deltas to every judge's score and clamps to the scale; the judge's score
stays beside it as ``original_score``.

Options come from ``--pass-option NAME.KEY=VALUE``; each pass declares its options and defaults in
``options``. ``penalty = auto`` (every pass has it) is a fraction of the benchmark's score range, so a
penalty means the same on ELYZA's 1–5 as on Rakuda's 1–10; a number is points on the benchmark's scale.

A pass may ask a model about the answers its rules cannot decide (a ``Consulting`` pass: ``needs_llm``,
``consult``, ``decide``); the runner makes those calls through the shared client, stores the verdict and
its tokens with the row, and reuses the verdict instead of paying again while the answer, model and
prompt stay the same.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from ..errors import UsageError
from ..registry import Registry, named

if TYPE_CHECKING:
    from ..llm.client import LLM, Completion

__all__ = ["PASSES", "Consulting", "Finding", "Item", "Pass", "build", "penalty"]


@dataclass(frozen=True)
class Item:
    """One answer as a pass sees it."""

    benchmark: str
    question_id: str
    sample_index: int
    strategy: str
    prompt: str  # the user turn this answer answers
    question: str  # every user turn of the question, joined: what was asked, in which language
    content: str | None
    error: str | None
    finish_reason: str | None
    scale: tuple[int, int]
    scores: dict[str, float | None] = field(default_factory=dict)  # judge -> the judge's score


@dataclass
class Finding:
    delta: float = 0.0
    reason: str = ""
    detail: dict[str, Any] = field(default_factory=dict)
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class Pass(Protocol):
    """A pass: subclasses set ``name``, ``version``, ``options`` and implement ``check``; they inherit the
    options' parsing and checking (``--pass-option``), ``config`` and the ``penalty`` helpers."""

    name: ClassVar[str]
    version: ClassVar[str]
    options: ClassVar[dict[str, str]] = {"penalty": "auto"}
    llm_option: ClassVar[str | None] = None  # the option naming a model as MODEL[@BASE_URL], if any
    settings: dict[str, str]  # the options, defaults filled in
    llm: LLM | None  # the model to consult, set by the pipeline when ``llm_option`` names one

    def __init__(self, **settings: str) -> None:
        unknown = sorted(set(settings) - set(self.options))
        if unknown:
            raise UsageError(f"--pass-option {self.name}.{unknown[0]}: {self.name} has no option {unknown[0]!r}; "
                             f"its options: {', '.join(sorted(self.options))}")
        self.settings = self.options | settings
        for key, default in self.options.items():  # bad values fail here, before any row is written
            if key != self.llm_option and self.settings[key] != "auto":
                self.number(key)
                if "penalty" in key:
                    penalty(self.settings[key], (0, 1), 0.0, f"{self.name}.{key}")
            elif key == self.llm_option and default == "" and self.settings[key].startswith("@"):
                raise UsageError(f"--pass-option {self.name}.{key} should be MODEL or MODEL@BASE_URL")
        self.llm = None

    @property
    def config(self) -> dict[str, Any]:
        """What goes into ``runs.pass_config`` and the manifest."""
        return {"version": self.version, "options": self.settings}

    def check(self, item: Item) -> Finding:
        """The answer's finding by the rules: a delta (0 when nothing is wrong), a reason, a detail."""
        ...

    def number(self, key: str) -> float:
        try:
            value = float(self.settings[key])
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise UsageError(f"--pass-option {self.name}.{key}={self.settings[key]!r} is not a number")
        return value

    def penalty(self, item: Item, fraction: float, key: str = "penalty") -> float:
        """The (negative) delta: ``fraction`` of the score range when the option is ``auto``, else its points."""
        return penalty(self.settings[key], item.scale, fraction, f"{self.name}.{key}")


@runtime_checkable
class Consulting(Pass, Protocol):
    """A pass that asks a model (``llm_option``) about the answers its rules leave undecided: for each finding
    ``needs_llm`` says yes to, the runner calls ``consult`` (when the pass has a model) and then ``decide``."""

    def needs_llm(self, finding: Finding) -> bool:
        """Whether the rules left this answer undecided."""
        ...

    async def consult(self, item: Item, finding: Finding, llm: LLM) -> tuple[dict[str, Any], Completion]:
        """Ask the model; returns (verdict, the reply). The verdict is stored in the row's detail and
        reused, without a call, while the answer, model and prompt stay the same."""
        ...

    def decide(self, item: Item, finding: Finding, verdict: dict[str, Any]) -> Finding:
        """The finding once the model's verdict is known."""
        return finding

    def reusable(self, verdict: dict[str, Any]) -> bool:
        """Whether a stored verdict (of the same answer text) still stands for this pass's model."""
        return self.llm is not None and verdict.get("model") == self.llm.model


PASSES: Registry[type[Pass]] = Registry("pass", make=named)


def penalty(setting: str, scale: tuple[int, int], fraction: float, option: str = "penalty") -> float:
    if setting == "auto":
        return -(scale[1] - scale[0]) * fraction
    try:
        points = float(setting)
    except ValueError:
        points = math.nan
    if not math.isfinite(points) or points < 0:
        raise UsageError(f"--pass-option {option}={setting!r} should be auto or a number of points, 0 or more")
    return -points


def build(names: str | list[str], options: Sequence[str] = ()) -> list[Pass]:
    """Passes from ``--passes a,b`` and ``--pass-option NAME.KEY=VALUE`` items, validated."""
    wanted = PASSES.resolve(names if isinstance(names, str) else ",".join(names))  # there is no "all"
    settings: dict[str, dict[str, str]] = {n: {} for n in wanted}
    for item in options:
        target, eq, value = item.partition("=")
        name, dot, key = target.partition(".")
        if not eq or not dot or not key:
            raise UsageError(f"--pass-option {item!r} should be NAME.KEY=VALUE, e.g. lang_mixing.penalty=1")
        if name not in settings:
            raise UsageError(f"--pass-option {item!r} is for {name!r}, which is not among --passes")
        settings[name][key] = value
    return [PASSES[n](**settings[n]) for n in wanted]


def _load() -> None:
    from . import format_validation, lang_mixing, repetition, safety_check  # noqa: F401  (registration)


_load()
