"""``shaberi ensemble report FILES…``: quick-eval result files, one Markdown report for a pull request.

Each file may come from a separate CI job (one strategy each, say). Each file records its family
(``gate``: the model's whole configuration, α split among its jobs in proportion to their tests) and the
report re-derives each job's own verdict from it, so the report and the jobs agree by construction, and
the exit code follows those verdicts. Such a verdict bounds the family-wise error over the whole
configuration at α (Bonferroni across the jobs, Holm within each). When the files cover a family, the
report also shows Holm over the whole configuration (every p-value pooled, at α) and where it differs:
another procedure with the same bound, shown for information, since acting on whichever of the two flags
more would not keep that bound. Per dataset: the baseline, the mean of the N samples, then per strategy its
accuracy, the difference from the baseline with its 95 % interval, the discordance, the job's own
McNemar, paired-t and Fisher p-values, the family-adjusted ones, the smallest detectable regression, the
verdict and the configuration-wide one. When the files given cover only part of a family (a job's file
missing), or a strategy could not be compared at all, it says so and exits 1. Then, per model, dataset and
grader, how many responses were graded and how many were unreadable, and how many had no grade at all
(left out of every accuracy and test).
"""

from __future__ import annotations

import math
from pathlib import Path

from ..errors import DataError
from .gate import Comparison
from .result import Result, attempted_lines, coverage_lines, excluded_lines, failures, grader_rows, verdicts

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


_Family = tuple[str, float, int]  # name, α, tests


def _family_of(path: Path, r: Result) -> _Family:
    return r.family or f"{r.model}: {path.name} alone", r.alpha, r.tests()


def _families(results: list[tuple[Path, Result]]) -> tuple[dict[_Family, list[str]], list[str], set[_Family]]:
    """The lines of each family (its α and tests, the jobs' files given, whether they cover it), one problem per
    family they do not cover (a missing job's verdict is unknown, which a gate must not read as a pass), and
    the families the files cover exactly once (those whose configuration-wide Holm can be computed)."""
    lines: dict[_Family, list[str]] = {}
    missing: list[str] = []
    whole: set[_Family] = set()
    by_family: dict[_Family, list[Result]] = {}
    for path, r in results:
        by_family.setdefault(_family_of(path, r), []).append(r)
    for key, members in by_family.items():
        name, alpha, tests = key
        seen = {(d, s) for r in members for d, o in r.datasets.items() for s in o.strategies}
        covered = 2 * len(seen)
        lines[key] = [f"- **{name}**: {tests} tests at α = {alpha:g}, {len(members)} job file(s) "
                      + (f"covering all {tests} tests" if covered >= tests else
                         f"covering {covered} of the {tests} tests: a job's file is missing, its verdict is not here")]
        if covered < tests:
            missing.append(f"{name}: the files cover {covered} of its {tests} tests (a job's result file is missing)")
        if sum(2 * len(o.strategies) for r in members for o in r.datasets.values()) > covered:
            lines[key].append("  - the jobs overlap (a strategy on a dataset checked by two of them): the split of α "
                              "assumes they partition the configuration, so the family's error may exceed α")
        elif covered >= tests:
            whole.add(key)
    return lines, missing, whole


def _pooled(comparisons: list[Comparison], alpha: float) -> list[tuple[float, bool]]:
    """Holm over a whole family's p-values pooled at ``alpha`` (``multipletests``): per comparison, the smaller
    adjusted p of its two tests and whether it regresses."""
    from statsmodels.stats.multitest import multipletests

    k = len(comparisons)
    adjusted = multipletests([c.p_mcnemar for c in comparisons] + [c.p_ttest for c in comparisons],
                             alpha=alpha, method="holm")[1]
    return [(float(min(adjusted[i], adjusted[k + i])), bool(min(adjusted[i], adjusted[k + i]) <= alpha))
            for i in range(k)]


def _configuration_holm(rows: list[tuple[_Family, Comparison]], whole: set[_Family], alpha: float | None
                        ) -> tuple[dict[int, tuple[float, bool]], dict[_Family, str]]:
    """The configuration-wide Holm verdict of every comparison of a family the files cover (by ``id`` of its
    Comparison: adjusted p, regression), and one line per such family: its verdicts, and where they differ from
    the jobs' own."""
    by_family: dict[_Family, list[Comparison]] = {}
    for key, c in rows:
        if key in whole:
            by_family.setdefault(key, []).append(c)
    pooled: dict[int, tuple[float, bool]] = {}
    lines: dict[_Family, str] = {}
    for key, compared in by_family.items():
        level, tests = key[1] if alpha is None else alpha, key[2]
        head = f"  - Holm over the whole configuration (its {tests} p-values pooled, at α = {level:g}): "
        if 2 * len(compared) < tests:
            lines[key] = head + (f"not computed: {tests - 2 * len(compared)} of its tests have no p-value (a "
                                 "strategy not compared, see Not checked)")
            continue
        found = dict(zip(map(id, compared), _pooled(compared, level), strict=True))
        pooled |= found
        flagged = [f"{c.strategy} on {c.dataset}" for c in compared if found[id(c)][1]]
        differ = [f"{c.strategy} on {c.dataset} (configuration-wide: {_word(found[id(c)][1])}, adjusted p "
                  f"{_p(found[id(c)][0])}; its job: {_word(bool(c.regression))}, adjusted p {_p(_job_p(c))})"
                  for c in compared if found[id(c)][1] != c.regression]
        lines[key] = head + (f"regression(s): {', '.join(flagged)}" if flagged else "no regression") + (
            f"; it differs from the jobs' verdicts on {', '.join(differ)}" if differ else
            "; the same verdicts as the jobs'")
    return pooled, lines


def _job_p(c: Comparison) -> float | None:
    """The smaller family-adjusted p of the job's two tests."""
    return min((p for p in (c.p_mcnemar_holm, c.p_ttest_holm) if p is not None), default=None)


def _word(regression: bool) -> str:
    return "regression" if regression else "no regression"


CONTROLS = ("What a verdict controls: each job's verdict is Holm within the job at its share of the family's α (α × "
            "the job's tests ÷ the family's tests). The shares add up to α, so (Bonferroni across the jobs) the chance "
            "that any regression declared anywhere in the configuration is false, the family-wise error, is at most "
            "α however the configuration is split into jobs. **The exit code follows these verdicts**, as the CI jobs "
            "gave them. Holm over the whole configuration (every job's p-values pooled, at α) bounds the same error "
            "and is shown beside them when the files cover a family; with the family split into several jobs it is "
            "another procedure, which can find a regression the split misses and miss one the split finds. It is "
            "for information only: acting on whichever of the two flags more would let the family-wise error "
            "exceed α. Checked whole in one job, the two are the same.")


def markdown(results: list[tuple[Path, Result]], alpha: float | None = None
             ) -> tuple[str, list[Comparison], list[str]]:
    """The report, the gated comparisons (``regression`` set on each, as its job set it, or at ``alpha`` when
    given), and what kept the report from a verdict: strategies × datasets not compared at all, families whose
    files are missing."""
    tagged = [(_family_of(path, r), r, c) for path, r in results for c in verdicts(r, alpha)]
    rows = [(r, c) for _, r, c in tagged]
    family_lines, missing, whole = _families(results)
    pooled, pooled_lines = _configuration_holm([(key, c) for key, _, c in tagged], whole, alpha)
    problems = [f"{r.model}: {line}" for _, r in results for line in failures(r)] + missing
    lines = [f"## Ensemble quick-eval: {len(rows)} comparisons from {len(results)} file(s)", ""]
    if alpha is not None:
        lines += [f"Verdicts at α = {alpha:g} (--significance), not the jobs' own α.", ""]
    regressions = [c for _, c in rows if c.regression]
    lines.append(f"**{len(regressions)} significant regression(s)**: " + ", ".join(
        f"{c.strategy} on {c.dataset}" for c in regressions) if regressions else
        "**No significant regression** against the single-model baseline" + (" in the files given." if problems
                                                                              else "."))
    differ = [f"{c.strategy} on {c.dataset} ({_word(pooled[id(c)][1])} there, {_word(bool(c.regression))} in its job)"
              for _, c in rows if id(c) in pooled and pooled[id(c)][1] != c.regression]
    if differ:
        lines += ["", "**Holm over the whole configuration differs from the jobs' verdicts** on " + ", ".join(differ)
                  + ": the exit code follows the jobs' verdicts (see What a verdict controls)."]
    if problems:
        lines += ["", "**Not checked**: " + "; ".join(problems)]
    lines += ["", CONTROLS, "", "Families:"]
    for key, said in family_lines.items():
        lines += [*said, pooled_lines.get(key, "  - Holm over the whole configuration: not computed without every "
                                               "job's file exactly once")]
    for dataset in dict.fromkeys(c.dataset for _, c in rows):
        lines += ["", f"### {dataset}", "",
                  "| model | strategy | n | baseline | mean of N | strategy | Δ (95 % CI) | worse / better | "
                  "discordant | p McNemar | p paired t | p Fisher | p adjusted (McN / t) | MDE | verdict | "
                  "Holm over the configuration |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for result, c in rows:
            if c.dataset != dataset:
                continue
            verdict = "**regression**" if c.regression else ("better" if c.ci_low > 0 else "no regression")
            mde = "-" if math.isinf(c.mde) else f"{100 * c.mde:.1f} pts"
            wide = f"{_word(pooled[id(c)][1])} ({_p(pooled[id(c)][0])})" if id(c) in pooled else "-"
            lines.append(
                f"| {result.model} | {c.strategy} | {c.n} | {_pct(c.baseline)} | {_pct(c.samples_mean)} | "
                f"{_pct(c.accuracy)} | {100 * c.difference:+.1f} ({100 * c.ci_low:+.1f} to {100 * c.ci_high:+.1f}) | "
                f"{c.worse} / {c.better} | {_pct(c.discordance)} | {_p(c.p_mcnemar)} | {_p(c.p_ttest)} | "
                f"{_p(c.p_fisher)} | {_p(c.p_mcnemar_holm)} / {_p(c.p_ttest_holm)} | {mde} | {verdict} | {wide} |")
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
              "family (a regression when ≤ α). Holm over the configuration: the adjusted p of Holm over every "
              "p-value of the family pooled (information only; see What a verdict controls). Discordant: questions "
              "where the two answers differ in correctness. MDE: the regression the exact McNemar test at α ÷ the "
              "family's tests detects with 80 % power at this n and discordance (exact computation)."]
    return "\n".join(lines) + "\n", [c for _, c in rows], problems
