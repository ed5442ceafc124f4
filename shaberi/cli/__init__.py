"""The command line: parse, call a stage, print. Bad input ends in one ``error:`` line and exit code 2.

One module per command group: ``run`` (generate, judge, passes), ``results`` (sql, view, compare, export,
import-legacy, leaderboard, inspect, report), ``ensemble``, ``local`` (demo, serve-local, data pull, list); ``common``
holds the application and what the groups share.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from functools import cache
from typing import Any, NoReturn

import typer
from typer.core import TyperCommand, TyperGroup

from ..errors import ShaberiError
from ..redact import redact
from . import ensemble, local, pairwise, results, run, sweep  # noqa: F401  (each registers its commands on the application)
from .common import HELP, app

__all__ = ["app", "inspect_output_main", "main", "run_evals_main", "view_scores_main"]

# The click exceptions the commands raise. typer 0.28 runs on its own copy of click, whose modules are private
# (typer._click), and exports one of its exceptions, BadParameter: the others are its bases. Before 0.28 the
# same names give click's own.
_CLICK: dict[str, type[Any]] = {c.__name__: c for c in typer.BadParameter.__mro__}
BadParameter, UsageError, ClickException = typer.BadParameter, _CLICK["UsageError"], _CLICK["ClickException"]


def main(argv: list[str] | None = None) -> None:
    """Console entry point (``shaberi``)."""
    _invoke(_command(), argv, None)


def _alias(command: str, prog_name: str) -> None:
    """A legacy script name for one command, whose usage line names the script as typed (``run-evals``)."""
    found = _command().commands[command]
    assert isinstance(found, TyperCommand)
    found.context_settings = {**found.context_settings, **HELP}  # -h too, as under shaberi
    _invoke(found, sys.argv[1:], prog_name)


def _invoke(command: TyperCommand | TyperGroup, argv: list[str] | None, prog_name: str | None) -> NoReturn:
    """Run a command and exit with its code. Bad input, whether the parser finds it (an unknown option, a value
    outside a choice) or a stage does (``ShaberiError``), ends in one ``error:`` line and exit code 2 (1 for a
    ``ShaberiError`` that is no bad input: a lost lease)."""
    try:
        code = command.main(args=argv, prog_name=prog_name, standalone_mode=False)
    except ShaberiError as exc:
        typer.echo(f"error: {redact(str(exc))}", err=True)  # an option echoed back may hold a URL's password
        sys.exit(exc.exit_code)
    except UsageError as exc:
        if type(exc).__name__ == "NoArgsIsHelpError" and exc.ctx is not None:  # a group called bare: its help
            typer.echo(exc.ctx.get_help())
            sys.exit(0)
        message = exc.format_message().rstrip(".")
        if type(exc) is BadParameter and exc.param is not None and exc.param.opts:
            message = f"{exc.param.opts[0]} {exc.message.rstrip('.')}"  # --format 'xml' is not one of 'table', …
        where = f"; see '{exc.ctx.command_path} --help'" if exc.ctx is not None else ""
        typer.echo(f"error: {message}{where}", err=True)
        sys.exit(exc.exit_code)
    except ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except typer.Abort:
        typer.echo("Aborted!", err=True)
        sys.exit(1)
    except Exception as exc:
        from ..tables.failures import converted  # DuckDB and pyarrow: only once something failed

        if (said := converted(exc)) is None:
            raise  # a bug: its traceback is what a maintainer needs
        typer.echo(f"error: {said}", err=True)
        sys.exit(said.exit_code)
    if code == INTERRUPTED:  # Ctrl-C (typer returns 130 for it)
        typer.echo("interrupted: what was stored is kept; re-run the same command to resume", err=True)
    sys.exit(code if isinstance(code, int) else 0)


INTERRUPTED = 130


@cache
def _command() -> TyperGroup:
    """The application, every command of which refuses a single-valued option given twice (built once: reading
    every command's signature takes 50 ms)."""
    root = typer.main.get_command(app)
    assert isinstance(root, TyperGroup)
    stack: list[Any] = [root]
    while stack:
        command = stack.pop()
        if isinstance(command, TyperGroup):
            stack += command.commands.values()
        else:
            command.parse_args = _once(command)
    return root


def _once(command: TyperCommand) -> Callable[[typer.Context, list[str]], list[str]]:
    """``command.parse_args``, first refusing an option that takes one value given more than once: the parser
    would keep the last silently (``--tag a --tag b`` would read b alone). Flags and options that take many
    (``multiple``) are left alone."""
    parse = command.parse_args

    def parse_args(ctx: typer.Context, args: list[str]) -> list[str]:
        try:
            _, _, order = command.make_parser(ctx).parse_args(args=list(args))
        except UsageError:
            return parse(ctx, args)  # the parser's own error, said as it says it
        given = Counter(p for p in order if p.param_type_name == "option" and not (
            getattr(p, "multiple", False) or getattr(p, "is_flag", False) or getattr(p, "count", False)))
        if repeated := [p.opts[-1] for p, n in given.items() if n > 1]:
            raise UsageError(f"{' and '.join(repeated)} given more than once, but "
                             f"{'each takes' if len(repeated) > 1 else 'it takes'} one value (the last would win "
                             "silently): give it once", ctx=ctx)
        return parse(ctx, args)

    return parse_args


def run_evals_main() -> None:
    _alias("run", "run-evals")


def view_scores_main() -> None:
    _alias("view", "view-scores")


def inspect_output_main() -> None:
    _alias("inspect", "inspect-output")

