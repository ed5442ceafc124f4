"""What every command group shares: the application, the options common to many commands, and printing.

Commands import the stages (and rich) where used, so that ``shaberi --help``, ``leaderboard``, ``view`` and
``sql`` start fast.
"""

from __future__ import annotations

import csv
import sys
from collections.abc import Iterable
from enum import StrEnum
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated

import typer

from ..errors import UsageError
from ..tables.location import Root, as_root
from .help import Typer

if TYPE_CHECKING:
    from rich.console import Console

    from ..errors import BudgetSpent

__all__ = [
    "DEFAULT_DATA",
    "DEFAULT_RESULTS",
    "FILES",
    "JUDGES",
    "LIMITS",
    "MAX_CONCURRENCY",
    "MODEL",
    "PASSES",
    "RUNS",
    "CacheDir",
    "Compact",
    "DataDir",
    "Format",
    "FormatOption",
    "ResultsDir",
    "SafeCSV",
    "app",
    "check_concurrency",
    "console",
    "data_app",
    "ensemble_app",
    "prepare_arrow",
    "print_rows",
    "stop_line",
]

# The panels of long --help pages (run's), in the order of the work; options shared with other commands keep theirs.
MODEL, JUDGES, PASSES, RUNS = "Model and generation", "Judges", "Passes", "Runs and families"
LIMITS, FILES = "Rate limits", "Data and results"

HELP = {"help_option_names": ["-h", "--help"]}
app = Typer(
    no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
    context_settings=HELP,
    help="Batch evaluation of LLMs on Japanese chat benchmarks. Results are Parquet tables; query them "
    "with `shaberi sql`. Exit codes: 0 success; 1 the work ran but failed (run: a stage in which every call failed "
    "or nothing is usable; ensemble quick-eval, check, report: a significant regression; inspect: the browser "
    "crashed); 2 bad input (one line saying what to fix, nothing written).",
)


def _version(shown: bool) -> None:
    if shown:
        from importlib.metadata import version

        typer.echo(f"shaberi {version('shaberi')}")
        raise typer.Exit()


@app.callback()
def _options(version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                                   help="Print the installed version and exit.")] = False) -> None:
    """The options of ``shaberi`` itself (its commands have their own)."""


data_app = Typer(no_args_is_help=True, context_settings=HELP, help="Benchmark data files.")
app.add_typer(data_app, name="data")
ensemble_app = Typer(no_args_is_help=True, context_settings=HELP,
                           help="Ensemble consensus on ground-truth benchmarks: cache N answers once, evaluate "
                           "strategies many times, gate on paired regressions.")
app.add_typer(ensemble_app, name="ensemble")

ResultsDir = Annotated[Root, typer.Option("--results-dir", envvar="SHABERI_RESULTS_DIR", parser=as_root,
                                          metavar="DIR|URL",
                                          help="Results root holding tables/: a folder, or s3://bucket/prefix "
                                          "(gs:// too; the cluster extra).", rich_help_panel=FILES)]
DataDir = Annotated[Path, typer.Option("--data-dir", envvar="SHABERI_DATA_DIR",
                                       help="Folder with the benchmark files: ja/<name>.jsonl|csv|parquet (the chat "
                                       "benchmarks), gt/<name>/… (the ensemble's ground-truth datasets).",
                                       rich_help_panel=FILES)]
DEFAULT_RESULTS = Path("results")
CacheDir = Annotated[Path | None, typer.Option(
    "--cache-dir", envvar="SHABERI_CACHE_DIR", help="A committable cache directory (e.g. .cache/ensemble): one "
    "Parquet file per model, dataset, N and temperature, read before and written after; readers scan every file "
    "below it (so .cache holds ensemble/ and baselines/).")]

MAX_CONCURRENCY = 10_000  # one worker task per slot: a million slots cost a gigabyte before the first call


def check_concurrency(option: str, value: int | None) -> None:
    """Requests in flight: at least 1, at most ``MAX_CONCURRENCY``."""
    if value is not None and not 1 <= value <= MAX_CONCURRENCY:
        raise UsageError(f"{option} {value} is out of range: it must be between 1 and {MAX_CONCURRENCY:,}")
DEFAULT_DATA = Path("datasets")


class Format(StrEnum):
    """How a results command prints: a terminal table, or CSV, JSON or Markdown for other tools."""

    table = "table"
    csv = "csv"
    json = "json"
    markdown = "markdown"


Compact = Annotated[bool, typer.Option("--compact", help="Normalized judgements (artifacts/shaberi/normalized/"
                                      "judgements.jsonl) keep the judge's reasoning trimmed and the path and line of "
                                      "its full transcript (the judge's own file) instead of its replies.")]
FormatOption = Annotated[Format, typer.Option("--format", help="How to print: table, csv, json or markdown.")]


class SafeCSV:
    """``csv.writer`` for files opened in a spreadsheet: a text cell starting with ``=``, ``+``, ``-``, ``@``, a tab
    or a carriage return is a formula to Excel and LibreOffice (a model name can be ``=HYPERLINK(…)``), so it is
    written with a leading ``'``, as OWASP advises; numbers, and text that reads as one (``-0.5``), stay as
    they are."""

    def __init__(self, stream: IO[str]) -> None:
        self.writer = csv.writer(stream)

    def writerow(self, row: Iterable[object]) -> None:
        self.writer.writerow([_inert(v) for v in row])

    def writerows(self, rows: Iterable[Iterable[object]]) -> None:
        for row in rows:
            self.writerow(row)


def _inert(value: object) -> object:
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        try:
            float(value)
        except ValueError:
            return "'" + value
    return value


def print_rows(title: str | None, header: list[str], rows: list[list[str]], fmt: Format | str, fold: int = 0
               ) -> None:
    """Rows as a terminal table (``json`` too: the commands with structured output write their own), CSV or
    Markdown. ``fold``: the first columns hold names that fold onto more lines when the table is too wide (kept
    16 wide at least), before the other columns wrap; no cell is cut to "…"."""
    if fmt == "csv":
        writer = SafeCSV(sys.stdout)
        writer.writerow(header)
        writer.writerows(rows)
    elif fmt == "markdown":
        sys.stdout.write(f"### {title}\n\n" if title else "")
        sys.stdout.write(f"| {' | '.join(header)} |\n|{'---|' * len(header)}\n")
        sys.stdout.writelines(f"| {' | '.join(_cell(v) for v in row)} |\n" for row in rows)
        sys.stdout.write("\n")
    else:
        from rich.table import Table

        out = console()
        table = Table(title=title, title_justify="left")
        for name, width in zip(header, _widths(header, rows, fold, out.width), strict=True):
            table.add_column(name, overflow="fold", width=width)
        for row in rows:
            table.add_row(*row)
        out.print(table)


def _widths(header: list[str], rows: list[list[str]], fold: int, room: int) -> list[int | None]:
    """Column widths for a table ``room`` characters wide: None (as wide as their text) when it fits. Else the
    headers wrap at their spaces, then the cells do; the first ``fold`` columns (names) take what is left, folding
    onto more lines (16 wide at least, else 8, else 4); only then do words fold, a header's before a cell's (a
    number split over two lines reads as two). Rich's own shrinking takes from every column alike, and crops the
    last ones when the names cannot give enough: a 10-column leaderboard lost its Complete column in 120."""
    from rich.cells import cell_len

    def longest(texts: list[str], words: bool) -> int:
        return max((cell_len(w) for t in texts for w in (t.split() if words else t.splitlines())), default=0)

    columns = [[name, *(r[i] for r in rows)] for i, name in enumerate(header)]
    natural = [longest(c, False) for c in columns]
    room -= 3 * len(header) + 1  # borders and padding
    if sum(natural) <= room:
        return [None] * len(header)
    for least in (16, 8):  # names 16 wide at least; when the cells' words cannot fit so, 8
        names = [min(least, n) for n in natural[:fold]]
        for words in ([False, True], [True, True]):  # headers wrap, then the cells too
            rest = [max(longest(c[:1], words[0]), longest(c[1:], words[1])) for c in columns[fold:]]
            left = room - sum(rest)
            if left >= sum(names):  # the names share what is left, each up to its natural width
                share = [*names]
                for k, i in enumerate(sorted(range(fold), key=lambda i: natural[i])):  # the shortest first
                    share[i] = min(natural[i], max(names[i], left // (fold - k)))
                    left -= share[i]
                for i in sorted(range(len(rest)), key=lambda i: natural[fold + i] - rest[i]):  # room to spare:
                    if (grow := natural[fold + i] - rest[i]) <= left:  # whole headers again, the shortest first
                        rest[i], left = rest[i] + grow, left - grow
                return [*share, *rest]
    # too narrow even so: the widest of the others fold, a header's words before a cell's (a number), and the names
    # give up to 4 wide for the cells' words
    cells = [longest(c[1:], True) for c in columns[fold:]]
    if room - sum(names) < sum(cells):
        names = [min(4, n) for n in natural[:fold]]
    left = room - sum(names)
    if left < len(rest):
        return [None] * len(header)  # not a character a column: rich's own shrinking
    for floor in ([max(w, min(5, r)) for w, r in zip(cells, rest, strict=True)], cells, [1] * len(rest)):  # 5 wide
        while sum(rest) > left and (above := [i for i, w in enumerate(rest) if w > floor[i]]):  # at least first
            rest[max(above, key=lambda i: rest[i])] -= 1  # the widest first
    for i in range(fold):  # what the others left goes back to the names
        grow = min(left - sum(rest), natural[i] - names[i])
        names[i] += max(grow, 0)
        left -= max(grow, 0)
    return [*names, *rest]


def _cell(text: str) -> str:
    """A Markdown table cell: a pipe would end it and a line break would end the row."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r\n", "<br>").replace("\n", "<br>")


def prepare_arrow() -> None:
    """pyarrow set up for a command that writes tables.

    Its memory comes from the C library's allocator, which gives freed memory back, rather than mimalloc's
    pool, which keeps it: measured, the peak of a 2,000-call run 210 -> 191 MB, of quick-eval over 60,160
    answers 650 -> 520 MB (by this alone), at the same speed.

    And pyarrow imports pandas (0.3 s, 60 MB) the first time it converts Python values, only to ask whether
    they are pandas objects; the commands that write tables never hand it one. That one question is let fail
    (pyarrow asks once per process); pandas itself stays importable, for statsmodels."""
    import pyarrow as pa

    pa.set_memory_pool(pa.system_memory_pool())
    if "pandas" in sys.modules:
        return

    class NoPandas:
        @staticmethod
        def find_spec(name: str, *_: object) -> None:
            if name == "pandas":
                raise ModuleNotFoundError("No module named 'pandas'", name=name)

    sys.meta_path.insert(0, NoPandas)
    try:
        pa.array([0])
    finally:
        sys.meta_path.remove(NoPandas)


def console() -> Console:
    """Stdout; when it is not a terminal (a log, a pipe), wide enough that no cell is cut. Markup is off:
    cells hold stored text (answers, judge replies, model names) that must print as stored, "[/x]" included."""
    from rich.console import Console

    return Console(markup=False) if sys.stdout.isatty() else Console(width=240, markup=False)


def stop_line(stop: BudgetSpent, whose: str, cost: float, counted: float, spender: str = "the run has") -> str:
    """Why the spending limit stopped ``whose`` work (``run ID``; the cache entries one limit covers), in figures
    that add up: what the limit counts as spent once the calls in flight landed (the cost, unless a call timed out
    and is counted as billed, or a cache served prompt tokens at less), plus the refused call's worst case, against
    the limit."""
    if stop.worst is None:  # refused for want of a bound (no price, no completion limit), not of room
        return f"stopped before the spending limit ({stop}): {whose} has cost ${cost:.4f}"
    worst, total = stop.worst, counted + stop.worst
    # as many decimals as it takes for the figures to show it: a limit of cents on calls of hundredths of a cent
    digits = next((d for d in range(4, 10) if round(total, d) > stop.limit and round(worst, d) > 0
                   and abs(round(counted, d) + round(worst, d) - round(total, d)) < 10 ** -(d + 2)), 10)
    basis = (f"${counted:.{digits}f} (its cost ${cost:.{digits}f}, with each call that timed out counted at its worst "
             "case and cached prompt tokens at the full rate)" if round(counted, digits) != round(cost, digits)
             else f"${cost:.{digits}f}")
    limit = f"{stop.limit:.{digits}f}".rstrip("0").rstrip(".")  # 0.00005, not 5e-05
    return (f"--max-cost ${limit} stopped {whose} before a call to {stop.model} that could cost up to "
            f"${worst:.{digits}f}: {spender} spent {basis}, and "
            f"${counted:.{digits}f} + ${worst:.{digits}f} = ${total:.{digits}f} is over the spending limit")
