"""The command line: parse, call a stage, print. Bad input ends in one ``error:`` line and exit code 2."""

from __future__ import annotations

import csv
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import orjson
import typer

from .errors import ShaberiError, UsageError

if TYPE_CHECKING:  # the stages (and rich) are imported where used: `leaderboard`, `view`, `sql` start fast
    from rich.console import Console

    from .ensemble.evaluate import Result
    from .ensemble.gate import Comparison
    from .pipeline import Outcome, RunRequest
    from .registry import Registry
    from .view import Report

__all__ = ["app", "main"]

app = typer.Typer(
    no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None,
    help="Batch evaluation of LLMs on Japanese chat benchmarks. Results are Parquet tables; query them "
    "with `shaberi sql`. Exit codes: 0 success; 1 the work ran but failed (run: a stage in which every call failed "
    "or nothing is usable; ensemble check: a significant regression; inspect: the browser crashed); 2 bad input "
    "(one line saying what to fix, nothing written).",
)
data_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="Benchmark data files.")
app.add_typer(data_app, name="data")
ensemble_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                           help="Ensemble consensus on ground-truth benchmarks: cache N answers once, evaluate "
                           "strategies many times, gate on paired regressions.")
app.add_typer(ensemble_app, name="ensemble")

ResultsDir = Annotated[Path, typer.Option("--results-dir", envvar="SHABERI_RESULTS_DIR",
                                          help="Results root holding tables/.")]
DataDir = Annotated[Path, typer.Option("--data-dir", envvar="SHABERI_DATA_DIR",
                                       help="Folder with the benchmark files (ja/<name>.jsonl|csv|parquet).")]
DEFAULT_RESULTS = Path("results")
DEFAULT_DATA = Path("datasets")
Format = Annotated[str, typer.Option("--format", help="table, csv or json.")]


@app.command()
def run(
    model: Annotated[str, typer.Option("--model", help="Model name sent to the endpoint.")],
    base_url: Annotated[str | None, typer.Option("--base-url", help="OpenAI-compatible base URL, e.g. "
                                                 "http://127.0.0.1:8000/v1 (not needed with --reprocess).")] = None,
    api_key_env: Annotated[str | None, typer.Option(
        "--api-key-env", help="Variable holding the API key [default: OPENAI_API_KEY, optional on loopback].")] = None,
    benchmark: Annotated[str | None, typer.Option("--benchmark", help="all, or a comma list of elyza,tengu,mt_bench,"
                                                  "rakuda (shaberi list: every one installed); scopes every stage "
                                                  "[default: all when generating, else every benchmark the run "
                                                  "has].")] = None,
    tag: Annotated[str, typer.Option("--tag", help="Names the run together with --model.")] = "default",
    limit: Annotated[int | None, typer.Option("--limit", help="First N questions of each benchmark.")] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", help="Most requests in flight: the upper bound "
                                             "of the adaptive limit.")] = 60,
    stages: Annotated[str | None, typer.Option("--stages", help="Comma list of generate,judge,passes [default: "
                                               "generate, judge when --judge is given, passes when --passes is "
                                               "given]. Without generate the candidate is never called and "
                                               "--base-url is not needed.")] = None,
    passes: Annotated[str | None, typer.Option("--passes", help="Comma list of score-modifying passes: "
                                               "lang_mixing,repetition,format_validation,safety_check (shaberi "
                                               "list: every one installed).")] = None,
    pass_option: Annotated[list[str] | None, typer.Option("--pass-option", help="NAME.KEY=VALUE, repeatable, e.g. "
                                                          "lang_mixing.penalty=1 or lang_mixing.detector=MODEL@URL."
                                                          )] = None,
    judge: Annotated[list[str] | None, typer.Option("--judge", "--judge-model", help="Judge model, repeatable: "
                                                    "MODEL (on --judge-base-url) or MODEL@BASE_URL.")] = None,
    judge_base_url: Annotated[str | None, typer.Option(help="Endpoint of judges given without @URL [default: "
                                                       "--base-url].")] = None,
    judge_api_key_env: Annotated[str | None, typer.Option(help="Variable holding the judges' key [default: "
                                                          "the candidate's; optional on loopback].")] = None,
    judge_concurrency: Annotated[int | None, typer.Option(help="Most judge requests in flight per judge endpoint, "
                                                          "shared by every shaberi process on this machine "
                                                          "[default: --concurrency].")] = None,
    judge_temperature: Annotated[float, typer.Option(help="Judge sampling temperature.")] = 0.0,
    judge_max_tokens: Annotated[int, typer.Option(help="Judge completion token limit.")] = 1024,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the calls, tokens and cost this would take; "
                                          "call nothing.")] = False,
    pricing: Annotated[Path | None, typer.Option("--pricing", help="Prices per million tokens (TOML) for "
                                                 "--dry-run, instead of data/pricing.toml.")] = None,
    runs: Annotated[int, typer.Option("--runs", help="Repeat as N independent runs tagged {tag}-run1 … "
                                      "{tag}-runN, each with its own seed.")] = 1,
    rejudge: Annotated[bool, typer.Option("--rejudge", help="Call the judges again on the stored answers (never the "
                                          "candidate).")] = False,
    reprocess: Annotated[bool, typer.Option("--reprocess", help="Only re-parse stored judge replies with the "
                                            "current rules: no API calls.")] = False,
    temperature: Annotated[float, typer.Option(help="Sampling temperature.")] = 0.2,
    max_tokens: Annotated[int, typer.Option(help="Completion token limit.")] = 6000,
    frequency_penalty: Annotated[float | None, typer.Option(help="Sent only when given.")] = None,
    seed: Annotated[int | None, typer.Option(help="Sent only when given.")] = None,
    rerun: Annotated[bool, typer.Option("--rerun", help="Call again even for answers already stored.")] = False,
    retry_errors: Annotated[int, typer.Option(help="Re-call an errored answer on resume up to this many "
                                              "more times.")] = 2,
    rpm: Annotated[float | None, typer.Option(help="Requests-per-minute cap.")] = None,
    timeout: Annotated[float, typer.Option(help="Seconds per request.")] = 600.0,
    max_retries: Annotated[int, typer.Option(help="Retries per request for 429, 5xx, timeouts, "
                                             "connection errors and bad bodies.")] = 6,
    concurrency_start: Annotated[int, typer.Option(help="Requests in flight at the start, before the adaptive "
                                                        "limit has seen the endpoint.",
                                                   rich_help_panel="Adaptive concurrency")] = 40,
    concurrency_min: Annotated[int, typer.Option(help="The adaptive limit never goes below this.",
                                                 rich_help_panel="Adaptive concurrency")] = 1,
    aimd_increase: Annotated[int, typer.Option(help="Added per success.",
                                               rich_help_panel="Adaptive concurrency")] = 1,
    aimd_decrease: Annotated[float, typer.Option(help="Multiplied on 429.",
                                                 rich_help_panel="Adaptive concurrency")] = 0.5,
    aimd_cooldown: Annotated[float, typer.Option(help="Seconds between decreases.",
                                                 rich_help_panel="Adaptive concurrency")] = 2.0,
    results_dir: ResultsDir = DEFAULT_RESULTS,
    data_dir: DataDir = DEFAULT_DATA,
) -> None:
    """Generate answers for the Japanese benchmarks, judge them and run the passes (resumable: re-run the same
    command to continue).

    Exit codes: 0 done (the run's status may still be partial: see view or the manifest); 1 the work ran but a
    stage failed: every call of it failed, or nothing of it is usable (one line names the most common error);
    2 bad input, nothing written.
    """
    _arrow_without_pandas()
    from .client import AIMDConfig, ClientConfig
    from .generate import GenerationConfig
    from .judge import JudgeConfig
    from .pipeline import RunRequest, check_stored, parse_stages, repeated, reprocess_run
    from .run import run_id_for

    if reprocess:
        import asyncio

        changed = asyncio.run(reprocess_run(results_dir, model, tag))
        typer.echo(f"reprocessed run {run_id_for(model, tag)}: {changed} judgements changed, 0 API calls")
        return
    stages_run = parse_stages(stages, bool(judge), bool(passes), rejudge)
    if base_url is None and "generate" in stages_run:
        raise UsageError("--base-url is required (the OpenAI-compatible endpoint serving --model)")
    if concurrency < 1 or (judge_concurrency is not None and judge_concurrency < 1):
        raise UsageError("--concurrency and --judge-concurrency must be at least 1")
    for option, value, ok, want in [  # a value the endpoint would refuse, or that would turn a safeguard off
        ("--timeout", timeout, timeout > 0, "more than 0 seconds"),
        ("--max-tokens", max_tokens, max_tokens >= 1, "at least 1"),
        ("--judge-max-tokens", judge_max_tokens, judge_max_tokens >= 1, "at least 1"),
        ("--temperature", temperature, 0 <= temperature <= 2, "between 0 and 2"),
        ("--judge-temperature", judge_temperature, 0 <= judge_temperature <= 2, "between 0 and 2"),
        ("--frequency-penalty", frequency_penalty, frequency_penalty is None or -2 <= frequency_penalty <= 2,
         "between -2 and 2"),
        ("--rpm", rpm, rpm is None or rpm > 0, "more than 0"),
        ("--max-retries", max_retries, max_retries >= 0, "0 or more"),
        ("--retry-errors", retry_errors, retry_errors >= 0, "0 or more"),
        ("--aimd-increase", aimd_increase, aimd_increase >= 1, "at least 1"),
        ("--aimd-decrease", aimd_decrease, 0 < aimd_decrease < 1, "between 0 and 1"),
        ("--aimd-cooldown", aimd_cooldown, aimd_cooldown >= 0, "0 or more seconds"),
    ]:
        if not ok:
            raise UsageError(f"{option} {value:g} is out of range: it must be {want}")
    aimd = AIMDConfig(min(concurrency_start, concurrency), min(concurrency_min, concurrency), concurrency,
                      aimd_increase, aimd_decrease, aimd_cooldown)
    request = RunRequest(
        model=model, base_url=base_url or "", results_dir=results_dir, data_dir=data_dir, benchmark=benchmark,
        tag=tag, api_key_env=api_key_env, limit=limit, stages=stages,
        generation=GenerationConfig(temperature, max_tokens, frequency_penalty, seed),
        client=ClientConfig(timeout=timeout, max_retries=max_retries, rpm=rpm, aimd=aimd),
        rerun=rerun, retry_errors=retry_errors, judges=judge or [], judge_base_url=judge_base_url,
        judge_api_key_env=judge_api_key_env, judge_concurrency=judge_concurrency,
        judging=JudgeConfig(judge_temperature, judge_max_tokens), rejudge=rejudge, passes=passes,
        pass_options=pass_option or [],
    )
    if dry_run:
        _dry_run(request, runs, pricing)
        return
    family = repeated(request, runs)
    if "generate" not in stages_run:  # every run of the family must have answers before any is judged
        for each in family:
            check_stored(each, stages_run)
    for each in family:
        _run(each)


def _dry_run(request: RunRequest, runs: int, pricing: Path | None) -> None:
    from .benchmarks import BENCHMARKS, load, registry, resolve
    from .estimate import estimate
    from .pipeline import check_stored, parse_stages, repeated
    from .run import validate_name

    validate_name("model", request.model)
    validate_name("tag", request.tag)
    stages = parse_stages(request.stages, bool(request.judges), bool(request.passes), request.rejudge)
    table = []
    for each in repeated(request, runs):
        if "generate" in stages:
            names = resolve(each.benchmark or "all")
        else:  # the stored run's benchmarks, as the run itself would take them
            scope = check_stored(each, stages)
            names = scope.benchmarks or [n for n in registry() if n in scope.have and n in BENCHMARKS]
        datasets = [load(n, each.data_dir, each.limit) for n in names]
        for r in estimate(each.results_dir, each.model, each.tag, each.base_url, datasets, each.generation,
                          each.judges if "judge" in stages else [], each.judging.max_tokens, pricing,
                          generating="generate" in stages):
            table.append([*([each.tag] if runs > 1 else []), r.stage, r.model, f"{r.calls:,}", f"{r.reused:,}",
                          f"~{r.prompt_tokens:,}", f"~{r.completion_tokens:,}", f"{r.completion_bound:,}",
                          f"${r.cost_usd:.2f}" + ("" if r.priced else " *"),
                          f"${r.cost_bound_usd:.2f}" + ("" if r.priced else " *")])
    header = [*(["Run"] if runs > 1 else []), "Stage", "Model", "Calls", "Reused", "Prompt tokens",
              "Completion (typical)", "Completion (max)", "Cost typical (USD)", "Cost max (USD)"]
    _print_rows(f"Dry run: {request.model}, tag {request.tag}{f' × {runs} runs' if runs > 1 else ''} "
                "(estimates; * unpriced model counted as $0; nothing was called)", header, table, "table")


def _run(request: RunRequest) -> None:
    import asyncio

    from rich.console import Console

    from .display import live_progress
    from .pipeline import run as run_pipeline
    from .status import describe

    console = Console(stderr=True)

    async def go() -> Outcome:
        async with live_progress(console) as slot:
            return await run_pipeline(request, on_start=slot.append)

    outcome = asyncio.run(go())
    g = outcome.generation.benchmarks.values()
    failed = sum(b.errors for b in g)
    if g:
        typer.echo(f"run {outcome.info.run_id}: {sum(b.done for b in g)} answers ({sum(b.cached for b in g)} "
                   f"reused, {outcome.generation.calls} called, {failed} errors), {sum(b.tokens for b in g):,} tokens")
    j = outcome.judging
    lead = "  " if g else f"run {outcome.info.run_id}: "
    if j.total:
        errored = f"; {j.answer_errors} errored answers not sent" if j.answer_errors else ""
        typer.echo(f"{lead}judged {j.done - j.answer_errors} ({j.reused} reused, {j.judged} called, {j.failed} "
                   f"failed, {j.fallbacks} needed the fallback prompt, {j.null_scores} without a score){errored}")
        lead = "  "
    p = outcome.passes
    if p.answers:
        calls = f"; {p.consulted} model calls, {p.reused} verdicts reused, {p.failed} failed" if (
            p.consulted or p.reused or p.failed) else ""
        noted = {name: n for name, n in p.noted.items() if n}
        noted_text = f"; flagged with no penalty: {', '.join(f'{k} {n}' for k, n in noted.items())}" if noted else ""
        typer.echo(f"{lead}passes over {p.answers} answers, changing the "
                   f"score of: {', '.join(f'{name} {n}' for name, n in p.flagged.items())}{noted_text}{calls}")
    if failed:
        typer.echo("  errored answers are retried by running the same command again (see answers.error_type)")
    typer.echo(f"  status: {outcome.status}")
    if broken := outcome.failed_stages:
        typer.echo("error: " + "; ".join(describe(name, r) for name, r in broken.items()), err=True)
        raise typer.Exit(1)


@app.command()
def sql(
    query: Annotated[str, typer.Argument(help="DuckDB SQL over the views runs, questions, answers, "
                                         "judgements, pass_deltas, token_usage.")],
    format: Format = "table",
    pricing: Annotated[Path | None, typer.Option("--pricing", help="Prices per million tokens (TOML) for the "
                                                 "cost view, instead of data/pricing.toml.")] = None,
    results_dir: ResultsDir = DEFAULT_RESULTS,
    data_dir: DataDir = DEFAULT_DATA,
) -> None:
    """Run SQL over the results views (runs, questions, answers, judgements, scores, benchmark_scores, …)."""
    import duckdb

    from .sql import connect

    if format not in ("table", "csv", "json"):
        raise UsageError(f"--format {format!r} is not one of table, csv, json")
    try:
        cursor = connect(results_dir, pricing).execute(query)
    except duckdb.Error as exc:
        raise UsageError(f"SQL: {str(exc).splitlines()[0]}") from None
    names = [d[0] for d in cursor.description or []]
    rows = cursor.fetchall()
    if format == "csv":
        writer = csv.writer(sys.stdout)
        writer.writerow(names)
        writer.writerows(rows)
    elif format == "json":
        sys.stdout.write(orjson.dumps([dict(zip(names, r, strict=True)) for r in rows],
                                      option=orjson.OPT_INDENT_2, default=str).decode() + "\n")
    else:
        from rich.table import Table

        table = Table(*names)
        for r in rows:
            table.add_row(*("" if v is None else str(v) for v in r))
        _console().print(table)


@app.command()
def view(
    tag: Annotated[str, typer.Option("--tag", help="A run's tag, or the base tag of runs {tag}-run1 … N.")] = "default",
    runs: Annotated[int | None, typer.Option("--runs", help="Aggregate the runs {tag}-run1 … {tag}-runN.")] = None,
    model: Annotated[str | None, typer.Option("--model", help="Only this model.")] = None,
    judge: Annotated[str | None, typer.Option("--judge", help="Only this judge ('*': all judges pooled; the "
                                              "default when there are several).")] = None,
    format: Annotated[str, typer.Option("--format", help="table, csv, json or markdown.")] = "table",
    pricing: Annotated[Path | None, typer.Option("--pricing", help="Prices per million tokens (TOML), instead of "
                                                 "data/pricing.toml.")] = None,
    clustered_se: Annotated[bool, typer.Option("--clustered-se", help="Add the standard error of each mean "
                                               "clustered by question across runs (statsmodels).")] = False,
    results_dir: ResultsDir = DEFAULT_RESULTS,
    data_dir: DataDir = DEFAULT_DATA,
) -> None:
    """Scores per benchmark and overall (mean, sd, 95% CI and range over {tag}-runN runs), tokens and cost."""
    from .view import build

    if format not in ("table", "csv", "json", "markdown"):
        raise UsageError(f"--format {format!r} is not one of table, csv, json, markdown")
    report = build(results_dir, tag, runs, model, judge, pricing, clustered_se)
    _render_report(report, format)


def _render_report(report: Report, fmt: str) -> None:
    if fmt == "json":
        body = {"tag": report.tag, "multi_run": report.multi,
                "scores": [{"model": s.model, "judge": s.judge, "runs": s.runs, "status": s.status, "notes": s.notes,
                            "prompt_hashes": s.prompt_hashes,
                            "rows": [dict(zip(s.columns, r, strict=True)) for r in s.rows]} for s in report.sections],
                "tokens": [dict(zip(report.token_columns, r, strict=True)) for r in report.tokens]}
        sys.stdout.write(orjson.dumps(body, option=orjson.OPT_INDENT_2).decode() + "\n")
        return
    if fmt == "csv":
        writer = csv.writer(sys.stdout)
        for s in report.sections:
            writer.writerow(["model", "judge", "status", *s.columns])
            writer.writerows([s.model, s.judge, s.status, *r] for r in s.rows)
        writer.writerow([])
        writer.writerow(report.token_columns)
        writer.writerows(report.tokens)
        return
    tables = []
    for s in report.sections:
        judge = "all judges pooled" if s.judge == "*" else s.judge
        title = (f"{s.model} · {report.tag}{f' ({len(s.runs)} runs)' if report.multi else ''} · judge: {judge} · "
                 f"status: {s.status}")
        if report.multi:
            header = ["Benchmark", "Mean", "Std Dev", "95% CI", "Range", "Runs", "SE (by question)",
                      "Mean without passes", "Note"]
            rows = [[r[0], _num(r[1]), _num(r[2]), _ci(r[3], r[4], r[1]), _range(r[5], r[6]), str(r[7] or "-"),
                     _num(r[8]), _num(r[9]), r[10]] for r in s.rows]
        else:
            header = ["Benchmark", "Score", "Without passes", "n", "Null", "Errors", "Not judged", "Note"]
            rows = [[r[0], _num(r[1]), _num(r[2]), *(str(v) if v is not None else "" for v in r[3:7]), r[7]]
                    for r in s.rows]
        tables.append((title + "".join(f"\n{n}" for n in s.notes), header, rows))
    tokens = [[r[0], f"{r[1]:,}", f"{r[2]:,}", f"{r[3]:,}", f"{r[4]:,}", f"${r[5]:.4f}" + ("" if r[6] else " *")]
              for r in report.tokens]
    tables.append(("Tokens and estimated cost (* includes unpriced models, counted as $0)",
                   ["Stage", "Requests", "Reused", "Prompt tokens", "Completion tokens", "Cost (USD)"], tokens))
    for title, header, rows in tables:
        _print_rows(title, header, rows, fmt)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _ci(low: float | None, high: float | None, mean: float | None) -> str:
    return "-" if low is None or mean is None else f"{low:.2f}–{high:.2f}"


def _range(low: float | None, high: float | None) -> str:
    return "-" if low is None else f"{low:.2f}–{high:.2f}"


@app.command()
def compare(
    tag_a: Annotated[str, typer.Argument(help="The baseline tag (a run, or the base tag of {tag}-runN runs).")],
    tag_b: Annotated[str, typer.Argument(help="The tag compared with it.")],
    model: Annotated[str | None, typer.Option("--model", help="Only this model (needed when a tag holds several).")
                     ] = None,
    judge: Annotated[str | None, typer.Option("--judge", help="Only this judge [default: the judges both tags "
                                              "have, averaged per question].")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap resampling.")] = 0,
    format: Format = "table",
    results_dir: ResultsDir = DEFAULT_RESULTS,
    data_dir: DataDir = DEFAULT_DATA,
) -> None:
    """Paired per-question comparison of two tags, like for like (the judges, judging prompts and passes both
    have; what only one side has is named and left out): difference, bootstrap CI and verdict (both
    Bonferroni-adjusted across benchmarks), Wilcoxon and t (Holm), MDE, and the questions dropped per side."""
    from .compare import compare as run_compare

    if format not in ("table", "csv", "json", "markdown"):
        raise UsageError(f"--format {format!r} is not one of table, csv, json, markdown")
    report = run_compare(results_dir, tag_a, tag_b, model, judge, seed)
    if format == "json":
        sys.stdout.write(orjson.dumps(report.to_dict(), option=orjson.OPT_INDENT_2).decode() + "\n")
        return
    level = report.benchmarks[0].ci_level or 0.95
    header = ["Benchmark", "n", "A", "B", "B − A", f"{level:.2%} CI (bootstrap, adjusted)", "Wilcoxon p (Holm)",
              "t p (Holm)", "MDE 80%", "Verdict (from the CI)", "Dropped A", "Dropped B"]
    rows = [[c.title, str(c.n), _num(c.mean_a), _num(c.mean_b), f"{c.diff:+.2f}", _range(c.ci_low, c.ci_high),
             _p(c.p_wilcoxon_holm), _p(c.p_t_holm), _num(c.mde), c.verdict, _dropped(c.dropped_a),
             _dropped(c.dropped_b)] for c in report.benchmarks]
    if format != "csv":
        typer.echo("Compared like for like on\n" + "".join(f"  {line}\n" for line in report.basis.lines()))
    _print_rows(f"{tag_b} vs {tag_a} (0–10 scale; positive: B scores higher)", header, rows, format)


def _dropped(reasons: dict[str, int]) -> str:
    return "; ".join(f"{n} {why}" for why, n in sorted(reasons.items())) or "0"


def _p(value: float | None) -> str:
    return "-" if value is None else ("<0.001" if value < 0.001 else f"{value:.3f}")


def _print_rows(title: str, header: list[str], rows: list[list[str]], fmt: str) -> None:
    if fmt == "csv":
        writer = csv.writer(sys.stdout)
        writer.writerow(header)
        writer.writerows(rows)
    elif fmt == "markdown":
        sys.stdout.write(f"### {title}\n\n| {' | '.join(header)} |\n|{'---|' * len(header)}\n")
        sys.stdout.writelines(f"| {' | '.join(row)} |\n" for row in rows)
        sys.stdout.write("\n")
    else:
        from rich.table import Table

        table = Table(*header, title=title, title_justify="left")
        for row in rows:
            table.add_row(*row)
        _console().print(table)


@app.command()
def export(
    tag: Annotated[str | None, typer.Option("--tag", help="Only runs with this tag or base tag.")] = None,
    model: Annotated[str | None, typer.Option("--model", help="Only this model.")] = None,
    results_dir: ResultsDir = DEFAULT_RESULTS,
    data_dir: DataDir = DEFAULT_DATA,
) -> None:
    """Write (again) the JSONL artifacts, metrics and manifests of stored runs."""
    from .export import export_run, export_summary, write_manifest
    from .sql import find_runs
    from .store import Store

    where = "($tag IS NULL OR tag = $tag OR base_tag = $tag) AND ($model IS NULL OR model = $model)"
    runs = find_runs(results_dir, where, {"tag": tag, "model": model})
    if not runs:
        raise UsageError(f"no runs to export under {results_dir}{f' tagged {tag!r}' if tag else ''}"
                         f"{f' for model {model!r}' if model else ''}")
    store = Store(results_dir)
    for r in runs:
        with store.lock(r.run_id, f"run {r.model!r} tag {r.tag!r}"):  # not while a run writes it
            write_manifest(results_dir, r.run_id, holding_lock=True)
            folder = export_run(results_dir, r.run_id)
        typer.echo(f"{r.tag} ({r.model}): {folder.parent.parent}")
    for run_model, base_tag in sorted({(r.model, r.base_tag) for r in runs if r.tag != r.base_tag}):
        if path := export_summary(results_dir, base_tag, run_model):
            typer.echo(f"{base_tag} ({run_model}), {len([r for r in runs if r.base_tag == base_tag])} runs: {path}")


@app.command("import-legacy")
def import_legacy(
    path: Annotated[Path, typer.Argument(help="An original Shaberi result tree (holding data/model_answers and "
                                         "data/judgements).")],
    export: Annotated[bool, typer.Option("--export", help="Also write the JSONL + manifest layout of every "
                                         "imported model.")] = False,
    results_dir: ResultsDir = DEFAULT_RESULTS,
    data_dir: DataDir = DEFAULT_DATA,
) -> None:
    """Import original Shaberi results as runs tagged 'legacy' (one per model); re-importing adds nothing."""
    _arrow_without_pandas()
    from .legacy import TAG, import_tree, report_lines

    report = import_tree(path, results_dir)
    for line in report_lines(report):
        typer.echo(line)
    if export:
        from .export import export_run, write_manifest
        from .sql import find_runs

        for r in find_runs(results_dir, "tag = $tag", {"tag": TAG}):
            write_manifest(results_dir, r.run_id)
            export_run(results_dir, r.run_id)
        typer.echo(f"exported {report.models} models under {results_dir}/<model>/{TAG}/")


@app.command("leaderboard")
def leaderboard_command(
    tag: Annotated[str, typer.Option("--tag", help="Runs to rank.")] = "legacy",
    format: Annotated[str, typer.Option("--format", help="table, csv or markdown.")] = "table",
    as_published: Annotated[bool, typer.Option("--as-published", help="Count every row of the legacy files, "
                                               "repeated questions too, as the original tooling did [default: each "
                                               "question once].")] = False,
    results_dir: ResultsDir = DEFAULT_RESULTS,
    data_dir: DataDir = DEFAULT_DATA,
) -> None:
    """The original Shaberi leaderboard: all judges pooled, then per judge (ELYZA × 2, Tengu 61–65 left out).
    Rows with all four benchmarks come first (Complete 4/4); partial rows follow."""
    from .leaderboard import leaderboard

    if format not in ("table", "csv", "markdown"):
        raise UsageError(f"--format {format!r} is not one of table, csv, markdown")
    header, rows = leaderboard(results_dir, tag, as_published)
    if format == "csv":
        writer = csv.writer(sys.stdout)
        writer.writerow(header)
        writer.writerows(["" if v is None else v for v in row] for row in rows)
        return
    text = [[str(v) if isinstance(v, int | str) else ("" if v is None else f"{v:.2f}") for v in row] for row in rows]
    _print_rows(f"Leaderboard: tag {tag}", header, text, format)


@data_app.command("pull")
def data_pull(
    benchmark: Annotated[str, typer.Option("--benchmark", help="all, or a comma list of the benchmarks to "
                                                              "download.")] = "all",
    results_dir: ResultsDir = DEFAULT_RESULTS,
    data_dir: DataDir = DEFAULT_DATA,
) -> None:
    """Download the upstream benchmark files from the Hugging Face hub into --data-dir."""
    from .benchmarks import pull, resolve

    for name in resolve(benchmark):
        path = pull(name, data_dir)
        typer.echo(f"{name}: {path}")


@app.command("list")
def list_command() -> None:
    """What this installation can run: the benchmarks, ensemble datasets, graders, strategies, passes and prompt
    folders, built-in ones first, then the plugins' (docs/plugins.md), and the plugins loaded."""
    from .benchmarks import BENCHMARKS
    from .ensemble.datasets import DATASETS
    from .ensemble.graders import GRADERS
    from .ensemble.strategies import STRATEGIES
    from .passes import PASSES
    from .prompts import PROMPTS

    registries: list[tuple[str, Registry[Any]]] = [
        ("benchmarks", BENCHMARKS), ("datasets", DATASETS), ("graders", GRADERS), ("strategies", STRATEGIES),
        ("passes", PASSES), ("prompt folders", PROMPTS)]
    plugins: dict[str, list[str]] = {}
    for title, registry in registries:
        typer.echo(f"{title}: {', '.join(registry) or '-'}")
        for ep in registry.plugins:
            dist = f" ({ep.dist.name} {ep.dist.version})" if ep.dist else ""
            plugins.setdefault(f"{ep.name} = {ep.value}{dist}", []).append(registry.group)
    for plugin, groups in plugins.items():
        typer.echo(f"plugin {plugin}: {', '.join(groups)}")


@app.command()
def demo(
    limit: Annotated[int, typer.Option("--limit", help="Questions per benchmark.")] = 2,
    loopback: Annotated[bool, typer.Option("--loopback", help="Use the project's canned test server instead of "
                                           "the local model: seconds instead of minutes, no model needed.")] = False,
    threads: Annotated[int, typer.Option("--threads", help="CPU threads of the local model.")] = 2,
    results_dir: ResultsDir = DEFAULT_RESULTS,
    data_dir: Annotated[Path | None, typer.Option("--data-dir", envvar="SHABERI_DATA_DIR", help="Default: the "
                                                  "hand-written samples shipped in data/samples.")] = None,
) -> None:
    """Every stage end to end on a real local model (candidate and judge), offline and without a key: answers,
    judgements, the three passes, scores and the export. The scores of a 0.5B model mean nothing."""
    _arrow_without_pandas()
    from contextlib import AbstractContextManager

    from .client import AIMDConfig, ClientConfig
    from .generate import GenerationConfig
    from .judge import JudgeConfig
    from .pipeline import RunRequest
    from .resources import resource_dir

    server: AbstractContextManager
    client = ClientConfig()
    if loopback:
        from .testing import LoopbackServer

        server, model, judge_model, note = LoopbackServer(latency_ms=20), "shaberi-loopback", \
            "shaberi-loopback-judge", "the project's loopback test server (answers are canned, scores meaningless)"
    else:
        from .local import LocalServer

        server = LocalServer(threads=threads)
        model = judge_model = server.name
        client = ClientConfig(aimd=AIMDConfig(start=2, min=1, max=2))  # llama.cpp answers one request at a time
        note = f"{model} on llama.cpp, {threads} thread(s) (a 0.5B model: the scores are not meaningful)"
    with server as endpoint:
        typer.echo(f"serving {note} at {endpoint.base_url}", err=True)
        _run(RunRequest(model=model, base_url=endpoint.base_url, results_dir=results_dir,
                        data_dir=data_dir or resource_dir("data") / "samples", tag="demo", limit=limit,
                        judges=[judge_model], passes="lang_mixing,repetition,format_validation", client=client,
                        generation=GenerationConfig(max_tokens=384), judging=JudgeConfig(max_tokens=384)))
    view(tag="demo", runs=None, model=model, judge=None, format="table", pricing=None, clustered_se=False,
         results_dir=results_dir, data_dir=DEFAULT_DATA)
    from .export import run_folder

    typer.echo(f"tables: {results_dir / 'tables'}; export and manifest: {run_folder(results_dir, model, 'demo')}")


@app.command("serve-local")
def serve_local(
    gguf: Annotated[Path | None, typer.Option("--gguf", help="A GGUF model file [default: the embedded "
                                              "Qwen2.5-Coder-0.5B-Instruct Q4_K_M].")] = None,
    port: Annotated[int, typer.Option("--port", help="Port on 127.0.0.1 to serve the model on.")] = 8000,
    threads: Annotated[int, typer.Option("--threads", help="CPU threads; 1 when shaberi runs on the same "
                                         "machine (2 threads collapse when the other core is busy).")] = 1,
    model: Annotated[str, typer.Option("--model", help="The embedded model: qwen2.5-coder-0.5b or "
                                       "qwen2.5-coder-1.5b (install shaberi[local-1.5b]).")] = "qwen2.5-coder-0.5b",
) -> None:
    """Serve a local model on 127.0.0.1 with llama-cpp-python's OpenAI-compatible server, until Ctrl-C."""
    import signal

    from .local import MODELS, LocalServer

    if model not in MODELS:
        raise UsageError(f"--model {model!r} is not one of {', '.join(MODELS)}")
    server = LocalServer(gguf, port, threads, model=model)

    def stop(*_: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)  # a plain kill stops the model server too
    server.start()
    try:
        typer.echo(f"serving {server.name} at {server.base_url} with {threads} thread(s); Ctrl-C stops it")
        assert server.proc is not None
        code = server.proc.wait()
        raise UsageError(f"the local model server exited by itself with code {code}; see {server.log}")
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    typer.echo("stopped")


@ensemble_app.command("generate-cache")
def ensemble_generate_cache(
    model: Annotated[str, typer.Option("--model", help="Model whose N answers per question to cache.")],
    base_url: Annotated[str, typer.Option("--base-url", help="OpenAI-compatible endpoint serving --model.")],
    datasets: Annotated[str, typer.Option("--datasets", help="Comma list: gsm8k, math500, truthfulqa, mmlu_pro, "
                                          "arc_challenge, arc_easy, hellaswag, simpleqa, gpqa, hle, hallumix "
                                          "(shaberi list: every one installed).")],
    n: Annotated[int, typer.Option("--n", help="Answers per question (sample_index 0…n−1).")] = 5,
    temperature: Annotated[float, typer.Option("--temperature", help="Sampling temperature of the members.")] = 0.7,
    max_tokens: Annotated[int, typer.Option("--max-tokens", help="Most tokens per answer.")] = 2048,
    limit: Annotated[int | None, typer.Option("--limit", help="First N questions of each dataset.")] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", help="Most requests in flight.")] = 60,
    api_key_env: Annotated[str | None, typer.Option("--api-key-env", help="Variable holding the API key "
                                                    "[default: OPENAI_API_KEY, optional on loopback].")] = None,
    results_dir: ResultsDir = DEFAULT_RESULTS,
    data_dir: DataDir = DEFAULT_DATA,
) -> None:
    """N answers to every question, stored once per (model, dataset, N, temperature); resumable."""
    _arrow_without_pandas()
    import asyncio

    from .client import AIMDConfig, ClientConfig
    from .ensemble.commands import generate

    config = ClientConfig(aimd=AIMDConfig(min(40, concurrency), 1, concurrency))
    for run_id in asyncio.run(generate(results_dir, data_dir, model, base_url, datasets, n, temperature, max_tokens,
                                       api_key_env, config, limit)):
        typer.echo(f"cache {run_id}")


@ensemble_app.command("import-responses")
def ensemble_import_responses(
    dataset: Annotated[str, typer.Option("--dataset", help="The ground-truth dataset the responses answer, "
                                                          "e.g. mmlu_pro.")],
    model: Annotated[str, typer.Option("--model", help="The name the members go under.")],
    files: Annotated[list[Path], typer.Argument(help="One JSON Lines file (question_id, response) per member; the "
                                                "first is the single-model baseline.")],
    results_dir: ResultsDir = DEFAULT_RESULTS,
    data_dir: DataDir = DEFAULT_DATA,
) -> None:
    """Pre-recorded responses as ensemble members (sample_index in the order given): zero calls."""
    _arrow_without_pandas()
    from .ensemble import cache
    from .ensemble import datasets as gt

    (name,) = gt.resolve(dataset)
    run_id, counts = cache.import_responses(results_dir, model, gt.load(name, data_dir), files)
    typer.echo(f"cache {run_id}: {len(files)} members, {', '.join(f'{c:,}' for c in counts)} responses")


def _holm(c: Comparison) -> float:
    """The smaller Holm-adjusted p of the gate's two tests (NaN before the adjustment)."""
    return min((p for p in (c.p_mcnemar_holm, c.p_ttest_holm) if p is not None), default=math.nan)


def _quick_eval_print(result: Result, out: Path | None, results_dir: Path) -> Path:
    from .ensemble.evaluate import attempted_lines, comparisons, unreadable_lines
    from .ensemble.gate import gate

    gated = gate(comparisons(result))
    header = ["Dataset", "Strategy", "n", "Baseline", "Mean of N", "Strategy acc", "Δ", "p McNemar", "p t", "p Fisher",
              "p Holm", "MDE", "Calls", "Verdict"]
    rows = []
    for c in gated:
        o = result.datasets[c.dataset].strategies[c.strategy]
        rows.append([c.dataset, c.strategy, str(c.n), f"{c.baseline:.1%}", f"{c.samples_mean:.1%}", f"{c.accuracy:.1%}",
                     f"{100 * c.difference:+.1f}", f"{c.p_mcnemar:.3f}", f"{c.p_ttest:.3f}", f"{c.p_fisher:.3f}",
                     f"{_holm(c):.3f}", f"{100 * c.mde:.1f}",
                     f"{o.requests} ({o.reused} reused)", "REGRESSION" if c.regression else "ok"])
    _print_rows(f"quick-eval {result.model}, seed {result.seed}, sample {result.sample}", header, rows, "table")
    for line in attempted_lines(result) + unreadable_lines(result):
        typer.echo(line)
    path = out or results_dir / "quick-eval" / f"{result.model.replace('/', '__')}-{'+'.join(result.strategies)}" \
        f"-seed{result.seed}-n{result.sample}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(result.to_json())
    typer.echo(f"result file: {path}")
    return path


@ensemble_app.command("quick-eval")
def ensemble_quick_eval(
    model: Annotated[str, typer.Option("--model", help="The cached model (as generated or imported).")],
    strategy: Annotated[str, typer.Option("--strategy", help="majority, standard, elo, council (shaberi list: every "
                                          "one installed), a comma list, or all.")] = "majority",
    sample: Annotated[int, typer.Option("--sample", help="Questions per dataset (more than it has: all).")] = 30,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the question sample (the same seed, the same "
                                                    "questions).")] = 0,
    datasets: Annotated[str | None, typer.Option("--datasets", help="Default: every dataset cached for --model.")
                        ] = None,
    n: Annotated[int | None, typer.Option("--n", help="Which cache, when there are several.")] = None,
    temperature: Annotated[float | None, typer.Option("--temperature", help="Which cache, when there are several.")
                           ] = None,
    consensus_model: Annotated[str | None, typer.Option("--consensus-model", help="MODEL[@BASE_URL] for standard, "
                                                        "elo and council.")] = None,
    judge: Annotated[str | None, typer.Option("--judge", help="MODEL[@BASE_URL] grading free answers (SimpleQA, "
                                              "HLE exact-match).")] = None,
    base_url: Annotated[str | None, typer.Option("--base-url", help="Endpoint of models given without @URL.")] = None,
    api_key_env: Annotated[str | None, typer.Option("--api-key-env", help="Variable holding the API key "
                                                    "[default: OPENAI_API_KEY, optional on loopback].")] = None,
    baseline_model: Annotated[str | None, typer.Option("--baseline-model", help="A separate cached run (e.g. "
                                                       "temperature 0) whose sample 0 is the baseline.")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Result file [default: results/quick-eval/…json].")
                   ] = None,
    results_dir: ResultsDir = DEFAULT_RESULTS,
) -> None:
    """Strategies over a seeded sample of cached questions (zero generation calls), graded and gated."""
    _arrow_without_pandas()
    import asyncio

    from .ensemble.commands import evaluate

    result = asyncio.run(evaluate(results_dir, model, strategy, sample, seed, datasets, n=n, temperature=temperature,
                                  consensus_model=consensus_model, judge=judge, base_url=base_url,
                                  api_key_env=api_key_env, baseline_model=baseline_model))
    _quick_eval_print(result, out, results_dir)


@ensemble_app.command("report")
def ensemble_report(
    files: Annotated[list[Path], typer.Argument(help="quick-eval result files (from one job or many).")],
    out: Annotated[Path | None, typer.Option("--out", help="Write the Markdown here instead of stdout.")] = None,
) -> None:
    """One Markdown report over result files: per dataset, baseline and each strategy with the paired tests."""
    from .ensemble.report import load_results, markdown

    text, _ = markdown(load_results(files))
    if out:
        out.write_text(text, encoding="utf-8")
        typer.echo(f"report: {out}")
    else:
        sys.stdout.write(text)


@ensemble_app.command("check")
def ensemble_check(
    model: Annotated[str, typer.Option("--model", help="The baselines file's entry to check.")],
    baseline_file: Annotated[Path, typer.Option("--baseline-file", help="Committed gate configuration.")] = Path(
        "baselines/quick-eval.json"),
    consensus_model: Annotated[str | None, typer.Option("--consensus-model", help="MODEL[@BASE_URL] for the "
                                                        "strategies that call a model.")] = None,
    judge: Annotated[str | None, typer.Option("--judge", help="MODEL[@BASE_URL] grading free answers.")] = None,
    base_url: Annotated[str | None, typer.Option("--base-url", help="Endpoint of models given without @URL.")
                        ] = None,
    api_key_env: Annotated[str | None, typer.Option("--api-key-env", help="Variable holding the API key "
                                                    "[default: OPENAI_API_KEY, optional on loopback].")] = None,
    results_dir: ResultsDir = DEFAULT_RESULTS,
) -> None:
    """The CI gate: quick-eval as the baseline file configures it; exit code 1 on a significant regression."""
    _arrow_without_pandas()
    import asyncio

    from .ensemble.commands import check

    result, entry = asyncio.run(check(results_dir, baseline_file, model, consensus_model=consensus_model, judge=judge,
                                      base_url=base_url, api_key_env=api_key_env))
    from .ensemble.evaluate import accuracy, comparisons
    from .ensemble.gate import gate

    _quick_eval_print(result, None, results_dir)
    regressions = [c for c in gate(comparisons(result), entry["alpha"]) if c.regression]
    for dataset, accepted in (entry.get("accuracy") or {}).items():
        got = result.datasets.get(dataset)
        if got:
            now = {s: accuracy(o.correct) for s, o in got.strategies.items()}
            typer.echo(f"  {dataset}: accepted {accepted}, now " + ", ".join(
                f"{s} {'-' if v is None else f'{v:.3f}'}" for s, v in now.items()))
    if regressions:
        typer.echo("REGRESSION: " + ", ".join(f"{c.strategy} on {c.dataset} ({100 * c.difference:+.1f} points, Holm p "
                                              f"{_holm(c):.3f})" for c in regressions),
                   err=True)
        raise typer.Exit(1)
    typer.echo("gate passed: no significant regression against the single-model baseline")


@app.command("inspect")
def inspect_command(
    tag: Annotated[str | None, typer.Option("--tag", help="Runs with this tag or base tag (default: all).")] = None,
    model: Annotated[str | None, typer.Option("--model", help="Only this model.")] = None,
    results_dir: ResultsDir = DEFAULT_RESULTS,
) -> None:
    """Browse questions, answers, judge replies and pass deltas in the terminal (alias: inspect-output).

    Exit codes: 0 closed normally; 1 the browser failed (its traceback is shown); 2 bad input."""
    from .tui import InspectApp

    browser = InspectApp(results_dir, tag, model)
    browser.run()
    if browser.return_code:  # textual shows the traceback and returns; the exit code must say so too
        raise typer.Exit(browser.return_code)


@app.command("report")
def report_command(
    tag: Annotated[str, typer.Option("--tag", help="The run (or run family) to report.")],
    out: Annotated[Path, typer.Option("--out", help="The HTML file to write.")] = Path("report.html"),
    compare: Annotated[str | None, typer.Option("--compare", help="A second tag: per-question movers.")] = None,
    model: Annotated[str | None, typer.Option("--model", help="Only this model.")] = None,
    results_dir: ResultsDir = DEFAULT_RESULTS,
) -> None:
    """One self-contained HTML file: scores with intervals, a chart, the biggest movers, tokens and cost."""
    from .html_report import write_report

    path = write_report(results_dir, tag, out, compare, model)
    typer.echo(f"report: {path}")


def _arrow_without_pandas() -> None:
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


def _console() -> Console:
    """Stdout; when it is not a terminal (a log, a pipe), wide enough that no cell is cut. Markup is off:
    cells hold stored text (answers, judge replies, model names) that must print as stored, "[/x]" included."""
    from rich.console import Console

    return Console(markup=False) if sys.stdout.isatty() else Console(width=240, markup=False)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: ShaberiError becomes one line on stderr and exit code 2."""
    try:
        app(args=argv, standalone_mode=True)
    except ShaberiError as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(2)


def _alias(command: str, prog_name: str) -> None:
    """A legacy script name for one command, whose usage line names the script as typed (``run-evals``)."""
    try:
        typer.main.get_command(app).commands[command].main(  # type: ignore[attr-defined]
            args=sys.argv[1:], prog_name=prog_name, standalone_mode=True)
    except ShaberiError as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(2)


def run_evals_main() -> None:
    _alias("run", "run-evals")


def view_scores_main() -> None:
    _alias("view", "view-scores")


def inspect_output_main() -> None:
    _alias("inspect", "inspect-output")
