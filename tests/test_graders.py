"""The ensemble graders on tricky strings (mcq, numeric, math, the llm grader's reading of its judge), and what
becomes of a grade nobody could read: NULL in the judgements table, left out of every accuracy and test,
counted per grader in quick-eval's summary and in the report."""

from __future__ import annotations

import asyncio
import csv
import json
from fractions import Fraction
from pathlib import Path

import pytest

from shaberi.benchmarks import Question
from shaberi.ensemble import cache
from shaberi.ensemble import datasets as gt
from shaberi.ensemble.evaluate import quick_eval
from shaberi.ensemble.graders import GRADERS
from shaberi.ensemble.graders.llm import score, verdict
from shaberi.ensemble.graders.numeric import parse
from shaberi.ensemble.report import markdown
from shaberi.ensemble.result import (
    DatasetOutcome,
    Result,
    StrategyOutcome,
    attempted_lines,
    comparisons,
    given_attempted,
    unreadable_lines,
)
from shaberi.llm.client import LLM, ChatClient

from .conftest import query, shaberi
from .test_judge import FAST


def q(reference: str, labels: str = "ABCDEFGHIJ", grader: str = "mcq") -> Question:
    return Question("t", "1", ["?"], reference=reference, extra={"grader": grader, "labels": list(labels)})


# -- mcq -----------------------------------------------------------------------------------------------------
MCQ = [  # (response, labels, extracted letter, rule)
    ("Let's think. ... The answer is (J).", "ABCDEFGHIJ", "J", "answer"),
    ("The answer is (B)", "ABCDEFGHIJ", "B", "answer"),
    ("The answer is: D", "ABCDEFGHIJ", "D", "answer"),  # missed before issue 14
    ("so the answer is: (E).", "ABCDEFGHIJ", "E", "answer"),
    ("The correct answer is:\n\nG. 320,000", "ABCDEFGHIJ", "G", "answer"),
    ("Answer: (H)", "ABCDEFGHIJ", "H", "answer"),
    ("Answer: G", "ABCDEFGHIJ", "G", "answer"),
    ("Answer: **C**", "ABCDEFGHIJ", "C", "answer"),
    ("**Answer: F**", "ABCDEFGHIJ", "F", "answer"),
    ("**Answer:** I", "ABCDEFGHIJ", "I", "answer"),
    ("ANSWER: B", "ABCDEFGHIJ", "B", "answer"),
    ("Answer: A. 42 N", "ABCDEFGHIJ", "A", "answer"),
    ("The correct answer is option E.", "ABCDEFGHIJ", "E", "answer"),
    ("(A) is wrong and (B) too; so the answer is (D)", "ABCDEFGHIJ", "D", "answer"),
    ("I think A is wrong. B is also wrong. The answer is (C).", "ABCDEFGHIJ", "C", "answer"),
    ("The answer is (A). On reflection, the answer is (C).", "ABCDEFGHIJ", "C", "answer"),  # the last match
    ("The answer is (H) for part (a) and (B) for part (b).", "ABCDEFGHIJ", None, "hedged"),  # no single choice
    ("The answer is (C) or (B).", "ABCDEFGHIJ", None, "hedged"),
    ("The answer is (A), (B), (C), and (J).", "ABCDEFGHIJ", None, "hedged"),
    ("The answer is I believe (C).", "ABCDEFGHIJ", "C", "parenthesised"),  # "I" is a word here, not option I
    ("The answer is I and II only, which is option (C).", "ABCDEFGHIJ", "C", "parenthesised"),
    ("Answer: A reasonable estimate gives (C).", "ABCDEFGHIJ", "C", "parenthesised"),
    ("The answer is A because the rate doubles.", "ABCD", "A", "answer"),
    ("I would pick (C), not (D).", "ABCDEFGHIJ", "C", "answer"),
    ("(A) is wrong and (B) is wrong, so (C).\n\nThe options (A), (B) and (D) are incorrect.", "ABCD", None, "none"),
    ("正解は：D", "ABCDEFGHIJ", "D", "answer"),
    ("答えは（B）です。", "ABCDEFGHIJ", "B", "answer"),  # full-width brackets
    ("答え：Ｃ", "ABCDEFGHIJ", "C", "answer"),  # a full-width letter
    ("It must be \\boxed{\\text{B}}", "ABCDEFGHIJ", "B", "boxed"),
    ("So the choice is $\\boxed{C}$.", "ABCDEFGHIJ", "C", "boxed"),
    ("The best choice is **D**.", "ABCDEFGHIJ", "D", "bold"),
    ("Between (A) and (C), I pick (C)", "ABCDEFGHIJ", "C", "answer"),
    ("- (E) is wrong\n\n- (F) is right", "ABCDEFGHIJ", "F", "parenthesised"),  # list items, not subtractions
    ("The answer is **a** combination of (B) and (C).", "ABCDEFGHIJ", None, "none"),  # "a" is no letter; 2 named
    ("B", "ABCDEFGHIJ", "B", "bare"),
    ("B.", "ABCD", "B", "bare"),
    # nothing to read: lowercase, words, formulas, letters out of the label set
    ("answer: c", "ABCDEFGHIJ", None, "none"),
    ("The answer is (a).", "ABCDEFGHIJ", None, "none"),
    ("The answer is a combination of factors.", "ABCDEFGHIJ", None, "none"),
    ("I think A is wrong and B is right.", "ABCDEFGHIJ", None, "none"),
    ("The answer is Avogadro's number.", "ABCDEFGHIJ", None, "none"),
    ("Since P(D) = 0.3 and P(A) P(B) = 0.1, they are independent.", "ABCDEFGHIJ", None, "none"),
    ("We need det(A) = 5, so f(B) = 2 and \\det(C) = 0.", "ABCDEFGHIJ", None, "none"),
    ("The modulus of elasticity (E) = 30 × 10^6 psi.", "ABCDEFGHIJ", None, "none"),
    ("The correct answer is:\n\n(E → F) ∨ (C → S)", "ABCDEFGHIJ", None, "none"),
    ("\\boxed{A + B}", "ABCDEFGHIJ", None, "none"),
    ("Adding them, (A) + (B) = (C) holds.", "ABCDEFGHIJ", None, "none"),
    ("so the answer is: A - B = -(1,131)", "ABCDEFGHIJ", None, "none"),
    ("The answer is (K).", "ABCDEFGHIJ", None, "none"),  # K is not an option here
    ("The answer is (E).", "ABCD", None, "none"),
    ("", "ABCD", None, "none"),
]


@pytest.mark.parametrize(("text", "labels", "letter", "method"), MCQ)
def test_mcq_extraction(text, labels, letter, method):
    found = GRADERS["mcq"].extract(text, q("A", labels))
    assert (found.answer, found.method) == (letter, method)


@pytest.mark.parametrize(("text", "gold", "right"), [
    ("The answer is (J).", "J", True),
    ("The answer is (J).", "I", False),
    ("The answer is a combination of (B) and (C).", "A", False),  # was read as A before issue 14
    ("P(D) is 0.2.", "D", False),
    ("nothing", "A", False),
])
def test_mcq_grade(text, gold, right):
    assert GRADERS["mcq"].grade(text, q(gold))[0] is right


# -- numeric -------------------------------------------------------------------------------------------------
NUMERIC = [  # (response, extracted, rule)
    ("16 - 3 - 4 = 9 eggs, 9 * 2 = 18.\n#### 18", "18", "####"),
    ("#### 18\nThat was for 3 days, so 54 in total.", "18", "####"),  # #### wins over a later number
    ("She earns 12 dollars.", "12", "last_number"),
    ("She pays $1,234.50 in total.", "1234.5", "last_number"),
    ("The rod is 15 cm long.", "15", "last_number"),
    ("That is 50% of it.", "50", "last_number"),
    ("The town has 1,234,567 people.", "1234567", "last_number"),
    ("The answer is 1,000,000.", "1000000", "answer_is"),
    ("The values are 1,2", "2", "last_number"),  # a list, not 12
    ("so x = 1,2345", "2345", "last_number"),  # not a thousands group
    ("It is 12.50", "12.5", "last_number"),
    ("The result is 18.00", "18", "last_number"),
    ("answer: 3/4", "0.75", "answer_is"),
    ("The answer is 1/3 of the cake.", "1/3", "answer_is"),
    ("So \\boxed{\\frac{3}{4}}", "0.75", "boxed"),
    ("$\\boxed{\\dfrac{1}{3}}$", "1/3", "boxed"),
    ("Answer: $\\frac{-3}{4}$", "-0.75", "answer_is"),
    ("so the total is \\boxed{-7}", "-7", "boxed"),
    ("\\boxed{\\$18.00}", "18", "boxed"),
    ("\\boxed{12 \\text{ dollars}}", "12", "boxed"),
    ("The answer is -5", "-5", "answer_is"),
    ("The answer is −5", "-5", "answer_is"),  # U+2212
    ("The answer is 1½ cups.", "1.5", "answer_is"),  # a mixed number, not 11/2
    ("The answer is 18 1/2", "18.5", "answer_is"),
    ("\\boxed{1\\frac{1}{2}}", "1.5", "boxed"),
    ("\\boxed{18{,}000}", "18000", "boxed"),
    ("The answer is: 20 - 2 = 18", "18", "answer_is"),  # the result, not the first operand
    ("答えは 20 - 2 = 18 個です。", "18", "answer_is"),
    ("\\boxed{18 \\text{ apples, 2 left}}", "18", "boxed"),
    ("#### 1. Understand the problem\n#### 2. Compute\n20 - 2 = 18\n**Answer: 18**", "18", "answer_is"),  # headings
    ("#### − 3", "-3", "####"),
    ("She lost −$5.", "-5", "last_number"),
    ("10 - 5 = 5, then 10 - 5", "5", "last_number"),  # a subtraction, not -5
    ("The difference is 5-3", "3", "last_number"),
    ("The answer is: **$18**.", "18", "answer_is"),
    ("答えは１２個です", "12", "answer_is"),
    ("I cannot tell.", None, "none"),
]


@pytest.mark.parametrize(("text", "value", "method"), NUMERIC)
def test_numeric_extraction(text, value, method):
    found = GRADERS["numeric"].extract(text, q("0", grader="numeric"))
    assert (found.answer, found.method) == (value, method)


@pytest.mark.parametrize(("text", "gold", "right"), [
    ("It is 12.50", "12.5", True),
    ("$1,234", "1234", True),
    ("The answer is 3/4", "0.75", True),
    ("\\boxed{\\frac{6}{8}}", "3/4", True),
    ("The answer is 0.333", "1/3", False),  # exact, not rounded
    ("The answer is -5", "5", False),
    ("#### 18", "Because 9 * 2 = 18.\n#### 18", True),  # a GSM8K solution as the gold
    ("#### 1,800", "1800", True),
    ("nothing", "18", False),
])
def test_numeric_grade_is_numeric_equality(text, gold, right):
    assert GRADERS["numeric"].grade(text, q(gold, grader="numeric"))[0] is right


def test_numeric_parse_is_exact():
    assert [parse(t) for t in ["12.50", "-$1,234.5", "−5", "3/4", "\\dfrac{-3}{4}", "1/0", "--5"]] == [
        Fraction(25, 2), Fraction(-2469, 2), Fraction(-5), Fraction(3, 4), Fraction(-3, 4), None, None]


# -- math ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "gold", "right"), [
    ("So $\\boxed{\\frac{1}{2}}$.", "\\frac12", True),
    ("The answer is $\\boxed{0.5}$", "\\frac{1}{2}", True),
    ("$\\boxed{\\dfrac{\\pi}{2}}$", "\\frac{\\pi}{2}", True),
    ("$\\boxed{(3, \\frac{\\pi}{2})}$", "\\left( 3, \\frac{\\pi}{2} \\right)", True),
    ("$\\boxed{3}$", "4", False),
])
def test_math_grader_with_math_verify(text, gold, right):
    assert GRADERS["math"].grade(text, q(gold, grader="math"))[0] is right


def test_math_grader_bounds_its_own_time(monkeypatch):
    import time

    from shaberi.ensemble.graders import math as math_grader

    monkeypatch.setattr(math_grader, "TIME_LIMIT", 0.2)
    monkeypatch.setattr(math_grader, "_parse", lambda text: time.sleep(5))
    started = time.monotonic()
    got, found = GRADERS["math"].grade("$\\boxed{1}$", q("1", grader="math"))
    assert (got, found.method) == (False, "timeout") and time.monotonic() - started < 2


# -- the llm grader's reading of its judge -------------------------------------------------------------------
@pytest.mark.parametrize(("reply", "grade"), [
    ("A", "CORRECT"), ("B", "INCORRECT"), ("C.", "NOT_ATTEMPTED"), ("**B**", "INCORRECT"), ("(C)", "NOT_ATTEMPTED"),
    ("Grade: A", "CORRECT"), ("A: CORRECT", "CORRECT"), ("B\n\nThe answer names another person.", "INCORRECT"),
    ("CORRECT", "CORRECT"), ("INCORRECT", "INCORRECT"), ("The answer is NOT_ATTEMPTED", "NOT_ATTEMPTED"),
    ("Incorrect.", "INCORRECT"), ("Not attempted", "NOT_ATTEMPTED"),
    # unreadable: no grade, never a wrong one
    ("hmm", "unparsed"), ("", "unparsed"), ("a", "unparsed"), ("A reasonable guess.", "unparsed"),
    ("A. INCORRECT", "unparsed"), ("CORRECT or INCORRECT", "unparsed"), ("It is not correct", "unparsed"),
    ("ABC", "unparsed"), ("「Your job」についてお答えします。", "unparsed"),
    # a negated or hedged grade word, two letters, thinking, full-width forms
    ("NOT CORRECT", "unparsed"), ("The predicted answer is not CORRECT.", "unparsed"),
    ("PARTIALLY CORRECT", "unparsed"), ("Mostly Correct", "unparsed"), ("A/B", "unparsed"), ("A, B", "unparsed"),
    ("<think>The answer might be CORRECT... no.</think>\nB", "INCORRECT"), ("Ｂ．", "INCORRECT"),
])
def test_llm_grader_verdicts(reply, grade):
    assert verdict(reply) == grade


def test_llm_grader_scores_an_unreadable_reply_as_no_grade():
    assert [score(g) for g in ["CORRECT", "INCORRECT", "NOT_ATTEMPTED", "unparsed"]] == [1, 0, 0, None]


# -- a null grade downstream ---------------------------------------------------------------------------------
def test_null_grades_are_left_out_of_accuracy_and_the_paired_tests():
    d = DatasetOutcome("run", 2, ["1", "2", "3", "4"], baseline=[1, 0, None, 1], baseline_attempted=[1, 1, None, 1],
                       samples_mean=[1.0, 0.5, None, 0.5],
                       strategies={"majority": StrategyOutcome([1, None, 1, 0], [1, None, 1, 1])},
                       graders={"llm:j": {"graded": 12, "unreadable": 3, "no_grade": 3}})
    result = Result("m", 0, 4, ["majority"], {"simpleqa": d})
    (c,) = comparisons(result)
    assert (c.n, c.excluded, c.baseline, c.accuracy, c.worse, c.better) == (2, 2, 1.0, 0.5, 1, 0)
    assert given_attempted([1, None, 1, 0], [1, None, 1, 1]) == (3, 2 / 3)
    assert attempted_lines(result) == [
        "simpleqa: baseline attempted 3/4 (1 without a readable grade), accuracy given attempted 66.7%; "
        "majority attempted 3/4 (1 without a readable grade), accuracy given attempted 66.7%"]
    assert unreadable_lines(result) == [
        "simpleqa: grader llm:j: 12 graded, 3 unreadable (25.0%), 3 without a grade (left out of the accuracies)",
        "simpleqa: majority: 2 question(s) without a readable grade on some side left out of the comparison (n = 2)"]
    assert Result.from_json(result.to_json()) == result  # nulls survive the result file


def test_report_shows_unreadable_responses_per_grader(tmp_path):
    d = DatasetOutcome("run", 1, ["1", "2"], [1, 0], [1, 1], [1.0, 0.0], {"majority": StrategyOutcome([1, 0], [1, 1])},
                       graders={"mcq": {"graded": 4, "unreadable": 1, "no_grade": 0}})
    text, _, _ = markdown([(tmp_path / "r.json", Result("m", 0, 2, ["majority"], {"mmlu_pro": d}))])
    assert "| m | majority | mmlu_pro | mcq | 4 | 1 | 25.0 % | 0 |" in text
    assert "### Unreadable responses per grader" in text


# -- end to end: a judge that answers garbage ----------------------------------------------------------------
def write_simpleqa(data_dir: Path, problems: list[str]) -> Path:
    (data_dir / "gt" / "simpleqa").mkdir(parents=True, exist_ok=True)
    with open(data_dir / "gt" / "simpleqa" / "simple_qa_test_set.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, ["metadata", "problem", "answer"])
        w.writeheader()
        for i, problem in enumerate(problems):
            w.writerow({"metadata": "{}", "problem": problem, "answer": f"Person {i + 1}"})
    return data_dir


def test_a_judge_reply_nobody_can_read_is_stored_null_and_reported_unreadable(server, tmp_path):
    """The loopback judge answers the ``<<answer: …>>`` marker in the question (A: correct, B: incorrect);
    without one it answers its stock Japanese line, which is no grade: questions 3 and 4."""
    data = write_simpleqa(tmp_path / "d", ["Who won in 2001? <<answer: A>>", "Who won in 2002? <<answer: B>>",
                                           "Who won in 2003?", "Who won in 2004?"])
    member = tmp_path / "member.jsonl"
    member.write_text("\n".join(json.dumps({"question_id": str(i), "response": f"Person {i}"}) for i in range(1, 5)))
    args = ["--results-dir", str(tmp_path / "r")]
    assert shaberi("ensemble", "import-responses", "--dataset", "simpleqa", "--model", "m", str(member), str(member),
                   "--data-dir", str(data), *args).returncode == 0
    done = shaberi("ensemble", "quick-eval", "--model", "m", "--sample", "10", "--judge", f"grader@{server.base_url}",
                   "--out", str(tmp_path / "q.json"), *args)
    assert done.returncode == 0, done.stderr
    assert server.stats()["calls"] == 4  # one per distinct answer text
    assert query(tmp_path / "r", "SELECT question_id, parse_method, score, judge_output LIKE '%テスト用%', error "
                 "FROM judgements WHERE strategy = '' AND sample_index = 0 ORDER BY 1") == [
        ("1", "CORRECT", 1.0, False, None), ("2", "INCORRECT", 0.0, False, None),
        ("3", "unparsed", None, True, "unparseable: the judge's reply is none of A, B, C, CORRECT, INCORRECT, "
                                      "NOT_ATTEMPTED"),
        ("4", "unparsed", None, True, "unparseable: the judge's reply is none of A, B, C, CORRECT, INCORRECT, "
                                      "NOT_ATTEMPTED")]
    assert query(tmp_path / "r", "SELECT parse_method, count(*), count(score) FROM judgements GROUP BY 1 ORDER BY 1"
                 ) == [("CORRECT", 3, 3), ("INCORRECT", 3, 3), ("unparsed", 6, 0)]
    result = json.loads((tmp_path / "q.json").read_text())["datasets"]["simpleqa"]
    assert result["baseline"] == [1, 0, None, None] and result["samples_mean"] == [1.0, 0.0, None, None]
    assert result["strategies"]["majority"]["correct"] == [1, 0, None, None]
    assert result["graders"] == {"llm:grader": {"graded": 12, "unreadable": 6, "no_grade": 6}}
    assert "simpleqa: grader llm:grader: 12 graded, 6 unreadable (50.0%), 6 without a grade (left out of the " \
           "accuracies)" in done.stdout
    assert "baseline attempted 2/4 (2 without a readable grade), accuracy given attempted 50.0%" in done.stdout
    report = shaberi("ensemble", "report", str(tmp_path / "q.json"))
    assert report.returncode == 0, report.stderr
    assert "| m | majority | simpleqa | llm:grader | 12 | 6 | 50.0 % | 6 |" in report.stdout
    assert "| m | majority | 2 | 50.0 % | 50.0 % | 50.0 % |" in report.stdout  # over the 2 readable questions
    assert "| m | majority | 4 |" not in report.stdout  # not 25 %: a null grade is not a wrong one
    assert "- simpleqa: majority: 2 question(s) without a readable grade on some side left out of the comparison " \
           "(n = 2)" in report.stdout


def test_a_failed_grading_call_is_no_grade_and_is_asked_again(server, tmp_path):
    """Every call for question 2 gets HTTP 503 (two attempts each with this client): judge_error, score NULL."""
    data = write_simpleqa(tmp_path / "d", ["Who won in 2001? <<answer: A>>", "Who won in 2002? [[fail:503]]"])
    member = tmp_path / "member.jsonl"
    member.write_text("\n".join(json.dumps({"question_id": str(i), "response": f"Person {i}"}) for i in (1, 2)))
    results = tmp_path / "r"
    cache.import_responses(results, "m", gt.load("simpleqa", data), [member])

    async def evaluate() -> Result:
        client = ChatClient(server.base_url, None, FAST)
        try:
            return await quick_eval(results, "m", ["majority"], ["simpleqa"], 10, 0, judge=LLM("grader", client))
        finally:
            await client.aclose()

    first = asyncio.run(evaluate()).datasets["simpleqa"]
    assert (first.baseline, first.strategies["majority"].correct) == ([1, None], [1, None])
    assert first.graders == {"llm:grader": {"graded": 4, "unreadable": 0, "no_grade": 2}}
    assert query(results, "SELECT question_id, parse_method, score, error LIKE 'judge_error: %' FROM judgements "
                 "ORDER BY 1, strategy") == [("1", "CORRECT", 1.0, None), ("1", "CORRECT", 1.0, None),
                                             ("2", "judge_error", None, True), ("2", "judge_error", None, True)]
    calls = server.stats()["calls"]
    second = asyncio.run(evaluate()).datasets["simpleqa"]  # asked again (member and vote), still no grade
    assert server.stats()["calls"] - calls == 4 and second.baseline == [1, None]


def test_a_judge_whose_every_reply_is_unreadable_fails_the_gate_instead_of_passing_it(server, tmp_path):
    """10 questions, 3 members with their own texts and the majority's answer: 40 grades, and the loopback judge
    answers each with its stock Japanese line (no marker anywhere), which no rule reads. Nothing can be compared:
    quick-eval, check and report exit 1 with one line saying what and why, never a green "not compared"."""
    data = write_simpleqa(tmp_path / "d", [f"Who won in {2001 + i}?" for i in range(10)])
    members = []
    for m in range(3):
        members.append(tmp_path / f"member{m}.jsonl")
        members[-1].write_text("\n".join(json.dumps({"question_id": str(i), "response": f"Person {i} ({m})"})
                                         for i in range(1, 11)))
    args = ["--results-dir", str(tmp_path / "r")]
    assert shaberi("ensemble", "import-responses", "--dataset", "simpleqa", "--model", "m", *map(str, members),
                   "--data-dir", str(data), *args).returncode == 0
    judge = ["--judge", f"grader@{server.base_url}"]
    done = shaberi("ensemble", "quick-eval", "--model", "m", "--sample", "10", *judge, "--out",
                   str(tmp_path / "q.json"), *args)
    assert server.stats()["calls"] == 30  # one per distinct text: the vote's answer is a member's
    assert query(tmp_path / "r", "SELECT parse_method, count(*), count(score) FROM judgements GROUP BY 1") == [
        ("unparsed", 40, 0)]
    why = ("FAILED: majority on simpleqa: not compared, no question has a readable grade on every side (readable: "
           "baseline 0 of 10, majority 0 of 10, samples 0 of 10); grader llm:grader: 40 of 40 grades unreadable, 40 "
           "without a grade\n")
    assert (done.returncode, done.stderr) == (1, why)
    assert "simpleqa: grader llm:grader: 40 graded, 40 unreadable (100.0%)" in done.stdout
    assert json.loads((tmp_path / "q.json").read_text())["datasets"]["simpleqa"]["graders"] == {
        "llm:grader": {"graded": 40, "unreadable": 40, "no_grade": 40}}

    report = shaberi("ensemble", "report", str(tmp_path / "q.json"))
    assert (report.returncode, report.stderr) == (1, why.replace("FAILED: ", "FAILED: m: "))
    assert "**Not checked**: m: majority on simpleqa: not compared, no question has a readable grade" in report.stdout
    assert "0 comparisons from 1 file(s)" in report.stdout

    baselines = tmp_path / "quick-eval.json"
    baselines.write_text(json.dumps({"models": {"m": {"datasets": ["simpleqa"], "strategies": ["majority"],
                                                      "sample": 10, "seed": 0}}}))
    check = shaberi("ensemble", "check", "--model", "m", "--baseline-file", str(baselines), *judge, *args)
    assert (check.returncode, check.stderr) == (1, why) and "gate passed" not in check.stdout
