"""Help pages in sections, as plain text: the commands of ``shaberi --help`` grouped in the order of the work,
and a long command's options (``run --help``) in the panels its options name.

Plain click formatting, not rich's boxes: it reads the same in a terminal, a pipe and the generated CLI reference,
and a ``[default: …]`` in a help text stays text (rich would read it as markup).
"""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

__all__ = ["SECTIONS", "SectionedCommand", "SectionedGroup", "Typer"]

# The commands of ``shaberi --help``, by section, in the order of the work.
SECTIONS = {
    "Evaluate": ["run", "list"],
    "Results": ["view", "compare", "report", "inspect", "leaderboard", "sql", "export", "pairwise"],
    "Ensemble": ["ensemble"],
    "Many models": ["sweep"],
    "Local model": ["demo", "serve-local"],
    "Data": ["data", "import-legacy"],
}
_ORDER = [name for names in SECTIONS.values() for name in names]


class SectionedCommand(TyperCommand):
    """Arguments, then the options no panel claims (and ``--help``), then each ``rich_help_panel`` in the order
    its first option appears."""

    def format_options(self, ctx: Any, formatter: Any) -> None:
        panels: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):
            if (record := param.get_help_record(ctx)) is not None:
                default = "Arguments" if param.param_type_name == "argument" else "Options"
                panels.setdefault(getattr(param, "rich_help_panel", None) or default, []).append(record)
        for name in sorted(panels, key=lambda name: (name != "Arguments", name != "Options")):
            with formatter.section(name):
                formatter.write_dl(panels[name])


class SectionedGroup(TyperGroup):
    """Commands listed in the order of the work (``SECTIONS``), each section under its own heading."""

    def list_commands(self, ctx: Any) -> list[str]:
        return sorted(self.commands, key=lambda name: _ORDER.index(name) if name in _ORDER else len(_ORDER))

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        commands = [(name, command) for name in self.list_commands(ctx)
                    if (command := self.get_command(ctx, name)) is not None and not command.hidden]
        if not commands:
            return
        limit = formatter.width - 6 - max(len(name) for name, _ in commands)
        top = ctx.parent is None  # the sections are shaberi's own; a group under it lists its commands plainly
        section = {name: title for title, names in SECTIONS.items() for name in names} if top else {}
        grouped: dict[str, list[tuple[str, str]]] = {}
        for name, command in commands:
            grouped.setdefault(section.get(name, "Commands"), []).append((name, command.get_short_help_str(limit)))
        for title, rows in grouped.items():
            with formatter.section(title):
                formatter.write_dl(rows)


class Typer(typer.Typer):
    """A ``typer.Typer`` whose commands and groups print their help in sections."""

    def __init__(self, **options: Any) -> None:
        super().__init__(cls=SectionedGroup, rich_markup_mode=None, **options)

    def command(self, *args: Any, **options: Any) -> Any:
        return super().command(*args, cls=options.pop("cls", SectionedCommand), **options)
