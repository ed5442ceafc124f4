"""``shaberi pairwise``: head-to-head judging of stored runs, and the Bradley–Terry ratings it gives."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ..errors import UsageError
from .common import (
    DEFAULT_RESULTS,
    JUDGES,
    RUNS,
    ResultsDir,
    app,
    prepare_arrow,
    print_rows,
)
from .options import Sampled, client_options, sampling_options

if TYPE_CHECKING:
    from ..llm.config import ClientConfig
    from ..pairwise.job import PairwiseRequest, Result

__all__ = ["pairwise"]


@app.command()
@client_options
@sampling_options("judge", JUDGES, "0", 1024)
def pairwise(
    *,
    tags: Annotated[str, typer.Option(
        "--tags", rich_help_panel=RUNS,
        help="Comma list of the runs to compare, two or more: each a tag, or MODEL@TAG for one model of a tag that "
             "holds several (each names one run).")],
    judge: Annotated[str, typer.Option(
        "--judge", rich_help_panel=JUDGES,
        help="The judge: MODEL (on --judge-base-url) or MODEL@BASE_URL.")],
    judge_base_url: Annotated[str | None, typer.Option(
        rich_help_panel=JUDGES, help="Endpoint of a judge given without @URL.")] = None,
    judge_api_key_env: Annotated[str | None, typer.Option(
        rich_help_panel=JUDGES,
        help="Variable holding the judge's key [default: OPENAI_API_KEY, optional on loopback].")] = None,
    judge_prompts: Annotated[Path | None, typer.Option(
        metavar="FOLDER", rich_help_panel=JUDGES,
        help="A folder of judging templates laid out like prompts/judging/: its <benchmark>/pairwise.jinja and "
             "_pairwise*.jinja replace Shaberi's [default: Shaberi's own].")] = None,
    benchmark: Annotated[str | None, typer.Option(
        "--benchmark", rich_help_panel=RUNS,
        help="all, or a comma list of benchmarks [default: every benchmark the runs answered].")] = None,
    reference: Annotated[str | None, typer.Option(
        "--reference", metavar="TAG", rich_help_panel=RUNS,
        help="Compare each tag against this one only (it anchors the ratings at 1000) instead of every pair.")] = None,
    opponents: Annotated[int | None, typer.Option(
        "--opponents", metavar="K", rich_help_panel=RUNS,
        help="For many tags: compare each against K others (a connected, balanced design; seeded by --seed) "
             "instead of every pair.")] = None,
    seed: Annotated[int, typer.Option(
        "--seed", rich_help_panel=RUNS, help="Seed of the sampled design and of the bootstrap.")] = 0,
    bootstrap: Annotated[int, typer.Option(
        "--bootstrap", metavar="N", rich_help_panel=RUNS,
        help="Bootstrap resamples over questions for the 95 % intervals.")] = 1000,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", rich_help_panel=RUNS, help="Print the calls, tokens and cost this would take; call nothing.")
    ] = False,
    pricing: Annotated[Path | None, typer.Option(
        "--pricing", rich_help_panel=RUNS,
        help="Prices per million tokens (TOML) for --dry-run, added over "
             "data/pricing.toml (an entry it names replaces the shipped one).")] = None,
    results_dir: ResultsDir = DEFAULT_RESULTS,
    judging: Sampled,
    client: ClientConfig,
) -> None:
    """Judge stored runs head to head: each question's two answers shown side by side in both orders (a pair whose
    orders disagree is a tie), then Bradley–Terry ratings with 95 % bootstrap intervals, per benchmark and overall.
    No generation call; a comparison already stored is reused (resumable: run the same command again).

    Exit codes: 0 done; 1 the work ran but no rating could be fitted, or a judge call failed (asked again next
    time); 2 bad input, nothing written.
    """
    prepare_arrow()
    from ..benchmarks import resolve
    from ..judging import JudgeConfig
    from ..llm.endpoints import parse_judge
    from ..pairwise.job import PairwiseRequest
    from ..tables.selection import parse_selectors

    if judge_prompts is not None and not (judge_prompts / "_pairwise.jinja").is_file() and not any(
            judge_prompts.glob("*/pairwise.jinja")):
        raise UsageError(f"--judge-prompts {judge_prompts}: no pairwise templates there (<benchmark>/pairwise.jinja, "
                         "_pairwise*.jinja); an original Shaberi clone has none: leave --judge-prompts out")
    request = PairwiseRequest(
        results_dir=results_dir, tags=[s.label for s in parse_selectors(results_dir, tags, option="--tags")],
        judge=parse_judge(judge, (judge_base_url or "").rstrip("/")), judge_api_key_env=judge_api_key_env,
        benchmarks=None if benchmark is None else resolve(benchmark), reference=reference, opponents=opponents,
        seed=seed, bootstrap=bootstrap, judging=JudgeConfig(**judging.params),
        client=client,
        judge_prompts=str(judge_prompts) if judge_prompts else None)
    if dry_run:
        _dry_run(request, pricing)
        return
    import asyncio

    from ..pairwise.job import run

    result = asyncio.run(run(request))
    _print(result, request)
    if not result.ratings:
        typer.echo("error: no rating: no comparison has a verdict in both orders (see the pairwise table's "
                   "judge_output and error)", err=True)
    if not result.ratings or result.progress.failed:
        raise typer.Exit(1)


def _dry_run(request: PairwiseRequest, pricing: Path | None) -> None:
    from ..estimate import estimate_pairwise
    from ..pairwise.job import planned, prepare

    store, chosen, design, _ = prepare(request)
    work = planned(request, store, chosen, design)
    e = estimate_pairwise(request.results_dir, [i.messages for i in work.items], work.progress.reused,
                          request.judge.name, request.judging.max_tokens, pricing)
    priced = "" if e.priced else " *"
    print_rows(f"Dry run: pairwise {', '.join(s.tag for s in chosen)} ({design.described}), judge {e.model} "
               "(estimates; first calls only: fallbacks and retries come on top; * unpriced model counted as $0; "
               "nothing was called)",
               ["Comparisons", "Calls", "Reused", "Prompt tokens", "Completion (typical)", "Completion (max)",
                "Cost typical (USD)", "Cost max (USD)"],
               [[f"{work.progress.total:,}", f"{e.calls:,}", f"{e.reused:,}", f"~{e.prompt_tokens:,}",
                 f"~{e.completion_tokens:,}", f"{e.completion_bound:,}", f"${e.cost_usd:.2f}{priced}",
                 f"${e.cost_bound_usd:.2f}{priced}"]], "table")
    _missing(work.progress.missing, work.progress.differing)


def _missing(missing: dict[str, int], differing: int) -> None:
    for tag, n in sorted(missing.items()):
        typer.echo(f"note: {tag}: {n} question comparisons left out (no answer there, or its call failed)", err=True)
    if differing:
        typer.echo(f"note: {differing} questions left out: their text differs between two of the runs", err=True)


def _print(result: Result, request: PairwiseRequest) -> None:
    from ..pairwise.ratings import interval, open_note

    p = result.progress
    typer.echo(f"pairwise {result.job}: {', '.join(s.tag for s in result.sides)}; judge {request.judge.name}; "
               f"{result.design.described}")
    typer.echo(f"comparisons: {p.total:,} (both orders): {p.judged:,} judged now ({p.calls:,} requests), "
               f"{p.reused:,} reused; {p.no_verdict:,} without a verdict, {p.failed:,} failed")
    _missing(p.missing, p.differing)
    if left := result.one_order + result.no_order:
        why = "replies without a verdict are kept as they are: the pairwise table's judge_output and error"
        if p.failed:
            why = f"{p.failed:,} failed calls are asked again when the same command runs again; {why}"
        typer.echo(f"note: {left} question comparisons left out, {result.one_order} with a verdict in one order only "
                   f"and {result.no_order} in neither ({why})", err=True)
    shown = {b: r for b, r in result.ratings.items() if b != "*" or len(result.ratings) > 2}  # one benchmark: once
    if shown:
        r = next(iter(shown.values()))
        typer.echo(f"ratings: Bradley–Terry (ties half a win), {r.anchor} = 1000, 400 points = 10:1 odds; 95 % "
                   f"intervals from {r.bootstrap:,} bootstrap resamples over questions (seed {r.seed})")
    for benchmark, r in shown.items():
        order = sorted(range(len(r.tags)), key=lambda k: (math.isnan(r.rating[k]), -r.rating[k]))
        print_rows(("overall" if benchmark == "*" else benchmark) + (" (regularised: a tag won or lost all it met)"
                                                                     if r.regularised else ""),
                   ["Tag", "Rating", "95 % interval", "Comparisons"],
                   [[r.tags[k], "–" if math.isnan(r.rating[k]) else f"{r.rating[k]:.0f}",
                     interval(r.low[k], r.high[k]),
                     f"{sum(r.comparisons[k]):,}"] for k in order], "table")
        if note := open_note(r.tags, r.open_low, r.open_high):
            typer.echo(f"note: {note}")
    if overall := result.ratings.get("*"):
        print_rows("win rate (row v. column)", ["", *overall.tags],
                   [[t, *("" if x is None else f"{x:.0%}" for x in overall.win_rate[k])]
                    for k, t in enumerate(overall.tags)], "table")
    if (pos := result.position) is not None and pos.share is not None:
        typer.echo(f"position bias: the judge chose the answer shown first in {pos.share:.1%} of "
                   f"{pos.first + pos.second:,} verdicts that chose (95 % CI {pos.low:.1%}–{pos.high:.1%}; "
                   f"binomial p = {pos.p_value:.3g}; {pos.ties:,} ties); without bias 50 %")
    if (a := result.agreement) is not None and a.runs:
        rho = (f"{a.rho:+.2f} (p = {a.p_value:.3g})" if a.rho is not None else "n/a (fewer than 3 tags with scores)"
               if a.runs < 3 else "n/a (every tag has the same rating, or the same score)")
        typer.echo(f"agreement with absolute scores: Spearman rho {rho} over {a.runs} tags")
        for higher, scored in a.disagree:
            typer.echo(f"  disagree: {higher} rated above {scored}, but scored below it")
    elif result.ratings:
        typer.echo("agreement with absolute scores: none of these runs is judged (shaberi run --stages judge)")
