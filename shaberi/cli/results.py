"""The commands that read stored results: sql, view, compare, export, import-legacy, leaderboard, inspect
and report."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import orjson
import typer

from ..errors import UsageError
from .common import DEFAULT_RESULTS, Compact, Format, FormatOption, ResultsDir, SafeCSV, app, prepare_arrow, print_rows

if TYPE_CHECKING:
    from ..reports.view import Report

__all__ = ["compare", "export", "import_legacy", "inspect_command", "leaderboard_command", "report_command", "sql",
           "view"]


@app.command()
def sql(
    query: Annotated[str, typer.Argument(help="DuckDB SQL over the tables (runs, questions, answers, judgements, "
                                         "pass_deltas, token_usage) and the views built on them (scores, "
                                         "benchmark_scores, multi_run_stats, cost, …: README, sql/).")],
    format: FormatOption = Format.table,
    pricing: Annotated[Path | None, typer.Option("--pricing", help="Prices per million tokens (TOML) for the "
                                                 "cost view, added over data/pricing.toml.")] = None,
    results_dir: ResultsDir = DEFAULT_RESULTS,
) -> None:
    """Run SQL over the results views (runs, questions, answers, judgements, scores, benchmark_scores, …)."""
    import duckdb

    from ..tables.reader import queries_only
    from ..tables.selection import require_root
    from ..tables.sql import connect

    require_root(results_dir)  # a mistyped folder is not an empty one
    con = connect(results_dir, pricing, read_only=True)
    queries_only(con, query)
    try:
        cursor = con.execute(query)
    except duckdb.Error as exc:
        raise UsageError(f"SQL: {str(exc).splitlines()[0]}") from None
    names = [d[0] for d in cursor.description or []]
    rows = cursor.fetchall()
    if format == "csv":
        writer = SafeCSV(sys.stdout)
        writer.writerow(names)
        writer.writerows(rows)
    elif format == "json":
        sys.stdout.write(orjson.dumps([dict(zip(names, r, strict=True)) for r in rows],
                                      option=orjson.OPT_INDENT_2, default=str).decode() + "\n")
    else:
        print_rows(None, names, [["" if v is None else str(v) for v in r] for r in rows], format)


@app.command()
def view(
    tag: Annotated[str, typer.Option("--tag", help="What to show: a tag (a run, or the base tag of runs {tag}-run1 "
                                     "… N), MODEL@TAG, or a comma list of them.")] = "default",
    runs: Annotated[int | None, typer.Option("--runs", help="Aggregate the runs {tag}-run1 … {tag}-runN.")] = None,
    model: Annotated[str | None, typer.Option("--model", help="Only this model.")] = None,
    judge: Annotated[str | None, typer.Option("--judge", help="Only this judge ('*': all judges pooled; the "
                                              "default when there are several).")] = None,
    format: FormatOption = Format.table,
    pricing: Annotated[Path | None, typer.Option("--pricing", help="Prices per million tokens (TOML), added "
                                                 "over data/pricing.toml.")] = None,
    clustered_se: Annotated[bool, typer.Option("--clustered-se", help="Add the standard error of each number shown, "
                                               "clustered by question (across runs and judges), and the 95% "
                                               "interval over questions from it (statsmodels).")] = False,
    tokens: Annotated[bool, typer.Option("--tokens", help="With --format csv: the tokens and cost table instead of "
                                         "the scores (CSV holds one table).")] = False,
    results_dir: ResultsDir = DEFAULT_RESULTS,
) -> None:
    """Scores per benchmark and overall (mean, sd, 95% CI and range over {tag}-runN runs), tokens and cost."""
    from ..reports.view import build
    from ..tables.selection import parse_selectors

    if tokens and format != "csv":
        raise UsageError("--tokens selects the table --format csv writes; the other formats show both tables")
    reports = [build(results_dir, s.tag, runs, s.model, judge, pricing, clustered_se)
               for s in parse_selectors(results_dir, tag, model)]
    _render_reports(reports, format, tokens, clustered_se)



def _render_reports(reports: list[Report], fmt: str, tokens_only: bool = False, clustered: bool = False) -> None:
    """Each selector's report in turn: one JSON object (a list for several), one CSV table with a tag column."""
    if fmt == "json":
        bodies = [_json_body(r) for r in reports]
        sys.stdout.write(orjson.dumps(bodies[0] if len(bodies) == 1 else bodies,
                                      option=orjson.OPT_INDENT_2).decode() + "\n")
        return
    if fmt == "csv":  # one table, one header: every section's rows (a run's and a family's columns), or the tokens
        writer = SafeCSV(sys.stdout)
        if tokens_only:
            writer.writerow(["tag", *reports[0].token_columns])
            writer.writerows([r.tag, *row] for r in reports for row in r.tokens)
            return
        columns = list(dict.fromkeys(c for r in reports for s in r.sections for c in s.columns))
        writer.writerow(["tag", "model", "judge", "status", *columns, "section_notes"])
        for r in reports:
            for s in r.sections:  # what the section's numbers leave out, on each of its rows
                for row in s.rows:
                    named = dict(zip(s.columns, row, strict=True))
                    writer.writerow([r.tag, s.model, s.judge, s.status, *(named.get(c) for c in columns),
                                     " | ".join(s.notes)])
        return
    for report in reports:
        _render_report(report, fmt, clustered)


def _json_body(report: Report) -> dict[str, Any]:
    return {"tag": report.tag, "multi_run": report.multi,
            "scores": [{"model": s.model, "judge": s.judge, "runs": s.runs, "status": s.status, "notes": s.notes,
                        "prompt_hashes": s.prompt_hashes,
                        "rows": [dict(zip(s.columns, r, strict=True)) for r in s.rows]} for s in report.sections],
            "tokens": [dict(zip(report.token_columns, r, strict=True)) for r in report.tokens],
            "notes": report.notes}


def _render_report(report: Report, fmt: str, clustered: bool = False) -> None:
    """One report as terminal tables (or markdown)."""
    tables = []
    for s in report.sections:
        judge = "all judges pooled" if s.judge == "*" else s.judge
        counted = f", {len(s.runs) - len(s.excluded)} counted" if s.excluded else ""
        runs = f"{len(s.runs)} run{'s' if len(s.runs) > 1 else ''}"
        multi = "mean" in s.columns  # a family's section (a tag may hold one model's run, another's family)
        title = (f"{s.model} · {report.tag}{f' ({runs}{counted})' if multi else ''} · "
                 f"judge: {judge} · status: {s.status}")
        by = ["SE (by question)", "95% CI (questions)"] if clustered else []  # columns of dashes otherwise
        cells = [dict(zip(s.columns, r, strict=True)) for r in s.rows]

        def questions(c: dict[str, Any]) -> list[str]:
            return [_num(c["se_clustered"]), _range(c["ci_questions_low"], c["ci_questions_high"])] if clustered else []

        if multi:
            header = ["Benchmark", "Mean", "Std Dev", "95% CI (runs)", "Range", "Runs", *by, "Mean without passes",
                      "Note"]
            rows = [[c["benchmark"], _num(c["mean"]), _num(c["std_dev"]), _ci(c["ci_low"], c["ci_high"], c["mean"]),
                     _range(c["min"], c["max"]), str(c["runs"] or "-"), *questions(c), _num(c["baseline_mean"]),
                     c["note"]] for c in cells]
        else:
            header = ["Benchmark", "Score", *by, "Without passes", "n", "Null", "Errors", "Not judged", "Note"]
            rows = [[c["benchmark"], _num(c["score"]), *questions(c), _num(c["baseline"]),
                     *("" if c[k] is None else str(c[k]) for k in ("n", "null", "errors", "not_judged")), c["note"]]
                    for c in cells]
        tables.append((title + "".join(f"\n{n}" for n in s.notes), header, rows))
    several = len(report.models) > 1
    for model in dict.fromkeys(r[0] for r in report.tokens):  # each model's own (and, for several, the tag's)
        tokens = [[r[1], f"{r[2]:,}", f"{r[3]:,}", f"{r[4]:,}", f"{r[5]:,}", f"${r[6]:.4f}" + ("" if r[7] else " *")]
                  for r in report.tokens if r[0] == model]
        tables.append((f"Tokens and estimated cost{f': {model}' if several else ''} (* includes unpriced models, "
                       "counted as $0; Reused: rows its last run of the stage found stored)",
                       ["Stage", "Requests", "Reused", "Prompt tokens", "Completion tokens", "Cost (USD)"], tokens))
    for title, header, rows in tables:
        print_rows(title, header, rows, fmt)
    for note in report.notes:
        typer.echo(f"note: {note}")


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _ci(low: float | None, high: float | None, mean: float | None) -> str:
    return "-" if mean is None else _range(low, high)


def _range(low: float | None, high: float | None) -> str:
    """``1.20–3.40``; ``-1.53 to 2.00`` when it starts below 0 (``-1.53–-0.70`` reads badly)."""
    if low is None or high is None:
        return "-"
    return f"{low:.2f} to {high:.2f}" if low < 0 else f"{low:.2f}–{high:.2f}"



@app.command()
def compare(
    side_a: Annotated[str, typer.Argument(metavar="A", help="The baseline: a tag (a run, or the base tag of "
                                          "{tag}-runN runs), or MODEL@TAG for one model of a tag that holds several.")],
    side_b: Annotated[str, typer.Argument(metavar="B", help="What is compared with it: a tag or MODEL@TAG, of the "
                                          "same model or another.")],
    model: Annotated[str | None, typer.Option("--model", help="The model of both sides (two tags of one model).")
                     ] = None,
    model_a: Annotated[str | None, typer.Option("--model-a", help="The model of side A (instead of MODEL@TAG).")
                       ] = None,
    model_b: Annotated[str | None, typer.Option("--model-b", help="The model of side B (instead of MODEL@TAG).")
                       ] = None,
    judge: Annotated[str | None, typer.Option("--judge", help="Only this judge [default: the judges both sides "
                                              "have, averaged per question over those that scored it on both].")
                     ] = None,
    judge_a: Annotated[str | None, typer.Option("--judge-a", help="Side A's judge, with --judge-b for side B's: one "
                                                "judge under two prompt sets (the same tag on both sides: the same "
                                                "answers), or two judges.")] = None,
    judge_b: Annotated[str | None, typer.Option("--judge-b", help="Side B's judge (see --judge-a).")] = None,
    format: FormatOption = Format.table,
    results_dir: ResultsDir = DEFAULT_RESULTS,
) -> None:
    """Paired per-question comparison of two sides (two tags of one model, or two models: a fine-tune against its
    base), like for like (the judges, judging prompts and passes both have; what only one side has is named and
    left out): per benchmark and Overall the difference, the sign-flip test and its interval, the verdict (one family:
    each row at 0.05/rows), the MDE at that level, and the questions dropped per side."""
    from ..reports.compare import compare as run_compare

    report = run_compare(results_dir, side_a, side_b, model, judge, model_a=model_a, model_b=model_b,
                         judge_a=judge_a, judge_b=judge_b)
    if format == "json":
        sys.stdout.write(orjson.dumps(report.to_dict(), option=orjson.OPT_INDENT_2).decode() + "\n")
        return
    if format == "csv":  # the numbers as computed, and on each row what they rest on (as view's csv)
        from dataclasses import asdict

        said = " | ".join([*report.basis.lines(), *report.notes()])
        writer = SafeCSV(sys.stdout)
        names = list(asdict(report.benchmarks[0]))
        writer.writerow(["a", "b", *names, "notes"])
        for c in report.benchmarks:
            row = asdict(c) | {"dropped_a": _dropped(c.dropped_a), "dropped_b": _dropped(c.dropped_b),
                               "over": ",".join(c.over)}
            writer.writerow([report.label_a, report.label_b, *("" if row[n] is None else row[n] for n in names),
                             said])
        return
    header, rows = report.table()
    typer.echo("Compared like for like on\n" + "".join(f"  {line}\n" for line in report.basis.lines()))
    print_rows(f"A = {report.label_a}, B = {report.label_b} (0–10 scale; positive: B scores higher)", header, rows,
               format)
    for note in report.notes():
        typer.echo(f"note: {note}")


def _dropped(reasons: dict[str, int]) -> str:
    return "; ".join(f"{n} {why}" for why, n in sorted(reasons.items())) or "0"


@app.command()
def export(
    tag: Annotated[str | None, typer.Option("--tag", help="Only these runs: a tag (a run, or the base tag of runs "
                                            "{tag}-run1 … N), MODEL@TAG, or a comma list of them.")] = None,
    model: Annotated[str | None, typer.Option("--model", help="Only this model.")] = None,
    compact: Compact = False,
    results_dir: ResultsDir = DEFAULT_RESULTS,
) -> None:
    """Write (again) the JSONL artifacts, metrics and manifests of stored runs."""
    from ..reports.export import EXPORT_ERRORS, export_failure, export_run, export_summary, write_manifest
    from ..tables.selection import runs_named
    from ..tables.store import Store

    runs = runs_named(results_dir, tag, model)
    store = Store(results_dir)
    failed = 0
    for r in runs:
        with store.lock(r.run_id, f"run {r.model!r} tag {r.tag!r}"):  # not while a run writes it
            try:
                write_manifest(results_dir, r.run_id, holding_lock=True)
                folder = export_run(results_dir, r.run_id, compact=compact)
            except EXPORT_ERRORS as exc:
                failed += 1
                typer.echo(f"error: {r.tag} ({r.model}): the export could not be written: {export_failure(exc)}",
                           err=True)
                continue
        typer.echo(f"{r.tag} ({r.model}): {folder.parent.parent}")
    for run_model, base_tag in sorted({(r.model, r.base_tag) for r in runs if r.tag != r.base_tag}):
        if path := export_summary(results_dir, base_tag, run_model):
            typer.echo(f"{base_tag} ({run_model}), the family's summary: {path}")
    if failed:
        raise typer.Exit(1)


@app.command("import-legacy")
def import_legacy(
    path: Annotated[Path, typer.Argument(help="An original Shaberi result tree (holding data/model_answers and "
                                         "data/judgements).")],
    export: Annotated[bool, typer.Option("--export", help="Also write the JSONL + manifest layout of every "
                                         "imported model.")] = False,
    judge_prompts: Annotated[list[str] | None, typer.Option(
        "--judge-prompts", metavar="[JUDGE=]PATH",
        help="The prompt set the judgements were made with (a clone of the original Shaberi at that commit): "
             "JUDGE=PATH for one judge folder's (judge_JUDGE), PATH for every judge's; repeatable. Its judgements are "
             "then labelled with it, in the columns of new runs judged with the same prompt set.")] = None,
    results_dir: ResultsDir = DEFAULT_RESULTS,
) -> None:
    """Import original Shaberi results as runs tagged 'legacy' (one per model); re-importing adds nothing."""
    prepare_arrow()
    from ..judging.promptsets import load
    from ..legacy import TAG, import_tree, report_lines

    prompts = {}
    for spec in judge_prompts or []:
        judge, _, where = spec.partition("=") if "=" in spec and not Path(spec).exists() else ("", "", spec)
        if spec.startswith("=") or not where:
            raise UsageError(f"--judge-prompts {spec!r}: give JUDGE=PATH (a judge folder's name, judge_JUDGE) or PATH")
        if (judge or None) in prompts:
            raise UsageError(f"--judge-prompts names {'judge ' + repr(judge) if judge else 'every judge'} twice: "
                             "give one prompt set each")
        prompts[judge or None] = load(where)
    report = import_tree(path, results_dir, prompts)
    for line in report_lines(report):
        typer.echo(line)
    if export:
        from ..reports.export import export_run, write_manifest
        from ..tables.selection import find_runs

        for r in find_runs(results_dir, TAG, match="tag"):
            write_manifest(results_dir, r.run_id)
            export_run(results_dir, r.run_id)
        typer.echo(f"exported {report.models} models under {results_dir}/<model>/{TAG}/")


@app.command("leaderboard")
def leaderboard_command(
    tag: Annotated[list[str] | None, typer.Option("--tag", help="Runs to rank: a tag, or the base tag of runs "
                                                  "{tag}-run1 … N (ranked by the mean over their complete runs, "
                                                  "with the 95% interval), MODEL@TAG, or a comma list of them; "
                                                  "repeat it to rank several tags together (a Tag "
                                                  "column says whose each row is) [default: legacy].",
                                                  show_default=False)] = None,
    format: Annotated[str | None, typer.Option("--format", help="table, markdown, csv, json or xlsx [default: table; "
                                               "with --out, the file's suffix].", show_default=False)] = None,
    judges: Annotated[str | None, typer.Option("--judges", help="Judge columns: pooled (every judge's rows "
                                               "together), all (pooled, then each judge's), or judge names or "
                                               "titles, comma-separated (GPT4,Tulu405) [default: pooled for table "
                                               "and markdown, all for csv, json and xlsx].",
                                               show_default=False)] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Write this file instead of printing: .xlsx (a workbook, "
                                             "each score column colour-scaled), .csv, .json or .md.")] = None,
    as_published: Annotated[bool, typer.Option("--as-published", help="Count every row of the legacy files, "
                                               "repeated questions and scores off their scale too, as the original "
                                               "tooling did [default: each question once, off-scale scores set "
                                               "aside].")] = False,
    results_dir: ResultsDir = DEFAULT_RESULTS,
) -> None:
    """The original Shaberi leaderboard: all judges pooled, then per judge (ELYZA × 2, Tengu 61–65 left out).
    Rows with all four benchmarks come first (Complete 4/4); partial rows follow. A run family ({tag}-run1 … N)
    shows the mean over its complete runs ± the 95% interval (csv, json, xlsx: columns 'X CI low', 'X CI high')
    and how many runs count (Runs). The terminal formats show the pooled columns, the exports every judge's
    (--judges). Average (ex-GPT4) and GPT4 delta are columns of the wide table when a GPT-4 judge
    (gpt-4-turbo-preview) judged."""
    import io
    from contextlib import redirect_stdout

    from ..reports.leaderboard import board, output_format, write_xlsx
    from ..reports.output import write_atomic

    fmt = output_format(format, out)  # before anything is read
    tags = list(dict.fromkeys(tag or ["legacy"]))
    shown = board(results_dir, tags, as_published).select(
        judges or ("pooled" if fmt in ("table", "markdown") else "all"))
    if fmt == "xlsx":
        assert out is not None  # output_format refuses a workbook without a file
        typer.echo(f"leaderboard: {write_xlsx(out, shown)}")
        return
    title = (f"Leaderboard: tag{'s' if len(tags) > 1 else ''} {', '.join(tags)}"
             + (" (mean ± 95% interval over its complete runs)" if shown.family else ""))
    if fmt == "table":  # rich measures the terminal: printed, not buffered; a table per judge fits its width
        for part, table in shown.split():
            print_rows(f"{title}: {part}" if part else title, *table.text(), fmt,
                       fold=sum(c.kind == "text" and c.block == "" for c in table.columns[:3]))
        for note in shown.notes:
            typer.echo(f"note: {note}")
        return
    text = io.StringIO()
    with redirect_stdout(text):
        if fmt == "csv":
            writer = SafeCSV(sys.stdout)
            writer.writerow(shown.header)
            writer.writerows(["" if v is None else v for v in row] for row in shown.rows)
        elif fmt == "json":
            sys.stdout.write(orjson.dumps([dict(zip(shown.header, row, strict=True)) for row in shown.rows],
                                          option=orjson.OPT_INDENT_2).decode() + "\n")
        else:
            print_rows(title, *shown.text(), fmt)
            sys.stdout.writelines(f"note: {note}\n\n" for note in shown.notes)
    if out is None:
        sys.stdout.write(text.getvalue())
    else:
        typer.echo(f"leaderboard: {write_atomic(out, lambda tmp: tmp.write_text(text.getvalue(), 'utf-8'))}")



@app.command("inspect")
def inspect_command(
    tag: Annotated[str | None, typer.Option("--tag", help="These runs: a tag (a run, or the base tag of runs "
                                            "{tag}-run1 … N), MODEL@TAG, or a comma list of them [default: all].",
                                            show_default=False)] = None,
    model: Annotated[str | None, typer.Option("--model", help="Only this model.")] = None,
    results_dir: ResultsDir = DEFAULT_RESULTS,
) -> None:
    """Browse questions, answers, judge replies and pass deltas in the terminal (alias: inspect-output).

    Exit codes: 0 closed normally; 1 the browser failed (its traceback is shown); 2 bad input."""
    from ..reports.tui import InspectApp

    browser = InspectApp(results_dir, tag, model)
    browser.run()
    if browser.return_code:  # textual shows the traceback and returns; the exit code must say so too
        raise typer.Exit(browser.return_code)


@app.command("report")
def report_command(
    tag: Annotated[str, typer.Option("--tag", help="The run or run family to report (a tag holding several models: "
                                     "a block per model, the best first); with --compare, side A: a tag or "
                                     "MODEL@TAG.")],
    out: Annotated[Path, typer.Option("--out", help="The HTML file to write.")] = Path("report.html"),
    compare: Annotated[str | None, typer.Option("--compare", help=(
        "Side B, compared with --tag as the baseline (as in compare A B): a tag or MODEL@TAG, of the same model or "
        "another; per-question movers from --tag to it."))] = None,
    model: Annotated[str | None, typer.Option("--model", help="Only this model (with --compare: of both sides).")
                     ] = None,
    model_a: Annotated[str | None, typer.Option("--model-a", help="With --compare: the model of --tag.")] = None,
    model_b: Annotated[str | None, typer.Option("--model-b", help="With --compare: the model of --compare.")] = None,
    results_dir: ResultsDir = DEFAULT_RESULTS,
) -> None:
    """One self-contained HTML file that explains the scores: intervals, per judge and category, judge agreement,
    distributions, movers (with --compare), pass effects, tokens and cost."""
    from ..reports.html import write_report

    if (model_a or model_b) and not compare:
        raise UsageError("--model-a and --model-b name the models of the two sides of --compare; without it, use "
                         "--model")
    path = write_report(results_dir, tag, out, compare, model, model_a, model_b)
    typer.echo(f"report: {path}")
