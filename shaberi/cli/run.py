"""``shaberi run``: parse the options into a run request, estimate it (``--dry-run``) or run it, and print
what each stage did."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..errors import UsageError
from .common import (
    DEFAULT_DATA,
    DEFAULT_RESULTS,
    JUDGES,
    MODEL,
    PASSES,
    RUNS,
    Compact,
    DataDir,
    ResultsDir,
    app,
    check_concurrency,
    prepare_arrow,
    print_rows,
    stop_line,
)
from .options import MAX_COUNT, Sampled, client_options, sampling_options, shown

if TYPE_CHECKING:
    from ..estimate import Estimate
    from ..judging.promptsets import PromptSet
    from ..llm.config import ClientConfig
    from ..pipeline import Outcome, RunRequest

__all__ = ["run", "run_request"]


@app.command()
@client_options
@sampling_options("judge", JUDGES, "0", 1024)
@sampling_options("", MODEL, "0.2", 6000)
def run(
    *,
    model: Annotated[str | None, typer.Option(
        "--model", rich_help_panel=MODEL,
        help="Model name sent to the endpoint; on stored answers (--rejudge, --reprocess, --stages judge,passes), "
             "the model whose runs --tag names [default there: every model they hold].", show_default=False)] = None,
    base_url: Annotated[str | None, typer.Option(
        "--base-url", rich_help_panel=MODEL,
        help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1 (not needed with --reprocess).")] = None,
    api_key_env: Annotated[str | None, typer.Option(
        "--api-key-env", rich_help_panel=MODEL,
        help="Variable holding the API key [default: OPENAI_API_KEY, optional on loopback].")] = None,
    frequency_penalty: Annotated[float | None, typer.Option(
        rich_help_panel=MODEL,
        help="Sent only when given.")] = None,
    seed: Annotated[int | None, typer.Option(
        rich_help_panel=MODEL,
        help="Sent only when given.")] = None,
    batch: Annotated[bool, typer.Option(
        "--batch", rich_help_panel=MODEL,
        help="Generate through the endpoint's Batch API (OpenAI's; about half the price, answered within hours): "
             "every call in a batch, a later turn or a retry in a later one. A run stopped while batches are "
             "under way collects them when run again.")] = False,
    model_families: Annotated[Path | None, typer.Option(
        rich_help_panel=MODEL,
        help="Model family table (TOML) replacing data/model_families.toml: how requests to some models must "
             "differ; an empty file turns it off.")] = None,
    judge: Annotated[list[str] | None, typer.Option(
        "--judge", "--judge-model", rich_help_panel=JUDGES,
        help="Judge model, repeatable: MODEL (on --judge-base-url) or MODEL@BASE_URL.")] = None,
    judge_base_url: Annotated[str | None, typer.Option(
        rich_help_panel=JUDGES,
        help="Endpoint of judges given without @URL [default: --base-url].")] = None,
    judge_api_key_env: Annotated[str | None, typer.Option(
        rich_help_panel=JUDGES,
        help="Variable holding the judges' key [default: the candidate's; optional on loopback].")] = None,
    judge_prompts: Annotated[str | None, typer.Option(
        metavar="PATH", rich_help_panel=JUDGES,
        help="The judging prompt set: a clone of the original Shaberi (its prompts, requests and score reading: "
             "scores comparable with its published ones) or a folder of judging templates laid out like "
             "prompts/judging/ [default: Shaberi's own]. Judgements are kept per prompt set.")] = None,
    judge_concurrency: Annotated[int | None, typer.Option(
        rich_help_panel=JUDGES,
        help="Most judge requests in flight per judge endpoint, shared by every shaberi process on this machine "
             "[default: --concurrency].")] = None,
    judge_batch: Annotated[bool, typer.Option(
        "--judge-batch", rich_help_panel=JUDGES,
        help="Judge through the judges' Batch API (OpenAI's; about half the price, answered within hours): "
             "every judge call goes in a batch, a follow-up in a later one. A run stopped while batches are under "
             "way collects them when run again, instead of paying for them twice.")] = False,
    batch_poll: Annotated[float, typer.Option(
        metavar="SECONDS", rich_help_panel=JUDGES,
        help="How often a batch under way (--batch, --judge-batch) is looked at.")] = 15.0,
    batch_size: Annotated[int, typer.Option(
        metavar="N", rich_help_panel=JUDGES,
        help="Most requests in one batch (--batch, --judge-batch); a batch also holds at most 190 MB.")] = 50_000,
    passes: Annotated[str | None, typer.Option(
        "--passes", rich_help_panel=PASSES,
        help="Comma list of score-modifying passes: lang_mixing,repetition,format_validation,safety_check (shaberi"
             " list: every one installed).")] = None,
    pass_option: Annotated[list[str] | None, typer.Option(
        "--pass-option", rich_help_panel=PASSES,
        help="NAME.KEY=VALUE, repeatable, e.g. lang_mixing.penalty=1 or lang_mixing.detector=MODEL@URL.")] = None,
    tag: Annotated[str, typer.Option(
        "--tag", rich_help_panel=RUNS,
        help="Names the run together with --model. On stored answers, the runs to work on: a tag (a run, or the base "
             "tag of runs {tag}-run1 … N), MODEL@TAG, or a comma list of them.")] = "default",
    benchmark: Annotated[str | None, typer.Option(
        "--benchmark", rich_help_panel=RUNS,
        help="all, or a comma list of elyza,tengu,mt_bench,rakuda (shaberi list: every one installed); scopes "
             "every stage [default: all when generating, else every benchmark the run has].")] = None,
    limit: Annotated[int | None, typer.Option(
        "--limit", rich_help_panel=RUNS,
        help="First N questions of each benchmark.")] = None,
    runs: Annotated[int | None, typer.Option(
        "--runs", rich_help_panel=RUNS, show_default=False,
        help="Repeat as N independent runs tagged {tag}-run1 … {tag}-runN, each with its own seed [default: 1]; on "
             "stored answers, the first N of them [default there: every run of the family].")] = None,
    stages: Annotated[str | None, typer.Option(
        "--stages", rich_help_panel=RUNS,
        help="Comma list of generate,judge,passes [default: generate, judge when --judge is given, passes when "
             "--passes is given; without --base-url, judge and passes on the stored answers]. Without generate the "
             "candidate is never called and --base-url is not needed.")] = None,
    rerun: Annotated[bool, typer.Option(
        "--rerun", rich_help_panel=RUNS,
        help="Call again even for answers already stored.")] = False,
    retry_errors: Annotated[int, typer.Option(
        rich_help_panel=RUNS,
        help="Re-call an errored answer on resume up to this many more times.")] = 2,
    rejudge: Annotated[bool, typer.Option(
        "--rejudge", rich_help_panel=RUNS,
        help="Call the judges again on the stored answers (never the candidate).")] = False,
    reprocess: Annotated[bool, typer.Option(
        "--reprocess", rich_help_panel=RUNS,
        help="Only re-parse stored judge replies with the current rules: no API calls.")] = False,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", rich_help_panel=RUNS,
        help="Print the calls, tokens and cost this would take; call nothing.")] = False,
    max_cost: Annotated[float | None, typer.Option(
        "--max-cost", metavar="USD", rich_help_panel=RUNS,
        help="Spending limit of each run: no call is sent whose worst case (its prompt and its max tokens at the "
             "model's price) could take the run's cost past it; the run stops partial (exit 1), and the same "
             "command with a higher limit carries on without paying twice. Every model called must be priced "
             "(--pricing).")] = None,
    pricing: Annotated[Path | None, typer.Option(
        "--pricing", rich_help_panel=RUNS,
        help="Prices per million tokens (TOML) for --dry-run and --max-cost, added over "
             "data/pricing.toml (an entry it names replaces the shipped one).")] = None,
    compact: Compact = False,
    results_dir: ResultsDir = DEFAULT_RESULTS,
    data_dir: DataDir = DEFAULT_DATA,
    candidate: Sampled,
    judging: Sampled,
    client: ClientConfig,
) -> None:
    """Generate answers for the Japanese benchmarks, judge them and run the passes (resumable: re-run the same
    command to continue).

    Exit codes: 0 done (the run's status may still be partial: see view or the manifest); 1 the work ran but a
    stage failed: every call of it failed, or nothing of it is usable (one line names the most common error), or
    --max-cost stopped it; 2 bad input, nothing written.
    """
    prepare_arrow()
    from ..benchmarks import resolve
    from ..generate import GenerationConfig
    from ..judging import JudgeConfig
    from ..llm.endpoints import parse_judge
    from ..llm.params import load_families
    from ..passes import build
    from ..pipeline import RunRequest, check_stored, members

    prompt_set = _prompt_set(judge_prompts, bool(judge), reprocess, judging)
    if reprocess:
        _reprocess(results_dir, tag, model, runs, prompt_set)
        return
    stages_run = _stages(stages, base_url, bool(judge), bool(passes), rejudge, results_dir, tag, model, runs)
    families = str(model_families) if model_families else None
    load_families(families)  # a broken table is bad input, before anything runs
    _check_ranges(judge_concurrency, frequency_penalty, seed, retry_errors, batch_poll, batch_size, max_cost)
    if pass_option and not passes:
        raise UsageError(f"--pass-option {pass_option[0]!r} needs --passes naming its pass, e.g. --passes lang_mixing")
    judges_url = (judge_base_url or base_url or "").rstrip("/")
    request = RunRequest(
        model=model or "", base_url=base_url or "", results_dir=results_dir, data_dir=data_dir,
        benchmarks=None if benchmark is None else resolve(benchmark), tag=tag, api_key_env=api_key_env, limit=limit,
        stages=stages_run, client=client,
        generation=GenerationConfig(**candidate.params, families=families, frequency_penalty=frequency_penalty,
                                    seed=seed),
        rerun=rerun, retry_errors=retry_errors, judges=[parse_judge(spec, judges_url) for spec in judge or []],
        judge_api_key_env=judge_api_key_env, judge_concurrency=judge_concurrency, batch=batch,
        judge_batch=judge_batch, batch_poll=batch_poll, batch_size=batch_size,
        judging=JudgeConfig(**judging.params, families=families), max_cost=max_cost, pricing=pricing,
        rejudge=rejudge, judge_prompts=prompt_set, model_base_url=judge_base_url, compact=compact,
        passes=build(passes, pass_option or []) if passes is not None else [])
    family = members(request, runs)
    if "generate" not in stages_run:  # every run of the family must have answers before any is judged
        for each in family:
            check_stored(each, stages_run)
    if dry_run:
        _dry_run(request, family, pricing)
    else:
        _run_family(request, family)


def _prompt_set(judge_prompts: str | None, judged: bool, reprocess: bool, judging: Sampled) -> PromptSet:
    """``--judge-prompts`` loaded; with a clone, no judge sampling option applies (it sends what the original does)."""
    from ..judging.promptsets import load

    if judge_prompts is not None and not judged and not reprocess:
        raise UsageError("--judge-prompts chooses the prompts the judges are asked with: give --judge MODEL too")
    prompt_set = load(judge_prompts)
    if prompt_set.clone is not None and (given := judging.given):
        raise UsageError(f"{given[0]} does not apply with --judge-prompts {judge_prompts}: the judges are sent what "
                         "the original sends them (its llm_functions.py); drop it, or judge with Shaberi's prompts")
    return prompt_set


def _stages(stages: str | None, base_url: str | None, judged: bool, passes: bool, rejudge: bool, results_dir: Path,
            tag: str, model: str | None, runs: int | None) -> list[str]:
    """The stages to run. Without ``--base-url`` and ``--stages``, the stored answers' stages (the seed's
    ``--tag default --passes lang_mixing``), said in a note; a run that must generate needs the endpoint."""
    from ..pipeline import parse_stages, stored_runs

    found = parse_stages(stages, judged, passes, rejudge)
    if base_url is None and "generate" in found:
        needed = UsageError("--base-url is required (the OpenAI-compatible endpoint serving --model)")
        if stages is not None or found == ["generate"]:
            raise needed
        try:
            stored_runs(results_dir, tag, model, runs)
        except UsageError:
            raise needed from None
        found.remove("generate")
        typer.echo(f"note: no --base-url: {' and '.join(found)} on the stored answers of --tag {tag} (the "
                   "candidate is not called)", err=True)
    return found


def _check_ranges(judge_concurrency: int | None, frequency_penalty: float | None, seed: int | None, retry_errors: int,
                  batch_poll: float, batch_size: int, max_cost: float | None) -> None:
    """The run's own numeric options within their ranges (the client's and the sampling's are checked by their
    groups: ``options``)."""
    check_concurrency("--judge-concurrency", judge_concurrency)
    for option, value, ok, want in [
        ("--frequency-penalty", frequency_penalty, frequency_penalty is None or -2 <= frequency_penalty <= 2,
         "between -2 and 2"),
        ("--seed", seed, seed is None or -(2**63) <= seed < 2**63, "a 64-bit integer"),
        ("--retry-errors", retry_errors, 0 <= retry_errors <= MAX_COUNT, f"between 0 and {MAX_COUNT:,}"),
        ("--batch-poll", batch_poll, 0 < batch_poll < float("inf"), "a number of seconds above 0"),
        ("--batch-size", batch_size, 1 <= batch_size <= 50_000, "between 1 and 50,000 (OpenAI's limit)"),
        ("--max-cost", max_cost, max_cost is None or 0 < max_cost < float("inf"), "a number of USD above 0"),
    ]:
        if not ok:
            raise UsageError(f"{option} {shown(value)} is out of range: it must be {want}")


def _run_family(request: RunRequest, family: list[RunRequest]) -> None:
    """Each run of the family in turn (the others run when one fails: a family finishes), then where to look;
    exit 1 when one failed."""
    _family_notes(request)
    failed, told = [], set[str]()  # an endpoint's note is printed once for the family
    for each in family:
        outcome = run_request(each, told)
        if outcome.failed:
            failed.append(each)
            if outcome.status == "failed" and len(family) > 1:
                typer.echo(f"error: {each.tag} ({each.model}) holds nothing usable: the family's statistics leave it "
                           "out; the same command asks it again", err=True)
    where = "" if str(request.results_dir) == str(DEFAULT_RESULTS) else f" --results-dir {request.results_dir}"
    typer.echo(f"next: shaberi view --tag {request.tag}{where} (scores), shaberi report --tag {request.tag}{where} "
               "--out report.html (why)")
    if failed:
        raise typer.Exit(1)


def _reprocess(results_dir: Path, tag: str, model: str | None, runs: int | None, prompts: PromptSet) -> None:
    """``--reprocess``: every run the selector ``tag`` names re-read, with no call."""
    import asyncio

    from ..pipeline import reprocess_run, stored_runs
    from ..tables.sql import connect, query

    found = stored_runs(results_dir, tag, model, runs)
    for each in found:
        changed = asyncio.run(reprocess_run(results_dir, each.model, each.tag, prompts))
        run_id, which = each.run_id, f"{each.run_id}: " if len(found) > 1 else ""
        typer.echo(f"reprocessed run {run_id}: {changed} judgements changed, 0 API calls")
        for label, n in connect(results_dir).execute(  # read only by the clone that made them
                query("run.other_original_readings"), {"run": run_id, "label": prompts.label}).fetchall():
            typer.echo(f"note: {which}{n} judgements under {label} left as they are: give that clone with "
                       "--judge-prompts to read them again", err=True)


def _family_notes(request: RunRequest) -> None:
    """Say when the model family table changes what a model is sent (it never happens silently)."""
    from ..llm.params import Sampling, family_for, family_note

    clone = request.judge_prompts.clone
    asked: list[tuple[str, str, Sampling]] = [("judge", j.name, request.judging) for j in request.judges
                                              if clone is None]
    if "generate" in (request.stages or []):
        asked.insert(0, ("candidate", request.model, request.generation))
    for role, model, sampling in asked:
        if note := family_note(model, sampling):
            typer.echo(f"note: {role} {note}", err=True)
    if clone is None:
        return
    for j in request.judges:  # sent as the original sends it, the family table aside
        sent = clone.request(j.name)
        if dropped := clone.dropped(j.name):
            typer.echo(f"note: judge {j.name}: {request.judge_prompts.label}'s request also passes "
                       f"{', '.join(dropped)}: not sent (from a clone, only temperature, max tokens and reasoning "
                       "are)", err=True)
        fields, family = sent.fields, family_for(j.name, request.judging.families)
        if sent.api == "chat" and family and (
                clashes := sorted(set(fields) & {*family.omit, "max_tokens" if family.tokens_field else ""})):
            typer.echo(f"note: judge {j.name} is sent {', '.join(f'{k}={fields[k]}' for k in clashes)} as "
                       f"{request.judge_prompts.label} sends it; model family {family.name!r} says it takes none "
                       f"({family.why}): the endpoint may refuse every judge call", err=True)


def _judged_questions(request: RunRequest, stages: list[str]) -> dict[str, list[dict[str, Any]]]:
    """The questions the judges would see, by benchmark: the data files' when generating, else the stored run's."""
    from dataclasses import asdict

    from ..benchmarks import load, resolve
    from ..pipeline import check_stored
    from ..run_info import run_id_for
    from ..tables.store import Store

    found: dict[str, list[dict[str, Any]]] = {}
    if "generate" in stages:
        for name in request.benchmarks or resolve("all"):
            found[name] = [asdict(q) for q in load(name, request.data_dir, request.limit).questions]
        return found
    names = check_stored(request, stages).benchmarks
    for q in Store(request.results_dir).read("questions", run_id_for(request.model, request.tag)).to_pylist():
        if not names or q["benchmark"] in names:
            found.setdefault(q["benchmark"], []).append(q)
    return found


def _dry_run(request: RunRequest, runs: list[RunRequest], pricing: Path | None) -> None:
    """One table: a row per run, stage and model (a family's members one after another), then the total."""
    from ..benchmarks import load, resolve
    from ..estimate import estimate, stored_questions
    from ..pipeline import check_stored
    from ..run_info import validate_name

    for each in runs:
        validate_name("model", each.model)
        validate_name("tag", each.tag)
    stages = request.stages or []
    found = []
    if "judge" in stages:  # the prompt set as a run checks it: a dry run of a run that would be refused is refused
        questions = _judged_questions(runs[0], stages)
        request.judge_prompts.check(sorted(questions), questions, [j.name for j in request.judges])
    for each in runs:
        if "generate" in stages:
            names = each.benchmarks or resolve("all")
            items = [q for n in names for q in load(n, each.data_dir, each.limit).questions]
            scope = {(q.benchmark, q.question_id) for q in items} if each.limit else None
        else:  # the stored run's questions, as the run itself takes them (a data file only for --limit)
            stored = check_stored(each, stages)
            scope = stored.questions
            items = stored_questions(each.results_dir, each.model, each.tag, stored.benchmarks, scope)
        found += [(_label(each, runs), r) for r in estimate(
            each.results_dir, each.model, each.tag, each.base_url, items, each.generation,
            [j.name for j in each.judges] if "judge" in stages else [], each.judging.max_tokens, pricing,
            generating="generate" in stages, rejudge=each.rejudge, questions=scope, rerun=each.rerun,
            retry_errors=each.retry_errors, prompts=each.judge_prompts, judge_batch=each.judge_batch,
            batch=each.batch)]
    family = len(runs) > 1

    def cells(rows: list[Estimate]) -> list[str]:
        priced = "" if all(x.priced for x in rows) else " *"
        return [f"{sum(x.calls for x in rows):,}", f"{sum(x.reused for x in rows):,}",
                f"~{sum(x.prompt_tokens for x in rows):,}", f"~{sum(x.completion_tokens for x in rows):,}",
                f"{sum(x.completion_bound for x in rows):,}", f"${sum(x.cost_usd for x in rows):.2f}{priced}",
                f"${sum(x.cost_bound_usd for x in rows):.2f}{priced}"]

    if not found:  # --stages passes: rule passes make no call; a consulting pass's calls are not estimated
        typer.echo(f"Dry run: {request.model}, tag {request.tag}: no generation or judge call to estimate "
                   f"(stages: {', '.join(stages)})")
        return
    limits = _within_limit(runs, found) if request.max_cost is not None else []
    table = [[*([tag] if family else []), r.stage, r.model, *cells([r])] for tag, r in found]
    if len(found) > 1:
        table.append([*(["Total"] if family else []), "" if family else "Total", "", *cells([r for _, r in found])])
    header = [*(["Run"] if family else []), "Stage", "Model", "Calls", "Reused", "Prompt tokens",
              "Completion (typical)", "Completion (max)", "Cost typical (USD)", "Cost max (USD)"]
    print_rows(f"Dry run: {request.model or ', '.join(dict.fromkeys(r.model for r in runs))}, tag {request.tag}"
               f"{f' × {len(runs)} runs' if family else ''} "
               "(estimates; first calls only: judge fallbacks and retries come on top; * unpriced model counted "
               "as $0; nothing was called)", header, table, "table")
    for line in limits:
        typer.echo(line)


def _label(run: RunRequest, runs: list[RunRequest]) -> str:
    """A run as the dry run's table names it: its tag, MODEL@TAG among several models' runs."""
    return run.tag if len({r.model for r in runs}) == 1 else f"{run.model}@{run.tag}"


def _within_limit(runs: list[RunRequest], found: list[tuple[str, Estimate]]) -> list[str]:
    """``--dry-run --max-cost``: the models checked as the run checks them (unpriced: bad input), and a line per
    run saying whether the most its calls could cost fits beside what it has spent."""
    from ..llm.spending import free_note, open_budget
    from ..run_info import run_id_for

    lines = []
    for each in runs:
        rows = [r for label, r in found if label == _label(each, runs)]
        assert each.max_cost is not None
        urls = {j.name: j.base_url for j in each.judges}
        budget = open_budget(each.max_cost, each.results_dir, each.pricing, [run_id_for(each.model, each.tag)],
                             [(r.model, each.batch, each.base_url) if r.stage == "generation"
                              else (r.model, each.judge_batch, urls.get(r.model, "")) for r in rows])
        lines += [n for m, url in budget.free.items() if (n := f"note: {free_note(m, url)}") not in lines]
        most = budget.spent + sum(r.cost_bound_usd for r in rows)
        lines.append(f"--max-cost ${each.max_cost:g}, run {_label(each, runs)}: ${budget.spent:.4f} spent so far, "
                     f"at most ${most:.4f} with these calls: " + ("within the limit" if most <= each.max_cost else
                     "it may stop partway (then raise the limit and run it again: nothing paid for is asked again)"))
    return lines


def run_request(request: RunRequest, told: set[str] | None = None) -> Outcome:
    """Run one request, print what it did and why a stage failed; the caller sets the exit code. ``told``: the
    notes printed already (by the family's earlier runs)."""
    import asyncio

    from rich.console import Console

    from ..pipeline import run as run_pipeline
    from ..status import describe
    from .display import live_progress

    console = Console(stderr=True)

    async def go() -> Outcome:
        async with live_progress(console, told) as slot:
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
        errored = (f"; {j.answer_errors} errored answer{'s' if j.answer_errors != 1 else ''} not sent"
                   if j.answer_errors else "")
        typer.echo(f"{lead}judged {j.done - j.answer_errors} ({j.reused} reused, {j.judged} called, {j.failed} "
                   f"failed, {j.fallbacks} needed the fallback prompt, {j.null_scores} without a score){errored}")
        lead = "  "
    p = outcome.passes
    if p.answers:
        unreadable = sum(p.unreadable.values())
        calls = (f"; {p.consulted} model calls, {p.reused} verdicts reused, {p.failed} failed"
                 + (f", {unreadable} verdicts unreadable" if unreadable else "")) if (
            p.consulted or p.reused or p.failed) else ""
        noted = {name: n for name, n in p.noted.items() if n}
        noted_text = f"; flagged with no penalty: {', '.join(f'{k} {n}' for k, n in noted.items())}" if noted else ""
        typer.echo(f"{lead}passes over {p.answers} answers, changing the "
                   f"score of: {', '.join(f'{name} {n}' for name, n in p.flagged.items())}{noted_text}{calls}")
    if failed:
        typer.echo(f"  errored answers are retried by running the same command again, up to --retry-errors "
                   f"({request.retry_errors}) times each; --rerun asks them all again (see answers.error_type)")
    typer.echo(f"  status: {outcome.status}")
    for name, r in outcome.vain_stages.items():
        typer.echo(f"note: {describe(name, r)}; the run stays {outcome.status} (run the same command again to retry)",
                   err=True)
    if outcome.export_error:
        typer.echo(f"error: the export could not be written ({outcome.export_error}); the run stays "
                   f"{outcome.status}, its tables hold everything: shaberi export --tag {outcome.info.tag} writes it "
                   "again", err=True)
    if (stop := outcome.stopped) is not None:
        line = stop_line(stop, f"run {outcome.info.run_id}", outcome.spent or 0, outcome.counted or 0)
        typer.echo(f"error: {line}; raise --max-cost and run the same command again to continue (nothing already "
                   "paid for is asked again)", err=True)
    if broken := outcome.failed_stages:
        typer.echo("error: " + "; ".join(describe(name, r) for name, r in broken.items()), err=True)
    elif outcome.status == "failed":
        typer.echo(f"error: the run holds nothing usable: every benchmark failed (shaberi view --tag {request.tag} "
                   "says how)", err=True)
    return outcome

