"""The ensemble pipeline: loaders on the real files, each strategy over HTTP with scripted replies, cache hits
that cost no call, and the gate's statistics against scipy (the graders: tests/test_graders.py)."""

from __future__ import annotations

import asyncio
import csv
import json
from pathlib import Path

import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from shaberi.benchmarks import Question
from shaberi.ensemble import datasets as gt
from shaberi.ensemble.gate import compare, gate
from shaberi.ensemble.graders import GRADERS
from shaberi.ensemble.strategies import STRATEGIES, Context
from shaberi.ensemble.strategies.elo import ratings
from shaberi.errors import DataError
from shaberi.llm.client import ChatClient
from shaberi.tables.store import Store

from .conftest import query, shaberi
from .test_judge import FAST

RECORDED = ["Meta-Llama-3_1-8B-Instruct", "Mistral-7B-Instruct-v0.2", "Qwen1.5-7B-Chat", "Yi-6b-Chat", "gemma-7b"]


# -- datasets ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "rows", "first_gold"), [
    ("gsm8k", 1319, "18"), ("math500", 500, r"\left( 3, \frac{\pi}{2} \right)"), ("truthfulqa", 817, None),
    ("mmlu_pro", 12032, "I"), ("arc_challenge", 1172, "C"), ("arc_easy", 2376, None), ("hellaswag", 10042, "D"),
    ("simpleqa", 4326, "Michio Sugeno"),
])
def test_each_dataset_loads_its_upstream_file(data_dir, name, rows, first_gold):
    d = gt.load(name, data_dir)
    assert len(d.questions) == rows
    q = d.questions[0]
    if first_gold is not None:
        assert q.reference == first_gold
    if q.extra["grader"] == "mcq":
        assert q.reference in q.extra["labels"] and f"\n{q.extra['labels'][-1]}. " in q.turns[0]


def test_truthfulqa_options_are_shuffled_with_a_fixed_seed(data_dir):
    first, again = gt.load("truthfulqa", data_dir), gt.load("truthfulqa", data_dir)
    golds = [q.reference for q in first.questions]
    assert golds == [q.reference for q in again.questions]  # the same on every load and machine
    assert len(set(golds)) > 3 and golds.count("A") < len(golds) / 2  # upstream's "true answer first" is gone


def test_arc_numeric_labels_become_letters(data_dir):
    q = next(q for q in gt.load("arc_challenge", data_dir).questions if q.question_id == "NYSEDREGENTS_2008_8_34")
    assert q.extra["labels"] == ["A", "B", "C", "D"] and q.reference == "B" and "\nB. Kinetic energy increases" in \
        q.turns[0]


def test_user_supplied_datasets_read_hand_made_files_in_the_upstream_columns(tmp_path):
    (tmp_path / "gt" / "gpqa").mkdir(parents=True)
    with open(tmp_path / "gt" / "gpqa" / "gpqa_diamond.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, ["Record ID", "Question", "Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2",
                                "Incorrect Answer 3"])
        w.writeheader()
        w.writerow({"Record ID": "rec1", "Question": "What is 2+2?", "Correct Answer": "4", "Incorrect Answer 1": "3",
                    "Incorrect Answer 2": "5", "Incorrect Answer 3": "22"})
    (q,) = gt.load("gpqa", tmp_path).questions
    assert q.question_id == "rec1" and q.turns[0].splitlines()[ord(q.reference) - ord("A") + 2].endswith(". 4")
    (tmp_path / "gt" / "hle").mkdir()
    (tmp_path / "gt" / "hle" / "test.jsonl").write_text("\n".join(json.dumps(r) for r in [
        {"id": "h1", "question": "Which? A. x B. y", "answer": "B", "answer_type": "multipleChoice", "image": ""},
        {"id": "h2", "question": "Name it.", "answer": "Foo", "answer_type": "exactMatch", "image": ""},
        {"id": "h3", "question": "Look at this", "answer": "1", "answer_type": "exactMatch", "image": "data:..."}]))
    hle = gt.load("hle", tmp_path).questions
    assert [(q.question_id, q.extra["grader"]) for q in hle] == [("h1", "mcq"), ("h2", "llm")]  # image rows skipped
    (tmp_path / "gt" / "hallumix").mkdir()
    (tmp_path / "gt" / "hallumix" / "test.jsonl").write_text(json.dumps(
        {"documents": ["Paris is in France."], "answer": "Paris is in Spain.", "hallucination_label": 1}))
    (h,) = gt.load("hallumix", tmp_path).questions
    assert h.reference == "B" and "Paris is in France." in h.turns[0]
    (tmp_path / "gt" / "hallumix" / "test.jsonl").write_text(json.dumps({"documents": ["x"], "answer": "y"}))
    with pytest.raises(DataError, match=r"lacks the upstream column\(s\) hallucination_label"):
        gt.load("hallumix", tmp_path)


# -- strategies, over the loopback server -------------------------------------------------------------------
def q(reference: str, labels: str = "ABCD", grader: str = "mcq") -> Question:
    return Question("t", "1", ["?"], reference=reference, extra={"grader": grader, "labels": list(labels)})


def combine(name: str, responses: list[str], server=None, gold: str = "A"):
    async def go():
        client = ChatClient(server.base_url, None, FAST) if server else None
        try:
            ctx = Context(GRADERS["mcq"], "consensus-model" if server else None, client)
            return await STRATEGIES[name]().combine(q(gold), responses, ctx), ctx
        finally:
            if client:
                await client.aclose()

    return asyncio.run(go())


def test_majority_votes_over_extracted_answers_with_a_deterministic_tie_break():
    found, ctx = combine("majority", ["Answer: B", "Answer: C", "The answer is (C)", "Answer: B", "no idea"])
    assert found.detail["votes"] == {"B": 2, "C": 2} and found.detail["winner"] == "B"  # B came first
    assert found.content == "Answer: B" and ctx.requests == 0


def test_standard_makes_one_synthesizer_call(server):
    found, ctx = combine("standard", ["Answer: B <<answer: Checked both. Answer: B>>", "Answer: C"], server)
    assert found.content == "Checked both. Answer: B" and server.stats()["calls"] == 1 and ctx.prompt_tokens > 0
    (messages,) = server.requests()
    assert "Answer 2" in messages[-1]["content"]


def test_elo_judges_both_orders_and_counts_disagreement_as_a_tie(server):
    # The loopback server replies with the first marker in the prompt, i.e. the one of the answer shown
    # as A: r0 always says "B wins", r1 "A wins", r2 "B wins". r1 beats r0 and r2 in both orders; r0
    # against r2 flips with the order (position bias), so that pair is a tie.
    responses = ["Answer: A <<answer: WINNER: B>>", "Answer: B <<answer: WINNER: A>>",
                 "Answer: C <<answer: WINNER: B>>"]
    found, _ = combine("elo", responses, server)
    assert server.stats()["calls"] == 6  # 3 pairs × 2 orders
    assert found.detail["outcomes"] == [(0, 1, "j"), (0, 2, "tie"), (1, 2, "i")]
    assert found.detail["winner"] == 1 and found.content == responses[1]
    strength = found.detail["ratings"]
    assert strength[1] > strength[0] and strength[0] == pytest.approx(strength[2], abs=1e-6)


def test_elo_with_pure_position_bias_ties_everything_and_keeps_the_first():
    strength = ratings(3, [(0, 1, "tie"), (0, 2, "tie"), (1, 2, "tie")])
    assert max(strength) - min(strength) < 1e-6


def test_council_runs_critique_rebuttal_and_judgment_rounds(server):
    responses = ["Answer: A <<answer: 検討の結果 Answer: A>>", "Answer: B"]
    found, _ = combine("council", responses, server)
    assert server.stats()["calls"] == 5  # 2 critiques, 2 rebuttals, 1 judgment
    prompts = [m[-1]["content"] for m in server.requests()]
    assert sum("strict reviewer" in p for p in prompts) == 2 and sum("a reviewer criticised" in p for p in prompts) == 2
    assert sum("You chair a council" in p for p in prompts) == 1
    assert len(found.detail["critiques"]) == 2 and found.content == "検討の結果 Answer: A"


# -- the gate against scipy --------------------------------------------------------------------------------
def test_gate_statistics_equal_scipy_and_statsmodels_on_a_fixed_table():
    n = 200
    baseline = [1] * 140 + [0] * 60
    correct = list(baseline)
    for i in range(20):  # 20 right answers lost, 3 wrong ones gained: a planted regression
        correct[i] = 0
    for i in range(140, 143):
        correct[i] = 1
    samples_mean = [0.8 if b else 0.3 for b in baseline]
    c = compare("d", "s", baseline, correct, samples_mean)
    assert (c.worse, c.better) == (20, 3)
    assert c.p_mcnemar == pytest.approx(stats.binomtest(20, 23, 0.5, alternative="greater").pvalue, abs=1e-12)
    assert c.p_ttest == pytest.approx(stats.ttest_rel(correct, samples_mean, alternative="less").pvalue, abs=1e-12)
    table = [[sum(correct), n - sum(correct)], [140, 60]]
    assert c.p_fisher == pytest.approx(stats.fisher_exact(table, alternative="less")[1], abs=1e-12)
    diffs = [s - b for s, b in zip(correct, baseline, strict=True)]
    low, high = stats.t.interval(0.95, n - 1, loc=sum(diffs) / n, scale=stats.sem(diffs))
    assert (c.ci_low, c.ci_high) == pytest.approx((low, high), abs=1e-12)
    assert c.p_fisher > c.p_mcnemar  # the unpaired test sees less

    null = compare("d", "null", baseline, list(baseline), samples_mean)  # identical answers
    swap = list(baseline)
    swap[0], swap[150] = 0, 1  # one lost, one gained: no difference
    even = compare("d2", "even", baseline, swap, samples_mean)
    gated = gate([c, null, even], alpha=0.10)
    pvalues = [c.p_mcnemar, null.p_mcnemar, even.p_mcnemar, c.p_ttest, null.p_ttest, even.p_ttest]
    expected = multipletests(pvalues, alpha=0.10, method="holm")[1]
    assert [g.p_mcnemar_holm for g in gated] + [g.p_ttest_holm for g in gated] == pytest.approx(list(expected))
    assert [g.regression for g in gated] == [True, False, False]
    assert 0 < c.mde < 0.2


# -- the pipeline end to end ---------------------------------------------------------------------------------
def write_gsm8k(data_dir: Path, n: int = 6) -> Path:
    (data_dir / "gt" / "gsm8k").mkdir(parents=True, exist_ok=True)
    with open(data_dir / "gt" / "gsm8k" / "test.jsonl", "w") as fh:
        for i in range(n):  # the loopback server answers with the marker: right for even ids, wrong for odd
            answer = i * 10 if i % 2 == 0 else i * 10 + 1
            fh.write(json.dumps({"question": f"Question {i}? <<answer: Reasoning. #### {answer}>>",
                                 "answer": f"Because.\n#### {i * 10}"}) + "\n")
    return data_dir


def test_generate_once_then_evaluate_many_times_without_generation_calls(server, tmp_path):
    data = write_gsm8k(tmp_path / "d")
    args = ["--results-dir", str(tmp_path / "r")]
    made = shaberi("ensemble", "generate-cache", "--model", "m", "--base-url", server.base_url, "--datasets", "gsm8k",
                   "--n", "3", "--data-dir", str(data), *args)
    assert made.returncode == 0, made.stderr
    assert server.stats()["calls"] == 18  # 6 questions × 3 samples
    assert shaberi("ensemble", "generate-cache", "--model", "m", "--base-url", server.base_url, "--datasets", "gsm8k",
                   "--n", "3", "--data-dir", str(data), *args).returncode == 0
    assert server.stats()["calls"] == 18  # resumed: nothing to do
    server.reset()
    first = shaberi("ensemble", "quick-eval", "--model", "m", "--sample", "4", "--seed", "1", "--out",
                    str(tmp_path / "a.json"), *args)
    assert first.returncode == 0, first.stderr
    second = shaberi("ensemble", "quick-eval", "--model", "m", "--sample", "5", "--seed", "2", "--strategy",
                     "standard", "--consensus-model", f"synth@{server.base_url}", "--out", str(tmp_path / "b.json"),
                     *args)
    assert second.returncode == 0, second.stderr
    assert server.stats()["calls"] == 5  # the synthesizer, once per sampled question; no generation call
    result = json.loads((tmp_path / "a.json").read_text())["datasets"]["gsm8k"]
    assert len(result["question_ids"]) == 4 and result["baseline"] == [int(int(i) % 2 == 1) for i in
                                                                       result["question_ids"]]  # ids start at 1
    assert result["strategies"]["majority"]["correct"] == result["baseline"]
    server.reset()
    again = shaberi("ensemble", "quick-eval", "--model", "m", "--sample", "5", "--seed", "2", "--strategy",
                    "standard", "--consensus-model", f"synth@{server.base_url}", "--out", str(tmp_path / "c.json"),
                    *args)
    assert again.returncode == 0 and server.stats()["calls"] == 0  # consensus answers reused, not paid again
    assert "5 reused" in again.stdout
    assert query(tmp_path / "r", "SELECT sum(requests) FROM token_usage WHERE stage = 'consensus'") == [(5,)]
    report = shaberi("ensemble", "report", str(tmp_path / "a.json"), str(tmp_path / "b.json"))
    assert report.returncode == 0
    assert "| m | majority | 4 |" in report.stdout and "| m | standard | 5 |" in report.stdout
    assert "2 comparisons from 2 file(s)" in report.stdout
    # A reasoning model as the consensus model: its family's rules reach the strategy's calls (they used to send
    # max_tokens and a temperature, and every call failed with HTTP 400).
    server.reset()
    reasoning = shaberi("ensemble", "quick-eval", "--model", "m", "--sample", "5", "--seed", "2", "--strategy",
                        "standard", "--consensus-model", f"gpt-5-mini@{server.base_url}", *args)
    assert reasoning.returncode == 0, reasoning.stderr
    assert server.stats()["calls"] == 5 and "failed" not in reasoning.stdout, reasoning.stdout
    assert [sorted(b) for b in server.bodies()] == [["max_completion_tokens", "model"]] * 5
    # The same strategy's calls failing once (its answers errors, its grades none), then answering the same texts as
    # before: the grades of those texts count again (the error rows' grades are stale), none is left without one.
    server.fail_next(*[400] * 5)
    failed = shaberi("ensemble", "quick-eval", "--model", "m", "--sample", "5", "--seed", "2", "--strategy",
                     "standard", "--consensus-model", f"other@{server.base_url}", *args)
    assert "5 of 5 consensus calls failed" in failed.stdout + failed.stderr, failed.stdout + failed.stderr
    assert shaberi("ensemble", "quick-eval", "--model", "m", "--sample", "5", "--seed", "2", "--strategy", "standard",
                   "--consensus-model", f"other@{server.base_url}", *args).returncode == 0
    assert query(tmp_path / "r", "SELECT count(*), count(score) FROM judgements WHERE strategy = 'standard'") == [
        (5, 5)]
    # A rule grader has no prompt: its rules' version, not a prompt hash, says how a grade was made.
    from shaberi.ensemble.graders import GRADERS

    assert query(tmp_path / "r", "SELECT DISTINCT judge, prompt_hash, grader_version FROM judgements") == [
        ("exact:numeric", None, GRADERS["numeric"].version)]


def test_a_reasoning_models_cache_is_asked_as_its_family_takes_it_and_says_so(server, tmp_path):
    data = write_gsm8k(tmp_path / "d", n=2)
    made = shaberi("ensemble", "generate-cache", "--model", "gpt-5-mini", "--base-url", server.base_url, "--datasets",
                   "gsm8k", "--n", "2", "--temperature", "0.7", "--data-dir", str(data), "--results-dir",
                   str(tmp_path / "r"))
    assert made.returncode == 0, made.stderr
    assert "note: gpt-5-mini is in model family 'openai-reasoning'" in made.stderr and "temperature not sent" in \
        made.stderr
    assert [sorted(b) for b in server.bodies()] == [["max_completion_tokens", "model", "seed"]] * 4


def test_recorded_responses_and_the_ci_gate(data_dir, tmp_path):
    recorded = [str(data_dir / "recorded" / "mmlu_pro" / f"{m}.jsonl") for m in RECORDED]
    args = ["--results-dir", str(tmp_path / "r")]
    done = shaberi("ensemble", "import-responses", "--dataset", "mmlu_pro", "--model", "five", *recorded,
                   "--data-dir", str(data_dir), *args)
    assert done.returncode == 0, done.stderr
    assert "5 members, 12,032, 12,032, 12,032, 12,032, 12,032 responses" in done.stdout
    baselines = tmp_path / "quick-eval.json"
    baselines.write_text(json.dumps({"alpha": 0.1, "models": {"five": {
        "datasets": ["mmlu_pro"], "strategies": ["majority"], "sample": 300, "seed": 0}}}))
    check = shaberi("ensemble", "check", "--model", "five", "--baseline-file", str(baselines), *args)
    assert check.returncode == 0, check.stdout + check.stderr  # the vote does not lose to Llama-3.1 (first file)
    assert "gate passed" in check.stdout

    # A separate baseline cache (here Llama-3.1 alone): its sample 0 is the baseline, graded in its own run.
    assert shaberi("ensemble", "import-responses", "--dataset", "mmlu_pro", "--model", "llama-alone", recorded[0],
                   "--data-dir", str(data_dir), *args).returncode == 0
    separate = shaberi("ensemble", "quick-eval", "--model", "five", "--sample", "50", "--baseline-model",
                       "llama-alone", "--out", str(tmp_path / "sep.json"), *args)
    assert separate.returncode == 0, separate.stderr
    same = shaberi("ensemble", "quick-eval", "--model", "five", "--sample", "50", "--out", str(tmp_path / "own.json"),
                   *args)
    assert json.loads((tmp_path / "sep.json").read_text())["datasets"]["mmlu_pro"]["baseline"] == json.loads(
        (tmp_path / "own.json").read_text())["datasets"]["mmlu_pro"]["baseline"] and same.returncode == 0
    (alone,) = [r for (r,) in query(tmp_path / "r", "SELECT run_id FROM runs WHERE model = 'llama-alone'")]
    assert Store(tmp_path / "r").read("judgements", alone).num_rows == 50  # in its own partition

    # The strong model (Llama-3.1, 43 %) as the baseline and four copies of a weak one (gemma-7b, 33 %):
    # the copies outvote it on every question, the regression the gate exists to catch.
    weak_first = shaberi("ensemble", "import-responses", "--dataset", "mmlu_pro", "--model", "strong-plus-copies",
                         recorded[0], recorded[4], recorded[4], recorded[4], recorded[4], "--data-dir",
                         str(data_dir), *args)
    assert weak_first.returncode == 0, weak_first.stderr
    baselines.write_text(json.dumps({"models": {"strong-plus-copies": {
        "datasets": ["mmlu_pro"], "strategies": ["majority"], "sample": 300, "seed": 0}}}))
    gated = shaberi("ensemble", "check", "--model", "strong-plus-copies", "--baseline-file", str(baselines), *args)
    assert gated.returncode == 1 and "REGRESSION: majority on mmlu_pro" in gated.stderr
    quick = shaberi("ensemble", "quick-eval", "--model", "strong-plus-copies", "--sample", "300", "--out",
                    str(tmp_path / "weak.json"), *args)  # the same regression without a baseline file: a red job too
    assert quick.returncode == 1 and "REGRESSION: majority on mmlu_pro" in quick.stderr
    assert (tmp_path / "weak.json").is_file()
    job = shaberi("ensemble", "check", "--model", "strong-plus-copies", "--baseline-file", str(baselines),
                  "--strategy", "majority", "--datasets", "mmlu_pro", *args)  # one CI job's slice
    assert job.returncode == 1 and "REGRESSION: majority on mmlu_pro" in job.stderr
    other = shaberi("ensemble", "check", "--model", "strong-plus-copies", "--baseline-file", str(baselines),
                    "--strategy", "elo", *args)
    assert other.returncode == 2 and other.stderr.startswith("error: ") and "configures strategies majority" in \
        other.stderr and len(other.stderr.splitlines()) == 1


@pytest.mark.parametrize(("args", "message"), [
    (["quick-eval", "--model", "nobody"], "error: no ensemble cache for model 'nobody'"),
    (["quick-eval", "--model", "m", "--strategy", "vote"],
     "error: unknown strategy vote; choose from: all, council, elo, majority, standard"),
    (["generate-cache", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--datasets", "gsm9k"],
     "error: unknown dataset gsm9k; choose from: "),
    (["import-responses", "--dataset", "mmlu_pro", "--model", "m", "missing.jsonl"],
     "error: cannot read missing.jsonl"),
])
def test_bad_ensemble_input_is_one_line(tmp_path, data_dir, args, message):
    extra = ["--data-dir", str(data_dir)] if args[0] in ("generate-cache", "import-responses") else []
    done = shaberi("ensemble", *args, *extra, "--results-dir", str(tmp_path / "r"))
    assert done.returncode == 2 and done.stderr.startswith(message) and len(done.stderr.strip().splitlines()) == 1


def test_simpleqa_is_graded_by_a_judge_model_with_accuracy_given_attempted(server, tmp_path):
    """The judge (the loopback server) answers the marker in the predicted answer: A correct, B incorrect,
    C not attempted."""
    (tmp_path / "d" / "gt" / "simpleqa").mkdir(parents=True)
    with open(tmp_path / "d" / "gt" / "simpleqa" / "simple_qa_test_set.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, ["metadata", "problem", "answer"])
        w.writeheader()
        for i in range(4):
            w.writerow({"metadata": "{}", "problem": f"Who won in {2000 + i}?", "answer": f"Person {i}"})
    replies = ["Person 1 <<answer: A>>", "Someone else <<answer: B>>", "I don't know <<answer: C>>",
               "Person 4 <<answer: A>>"]
    member = tmp_path / "member.jsonl"
    member.write_text("\n".join(json.dumps({"question_id": str(i + 1), "response": r}) for i, r in enumerate(replies)))
    args = ["--results-dir", str(tmp_path / "r")]
    assert shaberi("ensemble", "import-responses", "--dataset", "simpleqa", "--model", "m", str(member), str(member),
                   "--data-dir", str(tmp_path / "d"), *args).returncode == 0
    no_judge = shaberi("ensemble", "quick-eval", "--model", "m", *args)
    assert no_judge.returncode == 2 and "give --judge MODEL[@BASE_URL]" in no_judge.stderr
    done = shaberi("ensemble", "quick-eval", "--model", "m", "--sample", "10", "--judge", f"grader@{server.base_url}",
                   "--out", str(tmp_path / "q.json"), *args)
    assert done.returncode == 0, done.stderr
    assert "baseline attempted 3/4, accuracy given attempted 66.7%" in done.stdout
    assert server.stats()["calls"] == 4  # one per distinct answer text: the second member and the vote repeat them
    assert query(tmp_path / "r", "SELECT parse_method, count(*) FROM judgements GROUP BY 1 ORDER BY 1") == [
        ("CORRECT", 6), ("INCORRECT", 3), ("NOT_ATTEMPTED", 3)]
    assert query(tmp_path / "r", "SELECT requests FROM token_usage WHERE stage = 'judging'") == [(4,)]
    # A reasoning model as the grader gets its family's request, as it does as run's --judge (it refuses
    # max_tokens and a temperature: every grade would fail).
    server.reset()
    reasoning = shaberi("ensemble", "quick-eval", "--model", "m", "--sample", "10", "--judge",
                        f"gpt-5-mini@{server.base_url}", *args)
    assert reasoning.returncode == 0, reasoning.stderr
    assert "baseline attempted 3/4, accuracy given attempted 66.7%" in reasoning.stdout
    bodies = [b for b in server.bodies() if b["model"] == "gpt-5-mini"]
    assert len(bodies) == 4 and all("max_completion_tokens" in b and "max_tokens" not in b
                                    and "temperature" not in b for b in bodies), bodies



def test_each_member_carries_its_own_seed_and_identical_members_are_warned_about(server, tmp_path):
    """The loopback server is deterministic: ``<<answer#N: …>>`` is its reply to a request with seed N, and
    ``<<answer: …>>`` its reply whatever the seed. Questions 0 and 1 get a reply per seed, 2 and 3 one reply."""
    (tmp_path / "d" / "gt" / "gsm8k").mkdir(parents=True)
    with open(tmp_path / "d" / "gt" / "gsm8k" / "test.jsonl", "w") as fh:
        for i in range(4):
            replies = " ".join(f"<<answer#{s}: #### {i + s}>>" for s in range(3)) if i < 2 else f"<<answer: #### {i}>>"
            fh.write(json.dumps({"question": f"Question {i}? {replies}", "answer": f"#### {i}"}) + "\n")
    args = ["ensemble", "generate-cache", "--model", "m", "--base-url", server.base_url, "--datasets", "gsm8k", "--n",
            "3", "--data-dir", str(tmp_path / "d"), "--results-dir", str(tmp_path / "r")]
    done = shaberi(*args)
    assert done.returncode == 0, done.stderr
    assert server.stats()["calls"] == 12
    assert sorted(b["seed"] for b in server.bodies()) == [0] * 4 + [1] * 4 + [2] * 4  # member i: seed i
    assert query(tmp_path / "r", "SELECT question_id, list(content ORDER BY sample_index) FROM answers GROUP BY 1 "
                                 "ORDER BY 1") == [("1", ["#### 0", "#### 1", "#### 2"]),
                                                   ("2", ["#### 1", "#### 2", "#### 3"]),
                                                   ("3", ["#### 2"] * 3), ("4", ["#### 3"] * 3)]
    # the seed is part of each request's identity: 12 requests, 12 hashes
    assert query(tmp_path / "r", "SELECT count(DISTINCT request_hash) FROM answers") == [(12,)]
    warning = (f"warning: gsm8k: all 3 members are byte-identical on 2 of 4 questions: majority or any consensus "
               f"over identical members measures nothing there (does {server.base_url} honour seed and temperature "
               "0.7?)\n")
    assert done.stderr == warning
    server.reset()
    again = shaberi(*args)  # resumed: nothing paid again, and the entry still says what it holds
    assert (again.returncode, again.stderr, server.stats()["calls"]) == (0, warning, 0)

    (tmp_path / "d2" / "gt" / "gsm8k").mkdir(parents=True)  # every question sampled per seed: no warning
    (tmp_path / "d2" / "gt" / "gsm8k" / "test.jsonl").write_text(json.dumps(
        {"question": "Question? " + " ".join(f"<<answer#{s}: #### {s}>>" for s in range(3)), "answer": "#### 0"}))
    apart = shaberi(*args[:-4], "--data-dir", str(tmp_path / "d2"), "--results-dir", str(tmp_path / "r2"))
    assert (apart.returncode, apart.stderr, server.stats()["calls"]) == (0, "", 3)


# -- recorded responses: only what was answered, as text, once ---------------------------------------------
def _gsm8k(root: Path, n: int = 4) -> Path:
    """A data dir whose gsm8k has ``n`` questions, question i's answer i (ids 1 … n)."""
    (root / "gt" / "gsm8k").mkdir(parents=True)
    (root / "gt" / "gsm8k" / "test.jsonl").write_text(
        "".join(json.dumps({"question": f"Question {i}?", "answer": f"Because.\n#### {i}"}) + "\n" for i in range(n)))
    return root


def _member(path: Path, lines: list[str]) -> str:
    path.write_text("".join(line + "\n" for line in lines))
    return str(path)


def _answer(qid: int, response: object = None) -> str:
    """The line of a member file answering question ``qid`` (right by default)."""
    return json.dumps({"question_id": str(qid), "response": f"So #### {qid - 1}" if response is None else response})


@pytest.mark.parametrize(("second", "said"), [
    ([_answer(1), _answer(2), _answer(2, "So #### 99"), _answer(3), _answer(4)],
     "m1.jsonl:3: question_id 2 is given again (first at {m1}:2): a member answers each question once"),
    ([], "m1.jsonl holds no responses (an empty member file)"),
    ([_answer(1), _answer(2, 7), _answer(3), _answer(4)], "m1.jsonl:2: the response to question 2 is 7, not text"),
    ([_answer(1), json.dumps({"question_id": "2", "response": None}), _answer(3), _answer(4)],
     "m1.jsonl:2: the response to question 2 is null, not text"),
    ([_answer(1), _answer(2, {"text": "So #### 1"}), _answer(3), _answer(4)],
     'm1.jsonl:2: the response to question 2 is {"text":"So #### 1"}, not text'),
    ([_answer(1), _answer(2), _answer(3)], "m1.jsonl lacks 1 question(s) that {m0} answers (e.g. 4): every member must "
                                           "answer the same questions"),
], ids=["repeated id", "empty file", "number", "null", "object", "fewer questions"])
def test_member_files_that_would_be_misread_are_refused_in_one_line_writing_nothing(tmp_path, second, said):
    data = _gsm8k(tmp_path / "d")
    m0 = _member(tmp_path / "m0.jsonl", [_answer(q) for q in range(1, 5)])
    m1 = _member(tmp_path / "m1.jsonl", second)
    results, cache_dir = tmp_path / "r", tmp_path / "c"
    done = shaberi("ensemble", "import-responses", "--dataset", "gsm8k", "--model", "m", m0, m1, "--cache-dir",
                   str(cache_dir), "--data-dir", str(data), "--results-dir", str(results))
    lines = done.stderr.splitlines()
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert said.replace("{m0}", m0).replace("{m1}", m1) in lines[0] and "Traceback" not in done.stderr
    assert not results.exists() and not cache_dir.exists()


def test_questions_no_file_answers_are_not_graded_and_the_coverage_is_stated(tmp_path):
    """Before, a question the files lack was an error row graded wrong: 2 right answers of 4 questions read as
    a 50 % baseline. It is no answer: the accuracy is over the 2 answered, and both commands say so."""
    data = _gsm8k(tmp_path / "d")
    members = [_member(tmp_path / f"m{i}.jsonl", [_answer(2), _answer(3)]) for i in range(3)]
    args = ["--results-dir", str(tmp_path / "r")]
    done = shaberi("ensemble", "import-responses", "--dataset", "gsm8k", "--model", "m", *members, "--data-dir",
                   str(data), *args)
    assert done.returncode == 0, done.stderr
    assert "3 members, 2, 2, 2 responses" in done.stdout
    assert "gsm8k: the files answer 2 of its 4 questions; the others are not answers, never graded" in done.stdout
    assert query(tmp_path / "r", "SELECT count(*), count(content) FROM answers") == [(6, 6)]  # no error rows
    evaluated = shaberi("ensemble", "quick-eval", "--model", "m", "--sample", "10", "--out", str(tmp_path / "q.json"),
                        *args)
    assert evaluated.returncode == 0, evaluated.stderr
    result = json.loads((tmp_path / "q.json").read_text())["datasets"]["gsm8k"]
    assert result["question_ids"] == ["2", "3"] and result["baseline"] == [1, 1]
    assert result["strategies"]["majority"]["correct"] == [1, 1]
    assert "gsm8k: the cache holds answers to 2 of 4 questions" in evaluated.stdout


def test_a_cache_file_whose_content_is_not_text_is_one_line_and_nothing_is_written(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = _gsm8k(tmp_path / "d")
    member = _member(tmp_path / "m0.jsonl", [_answer(q) for q in range(1, 5)])
    made = shaberi("ensemble", "import-responses", "--dataset", "gsm8k", "--model", "m", member, "--cache-dir",
                   str(tmp_path / "c"), "--data-dir", str(data), "--results-dir", str(tmp_path / "r0"))
    assert made.returncode == 0, made.stderr
    (path,) = (tmp_path / "c").rglob("*.parquet")
    table = pq.read_table(path)
    at = table.column_names.index("content")
    pq.write_table(table.set_column(at, pa.field("content", pa.int64()), pa.array([5] * table.num_rows, pa.int64())
                                    ).replace_schema_metadata(table.schema.metadata), path)
    results = tmp_path / "r"
    done = shaberi("ensemble", "quick-eval", "--model", "m", "--cache-dir", str(tmp_path / "c"), "--data-dir",
                   str(data), "--results-dir", str(results))
    assert done.returncode == 2 and done.stderr.splitlines() == [
        f"error: the cache file {path}: its column content holds int64, not text; write it again with "
        "generate-cache or import-responses --cache-dir"], done.stderr
    assert not results.exists()


def test_a_member_file_that_is_a_link_to_a_device_is_refused_not_read_without_end(tmp_path):
    data = _gsm8k(tmp_path / "d")
    m0 = _member(tmp_path / "m0.jsonl", [_answer(q) for q in range(1, 5)])
    endless = tmp_path / "m1.jsonl"
    endless.symlink_to("/dev/zero")
    done = shaberi("ensemble", "import-responses", "--dataset", "gsm8k", "--model", "m", m0, str(endless),
                   "--data-dir", str(data), "--results-dir", str(tmp_path / "r"), timeout=60)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "not a regular file" in done.stderr, done.stderr
    assert not (tmp_path / "r").exists()
