"""``shaberi ensemble report FILES…``: quick-eval result files, one Markdown report for a pull request.

Each file may come from a separate CI job (one strategy each, say). The report does not re-adjust
across the files: each file records its family (``gate``: the model's whole configuration, α split
among its jobs) and the report re-derives each job's own verdict from it, so the report and the
jobs agree by construction. Per dataset: the baseline, the mean of the N samples, then per strategy its
accuracy, the difference from the baseline with its 95 % interval, the discordance, the job's own
McNemar, paired-t and Fisher p-values, the family-adjusted ones, the smallest detectable regression and
the verdict. When the files given cover only part of a family (a job's file missing), it says so. Then,
per model, dataset and grader, how many responses were graded and how many were unreadable, and how
many had no grade at all (left out of every accuracy and test).
"""

from __future__ import annotations

import math
from pathlib import Path

from ..errors import DataError
from .evaluate import Result, attempted_lines, coverage_lines, excluded_lines, failures, grader_rows, verdicts
from .gate import Comparison

__all__ = ["load_results", "markdown"]


def load_results(paths: list[Path]) -> list[tuple[Path, Result]]:
    """The result files, each once (a path given twice, or two names of one file, count once)."""
    found = []
    for path in dict.fromkeys(p.resolve() for p in paths):
        try:
            found.append((path, Result.from_json(path.read_bytes())))
            problem = _bad_result(found[-1][1])
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            problem = f"{type(exc).__name__}: {exc}"
        if problem:
            raise DataError(f"{path} is not a quick-eval result file ({problem}); write one with shaberi ensemble "
                            "quick-eval --out FILE")
    return found


def _bad_result(r: Result) -> str | None:
    """What makes a result file unusable (its α, family or vectors), or None."""
    if not (isinstance(r.alpha, int | float) and 0 < r.alpha < 1):
        return f"alpha {r.alpha!r} is not between 0 and 1"
    if not (isinstance(r.family_tests, int) and r.family_tests >= 0):
        return f"family_tests {r.family_tests!r} is not a whole number ≥ 0"
    for name, d in r.datasets.items():
        n = len(d.question_ids)
        vectors = {"baseline": d.baseline, "baseline_attempted": d.baseline_attempted, "samples_mean": d.samples_mean}
        vectors |= {f"{s}.correct": o.correct for s, o in d.strategies.items()}
        vectors |= {f"{s}.attempted": o.attempted for s, o in d.strategies.items()}
        if bad := [k for k, v in vectors.items() if not isinstance(v, list) or len(v) != n]:
            return f"{name}: {', '.join(bad)} should hold {n} values, one per question"
    return None


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def _p(x: float | None) -> str:
    return "-" if x is None else ("<0.001" if x < 0.001 else f"{x:.3f}")


def _families(results: list[tuple[Path, Result]]) -> tuple[list[str], list[str]]:
    """One line per family (its α and tests, the jobs' files given, whether they cover it), and one problem per
    family they do not cover: a missing job's verdict is unknown, which a gate must not read as a pass."""
    lines, missing = [], []
    by_family: dict[tuple[str, float, int], list[tuple[Path, Result]]] = {}
    for path, r in results:
        by_family.setdefault((r.family or f"{r.model}: {path.name} alone", r.alpha, r.tests()), []).append((path, r))
    for (name, alpha, tests), members in by_family.items():
        seen = {(d, s) for _, r in members for d, o in r.datasets.items() for s in o.strategies}
        covered = 2 * len(seen)
        lines.append(f"- **{name}**: {tests} tests at α = {alpha:g}, {len(members)} job file(s) "
                     + (f"covering all {tests} tests" if covered >= tests else
                        f"covering {covered} of the {tests} tests: a job's file is missing, its verdict is not here"))
        if covered < tests:
            missing.append(f"{name}: the files cover {covered} of its {tests} tests (a job's result file is missing)")
        if sum(2 * len(o.strategies) for _, r in members for o in r.datasets.values()) > covered:
            lines.append("  - the jobs overlap (a strategy on a dataset checked by two of them): the split of α "
                         "assumes they partition the configuration, so the family's error may exceed α")
    return lines, missing


def markdown(results: list[tuple[Path, Result]], alpha: float | None = None
             ) -> tuple[str, list[Comparison], list[str]]:
    """The report, the gated comparisons (``regression`` set on each, as its job set it, or at ``alpha`` when
    given), and what kept the report from a verdict: strategies whose every call failed, families whose
    files are missing."""
    rows: list[tuple[Result, Comparison]] = [(r, c) for _, r in results for c in verdicts(r, alpha)]
    family_lines, missing = _families(results)
    problems = [f"{r.model}: {line}" for _, r in results for line in failures(r)] + missing
    lines = [f"## Ensemble quick-eval: {len(rows)} comparisons from {len(results)} file(s)", ""]
    if alpha is not None:
        lines += [f"Verdicts at α = {alpha:g} (--significance), not the jobs' own α.", ""]
    regressions = [c for _, c in rows if c.regression]
    lines.append(f"**{len(regressions)} significant regression(s)**: " + ", ".join(
        f"{c.strategy} on {c.dataset}" for c in regressions) if regressions else
        "**No significant regression** against the single-model baseline" + (" in the files given." if problems
                                                                              else "."))
    if problems:
        lines += ["", "**Not checked**: " + "; ".join(problems)]
    lines += ["", "Families (each job's verdict is its own, Holm within the job at its share of the family's α):",
              *family_lines]
    for dataset in dict.fromkeys(c.dataset for _, c in rows):
        lines += ["", f"### {dataset}", "",
                  "| model | strategy | n | baseline | mean of N | strategy | Δ (95 % CI) | worse / better | "
                  "discordant | p McNemar | p paired t | p Fisher | p adjusted (McN / t) | MDE | verdict |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for result, c in rows:
            if c.dataset != dataset:
                continue
            verdict = "**regression**" if c.regression else ("better" if c.ci_low > 0 else "no regression")
            mde = "-" if math.isinf(c.mde) else f"{100 * c.mde:.1f} pts"
            lines.append(
                f"| {result.model} | {c.strategy} | {c.n} | {_pct(c.baseline)} | {_pct(c.samples_mean)} | "
                f"{_pct(c.accuracy)} | {100 * c.difference:+.1f} ({100 * c.ci_low:+.1f} to {100 * c.ci_high:+.1f}) | "
                f"{c.worse} / {c.better} | {_pct(c.discordance)} | {_p(c.p_mcnemar)} | {_p(c.p_ttest)} | "
                f"{_p(c.p_fisher)} | {_p(c.p_mcnemar_holm)} / {_p(c.p_ttest_holm)} | {mde} | {verdict} |")
    coverage = [line for _, r in results for line in coverage_lines(r)]
    if coverage:
        lines += ["", "Partly generated caches:", *(f"- {line}" for line in coverage)]
    attempted = [line for _, r in results for line in attempted_lines(r)]
    if attempted:
        lines += ["", "Judge-graded datasets (SimpleQA style):", *(f"- {line}" for line in attempted)]
    graders = [(r.model, ", ".join(r.strategies), *row) for _, r in results for row in grader_rows(r)]
    if graders:
        lines += ["", "### Unreadable responses per grader", "",
                  "| model | job (strategies) | dataset | grader | graded | unreadable | share | no grade (left out) |",
                  "|---|---|---|---|---|---|---|---|"]
        lines += [f"| {model} | {job} | {dataset} | {grader} | {graded} | {unread} | "
                  f"{_pct(unread / graded if graded else 0)} | {no_grade} |"
                  for model, job, dataset, grader, graded, unread, no_grade in graders]
        lines += ["", "Unreadable: no rule found an answer (none, timeout: graded wrong), or the judge's reply could "
                  "not be read (unparsed: no grade, left out of the accuracies and tests, as is a failed grading "
                  "call)."]
    left_out = [line for _, r in results for line in excluded_lines(r)]
    if left_out:
        lines += ["", *(f"- {line}" for line in left_out)]
    lines += ["", "McNemar: exact, one-sided, against the single answer (sample 0), paired by question. Paired t: "
              "the strategy's per-question correctness against the mean of the N samples. Fisher: unpaired, shown for "
              "comparison only. p adjusted: Holm within the job at its share of the family's α, scaled to the "
              "family (a regression when ≤ α). Discordant: questions where the two answers differ in correctness. "
              "MDE: the regression the exact McNemar test at α ÷ the family's tests detects with 80 % power at "
              "this n and discordance (exact computation)."]
    return "\n".join(lines) + "\n", [c for _, c in rows], problems
