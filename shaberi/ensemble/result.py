"""What a quick-eval found: per dataset, the baseline's, the members' and each strategy's grades over the
sampled questions, saved as JSON (``Result.to_json``) that ``gate`` and ``report`` read back; and the lines and
comparisons derived from it, from the file alone.

A grade is 1, 0 or None: None when the llm grader could not read its judge's reply (``unparsed``) or the
grading call failed (``judge_error``). None is no grade, never a wrong one: accuracies are over the readable
grades, a question without a readable grade on either side of a paired comparison is left out of it (and
counted: ``Comparison.excluded``), and ``DatasetOutcome.graders`` counts, per grader, the grades of this
evaluation and the unreadable ones, as the ``judgements`` table holds them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import orjson

from .gate import ALPHA, Comparison, compare, gate

__all__ = ["DatasetOutcome", "Result", "StrategyOutcome", "accuracy", "attempted_lines", "comparisons",
           "coverage_lines", "excluded_lines", "failures", "given_attempted", "grader_rows", "unreadable_lines",
           "verdicts"]


@dataclass
class StrategyOutcome:
    correct: list[int | None]  # None: no readable grade
    attempted: list[int | None]
    reused: int = 0
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failed: int = 0  # consensus calls that failed (no answer, no grade: left out, never counted wrong)
    error: str = ""  # the first failure's message


@dataclass
class DatasetOutcome:
    cache: str  # run id of the cache entry
    n_members: int
    question_ids: list[str]
    baseline: list[int | None]  # None: no readable grade
    baseline_attempted: list[int | None]
    samples_mean: list[float | None]  # over the members' readable grades; None when there is none
    strategies: dict[str, StrategyOutcome] = field(default_factory=dict)
    member_accuracy: list[float | None] = field(default_factory=list)  # over readable grades
    # grader -> {"graded", "unreadable", "no_grade"} over this evaluation's grades (members, baseline,
    # strategies), from the judgements table
    graders: dict[str, dict[str, int]] = field(default_factory=dict)
    # what the cache could give: questions of the dataset, with some answer, with all N; and asked for
    questions: int = 0
    available: int = 0
    complete: int = 0
    asked: int = 0


@dataclass
class Result:
    model: str
    seed: int
    sample: int
    strategies: list[str]
    datasets: dict[str, DatasetOutcome] = field(default_factory=dict)
    # the multiple-comparison family this job belongs to (``gate``): its α and its number of tests (0: this
    # job's own comparisons are the family), and what it is, in words
    alpha: float = ALPHA
    family_tests: int = 0
    family: str = ""

    def to_json(self) -> bytes:
        return orjson.dumps(asdict(self), option=orjson.OPT_INDENT_2)

    @classmethod
    def from_json(cls, data: bytes) -> Result:
        raw = orjson.loads(data)
        sets = {}
        for name, d in raw["datasets"].items():
            d["strategies"] = {s: StrategyOutcome(**o) for s, o in d["strategies"].items()}
            sets[name] = DatasetOutcome(**d)
        return cls(raw["model"], raw["seed"], raw["sample"], raw["strategies"], sets, raw.get("alpha", ALPHA),
                   raw.get("family_tests", 0), raw.get("family", ""))

    def tests(self) -> int:
        """Tests in this job's family: ``family_tests``, or both tests of each of its comparisons."""
        return self.family_tests or max(1, 2 * sum(len(d.strategies) for d in self.datasets.values()))


def given_attempted(correct: list[int | None], attempted: list[int | None]) -> tuple[int, float | None]:
    """(questions attempted, accuracy among them): SimpleQA's second number, for judge-graded datasets.
    A question without a readable grade is neither attempted nor not."""
    tried = [c for c, a in zip(correct, attempted, strict=True) if a and c is not None]
    return len(tried), (sum(tried) / len(tried) if tried else None)


def accuracy(grades: list[int | None]) -> float | None:
    """Over the readable grades; None when there is none."""
    readable = [g for g in grades if g is not None]
    return sum(readable) / len(readable) if readable else None


def attempted_lines(result: Result) -> list[str]:
    """One line per dataset where some answer was NOT_ATTEMPTED or has no readable grade: attempted share and
    accuracy given attempted (and how many had no grade)."""
    lines = []
    for name, d in result.datasets.items():
        series = {"baseline": (d.baseline, d.baseline_attempted)} | {
            s: (o.correct, o.attempted) for s, o in d.strategies.items()}
        if all(all(a) for _, a in series.values()):
            continue
        parts = []
        for label, (correct, attempted) in series.items():
            tried, given = given_attempted(correct, attempted)
            unread = sum(c is None for c in correct)
            parts.append(f"{label} attempted {tried}/{len(attempted)}"
                         + (f" ({unread} without a readable grade)" if unread else "")
                         + ", accuracy given attempted " + ("-" if given is None else f"{given:.1%}"))
        lines.append(f"{name}: " + "; ".join(parts))
    return lines


def grader_rows(result: Result) -> list[tuple[str, str, int, int, int]]:
    """(dataset, grader, grades, unreadable, without a grade) per dataset and grader of this evaluation."""
    return [(name, grader, c.get("graded", 0), c.get("unreadable", 0), c.get("no_grade", 0))
            for name, d in result.datasets.items() for grader, c in d.graders.items()]


def excluded_lines(result: Result) -> list[str]:
    """The comparisons that left questions out for want of a readable grade, and the consensus calls that
    failed (a strategy left uncompared altogether is a failure: ``failures``)."""
    lines = [f"{c.dataset}: {c.strategy}: {c.excluded} question(s) without a readable grade on some side left out "
             f"of the comparison (n = {c.n})" for c in comparisons(result) if c.excluded]
    for name, d in result.datasets.items():
        for s, o in d.strategies.items():
            if o.failed:
                lines.append(f"{name}: {s}: {o.failed:,} of {len(o.correct):,} consensus calls failed (left out, not "
                             f"counted wrong; run again to retry them): {o.error}")
    return lines


def failures(result: Result) -> list[str]:
    """The strategies × datasets asked for that could not be compared at all (n = 0 paired questions), and why:
    every consensus call failed, or no question has a readable grade on every side (a judge whose every reply
    is unreadable). The work ran but failed: a CI job's red like a regression, never a green "not compared"."""
    found = []
    for name, d in result.datasets.items():
        for s, o in d.strategies.items():
            if o.failed and o.failed == len(o.correct):
                found.append(f"{s} on {name}: every consensus call failed ({o.error})")
            elif not _paired(d, o):
                found.append(f"{s} on {name}: not compared, {_why_unpaired(d, s, o)}")
    return found


def _why_unpaired(d: DatasetOutcome, strategy: str, o: StrategyOutcome) -> str:
    """Why no question of a dataset pairs a readable grade of the baseline, the strategy and the samples."""
    n = len(d.question_ids)
    if not n:
        return "no question was sampled (the cache holds no answer to any)"
    readable: dict[str, list] = {"baseline": d.baseline, strategy: o.correct, "samples": d.samples_mean}
    grades = "; ".join(f"grader {g}: {c.get('unreadable', 0):,} of {c.get('graded', 0):,} grades unreadable, "
                       f"{c.get('no_grade', 0):,} without a grade" for g, c in d.graders.items())
    return ("no question has a readable grade on every side (readable: "
            + ", ".join(f"{k} {sum(v is not None for v in vs)} of {n}" for k, vs in readable.items()) + ")"
            + (f"; {grades}" if grades else ""))


def unreadable_lines(result: Result) -> list[str]:
    """Per dataset and grader, the responses graded and how many were unreadable; then ``excluded_lines``."""
    return [f"{dataset}: grader {grader}: {graded:,} graded, {unread:,} unreadable ({unread / graded:.1%})"
            + (f", {no_grade:,} without a grade (left out of the accuracies)" if no_grade else "")
            for dataset, grader, graded, unread, no_grade in grader_rows(result) if graded] + excluded_lines(result)


def _paired(d: DatasetOutcome, o: StrategyOutcome) -> list[tuple[int, int, float]]:
    return [(b, c, m) for b, c, m in zip(d.baseline, o.correct, d.samples_mean, strict=True)
            if b is not None and c is not None and m is not None]


def comparisons(result: Result, alpha: float | None = None) -> list[Comparison]:
    """Each strategy against the baseline, over the questions with a readable grade on every side (the others
    counted in ``excluded``); a strategy with no such question is not compared (``failures`` says why).
    The detectable regression is at the family's per-test level, α ÷ its tests."""
    level = (result.alpha if alpha is None else alpha) / result.tests()
    found = []
    for name, d in result.datasets.items():
        for s, o in d.strategies.items():
            paired = _paired(d, o)
            if paired:
                c = compare(name, s, [p[0] for p in paired], [p[1] for p in paired], [p[2] for p in paired], level)
                c.excluded = len(o.correct) - len(paired)
                found.append(c)
    return found


def verdicts(result: Result, alpha: float | None = None) -> list[Comparison]:
    """The job's comparisons gated in its own family (``gate``), at its α or ``alpha``: the verdicts the job
    gave, re-derived from its result file alone."""
    alpha = result.alpha if alpha is None else alpha
    return gate(comparisons(result, alpha), alpha, result.tests())


def coverage_lines(result: Result) -> list[str]:
    """Datasets whose cache could not give every question asked for with all N answers."""
    lines = []
    for name, d in result.datasets.items():
        if d.complete < d.asked or d.available < d.questions:
            lines.append(f"{name}: the cache holds answers to {d.available:,} of {d.questions:,} questions "
                         f"({d.complete:,} with all {d.n_members} and no error); sampled {len(d.question_ids):,} of "
                         f"the {d.asked:,} asked")
    return lines
