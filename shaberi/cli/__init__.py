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
from typing import NoReturn

import typer

try:  # typer 0.28 carries its own copy of click; its commands raise that copy's exceptions
    from typer._click import core as click_core
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover - typer before 0.28 runs on click itself
    from click import core as click_core  # type: ignore[no-redef]
    from click import exceptions as click_exceptions  # type: ignore[no-redef]

from ..errors import ShaberiError
from ..redact import redact
from ..tables.failures import converted
from . import ensemble, local, results, run, sweep  # noqa: F401  (each registers its commands on the application)
from .common import HELP, app

__all__ = ["app", "inspect_output_main", "main", "run_evals_main", "view_scores_main"]


def main(argv: list[str] | None = None) -> None:
    """Console entry point (``shaberi``)."""
    _invoke(_command(), argv, None)


def _alias(command: str, prog_name: str) -> None:
    """A legacy script name for one command, whose usage line names the script as typed (``run-evals``)."""
    found = _command().commands[command]  # type: ignore[attr-defined]
    found.context_settings = {**found.context_settings, **HELP}  # -h too, as under shaberi
    _invoke(found, sys.argv[1:], prog_name)


def _invoke(command: click_core.Command, argv: list[str] | None, prog_name: str | None) -> NoReturn:
    """Run a command and exit with its code. Bad input, whether the parser finds it (an unknown option, a value
    outside a choice) or a stage does (``ShaberiError``), ends in one ``error:`` line and exit code 2 (1 for a
    ``ShaberiError`` that is no bad input: a lost lease)."""
    try:
        code = command.main(args=argv, prog_name=prog_name, standalone_mode=False)
    except ShaberiError as exc:
        typer.echo(f"error: {redact(str(exc))}", err=True)  # an option echoed back may hold a URL's password
        sys.exit(exc.exit_code)
    except click_exceptions.UsageError as exc:
        if type(exc).__name__ == "NoArgsIsHelpError" and exc.ctx is not None:  # a group called bare: its help
            typer.echo(exc.ctx.get_help())
            sys.exit(0)
        message = exc.format_message().rstrip(".")
        if type(exc) is click_exceptions.BadParameter and exc.param is not None and exc.param.opts:
            message = f"{exc.param.opts[0]} {exc.message.rstrip('.')}"  # --format 'xml' is not one of 'table', …
        where = f"; see '{exc.ctx.command_path} --help'" if exc.ctx is not None else ""
        typer.echo(f"error: {message}{where}", err=True)
        sys.exit(exc.exit_code)
    except click_exceptions.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except typer.Abort:
        typer.echo("Aborted!", err=True)
        sys.exit(1)
    except Exception as exc:
        if (said := converted(exc)) is None:
            raise  # a bug: its traceback is what a maintainer needs
        typer.echo(f"error: {said}", err=True)
        sys.exit(said.exit_code)
    if code == INTERRUPTED:  # Ctrl-C (typer returns 130 for it)
        typer.echo("interrupted: what was stored is kept; re-run the same command to resume", err=True)
    sys.exit(code if isinstance(code, int) else 0)


INTERRUPTED = 130


@cache
def _command() -> click_core.Command:
    """The application, every command of which refuses a single-valued option given twice (built once: reading
    every command's signature takes 50 ms)."""
    root = typer.main.get_command(app)
    stack = [root]
    while stack:
        command = stack.pop()
        if hasattr(command, "commands"):  # a group (typer's own copy of click has no Group class to test)
            stack += command.commands.values()
        else:
            command.parse_args = _once(command)  # type: ignore[method-assign,assignment]
    return root


def _once(command: click_core.Command) -> Callable[[click_core.Context, list[str]], list[str]]:
    """``command.parse_args``, first refusing an option that takes one value given more than once: the parser
    would keep the last silently (``--tag a --tag b`` would read b alone). Flags and options that take many
    (``multiple``) are left alone."""
    parse = command.parse_args

    def parse_args(ctx: click_core.Context, args: list[str]) -> list[str]:
        try:
            _, _, order = command.make_parser(ctx).parse_args(args=list(args))
        except click_exceptions.UsageError:
            return parse(ctx, args)  # the parser's own error, said as it says it
        given = Counter(p for p in order if p.param_type_name == "option" and not (
            getattr(p, "multiple", False) or getattr(p, "is_flag", False) or getattr(p, "count", False)))
        if repeated := [p.opts[-1] for p, n in given.items() if n > 1]:
            raise click_exceptions.UsageError(f"{' and '.join(repeated)} given more than once, but "
                                              f"{'each takes' if len(repeated) > 1 else 'it takes'} one value (the "
                                              "last would win silently): give it once", ctx=ctx)
        return parse(ctx, args)

    return parse_args


def run_evals_main() -> None:
    _alias("run", "run-evals")


def view_scores_main() -> None:
    _alias("view", "view-scores")


def inspect_output_main() -> None:
    _alias("inspect", "inspect-output")

