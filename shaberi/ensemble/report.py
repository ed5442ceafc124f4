"""``shaberi ensemble report FILES…``: quick-eval result files, one Markdown report for a pull request.

Each file may come from a separate job (one strategy each, say); the gate runs once over all their
comparisons, so Holm's correction covers everything the report shows. Per dataset: the baseline, the
mean of the N samples, then per strategy its accuracy, the difference from the baseline with its 95 %
interval, the McNemar, paired-t and Fisher p-values, the Holm-adjusted ones, the smallest detectable
regression and the verdict. Then, per model, dataset and grader, how many responses were graded and how many
were unreadable (``parse_method`` none, unparsed or timeout, as the quick-eval counted them in the
``judgements`` table), and how many had no grade at all (left out of every accuracy and test).
"""

from __future__ import annotations

from pathlib import Path

from ..errors import DataError
from .evaluate import Result, attempted_lines, comparisons, excluded_lines, grader_rows
from .gate import ALPHA, Comparison, gate

__all__ = ["load_results", "markdown"]


def load_results(paths: list[Path]) -> list[tuple[Path, Result]]:
    found = []
    for path in paths:
        try:
            found.append((path, Result.from_json(path.read_bytes())))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise DataError(f"{path} is not a quick-eval result file ({type(exc).__name__}: {exc}); write one with "
                            "shaberi ensemble quick-eval --out FILE") from None
    return found


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def _p(x: float | None) -> str:
    return "-" if x is None else ("<0.001" if x < 0.001 else f"{x:.3f}")


def markdown(results: list[tuple[Path, Result]], alpha: float = ALPHA) -> tuple[str, list[Comparison]]:
    """The report and the gated comparisons (``regression`` set on each)."""
    rows: list[tuple[Result, Comparison]] = [(r, c) for _, r in results for c in comparisons(r)]
    gate([c for _, c in rows], alpha)
    lines = [f"## Ensemble quick-eval: {len(rows)} comparisons, Holm-corrected at α = {alpha:g}", ""]
    regressions = [c for _, c in rows if c.regression]
    lines.append(f"**{len(regressions)} significant regression(s)**: " + ", ".join(
        f"{c.strategy} on {c.dataset}" for c in regressions) if regressions else
        "**No significant regression** against the single-model baseline.")
    for dataset in dict.fromkeys(c.dataset for _, c in rows):
        lines += ["", f"### {dataset}", "",
                  "| model | strategy | n | baseline | mean of N | strategy | Δ (95 % CI) | worse / better | "
                  "p McNemar | p paired t | p Fisher | p Holm (McN / t) | MDE | verdict |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for result, c in rows:
            if c.dataset != dataset:
                continue
            verdict = "**regression**" if c.regression else ("better" if c.ci_low > 0 else "no regression")
            lines.append(
                f"| {result.model} | {c.strategy} | {c.n} | {_pct(c.baseline)} | {_pct(c.samples_mean)} | "
                f"{_pct(c.accuracy)} | {100 * c.difference:+.1f} ({100 * c.ci_low:+.1f} to {100 * c.ci_high:+.1f}) | "
                f"{c.worse} / {c.better} | {_p(c.p_mcnemar)} | {_p(c.p_ttest)} | {_p(c.p_fisher)} | "
                f"{_p(c.p_mcnemar_holm)} / {_p(c.p_ttest_holm)} | {100 * c.mde:.1f} pts | {verdict} |")
    attempted = [line for _, r in results for line in attempted_lines(r)]
    if attempted:
        lines += ["", "Judge-graded datasets (SimpleQA style):", *(f"- {line}" for line in attempted)]
    graders = [(r.model, *row) for _, r in results for row in grader_rows(r)]
    if graders:
        lines += ["", "### Unreadable responses per grader", "",
                  "| model | dataset | grader | graded | unreadable | share | no grade (left out) |",
                  "|---|---|---|---|---|---|---|"]
        lines += [f"| {model} | {dataset} | {grader} | {graded} | {unread} | {_pct(unread / graded if graded else 0)} "
                  f"| {no_grade} |" for model, dataset, grader, graded, unread, no_grade in graders]
        lines += ["", "Unreadable: no rule found an answer (none, timeout: graded wrong), or the judge's reply could "
                  "not be read (unparsed: no grade, left out of the accuracies and tests, as is a failed grading "
                  "call)."]
    left_out = [line for _, r in results for line in excluded_lines(r)]
    if left_out:
        lines += ["", *(f"- {line}" for line in left_out)]
    lines += ["", "McNemar: exact, one-sided, against the single answer (sample 0), paired by question. Paired t: "
              "the strategy's per-question correctness against the mean of the N samples. Fisher: unpaired, shown for "
              "comparison only. MDE: the smallest regression detectable with 80 % power at this n."]
    return "\n".join(lines) + "\n", [c for _, c in rows]
