"""``shaberi compare TAG_A TAG_B``: is B better or worse than A, per benchmark, question by question?

Like for like, or not at all: both sides are scored by the same judges (those both have, or ``--judge``),
under the same judging prompts (per judge and benchmark, the prompt hashes both sides have) and with the
same passes (the ``name@version`` both ran; a pass only one side ran is left out of both). What was used
and what was left out is reported (``Basis``); sides with nothing in common are refused. A run family
(``{tag}-run1 … N``) counts its complete runs only.

Each question's score (0–10 scale, averaged over those judges and over the runs of a tag) is paired
across the two tags; a question without a score on either side is dropped and counted, per side, with
its reason (no answer, answer error, not judged, null score, other question text: a question id asked
with more than one text, as other data files do). Per benchmark: the mean difference B − A,
a paired bootstrap interval (scipy.stats.bootstrap, BCa) at the Bonferroni-adjusted level 1 − 0.05/k
over the k benchmarks compared, the Wilcoxon signed-rank and paired t tests (scipy), Holm-corrected
across benchmarks (statsmodels ``multipletests``), and the smallest difference a paired t test would
detect with 80 % power at α = 0.05 for that many questions (statsmodels ``TTestPower``). The verdict is
read off the adjusted interval (it excludes 0: better or worse), so the two always agree; the Holm
p-values are shown beside it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import duckdb

from ..errors import UsageError
from ..tables.selection import Selection, left_out, select_runs
from ..tables.sql import SCORE_DIGITS, connect

__all__ = ["Basis", "Comparison", "ComparisonReport", "compare", "other_texts"]

ALPHA = 0.05
_SEP = "\x1f"  # joins judge, benchmark and prompt hash into one key
# Each side's runs: a run on both sides (a tag and its own family) is counted on both.
_SIDES = "SELECT unnest($a) AS run_id, true AS is_a UNION ALL SELECT unnest($b), false"
# The (benchmark, question_id) pairs asked with more than one text, on one side or across both (another data
# file gives ELYZA's row numbers to other tasks): not one question, never paired. Texts are compared with
# their whitespace runs as one space (CRLF files, trailing blanks); a run without the question's text (no
# questions row) is not held against it.
_OTHER_TEXT = """
    SELECT benchmark, question_id FROM questions JOIN side_runs USING (run_id)
    GROUP BY benchmark, question_id
    HAVING count(DISTINCT md5(trim(regexp_replace(array_to_string(turns, chr(10)), '\\s+', ' ', 'g')))) > 1"""


@dataclass
class Comparison:
    benchmark: str
    title: str
    n: int
    mean_a: float | None = None
    mean_b: float | None = None
    diff: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    ci_level: float | None = None  # the interval's confidence: 1 − α/k
    p_wilcoxon: float | None = None
    p_wilcoxon_holm: float | None = None
    p_t: float | None = None
    p_t_holm: float | None = None
    mde: float | None = None  # smallest |difference| detectable at 80 % power
    verdict: str = ""
    dropped_a: dict[str, int] = field(default_factory=dict)  # reason -> questions without a score on side A
    dropped_b: dict[str, int] = field(default_factory=dict)


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

    def lines(self) -> list[str]:
        def left(a: list[str], b: list[str]) -> str:
            parts = ([f"A's {', '.join(a)}"] if a else []) + ([f"B's {', '.join(b)}"] if b else [])
            return f" (left out, on one side only: {'; '.join(parts)})" if parts else ""

        out = [f"judges: {', '.join(self.judges)}{left(self.judges_only_a, self.judges_only_b)}",
               f"passes: {', '.join(self.passes) or 'none'}{left(self.passes_only_a, self.passes_only_b)}"]
        varied = {b: h for b, h in self.prompts.items() if len(h) > 1}
        out.append("judging prompts: the same on both sides" + "".join(
            f"; {b}: {len(h)} versions" for b, h in varied.items()))
        out += [f"{b}: not compared, {why}" for b, why in self.not_compared.items()]
        if self.excluded_runs:
            out.append(f"left out, incomplete runs: {', '.join(self.excluded_runs)}")
        return out


@dataclass
class ComparisonReport:
    tag_a: str
    tag_b: str
    basis: Basis
    benchmarks: list[Comparison]

    def to_dict(self) -> dict:
        return {"tag_a": self.tag_a, "tag_b": self.tag_b, "basis": asdict(self.basis),
                "benchmarks": [asdict(c) for c in self.benchmarks]}


def other_texts(con: duckdb.DuckDBPyConnection, runs_a: list[str], runs_b: list[str]) -> set[tuple[str, str]]:
    """The (benchmark, question id) pairs asked with other texts, on a side or across both: not one question."""
    return set(con.execute(f"WITH side_runs AS ({_SIDES}) {_OTHER_TEXT}", {"a": runs_a, "b": runs_b}).fetchall())


def _side(results_dir: Path, tag: str, model: str | None) -> Selection:
    chosen = select_runs(results_dir, tag, model)
    if len(chosen.models) > 1:
        raise UsageError(f"tag {tag!r} holds several models ({', '.join(chosen.models)}); choose one with --model")
    return chosen


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


def compare(results_dir: Path, tag_a: str, tag_b: str, model: str | None = None, judge: str | None = None,
            seed: int = 0) -> ComparisonReport:
    if tag_a == tag_b:
        raise UsageError(f"both tags are {tag_a!r}: name another tag to compare with")
    side_a = _side(results_dir, tag_a, model)
    side_b = _side(results_dir, tag_b, model or side_a.models[0])
    con = connect(results_dir, None, list(dict.fromkeys(side_a.run_ids + side_b.run_ids)))
    runs_a, excluded_a = _complete(con, side_a, judge)
    runs_b, excluded_b = _complete(con, side_b, judge)
    basis, keys = _basis(con, tag_a, tag_b, runs_a, runs_b, judge)
    basis.excluded_runs = excluded_a + excluded_b
    rows = _per_question(con, runs_a, runs_b, basis, keys)
    for bench, _, paired, _, dropped, _ in rows:  # a benchmark both judged, with no question to pair: say why
        if not paired:
            other = (dropped or {}).get("other question text")
            basis.not_compared[bench] = "no question scored on both sides" + (
                f" ({other} share an id but not the text: other data files?)" if other else "")
    results = _statistics(rows, seed)
    if not results:
        why = "; ".join(f"{b}: {w}" for b, w in basis.not_compared.items())
        raise UsageError(f"tags {tag_a!r} and {tag_b!r} share no scored question"
                         f"{f' for judge {judge!r}' if judge else ''}{f' ({why})' if why else ''}; nothing to compare")
    return ComparisonReport(tag_a, tag_b, basis, results)


def _basis(con: duckdb.DuckDBPyConnection, tag_a: str, tag_b: str, runs_a: list[str], runs_b: list[str],
           judge: str | None) -> tuple[Basis, list[str]]:
    """The judges, passes and judging prompts both sides have; and the (judge, benchmark, prompt hash) keys of
    the judgements to compare."""
    def judges(runs: list[str]) -> list[str]:
        return [j for (j,) in con.execute("SELECT DISTINCT judge FROM judgements WHERE list_contains($r, run_id) AND "
                                          "strategy = '' ORDER BY 1", {"r": runs}).fetchall()]

    def passes(runs: list[str]) -> list[str]:
        return [p for (p,) in con.execute(
            "SELECT DISTINCT pass_name || '@' || coalesce(pass_version, '') FROM pass_deltas "
            "WHERE list_contains($r, run_id) AND strategy = '' ORDER BY 1", {"r": runs}).fetchall()]

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
            f"SELECT DISTINCT benchmark, is_a, judge, coalesce(prompt_hash, '') FROM judgements JOIN ({_SIDES}) "
            "USING (run_id) WHERE strategy = '' AND list_contains($used, judge)",
            {"a": runs_a, "b": runs_b, "used": used}).fetchall():
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


def _per_question(con: duckdb.DuckDBPyConnection, runs_a: list[str], runs_b: list[str], basis: Basis,
                  keys: list[str]) -> list[tuple]:
    """Per benchmark and side: the paired scores, and the dropped questions by reason."""
    return con.execute(f"""
        WITH side_runs AS ({_SIDES}),
        q AS (  -- every question either side answered or judged
            SELECT DISTINCT benchmark, question_id FROM answers JOIN side_runs USING (run_id)
            WHERE strategy = '' AND sample_index = 0
            UNION SELECT DISTINCT benchmark, question_id FROM judgement_rows JOIN side_runs USING (run_id)
            WHERE strategy = '' AND sample_index = 0
        ), sides AS (SELECT unnest([true, false]) AS is_a),
        other AS ({_OTHER_TEXT}),
        a AS (
            SELECT benchmark, question_id, is_a, bool_and(error IS NOT NULL) AS failed
            FROM answers JOIN side_runs USING (run_id) WHERE strategy = '' AND sample_index = 0 GROUP BY ALL
        ), s AS (
            SELECT benchmark, question_id, is_a, avg(score_10) AS score, count(*) AS judged
            FROM scores_using($passes) JOIN side_runs USING (run_id)
            WHERE strategy = '' AND sample_index = 0
              AND list_contains($keys, judge || '{_SEP}' || benchmark || '{_SEP}' || coalesce(prompt_hash, ''))
            GROUP BY ALL
        ), per AS (
            SELECT q.benchmark, q.question_id, sides.is_a, CASE WHEN o.question_id IS NULL THEN s.score END AS score,
                   CASE WHEN o.question_id IS NOT NULL THEN 'other question text'
                        WHEN s.score IS NOT NULL THEN NULL
                        WHEN a.question_id IS NULL AND s.judged IS NULL THEN 'no answer'
                        WHEN a.failed THEN 'answer error'
                        WHEN s.judged IS NULL THEN 'not judged'
                        ELSE 'null score' END AS dropped
            FROM q CROSS JOIN sides
            LEFT JOIN a ON a.benchmark = q.benchmark AND a.question_id = q.question_id AND a.is_a = sides.is_a
            LEFT JOIN s ON s.benchmark = q.benchmark AND s.question_id = q.question_id AND s.is_a = sides.is_a
            LEFT JOIN other o ON o.benchmark = q.benchmark AND o.question_id = q.question_id
            ANTI JOIN excluded_questions x ON x.benchmark = q.benchmark AND x.question_id = q.question_id
        ), paired AS (
            SELECT x.benchmark, x.question_id, x.score AS score_a, y.score AS score_b
            FROM per x JOIN per y ON y.benchmark = x.benchmark AND y.question_id = x.question_id
                                 AND x.is_a AND NOT y.is_a
            WHERE x.score IS NOT NULL AND y.score IS NOT NULL
        )
        SELECT b.benchmark, b.title,
               (SELECT list(score_a ORDER BY question_id) FROM paired p WHERE p.benchmark = b.benchmark),
               (SELECT list(score_b ORDER BY question_id) FROM paired p WHERE p.benchmark = b.benchmark),
               (SELECT map(list(dropped), list(n)) FROM (SELECT dropped, count(*) AS n FROM per p
                WHERE p.benchmark = b.benchmark AND p.is_a AND dropped IS NOT NULL GROUP BY 1)),
               (SELECT map(list(dropped), list(n)) FROM (SELECT dropped, count(*) AS n FROM per p
                WHERE p.benchmark = b.benchmark AND NOT p.is_a AND dropped IS NOT NULL GROUP BY 1))
        FROM benchmark_info b
        WHERE list_contains($benchmarks, b.benchmark)
        ORDER BY b.position""",
        {"a": runs_a, "b": runs_b, "passes": basis.passes, "keys": keys,
         "benchmarks": sorted(basis.prompts)}).fetchall()


def _statistics(rows: list[tuple], seed: int) -> list[Comparison]:
    import numpy as np
    from scipy import stats
    from statsmodels.stats.multitest import multipletests
    from statsmodels.stats.power import TTestPower

    compared = [r for r in rows if r[2]]
    level = 1 - ALPHA / max(1, len(compared))  # Bonferroni over the benchmarks compared: the verdict's family
    results = []
    for bench, title, scores_a, scores_b, dropped_a, dropped_b in compared:
        a, b = np.asarray(scores_a), np.asarray(scores_b)
        d = b - a
        # Means rounded as the SQL views round theirs: one mean prints the same here and in view.
        c = Comparison(bench, title, len(d), round(float(a.mean()), SCORE_DIGITS), round(float(b.mean()), SCORE_DIGITS),
                       round(float(d.mean()), SCORE_DIGITS), ci_level=level,
                       dropped_a=dict(dropped_a or {}), dropped_b=dict(dropped_b or {}))
        if len(d) >= 2 and np.ptp(d) > 0:
            boot = stats.bootstrap((d,), np.mean, confidence_level=level, n_resamples=9999, method="BCa",
                                   random_state=seed)
            c.ci_low, c.ci_high = float(boot.confidence_interval.low), float(boot.confidence_interval.high)
            c.p_t = float(stats.ttest_rel(b, a).pvalue)
            effect = TTestPower().solve_power(nobs=len(d), alpha=ALPHA, power=0.8, alternative="two-sided")
            c.mde = float(effect * d.std(ddof=1))
        else:  # every question moved by the same amount (often 0): no spread to test against
            c.ci_low = c.ci_high = c.diff
            c.p_t = 1.0 if c.diff == 0 else 0.0
        c.p_wilcoxon = float(stats.wilcoxon(d).pvalue) if np.any(d != 0) else 1.0
        results.append(c)
    for attr in ("p_wilcoxon", "p_t"):
        if results:
            adjusted = multipletests([getattr(c, attr) for c in results], alpha=ALPHA, method="holm")[1]
            for c, p in zip(results, adjusted, strict=True):
                setattr(c, f"{attr}_holm", float(p))
    for c in results:
        if c.n < 2:
            c.verdict = "too few"
        elif c.ci_low is not None and c.ci_low > 0:
            c.verdict = "B better"
        elif c.ci_high is not None and c.ci_high < 0:
            c.verdict = "B worse"
        else:
            c.verdict = "n.s."
        if c.n < 2 or (c.mde is not None and math.isnan(c.mde)):
            c.mde = None
    return results
