"""What every command group shares: the application, the options common to many commands, and printing.

Commands import the stages (and rich) where used, so that ``shaberi --help``, ``leaderboard``, ``view`` and
``sql`` start fast.
"""

from __future__ import annotations

import csv
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ..errors import UsageError

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "DEFAULT_DATA",
    "DEFAULT_RESULTS",
    "MAX_CONCURRENCY",
    "DataDir",
    "Format",
    "FormatOption",
    "ResultsDir",
    "app",
    "arrow_without_pandas",
    "check_concurrency",
    "console",
    "data_app",
    "ensemble_app",
    "print_rows",
]

HELP = {"help_option_names": ["-h", "--help"]}
app = typer.Typer(
    no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None,
    context_settings=HELP,
    help="Batch evaluation of LLMs on Japanese chat benchmarks. Results are Parquet tables; query them "
    "with `shaberi sql`. Exit codes: 0 success; 1 the work ran but failed (run: a stage in which every call failed "
    "or nothing is usable; ensemble check: a significant regression; inspect: the browser crashed); 2 bad input "
    "(one line saying what to fix, nothing written).",
)
data_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, context_settings=HELP, help="Benchmark data files.")
app.add_typer(data_app, name="data")
ensemble_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, context_settings=HELP,
                           help="Ensemble consensus on ground-truth benchmarks: cache N answers once, evaluate "
                           "strategies many times, gate on paired regressions.")
app.add_typer(ensemble_app, name="ensemble")

ResultsDir = Annotated[Path, typer.Option("--results-dir", envvar="SHABERI_RESULTS_DIR",
                                          help="Results root holding tables/.")]
DataDir = Annotated[Path, typer.Option("--data-dir", envvar="SHABERI_DATA_DIR",
                                       help="Folder with the benchmark files (ja/<name>.jsonl|csv|parquet).")]
DEFAULT_RESULTS = Path("results")
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


FormatOption = Annotated[Format, typer.Option("--format", help="How to print: table, csv, json or markdown.")]


def print_rows(title: str | None, header: list[str], rows: list[list[str]], fmt: Format | str) -> None:
    """Rows as a terminal table (``json`` too: the commands with structured output write their own), CSV or
    Markdown."""
    if fmt == "csv":
        writer = csv.writer(sys.stdout)
        writer.writerow(header)
        writer.writerows(rows)
    elif fmt == "markdown":
        sys.stdout.write(f"### {title}\n\n" if title else "")
        sys.stdout.write(f"| {' | '.join(header)} |\n|{'---|' * len(header)}\n")
        sys.stdout.writelines(f"| {' | '.join(_cell(v) for v in row)} |\n" for row in rows)
        sys.stdout.write("\n")
    else:
        from rich.table import Table

        table = Table(*header, title=title, title_justify="left")
        for row in rows:
            table.add_row(*row)
        console().print(table)



def _cell(text: str) -> str:
    """A Markdown table cell: a pipe would end it and a line break would end the row."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r\n", "<br>").replace("\n", "<br>")


def arrow_without_pandas() -> None:
    """pyarrow imports pandas (0.3 s, 60 MB) the first time it converts Python values, only to ask whether
    they are pandas objects; the commands that write tables never hand it one. Let that one question fail
    (pyarrow asks once per process); pandas itself stays importable, for statsmodels."""
    if "pandas" in sys.modules:
        return
    import pyarrow as pa

    class NoPandas:
        @staticmethod
        def find_spec(name: str, *_: object) -> None:
            if name == "pandas":
                raise ModuleNotFoundError("No module named 'pandas'", name=name)

    sys.meta_path.insert(0, NoPandas)  # type: ignore[arg-type]
    try:
        pa.array([0])
    finally:
        sys.meta_path.remove(NoPandas)  # type: ignore[arg-type]


def console() -> Console:
    """Stdout; when it is not a terminal (a log, a pipe), wide enough that no cell is cut. Markup is off:
    cells hold stored text (answers, judge replies, model names) that must print as stored, "[/x]" included."""
    from rich.console import Console

    return Console(markup=False) if sys.stdout.isatty() else Console(width=240, markup=False)

