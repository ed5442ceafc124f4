"""``shaberi compare A B``: is B better or worse than A, per benchmark, question by question?

A side is a tag (a run, or a run family ``{tag}-run1 … N`` of which the complete runs count), ``MODEL@TAG``
for one model of a tag that holds several (or ``--model-a`` / ``--model-b``): two tags of one model, or two
models, a fine-tune and its base, on the same questions. Paired per question on the same question text.

Like for like, or not at all: both sides are scored by the same judges (those both have, or ``--judge``),
under the same judging prompts (per judge and benchmark, the prompt hashes both sides have) and with the
same passes (the ``name@version`` both ran; a pass only one side ran is left out of both). What was used
and what was left out is reported (``Basis``); sides with nothing in common are refused. A judge under another
prompt set is another judge (``judging.promptsets``): two prompt sets are never pooled. What changing prompts (or
judges) does is asked for by name: ``--judge-a`` / ``--judge-b`` score side A by one judge and side B by another,
each under its own prompts (the same tag on both sides: the same answers judged twice).

Per question, each side's score (0–10 scale) is the mean over its runs and over the judges that scored the
question on **both** sides: a judge that scored it on one side only is left out of both for that question
(counted: ``judge_scores_dropped``), so one side is never one judge's score against the other's mean of
two. A question without such a judge is dropped and counted, per side, with its reason (no answer, answer
error, not judged, null score, no judge in common, other question text: a question id asked with more than
one text, as other data files do). Means are ``score_mean``, as every view's.

The table: per benchmark the mean difference B − A, then the **Overall** where two or more of the four that make it
were compared (the unweighted mean of their differences over their paired questions, as ``view``'s Overall is the
mean of the benchmark means). Its m rows are one family at α = 0.05: each is decided by the sign-flip test at α/m,
with that test's interval at 1 − α/m, so interval, p-value and verdict agree (``reports.verdict``: the rule, and
why neither a bootstrap nor the t test). Beside them the smallest difference a t test detects at that level with
80 % power (statsmodels ``TTestPower``). ``ComparisonReport.table`` and ``notes`` are what the CLI and the HTML
report print, so the two show one table.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from ..errors import UsageError
from ..tables.selection import Selection, Selector, left_out, parse_selector, select_one_model
from ..tables.sql import connect, query, score_mean
from .verdict import ALPHA, DRAWS, Test, min_pairs, overall, paired, verdict

__all__ = ["Basis", "Comparison", "ComparisonReport", "Side", "compare", "comparisons", "min_pairs", "other_texts",
           "parse_sides", "select_side"]

OVERALL = "overall"  # the Overall row's benchmark
_SEP = "\x1f"  # joins judge, benchmark and prompt hash into one key (chr(31) in paired_questions)


Side = Selector  # one side of a comparison: a selector naming one model's run or family


def parse_sides(root: Path, a: str, b: str, model: str | None = None, model_a: str | None = None,
                model_b: str | None = None) -> tuple[Side, Side]:
    """Sides A and B as the user named them (``selection.parse_selector``): ``--model`` for both, or
    ``--model-a`` / ``--model-b`` for one each."""
    if model is not None and (model_a is not None or model_b is not None):
        raise UsageError("--model names the model of both sides, --model-a and --model-b one side's: give one or the "
                         "other")
    return (parse_selector(root, a, model_a or model, "side A", "--model-a" if model_a else "--model"),
            parse_selector(root, b, model_b or model, "side B", "--model-b" if model_b else "--model"))


def select_side(root: Path, side: Side, name: str = "A") -> Selection:
    """The runs of one side: a tag holding several models needs one named (``MODEL@TAG``)."""
    return select_one_model(root, side, f"side {name}", "--model-a/--model-b")


@dataclass
class Comparison:
    """One row of the table: a benchmark, or the Overall (``benchmark`` "overall", over ``over``)."""

    benchmark: str
    title: str
    n: int
    mean_a: float | None = None
    mean_b: float | None = None
    diff: float | None = None
    ci_low: float | None = None  # the deciding test's interval (None: none, see ``reports.verdict``)
    ci_high: float | None = None
    ci_level: float | None = None  # the interval's confidence: 1 − α/m over the table's m verdicts
    test: str = ""  # the sign-flip test: "exact" (every sign pattern) or "drawn" (DRAWS seeded ones)
    p: float | None = None  # its p-value
    p_adjusted: float | None = None  # × m (Bonferroni, capped at 1): below 0.05 exactly where the verdict is given
    p_t: float | None = None  # the paired t test's, for information; None where undefined (no spread)
    mde: float | None = None  # smallest |difference| the t test detects with 80 % power at the verdict's level
    min_pairs: int = 0  # fewer paired questions than this (or that moved, for better or worse): no verdict
    moved_pairs: int = 0  # paired questions whose score differs between the sides
    verdict: str = ""
    dropped_a: dict[str, int] = field(default_factory=dict)  # reason -> questions without a score on side A
    dropped_b: dict[str, int] = field(default_factory=dict)
    judge_scores_dropped: int = 0  # of paired questions: a judge's score with no counterpart on the other side
    over: list[str] = field(default_factory=list)  # the Overall's benchmarks


@dataclass
class Basis:
    """What the two sides were compared on, and what was left out because only one side had it."""

    judges: list[str]
    judges_only_a: list[str]
    judges_only_b: list[str]
    passes: list[str]
    passes_only_a: list[str]
    passes_only_b: list[str]
    prompts: dict[str, list[str]]  # benchmark -> judging prompt hashes used (both sides)
    not_compared: dict[str, str]  # benchmark -> why (judged under different prompts, no scores on a side)
    runs_a: list[str]
    runs_b: list[str]
    excluded_runs: list[str]  # incomplete family members left out
    crossed: bool = False  # each side scored by its own judge (--judge-a / --judge-b), under its own prompts

    def lines(self) -> list[str]:
        def left(a: list[str], b: list[str]) -> str:
            parts = ([f"A's {', '.join(a)}"] if a else []) + ([f"B's {', '.join(b)}"] if b else [])
            return f" (left out, on one side only: {'; '.join(parts)})" if parts else ""

        out = [f"judges: {', '.join(self.judges)}{left(self.judges_only_a, self.judges_only_b)}",
               f"passes: {', '.join(self.passes) or 'none'}{left(self.passes_only_a, self.passes_only_b)}"]
        varied = {b: h for b, h in self.prompts.items() if len(h) > 1}
        out.append("judging prompts: each side its judge's own (what the comparison measures)" if self.crossed else
                   "judging prompts: the same on both sides" + "".join(
                       f"; {b}: {len(h)} versions" for b, h in varied.items()))
        out += [f"{b}: not compared, {why}" for b, why in self.not_compared.items()]
        if self.excluded_runs:
            out.append(f"left out, incomplete runs: {', '.join(self.excluded_runs)}")
        return out


@dataclass
class ComparisonReport:
    a: Side
    b: Side
    model_a: str
    model_b: str
    basis: Basis
    benchmarks: list[Comparison]
    judge_a: str | None = None  # each side's judge, when compared by name (--judge-a / --judge-b)
    judge_b: str | None = None
    family: int = 1  # m: the rows tested (each benchmark, and the Overall of two or more), each at α/m

    @property
    def label_a(self) -> str:
        return (self.a.label if self.model_a == self.model_b else f"{self.model_a}@{self.a.tag}") + (
            f" judged by {self.judge_a}" if self.judge_a else "")

    @property
    def label_b(self) -> str:
        return (self.b.label if self.model_a == self.model_b else f"{self.model_b}@{self.b.tag}") + (
            f" judged by {self.judge_b}" if self.judge_b else "")

    def to_dict(self) -> dict[str, Any]:
        return {"a": {"tag": self.a.tag, "model": self.model_a, "label": self.label_a, "judge": self.judge_a},
                "b": {"tag": self.b.tag, "model": self.model_b, "label": self.label_b, "judge": self.judge_b},
                "basis": asdict(self.basis), "family": self.family,
                "benchmarks": [asdict(c) for c in self.benchmarks], "notes": self.notes()}

    def table(self) -> tuple[list[str], list[list[str]]]:
        """The header and rows ``shaberi compare`` prints and the HTML report shows."""
        first, m = self.benchmarks[0], self.family
        level = first.ci_level or 1 - ALPHA
        header = ["Benchmark", "n", "A", "B", "B − A", f"{100 * level:.4g} % CI", "p" + (f" (×{m})" if m > 1 else ""),
                  f"Verdict (p < {ALPHA:g}{f', α/{m} each' if m > 1 else ''})", f"MDE 80 % (α {1 - level:.3g})",
                  "Dropped A", "Dropped B"]
        rows = [[c.title, str(c.n), _num(c.mean_a), _num(c.mean_b), _num(c.diff, signed=True),
                 _interval(c.ci_low, c.ci_high), _p(c.p_adjusted), c.verdict, _num(c.mde), _dropped(c.dropped_a),
                 _dropped(c.dropped_b)] for c in self.benchmarks]
        return header, rows

    def notes(self) -> list[str]:
        """What the table's verdicts rest on, beyond its columns."""
        rows, m = self.benchmarks, self.family
        level = ALPHA / m
        how = f"sign-flip test (exact up to 13 questions, else over {DRAWS:,} seeded sign patterns)"
        notes = [f"verdicts: each row's {how} at α = {ALPHA:g}/{m} = {level:.3g}; one family: the chance that any "
                 f"'better' or 'worse' here is false is at most {ALPHA:g}; each interval is its test's; p is ×{m}"
                 if m > 1 else f"verdict: the {how} at α = {ALPHA:g}, with that test's interval"]
        if overall_row := next((c for c in rows if c.benchmark == OVERALL), None):
            titles = [c.title for c in rows if c.benchmark in overall_row.over]
            notes.append(f"Overall: the mean of the {len(titles)} benchmarks' differences ({', '.join(titles)}), each "
                         "over its own paired questions, tested as one (each question weighted by 1 / its "
                         "benchmark's questions)")
        fewest = rows[0].min_pairs
        if few := [f"{c.title} ({c.n} paired, {c.moved_pairs} moved)" for c in rows if c.verdict == "too few"]:
            notes.append(f"too few for a verdict: {', '.join(few)}; with fewer than {fewest} that moved no sign "
                         f"pattern is rare enough to reach α = {level:.3g}, whatever the scores")
        if dropped := [f"{c.title} {c.judge_scores_dropped}" for c in rows
                       if c.judge_scores_dropped and c.benchmark != OVERALL]:
            notes.append("judge scores left out, the judge having scored the question on one side only (each question "
                         f"is compared on the judges that scored it on both): {', '.join(dropped)}")
        return notes


def _num(value: float | None, signed: bool = False) -> str:
    return "–" if value is None else _digits(value, "+" if signed else "")


def _digits(x: float, sign: str = "", near: float = 0.0) -> str:
    """``x`` to two decimals, or as many more (up to 10) as it takes not to print it as ``near`` when it is not
    (0.00076, not 0.00; 0.04997, not 0.050): a number that excludes a bound never prints as touching it."""
    places = 2
    while places < 10 and x != near and round(x, places) == near:
        places += 1
    return f"{x:{sign}.{places}f}"


def _interval(low: float | None, high: float | None) -> str:
    """``1.20–3.40``; ``-1.53 to 2.00`` when it starts below 0 (``-1.53–-0.70`` reads badly)."""
    if low is None or high is None:
        return "–"
    return f"{_digits(low)} to {_digits(high)}" if low < 0 else f"{_digits(low)}–{_digits(high)}"


def _p(value: float | None) -> str:
    """A p-value to three decimals, or more where three would round it onto 0.05 (0.04997 is not 0.050)."""
    if value is None:
        return "–"
    if value < 0.001:
        return "<0.001"
    return f"{value:.3f}" if round(value, 3) != ALPHA or value == ALPHA else _digits(value, near=ALPHA)


def _dropped(reasons: dict[str, int]) -> str:
    return "; ".join(f"{n} {why}" for why, n in sorted(reasons.items())) or "0"


def other_texts(con: duckdb.DuckDBPyConnection, runs_a: list[str], runs_b: list[str]) -> set[tuple[str, str]]:
    """The (benchmark, question id) pairs asked with other texts, on a side or across both: not one question."""
    return set(con.execute(query("compare.texts_differ"), {"a": runs_a, "b": runs_b}).fetchall())


def _complete(con: duckdb.DuckDBPyConnection, side: Selection, judge: str | None) -> tuple[list[str], list[str]]:
    """A family's complete runs (for ``judge``, or every judge), and the tags of those left out."""
    if not side.family:
        return side.run_ids, []
    incomplete = {run_id for run_id, _, _ in left_out(con, judge or "*")}
    kept = [r.run_id for r in side.runs if r.run_id not in incomplete]
    if not kept:
        raise UsageError(f"no run of {side.tag!r} is complete (every member lacks questions or judgements the "
                         "family has); see shaberi view --tag " + side.tag)
    return kept, [r.tag for r in side.runs if r.run_id in incomplete]


def compare(results_dir: Path, a: str | Side, b: str | Side, model: str | None = None, judge: str | None = None,
            model_a: str | None = None, model_b: str | None = None, judge_a: str | None = None,
            judge_b: str | None = None) -> ComparisonReport:
    """Side ``b`` against side ``a`` (the baseline). A side given as text is ``TAG`` or ``MODEL@TAG``; ``model``
    names the model of both sides, ``model_a`` / ``model_b`` of one; ``judge_a`` / ``judge_b``: the judge of each
    side (both, instead of ``judge``), e.g. one judge under two prompt sets."""
    if (judge_a is None) != (judge_b is None) or (judge is not None and judge_a is not None):
        raise UsageError("--judge names the judge of both sides, --judge-a and --judge-b one each: give --judge, or "
                         "both --judge-a and --judge-b")
    if isinstance(a, Side) and isinstance(b, Side):
        side_a, side_b = a, b
    else:
        side_a, side_b = parse_sides(results_dir, str(a), str(b), model, model_a, model_b)
    chosen_a, chosen_b = select_side(results_dir, side_a, "A"), select_side(results_dir, side_b, "B")
    if chosen_a.run_ids == chosen_b.run_ids and judge_a == judge_b:
        raise UsageError(f"both sides are {side_a.label!r} ({chosen_a.models[0]}): name another tag or model to "
                         "compare with (or two judges of it: --judge-a, --judge-b)")
    con = connect(results_dir, None, list(dict.fromkeys(chosen_a.run_ids + chosen_b.run_ids)))
    runs_a, excluded_a = _complete(con, chosen_a, judge_a or judge)
    runs_b, excluded_b = _complete(con, chosen_b, judge_b or judge)
    label_a, label_b = side_a.label, side_b.label
    if judge_a is not None and judge_b is not None:
        basis, keys = _crossed_basis(con, label_a, label_b, runs_a, runs_b, judge_a, judge_b)
    else:
        basis, keys = _basis(con, label_a, label_b, runs_a, runs_b, judge)
    basis.excluded_runs = excluded_a + excluded_b
    rows = _per_question(con, runs_a, runs_b, basis, keys, (judge_a, judge_b) if judge_a else None)
    for bench, _, pairs, _, dropped, *_ in rows:  # a benchmark both judged, with no question to pair: say why
        if not pairs:
            other = (dropped or {}).get("other question text")
            basis.not_compared[bench] = "no question scored on both sides" + (
                f" ({other} share an id but not the text: other data files?)" if other else "")
    results, family = comparisons(rows)
    if not results:
        why = "; ".join(f"{b}: {w}" for b, w in basis.not_compared.items())
        raise UsageError(f"{label_a!r} and {label_b!r} share no scored question"
                         f"{f' for judge {judge!r}' if judge else ''}{f' ({why})' if why else ''}; nothing to compare")
    return ComparisonReport(side_a, side_b, chosen_a.models[0], chosen_b.models[0], basis, results, judge_a, judge_b,
                            family)


def _basis(con: duckdb.DuckDBPyConnection, tag_a: str, tag_b: str, runs_a: list[str], runs_b: list[str],
           judge: str | None) -> tuple[Basis, list[str]]:
    """The judges, passes and judging prompts both sides have; and the (judge, benchmark, prompt hash) keys of
    the judgements to compare."""
    def judges(runs: list[str]) -> list[str]:  # a judge whose calls all failed scored nothing there: not a judge
        return [j for (j,) in con.execute(query("compare.judges"), {"r": runs}).fetchall()]

    def passes(runs: list[str]) -> list[str]:
        return [p for (p,) in con.execute(query("compare.passes"), {"r": runs}).fetchall()]

    ja, jb = judges(runs_a), judges(runs_b)
    if judge is not None:
        for tag, present in ((tag_a, ja), (tag_b, jb)):
            if judge not in present:
                raise UsageError(f"judge {judge!r} has no judgements for {tag!r}; judges there: "
                                 f"{', '.join(present) or 'none'}")
        used = [judge]
    else:
        used = [j for j in ja if j in jb]
        if not used:
            raise UsageError(f"{tag_a!r} and {tag_b!r} share no judge ({tag_a}: {', '.join(ja) or 'none'}; "
                             f"{tag_b}: {', '.join(jb) or 'none'}): they were scored differently, nothing is "
                             "like for like")
    pa_, pb = passes(runs_a), passes(runs_b)
    prompts: dict[str, dict[bool, set[tuple[str, str]]]] = {}
    for bench, is_a, j, h in con.execute(
            query("compare.prompts"), {"a": runs_a, "b": runs_b, "used": used}).fetchall():
        prompts.setdefault(bench, {True: set(), False: set()})[is_a].add((j, h))
    common: dict[str, list[str]] = {}
    not_compared = {}
    for bench, by in sorted(prompts.items()):
        both = by[True] & by[False]
        if both:
            common[bench] = sorted({h for _, h in both})
        elif by[True] and by[False]:
            not_compared[bench] = (f"judged under different prompts ({tag_a}: "
                                   f"{', '.join(sorted({h or 'none' for _, h in by[True]}))}; {tag_b}: "
                                   f"{', '.join(sorted({h or 'none' for _, h in by[False]}))})")
        else:
            not_compared[bench] = f"judged for {tag_a if by[True] else tag_b} only"
    basis = Basis(used, [j for j in ja if j not in used], [j for j in jb if j not in used],
                  [p for p in pa_ if p in pb], [p for p in pa_ if p not in pb], [p for p in pb if p not in pa_],
                  common, not_compared, runs_a, runs_b, [])
    keys = [_SEP.join((j, bench, h)) for bench, by in prompts.items() for j, h in by[True] & by[False]]
    return basis, keys


def _crossed_basis(con: duckdb.DuckDBPyConnection, tag_a: str, tag_b: str, runs_a: list[str], runs_b: list[str],
                   judge_a: str, judge_b: str) -> tuple[Basis, list[str]]:
    """``--judge-a`` / ``--judge-b``: side A scored by one judge, side B by another, each under its own prompts;
    the keys of both sides' judgements, per benchmark both judged."""
    found: dict[str, dict[bool, set[str]]] = {}
    for bench, is_a, h in con.execute(
            query("compare.crossed_prompts"), {"a": runs_a, "b": runs_b, "ja": judge_a, "jb": judge_b}).fetchall():
        found.setdefault(bench, {True: set(), False: set()})[is_a].add(h)
    for tag, judge, is_a in ((tag_a, judge_a, True), (tag_b, judge_b, False)):
        if not any(by[is_a] for by in found.values()):
            present = [j for (j,) in con.execute(
                query("compare.scored_judges"), {"r": runs_a if is_a else runs_b}).fetchall()]
            raise UsageError(f"judge {judge!r} has no scores for {tag!r}; judges there: {', '.join(present) or 'none'}")
    common = {b: sorted(by[True] | by[False]) for b, by in sorted(found.items()) if by[True] and by[False]}
    not_compared = {b: f"judged for {tag_a if by[True] else tag_b} only" for b, by in sorted(found.items())
                    if b not in common}

    def passes(runs: list[str]) -> list[str]:
        return [p for (p,) in con.execute(query("compare.passes"), {"r": runs}).fetchall()]

    pa_, pb = passes(runs_a), passes(runs_b)
    basis = Basis([f"A: {judge_a}", f"B: {judge_b}"], [], [], [p for p in pa_ if p in pb],
                  [p for p in pa_ if p not in pb], [p for p in pb if p not in pa_], common, not_compared, runs_a,
                  runs_b, [], crossed=True)
    keys = [_SEP.join((j, bench, h)) for bench, by in found.items() if bench in common
            for j, side in ((judge_a, True), (judge_b, False)) for h in by[side]]
    return basis, keys


def _per_question(con: duckdb.DuckDBPyConnection, runs_a: list[str], runs_b: list[str], basis: Basis,
                  keys: list[str], crossed: tuple[str | None, str | None] | None = None) -> list[tuple]:
    """Per benchmark: the paired scores of each side, the dropped questions by reason per side, and the judge
    scores left out of paired questions (a judge that scored the question on one side only), by the pairing rule
    ``paired_questions()`` (``sql/070_compare.sql``). ``crossed``: side A's judge and side B's (``--judge-a`` /
    ``--judge-b``), paired as one."""
    ja, jb = crossed or (None, None)
    return con.execute(
        query("compare.benchmarks"),
        {"a": runs_a, "b": runs_b, "passes": basis.passes, "keys": keys, "ja": ja, "jb": jb,
         "benchmarks": sorted(basis.prompts)}).fetchall()


def comparisons(rows: list[tuple]) -> tuple[list[Comparison], int]:
    """The table's rows and m from each benchmark's paired scores — ``(benchmark, title, scores_a, scores_b,
    dropped_a, dropped_b, judge_scores_dropped, in_overall)``, as ``compare.benchmarks`` gives them: each benchmark
    compared, then the Overall, one family, each row tested at α/m (``reports.verdict``). What ``compare`` runs,
    and the calibration bench and the tests with it."""
    import numpy as np

    compared = [r for r in rows if r[2]]
    counted = [r for r in compared if r[7]]  # the benchmarks that make the Overall
    m = max(1, len(compared) + (len(counted) > 1))  # rows tested (the Overall of one benchmark would be that one)
    level = ALPHA / m
    results = []
    for bench, title, scores_a, scores_b, dropped_a, dropped_b, one_sided, _ in compared:
        d = np.asarray(scores_b, dtype=float) - np.asarray(scores_a, dtype=float)
        c = _row(bench, title, len(d), score_mean(scores_a), score_mean(scores_b), score_mean(d.tolist()),
                 paired(d, level), m, dict(dropped_a or {}), dict(dropped_b or {}), int(one_sided))
        results.append(c)
    if len(counted) > 1:
        parts = [c for c in results if c.benchmark in {r[0] for r in counted}]
        means = [score_mean([c.mean_a for c in parts]), score_mean([c.mean_b for c in parts])]
        test = overall([np.asarray(r[3], dtype=float) - np.asarray(r[2], dtype=float) for r in counted], level)

        def summed(side: str) -> dict[str, int]:
            out: dict[str, int] = {}
            for c in parts:
                for why, n in getattr(c, side).items():
                    out[why] = out.get(why, 0) + n
            return out

        results.append(_row(OVERALL, "Overall", sum(c.n for c in parts), means[0], means[1],
                            score_mean([c.diff for c in parts]), test, m, summed("dropped_a"), summed("dropped_b"),
                            sum(c.judge_scores_dropped for c in parts), [c.benchmark for c in parts]))
    return results, m


def _row(bench: str, title: str, n: int, mean_a: float | None, mean_b: float | None, diff: float | None, t: Test,
         m: int, dropped_a: dict[str, int], dropped_b: dict[str, int], one_sided: int,
         over: list[str] | None = None) -> Comparison:
    level = ALPHA / m
    return Comparison(bench, title, n, mean_a, mean_b, diff, t.low, t.high, 1 - level,
                      "" if t.p is None else "exact" if t.exact else "drawn", t.p,
                      None if t.p is None else min(1.0, m * t.p), t.p_t, t.mde, min_pairs(level), t.moved,
                      verdict(t, n, level), dropped_a, dropped_b, one_sided, over or [])
