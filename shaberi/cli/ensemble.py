"""``shaberi ensemble …``: cache N answers, import recorded ones, evaluate strategies, report and gate."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..errors import UsageError
from .common import (
    DEFAULT_DATA,
    DEFAULT_RESULTS,
    CacheDir,
    DataDir,
    ResultsDir,
    ensemble_app,
    prepare_arrow,
    print_rows,
)
from .options import client_options

if TYPE_CHECKING:
    from ..ensemble.gate import Comparison
    from ..ensemble.result import Result
    from ..llm.config import ClientConfig

__all__ = ["ensemble_check", "ensemble_generate_cache", "ensemble_import_responses", "ensemble_quick_eval",
           "ensemble_regenerate_baseline", "ensemble_report"]

Significance = Annotated[float | None, typer.Option(
    "--significance", help="The family's α: a regression is declared when a family-adjusted p-value is at most "
    "this [default: the baseline file's alpha (check), 0.1 (quick-eval), each result file's (report)].")]
RequireComplete = Annotated[bool, typer.Option(
    "--require-complete", help="Refuse (exit 2, nothing graded) a cache that cannot give every question asked "
    "for with all N answers, instead of sampling what it holds and saying so.")]
ConsensusModel = Annotated[str | None, typer.Option("--consensus-model", help="MODEL[@BASE_URL] for the strategies "
                                                   "that call a model (standard, elo, council).")]
Judge = Annotated[str | None, typer.Option("--judge", help="MODEL[@BASE_URL] grading free answers (SimpleQA, HLE "
                                           "exact-match).")]
BaseUrl = Annotated[str | None, typer.Option("--base-url", help="Endpoint of models given without @URL.")]
ApiKeyEnv = Annotated[str | None, typer.Option("--api-key-env", help="Variable holding the API key [default: "
                                               "OPENAI_API_KEY, optional on loopback].")]
BaselineFile = Annotated[Path, typer.Option("--baseline-file", help="Committed gate configuration.")]


@ensemble_app.command("generate-cache")
@client_options
def ensemble_generate_cache(
    *,
    model: Annotated[str, typer.Option("--model", help="Model whose N answers per question to cache.")],
    base_url: Annotated[str, typer.Option("--base-url", help="OpenAI-compatible endpoint serving --model.")],
    datasets: Annotated[str, typer.Option("--datasets", help="Comma list: gsm8k, math500, truthfulqa, mmlu_pro, "
                                          "arc_challenge, arc_easy, hellaswag, simpleqa, gpqa, hle, hallumix "
                                          "(shaberi list: every one installed).")],
    n: Annotated[int, typer.Option("--n", help="Answers per question (sample_index 0…n−1).")] = 5,
    temperature: Annotated[float, typer.Option("--temperature", help="Sampling temperature of the members.")] = 0.7,
    max_tokens: Annotated[int, typer.Option("--max-tokens", help="Most tokens per answer.")] = 2048,
    limit: Annotated[int | None, typer.Option("--limit", help="First N questions of each dataset.")] = None,
    api_key_env: ApiKeyEnv = None,
    max_cost: Annotated[float | None, typer.Option(
        "--max-cost", metavar="USD", help="Spending limit over the entries made: no call is sent whose worst case "
        "(its prompt and --max-tokens at the model's price) could take their cost past it; they stop partial (exit "
        "1), and the same command with a higher limit carries on without paying twice.")] = None,
    pricing: Annotated[Path | None, typer.Option(
        "--pricing", help="Prices per million tokens (TOML) for --max-cost, added over data/pricing.toml (an entry "
        "it names replaces the shipped one).")] = None,
    cache_dir: CacheDir = None,
    results_dir: ResultsDir = DEFAULT_RESULTS,
    data_dir: DataDir = DEFAULT_DATA,
    client: ClientConfig,
) -> None:
    """N answers to every question, stored once per (model, dataset, N, temperature); resumable. The datasets
    run at once under one adaptive limit. With --cache-dir, what its files hold is not asked again, and the
    entries are written there (commit them).

    Exit codes: 0 done; 1 every answer of an entry is an error, or --max-cost stopped it; 2 bad input."""
    prepare_arrow()
    import asyncio

    from ..ensemble.commands import generate
    from ..llm.params import Sampling, family_note

    if note := family_note(model, Sampling(temperature, max_tokens)):  # as run says it: the cache's name keeps -tT
        typer.echo(f"note: {note}", err=True)
    if max_cost is not None and not 0 < max_cost < float("inf"):
        raise UsageError(f"--max-cost {max_cost:g} is out of range: it must be a number of USD above 0")
    failed, stopped = [], []
    made_all = asyncio.run(generate(results_dir, data_dir, model, base_url, datasets, n, temperature, max_tokens,
                                    api_key_env, client, limit, cache_dir=cache_dir, max_cost=max_cost,
                                    pricing=pricing))
    for made in made_all:
        done = made.done
        called = done.done - done.cached
        errors = f", {done.errors:,} errors: run again to retry them" if done.errors else ""
        typer.echo(f"cache {made.run_id}: {done.done - done.errors:,} of {done.total:,} answers ({called:,} called "
                   f"now, {done.cached:,} already there){errors}" + (f"; written to {made.path}" if made.path else ""))
        _warn_identical(made.dataset, n, made.identical, made.complete,
                        f"does {base_url} honour seed and temperature {temperature:g}?")
        if done.errors and done.errors == done.total:
            failed.append(made.run_id)
        if made.stopped:
            stopped.append(made)
    if stopped:
        from ..llm.spending import spent_usd
        from .common import stop_line

        everything = [m.run_id for m in made_all]  # one limit over every entry made: its figures are theirs
        spent = spent_usd(results_dir, pricing, everything)
        stop = stopped[0].stopped
        assert stop is not None
        one = len(everything) == 1
        line = stop_line(stop, f"cache entr{'y' if one else 'ies'} {', '.join(everything)}", spent,
                         stopped[0].counted or spent, "the entry has" if one else "they have")
        typer.echo(f"error: {line} "
                   f"({', '.join(m.run_id for m in stopped)} left partial); raise --max-cost and run the same command "
                   "again to continue (nothing already paid for is asked again)", err=True)
    if failed or stopped:
        if failed:
            typer.echo(f"FAILED: every answer is an error in {', '.join(failed)} (see: shaberi view, or the answers "
                       "table's error column)", err=True)
        raise typer.Exit(1)


@ensemble_app.command("import-responses")
def ensemble_import_responses(
    dataset: Annotated[str, typer.Option("--dataset", help="The ground-truth dataset the responses answer, "
                                                          "e.g. mmlu_pro.")],
    model: Annotated[str, typer.Option("--model", help="The name the members go under.")],
    files: Annotated[list[Path], typer.Argument(help="One JSON Lines file (question_id, response) per member; the "
                                                "first is the single-model baseline.")],
    cache_dir: CacheDir = None,
    results_dir: ResultsDir = DEFAULT_RESULTS,
    data_dir: DataDir = DEFAULT_DATA,
) -> None:
    """Pre-recorded responses as ensemble members (sample_index in the order given): zero calls. Every file
    answers the same questions, each once, with text; questions no file answers are not evaluated (the
    coverage is stated). With --cache-dir, the entry is written there too (commit it)."""
    prepare_arrow()
    from ..ensemble.commands import import_responses

    done = import_responses(results_dir, data_dir, model, dataset, files, cache_dir)
    typer.echo(f"cache {done.run_id}: {len(files)} members, {', '.join(f'{c:,}' for c in done.counts)} responses")
    if done.counts[0] < done.questions:  # a score over what was answered, with the coverage stated
        typer.echo(f"{dataset}: the files answer {done.counts[0]:,} of its {done.questions:,} questions; the others "
                   "are not answers, never graded: quick-eval samples from the answered ones and says so")
    _warn_identical(dataset, len(files), done.identical, done.complete, "are the files copies of one another?")


def _warn_identical(dataset: str, n: int, identical: int, complete: int, ask: str) -> None:
    """One warning line when some question's N members are byte-identical: a vote over copies measures nothing."""
    if n > 1 and identical:
        typer.echo(f"warning: {dataset}: all {n} members are byte-identical on {identical:,} of {complete:,} "
                   f"questions: majority or any consensus over identical members measures nothing there ({ask})",
                   err=True)


def _holm(c: Comparison) -> float:
    """The smaller family-adjusted p of the gate's two tests (NaN before the adjustment)."""
    return min((p for p in (c.p_mcnemar_holm, c.p_ttest_holm) if p is not None), default=math.nan)


def _quick_eval_print(result: Result, out: Path | None, results_dir: Path) -> tuple[list[Comparison], list[str]]:
    """Print the gated comparisons and what the cache and graders could not give, write the result file;
    return the regressions."""
    from ..ensemble.result import attempted_lines, coverage_lines, failures, unreadable_lines, verdicts

    gated = verdicts(result)
    header = ["Dataset", "Strategy", "n", "Baseline", "Mean of N", "Strategy acc", "Δ", "Discordant", "p McNemar",
              "p t", "p Fisher", "p adj (min)", "MDE", "Calls", "Verdict"]
    rows = []
    for c in gated:
        o = result.datasets[c.dataset].strategies[c.strategy]
        rows.append([c.dataset, c.strategy, str(c.n), f"{c.baseline:.1%}", f"{c.samples_mean:.1%}", f"{c.accuracy:.1%}",
                     f"{100 * c.difference:+.1f}", f"{c.discordance:.1%}", f"{c.p_mcnemar:.3f}", f"{c.p_ttest:.3f}",
                     f"{c.p_fisher:.3f}", f"{_holm(c):.3f}", _mde(c.mde),
                     f"{o.requests} ({o.reused} reused)", "REGRESSION" if c.regression else "ok"])
    print_rows(f"quick-eval {result.model}, seed {result.seed}, sample {result.sample}", header, rows, "table")
    typer.echo(family_line(result))
    for line in coverage_lines(result) + attempted_lines(result) + unreadable_lines(result):
        typer.echo(line)
    path = out or results_dir / "quick-eval" / f"{result.model.replace('/', '__')}-{'+'.join(result.strategies)}" \
        f"-seed{result.seed}-n{result.sample}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(result.to_json())
    typer.echo(f"result file: {path}")
    return [c for c in gated if c.regression], failures(result)


def _mde(mde: float) -> str:
    return "-" if math.isinf(mde) else f"{100 * mde:.1f}"


def family_line(result: Result) -> str:
    """What the adjusted p-values and the MDE are relative to."""
    own = 2 * sum(len(d.strategies) for d in result.datasets.values())
    family = f"{result.family}: " if result.family else "this evaluation: "
    return (f"family {family}{result.tests()} tests at α = {result.alpha:g} (this job: {own}); p adj (min): the "
            f"smaller of McNemar's and the t-test's p, Holm-adjusted within the job at its share of α, on the "
            f"family's scale; MDE: the regression (points) the exact McNemar test at α/{result.tests()} detects with "
            f"80 % power at the observed discordance (-: none at this n)")


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
    consensus_model: ConsensusModel = None,
    judge: Judge = None,
    base_url: BaseUrl = None,
    api_key_env: ApiKeyEnv = None,
    baseline_model: Annotated[str | None, typer.Option("--baseline-model", help="A separate cached run (e.g. "
                                                       "temperature 0) whose sample 0 is the baseline.")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Result file [default: results/quick-eval/…json].",
                                             dir_okay=False)] = None,
    significance: Significance = None,
    require_complete: RequireComplete = False,
    cache_dir: CacheDir = None,
    results_dir: ResultsDir = DEFAULT_RESULTS,
    data_dir: DataDir = DEFAULT_DATA,
) -> None:
    """Strategies over a seeded sample of cached questions (zero generation calls), graded and gated.

    Exit codes: 0 no significant regression against the single-model baseline; 1 a significant regression, or a
    strategy × dataset that could not be compared at all (every consensus call failed, or no question with a
    readable grade on every side): one line names each, the result file is written either way; 2 bad input."""
    prepare_arrow()
    import asyncio

    from ..ensemble.commands import evaluate
    from ..ensemble.gate import ALPHA

    result = asyncio.run(evaluate(results_dir, model, strategy, sample, seed, datasets, n=n, temperature=temperature,
                                  consensus_model=consensus_model, judge=judge, base_url=base_url,
                                  api_key_env=api_key_env, baseline_model=baseline_model,
                                  alpha=ALPHA if significance is None else significance,
                                  require_complete=require_complete, cache_dir=cache_dir, data_dir=data_dir))
    _fail_on(*_quick_eval_print(result, out, results_dir))


@ensemble_app.command("report")
def ensemble_report(
    files: Annotated[list[Path], typer.Argument(help="quick-eval result files (from one job or many).")],
    out: Annotated[Path | None, typer.Option("--out", help="Write the Markdown here instead of stdout.")] = None,
    significance: Significance = None,
) -> None:
    """One Markdown report over result files: per dataset, baseline and each strategy with the paired tests, and
    each job's verdict as the job gave it: Holm within the job at its share of α, which bounds the family-wise
    error over the whole configuration at α (``shaberi.ensemble.gate``). With every job's file it also shows Holm
    over the whole configuration pooled, and where the two differ (information only: the exit code follows the
    jobs' verdicts).

    Exit codes: 0 no significant regression in a complete set of files; 1 a significant regression (a job's
    verdict), a strategy × dataset that could not be compared at all, or a family whose job files are not all
    given (one line names each; the report is written first); 2 bad input."""
    from ..ensemble.report import load_results, markdown

    if significance is not None and not 0 < significance < 1:
        raise UsageError(f"--significance {significance:g} is out of range: it must be between 0 and 1, e.g. 0.1")
    text, gated, problems = markdown(load_results(files), significance)
    if out:
        out.write_text(text, encoding="utf-8")
        typer.echo(f"report: {out}")
    else:
        sys.stdout.write(text)
    _fail_on([c for c in gated if c.regression], problems)


@ensemble_app.command("check")
def ensemble_check(
    model: Annotated[str, typer.Option("--model", help="The baselines file's entry to check.")],
    baseline_file: BaselineFile = Path("baselines/quick-eval.json"),
    consensus_model: ConsensusModel = None,
    judge: Judge = None,
    base_url: BaseUrl = None,
    api_key_env: ApiKeyEnv = None,
    strategy: Annotated[str | None, typer.Option("--strategy", help="Comma list: one CI job's strategies, of "
                                                 "those the baseline file configures [default: all of them].")
                        ] = None,
    datasets: Annotated[str | None, typer.Option("--datasets", help="Comma list: one CI job's datasets, of those "
                                                 "the baseline file configures [default: all of them].")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Result file (for ensemble report) [default: "
                                             "results/quick-eval/…json].", dir_okay=False)] = None,
    significance: Significance = None,
    require_complete: RequireComplete = False,
    cache_dir: CacheDir = None,
    results_dir: ResultsDir = DEFAULT_RESULTS,
    data_dir: DataDir = DEFAULT_DATA,
) -> None:
    """The CI gate: quick-eval as the baseline file configures it (or one job's slice: --strategy, --datasets).
    The multiple-comparison family is the model's whole configuration however it is sliced into jobs: a job
    gets α × its tests ÷ the family's and runs Holm within them, so the family-wise error over the whole
    configuration is at most α (Bonferroni across the jobs), and the jobs' verdicts and the report's agree.

    Exit codes: 0 no significant regression; 1 a significant regression, or a strategy × dataset that could not
    be compared at all (one line names each); 2 bad input."""
    prepare_arrow()
    import asyncio

    from ..ensemble.commands import check

    result, entry = asyncio.run(check(results_dir, baseline_file, model, consensus_model=consensus_model, judge=judge,
                                      base_url=base_url, api_key_env=api_key_env, strategies=_split(strategy),
                                      datasets=_split(datasets), significance=significance,
                                      require_complete=require_complete, cache_dir=cache_dir, data_dir=data_dir))
    regressions, failed = _quick_eval_print(result, out, results_dir)
    _accepted(entry.get("accuracy") or {}, result)
    _fail_on(regressions, failed)
    typer.echo("gate passed: no significant regression against the single-model baseline")


@ensemble_app.command("regenerate-baseline")
def ensemble_regenerate_baseline(
    model: Annotated[str, typer.Option("--model", help="The baselines file's entry to evaluate again (or to add, "
                                       "with --datasets and --strategies).")],
    datasets: Annotated[str | None, typer.Option("--datasets", help="The entry's datasets, comma-separated "
                                                 "[default: the entry's].", show_default=False)] = None,
    strategies: Annotated[str | None, typer.Option("--strategies", help="The entry's strategies, comma-separated "
                                                   "[default: the entry's].", show_default=False)] = None,
    sample: Annotated[int | None, typer.Option("--sample", help="Questions drawn per dataset [default: the "
                                               "entry's; 500 for a new one].", show_default=False)] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="The sample's seed [default: the entry's; 0 for a "
                                             "new one].", show_default=False)] = None,
    baseline_file: BaselineFile = Path("baselines/quick-eval.json"),
    consensus_model: ConsensusModel = None,
    judge: Judge = None,
    base_url: BaseUrl = None,
    api_key_env: ApiKeyEnv = None,
    significance: Annotated[float | None, typer.Option(
        "--significance", help="Also make this the file's alpha (for every model it configures) [default: keep "
        "the file's].")] = None,
    require_complete: RequireComplete = False,
    cache_dir: CacheDir = None,
    results_dir: ResultsDir = DEFAULT_RESULTS,
    data_dir: DataDir = DEFAULT_DATA,
) -> None:
    """Evaluate the model's whole configuration afresh and make its accuracies the accepted ones in the baseline
    file (commit the change), printing old and new. --datasets, --strategies, --sample, --seed replace the entry's
    configuration, or add an entry for a model the file lacks (the file is made if it does not exist). Afresh:
    from the cache's member answers alone, every consensus answer and grade made again (nothing read back from an
    earlier quick-eval). A regression is shown but does not stop the rewrite: this is accepting the current
    state. Exit codes: 0 rewritten; 2 bad input (nothing written)."""
    prepare_arrow()
    import asyncio

    from ..ensemble.commands import regenerate_baseline

    result, old, new = asyncio.run(regenerate_baseline(
        results_dir, baseline_file, model, significance=significance, datasets=_split(datasets),
        strategies=_split(strategies), sample=sample, seed=seed, consensus_model=consensus_model, judge=judge,
        base_url=base_url, api_key_env=api_key_env, require_complete=require_complete, cache_dir=cache_dir,
        data_dir=data_dir))
    _quick_eval_print(result, None, results_dir)
    rows = [[dataset, name, _acc((old.get(dataset) or {}).get(name)), _acc(value),
             _delta((old.get(dataset) or {}).get(name), value)]
            for dataset, values in new.items() for name, value in values.items()]
    print_rows(f"accepted accuracies of {model} in {baseline_file}", ["Dataset", "Of", "Was", "Now", "Change"], rows,
               "table")
    typer.echo(f"rewrote {baseline_file}: commit it to accept these accuracies")


def _acc(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _delta(old: float | None, new: float | None) -> str:
    return "new" if old is None else ("-" if new is None else f"{100 * (new - old):+.1f} pts")


def _split(text: str | None) -> list[str] | None:
    return [x.strip() for x in text.split(",") if x.strip()] if text else None


def _accepted(accepted: dict[str, Any], result: Result) -> None:
    """The accuracies last accepted (regenerate-baseline) beside today's: for the record, not the verdict."""
    from ..ensemble.result import accuracy

    for dataset, values in accepted.items():
        got = result.datasets.get(dataset)
        if got:
            now = {"baseline": accuracy(got.baseline)} | {s: accuracy(o.correct) for s, o in got.strategies.items()}
            typer.echo(f"  {dataset}: accepted " + ", ".join(f"{k} {_acc(v)}" for k, v in values.items()) + "; now "
                       + ", ".join(f"{k} {_acc(v)}" for k, v in now.items()))


def _fail_on(regressions: list[Comparison], failed: list[str] | None = None) -> None:
    """Exit 1 with one line naming each significant regression, and one naming what could not be compared and
    why (``failures``: a broken judge or consensus model is a CI job's red, never a green "not compared"), else
    return."""
    if regressions:
        typer.echo("REGRESSION: " + ", ".join(f"{c.strategy} on {c.dataset} ({100 * c.difference:+.1f} points, "
                                              f"adjusted p {_holm(c):.3f})" for c in regressions), err=True)
    if failed:
        typer.echo("FAILED: " + "; ".join(failed), err=True)
    if regressions or failed:
        raise typer.Exit(1)

