"""``shaberi ensemble …``: cache N answers, import recorded ones, evaluate strategies, report and gate."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from .common import (
    DEFAULT_DATA,
    DEFAULT_RESULTS,
    DataDir,
    ResultsDir,
    arrow_without_pandas,
    check_concurrency,
    ensemble_app,
    print_rows,
)

if TYPE_CHECKING:
    from ..ensemble.evaluate import Result
    from ..ensemble.gate import Comparison

__all__ = ["ensemble_check", "ensemble_generate_cache", "ensemble_import_responses", "ensemble_quick_eval",
           "ensemble_report"]


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
    arrow_without_pandas()
    import asyncio

    from ..ensemble.commands import generate
    from ..llm.client import ClientConfig
    from ..llm.control import ControlConfig

    check_concurrency("--concurrency", concurrency)
    config = ClientConfig(control=ControlConfig(max(1, concurrency * 2 // 3), 1, concurrency))
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
    arrow_without_pandas()
    from ..ensemble import cache
    from ..ensemble import datasets as gt

    (name,) = gt.resolve(dataset)
    run_id, counts = cache.import_responses(results_dir, model, gt.load(name, data_dir), files)
    typer.echo(f"cache {run_id}: {len(files)} members, {', '.join(f'{c:,}' for c in counts)} responses")


def _holm(c: Comparison) -> float:
    """The smaller Holm-adjusted p of the gate's two tests (NaN before the adjustment)."""
    return min((p for p in (c.p_mcnemar_holm, c.p_ttest_holm) if p is not None), default=math.nan)


def _quick_eval_print(result: Result, out: Path | None, results_dir: Path) -> Path:
    from ..ensemble.evaluate import attempted_lines, comparisons, unreadable_lines
    from ..ensemble.gate import gate

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
    print_rows(f"quick-eval {result.model}, seed {result.seed}, sample {result.sample}", header, rows, "table")
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
    """Strategies over a seeded sample of cached questions (zero generation calls), graded and gated.

    Exit codes: 0 no significant regression against the single-model baseline; 1 a significant regression (one
    line names it; the result file is written either way); 2 bad input."""
    arrow_without_pandas()
    import asyncio

    from ..ensemble.commands import evaluate

    result = asyncio.run(evaluate(results_dir, model, strategy, sample, seed, datasets, n=n, temperature=temperature,
                                  consensus_model=consensus_model, judge=judge, base_url=base_url,
                                  api_key_env=api_key_env, baseline_model=baseline_model))
    _quick_eval_print(result, out, results_dir)
    from ..ensemble.evaluate import comparisons
    from ..ensemble.gate import gate

    _fail_on([c for c in gate(comparisons(result)) if c.regression])


@ensemble_app.command("report")
def ensemble_report(
    files: Annotated[list[Path], typer.Argument(help="quick-eval result files (from one job or many).")],
    out: Annotated[Path | None, typer.Option("--out", help="Write the Markdown here instead of stdout.")] = None,
) -> None:
    """One Markdown report over result files: per dataset, baseline and each strategy with the paired tests."""
    from ..ensemble.report import load_results, markdown

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
    strategy: Annotated[str | None, typer.Option("--strategy", help="Comma list: one CI job's strategies, of "
                                                 "those the baseline file configures [default: all of them].")
                        ] = None,
    datasets: Annotated[str | None, typer.Option("--datasets", help="Comma list: one CI job's datasets, of those "
                                                 "the baseline file configures [default: all of them].")] = None,
    results_dir: ResultsDir = DEFAULT_RESULTS,
) -> None:
    """The CI gate: quick-eval as the baseline file configures it (or one job's slice: --strategy, --datasets).

    Exit codes: 0 no significant regression; 1 a significant regression (one line names it); 2 bad input."""
    arrow_without_pandas()
    import asyncio

    from ..ensemble.commands import check

    split = lambda text: [x.strip() for x in text.split(",") if x.strip()] if text else None  # noqa: E731
    result, entry = asyncio.run(check(results_dir, baseline_file, model, consensus_model=consensus_model, judge=judge,
                                      base_url=base_url, api_key_env=api_key_env, strategies=split(strategy),
                                      datasets=split(datasets)))
    from ..ensemble.evaluate import accuracy, comparisons
    from ..ensemble.gate import gate

    _quick_eval_print(result, None, results_dir)
    regressions = [c for c in gate(comparisons(result), entry["alpha"]) if c.regression]
    for dataset, accepted in (entry.get("accuracy") or {}).items():
        got = result.datasets.get(dataset)
        if got:
            now = {s: accuracy(o.correct) for s, o in got.strategies.items()}
            typer.echo(f"  {dataset}: accepted {accepted}, now " + ", ".join(
                f"{s} {'-' if v is None else f'{v:.3f}'}" for s, v in now.items()))
    _fail_on(regressions)
    typer.echo("gate passed: no significant regression against the single-model baseline")


def _fail_on(regressions: list[Comparison]) -> None:
    """Exit 1 with one line naming each significant regression (a CI job's red), else return."""
    if regressions:
        typer.echo("REGRESSION: " + ", ".join(f"{c.strategy} on {c.dataset} ({100 * c.difference:+.1f} points, Holm p "
                                              f"{_holm(c):.3f})" for c in regressions), err=True)
        raise typer.Exit(1)

