"""The ensemble gate as a team's CI runs it: a committed cache, one job per strategy, one report, one family.

Real parts: the CLI in subprocesses, the loopback server as the consensus model, the example workflow run
step by step by ``examples/ci/run_workflow.py``, the five recorded MMLU-Pro models.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from shaberi.ensemble.gate import detectable, power
from shaberi.testing import LoopbackServer

from .conftest import REPO, query, shaberi

MODEL = "recorded-5"
N = 100


def gate_repo(root: Path, refuse: range = range(0)) -> Path:
    """A team's repository (a git repository, everything committed): gsm8k (each question carries the
    loopback's answer marker, so a model asked about it answers right; those in ``refuse`` are answered 401),
    a committed cache of five members and a baseline file configuring four strategies. Member 0, the
    baseline, is wrong on questions 1-10; members 1-4 agree on a wrong answer to 11-40: the majority vote
    loses 30 questions and gains 10, a planted regression."""
    gt = root / "datasets" / "gt" / "gsm8k"
    gt.mkdir(parents=True)
    with open(gt / "test.jsonl", "w") as fh:
        for i in range(N):
            fault = " [[fail:401]]" if i in refuse else ""
            fh.write(json.dumps({"question": f"Question {i}?{fault} <<answer: Reasoning. #### {i * 10}>>",
                                 "answer": f"Because.\n#### {i * 10}"}) + "\n")
    members = []
    for m in range(5):
        path = root.parent / f"{root.name}-members" / f"member{m}.jsonl"
        path.parent.mkdir(exist_ok=True)
        with open(path, "w") as fh:
            for i in range(N):
                wrong = i < 10 if m == 0 else 10 <= i < 40
                fh.write(json.dumps({"question_id": str(i + 1),
                                     "response": f"So #### {i * 10 + (7 if wrong else 0)}"}) + "\n")
        members.append(str(path))
    done = shaberi("ensemble", "import-responses", "--dataset", "gsm8k", "--model", MODEL, *members, "--cache-dir",
                   str(root / ".cache" / "ensemble"), "--data-dir", str(root / "datasets"), "--results-dir",
                   str(root.parent / f"{root.name}-scratch"))
    assert done.returncode == 0, done.stderr
    (root / "baselines").mkdir()
    (root / "baselines" / "quick-eval.json").write_text(json.dumps({"alpha": 0.1, "models": {MODEL: {
        "datasets": ["gsm8k"], "strategies": ["majority", "standard", "elo", "council"], "sample": N, "seed": 0}}}))
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "the committed cache"]):
        subprocess.run([*git, *args], check=True)
    return root


def workflow_env(server: LoopbackServer) -> dict[str, str]:
    """This environment as a runner's, the loopback server as the consensus model."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SHABERI_RESULTS", "OPENAI_API_KEY"))}
    return env | {"CONSENSUS_MODEL": f"synth@{server.base_url}",
                  "PATH": f"{Path(sys.executable).parent}:{env['PATH']}"}


def run_workflow(repo: Path, work: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The shipped example workflow, run here by its local runner over ``repo``."""
    return subprocess.run([sys.executable, str(REPO / "examples" / "ci" / "run_workflow.py"),
                           str(REPO / "examples" / "ci" / "ensemble-gate.yml"), "--repo", str(repo), "--work",
                           str(work)], capture_output=True, text=True, env=env, timeout=900)


def test_the_example_workflow_runs_here_and_the_planted_regression_turns_its_job_red(tmp_path):
    repo = gate_repo(tmp_path / "repo")
    (repo / ".cache" / "uncommitted.parquet").write_bytes(b"not committed: a job never sees it")
    with LoopbackServer() as server:
        env = workflow_env(server)
        done = run_workflow(repo, tmp_path / "work", env)
        calls = server.stats()["calls"]
    jobs = {line.split(":")[0]: line for line in done.stdout.splitlines() if line.startswith("job ")}
    assert done.returncode == 1, done.stdout + done.stderr
    assert "job gate majority: FAILED" in jobs["job gate majority"] and "exit 1" in jobs["job gate majority"]
    for name in ("standard", "elo", "council"):
        assert f"job gate {name}: ok" in jobs[f"job gate {name}"], done.stdout
    assert "job report: FAILED" in jobs["job report"]  # it ran although a job it needs failed (if: always())
    assert "**1 significant regression(s)**: majority on gsm8k" in done.stdout  # the step summary
    assert "4 job file(s) covering all 8 tests" in done.stdout and "Not checked" not in done.stdout
    # zero generation calls: only the consensus model's (standard 1, council 11, elo 20 per question) and the
    # three jobs' endpoint checks (GET /models is not a chat call)
    assert calls == N * (1 + 11 + 20)
    # each job ran in its own checkout: the committed cache was never written
    assert not (repo / "results").exists()

    # No consensus model: three jobs fail on bad input (exit 2), leave no result file, and the report does not
    # read their absence as a pass.
    env.pop("CONSENSUS_MODEL")
    again = run_workflow(repo, tmp_path / "work", env)
    assert again.returncode == 1 and again.stdout.count("exit 2") == 3, again.stdout
    assert "warning: no files were found" in again.stdout  # the failed jobs' uploads, as on GitHub
    assert "1 job file(s) covering 2 of the 8 tests" in again.stdout and "**Not checked**" in again.stdout


RECORDED = ["Meta-Llama-3_1-8B-Instruct", "Mistral-7B-Instruct-v0.2", "Qwen1.5-7B-Chat", "Yi-6b-Chat", "gemma-7b"]


def test_the_shipped_example_passes_its_four_jobs_and_report_with_the_shipped_baseline(tmp_path, data_dir):
    """examples/ci/ensemble-gate.yml as shipped, over a repository holding this project's own
    baselines/quick-eval.json and a committed cache of the five recorded MMLU-Pro models (the file's recorded-5),
    the loopback server as CONSENSUS_MODEL: every strategy job and the report pass."""
    repo = tmp_path / "repo"
    shutil.copytree(data_dir / "gt" / "mmlu_pro", repo / "datasets" / "gt" / "mmlu_pro")
    (repo / "baselines").mkdir()
    shutil.copy(REPO / "baselines" / "quick-eval.json", repo / "baselines" / "quick-eval.json")
    files = [str(data_dir / "recorded" / "mmlu_pro" / f"{name}.jsonl") for name in RECORDED]
    done = shaberi("ensemble", "import-responses", "--dataset", "mmlu_pro", "--model", MODEL, *files, "--cache-dir",
                   str(repo / ".cache" / "ensemble"), "--data-dir", str(repo / "datasets"), "--results-dir",
                   str(tmp_path / "scratch"))
    assert done.returncode == 0, done.stderr
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "the committed cache"]):
        subprocess.run([*git, *args], check=True)
    entry = json.loads((REPO / "baselines" / "quick-eval.json").read_text())["models"][MODEL]
    with LoopbackServer() as server:
        ran = run_workflow(repo, tmp_path / "work", workflow_env(server))
        calls = server.stats()["calls"]
    assert ran.returncode == 0, ran.stdout + ran.stderr
    jobs = [line for line in ran.stdout.splitlines() if line.startswith("job ")]
    assert sorted(j.split(":")[0] for j in jobs) == sorted(
        ["job report", *(f"job gate {s}" for s in ("majority", "standard", "elo", "council"))])
    assert all(": ok (" in j for j in jobs), jobs
    assert entry["strategies"] == ["majority", "standard", "elo", "council"]
    assert f"4 job file(s) covering all {2 * 4} tests" in ran.stdout and "Not checked" not in ran.stdout
    assert calls == entry["sample"] * (1 + 11 + 20)  # the consensus model's calls only: no generation


def test_each_job_and_the_report_give_the_same_verdicts_in_one_family(tmp_path):
    repo = gate_repo(tmp_path)
    base = ["--baseline-file", str(repo / "baselines" / "quick-eval.json"), "--cache-dir", str(repo / ".cache"),
            "--data-dir", str(repo / "datasets"), "--results-dir", str(repo / "results")]
    # the majority job of a configuration of four strategies on one dataset: a family of 8 tests
    job = shaberi("ensemble", "check", "--model", MODEL, "--strategy", "majority", "--out", str(tmp_path / "m.json"),
                  *base)
    assert job.returncode == 1 and "REGRESSION: majority on gsm8k" in job.stderr
    result = json.loads((tmp_path / "m.json").read_text())
    assert (result["alpha"], result["family_tests"]) == (0.1, 8)
    d = result["datasets"]["gsm8k"]
    b = sum(1 for x, y in zip(d["baseline"], d["strategies"]["majority"]["correct"], strict=True) if x and not y)
    c = sum(1 for x, y in zip(d["baseline"], d["strategies"]["majority"]["correct"], strict=True) if y and not x)
    assert (b, c) == (30, 10)
    p_mcnemar = stats.binomtest(b, b + c, 0.5, alternative="greater").pvalue
    p_t = stats.ttest_rel(d["strategies"]["majority"]["correct"], d["samples_mean"], alternative="less").pvalue
    holm = multipletests([p_mcnemar, p_t], method="holm")[1]
    expected = min(1.0, min(holm) * 8 / 2)  # Holm within the job, at its 2/8 share of the family's α
    assert f"adjusted p {expected:.3f}" in job.stderr

    report = shaberi("ensemble", "report", str(tmp_path / "m.json"))
    assert report.returncode == 1 and "REGRESSION: majority on gsm8k" in report.stderr  # the job's verdict, kept
    assert "covering 2 of the 8 tests: a job's file is missing" in report.stdout
    row = next(line for line in report.stdout.splitlines() if line.startswith(f"| {MODEL} | majority"))
    assert f"{p_mcnemar:.3f}" in row and "**regression**" in row
    # A stricter α, asked for, is said, never silent: at 0.001 the file holds no regression, but the family's
    # other three jobs are missing, which is no pass either.
    strict = shaberi("ensemble", "report", str(tmp_path / "m.json"), str(tmp_path / "m.json"), "--significance",
                     "0.001")
    assert "Verdicts at α = 0.001 (--significance), not the jobs' own α." in strict.stdout
    assert strict.returncode == 1 and "REGRESSION" not in strict.stderr and "1 job file(s)" in strict.stdout
    assert strict.stderr.startswith("FAILED: recorded-5: majority, standard, elo, council × gsm8k, sample 100, seed 0: "
                                    "the files cover 2 of its 8 tests")
    # --significance on the job: the family's α for the job and for its result file.
    lenient = shaberi("ensemble", "check", "--model", MODEL, "--strategy", "majority", "--significance", "0.001",
                      "--out", str(tmp_path / "m2.json"), *base)
    assert lenient.returncode == 0 and json.loads((tmp_path / "m2.json").read_text())["alpha"] == 0.001
    bad = shaberi("ensemble", "check", "--model", MODEL, "--significance", "1.5", *base)
    assert bad.returncode == 2 and bad.stderr.startswith("error: --significance 1.5 is out of range")


def test_regenerate_baseline_rewrites_the_accepted_accuracies_and_shows_the_change(tmp_path):
    repo = gate_repo(tmp_path)
    path = repo / "baselines" / "quick-eval.json"
    config = json.loads(path.read_text())
    config["models"][MODEL]["strategies"] = ["majority"]
    config["models"][MODEL]["accuracy"] = {"gsm8k": {"baseline": 0.5, "majority": 0.75}}
    path.write_text(json.dumps(config))
    args = ["--baseline-file", str(path), "--cache-dir", str(repo / ".cache"), "--data-dir", str(repo / "datasets"),
            "--results-dir", str(repo / "results")]
    done = shaberi("ensemble", "regenerate-baseline", "--model", MODEL, "--significance", "0.05", *args)
    assert done.returncode == 0, done.stderr  # a regression is shown, but accepting is the point
    assert "REGRESSION" in done.stdout and "+40.0 pts" in done.stdout and "-5.0 pts" in done.stdout
    written = json.loads(path.read_text())
    assert written["alpha"] == 0.05 and written["models"][MODEL]["accuracy"] == {
        "gsm8k": {"baseline": 0.9, "majority": 0.7}}
    again = shaberi("ensemble", "regenerate-baseline", "--model", MODEL, *args)
    assert again.returncode == 0 and "+0.0 pts" in again.stdout and json.loads(path.read_text()) == written
    check = shaberi("ensemble", "check", "--model", MODEL, *args)
    assert "accepted baseline 0.900, majority 0.700; now baseline 0.900, majority 0.700" in check.stdout
    missing = shaberi("ensemble", "regenerate-baseline", "--model", "nobody", *args)
    assert missing.returncode == 2 and json.loads(path.read_text()) == written  # bad input: nothing written
    assert "give --datasets and --strategies" in missing.stderr


def test_regenerate_baseline_adds_or_replaces_an_entry_and_evaluates_afresh(tmp_path):
    """A model's entry added (and the file made) or replaced by --datasets/--strategies/--sample/--seed; the
    consensus answers an earlier quick-eval stored are never read back: every consensus call is made again."""
    repo = gate_repo(tmp_path)
    path = tmp_path / "new" / "quick-eval.json"
    args = ["--baseline-file", str(path), "--cache-dir", str(repo / ".cache"), "--data-dir", str(repo / "datasets"),
            "--results-dir", str(repo / "results")]
    with LoopbackServer() as server:
        consensus = ["--consensus-model", f"synth@{server.base_url}"]
        path.parent.mkdir()
        added = shaberi("ensemble", "regenerate-baseline", "--model", MODEL, "--datasets", "gsm8k", "--strategies",
                        "majority,standard", "--sample", "40", "--seed", "3", *consensus, *args)
        assert added.returncode == 0, added.stderr
        assert server.stats()["calls"] == 40  # standard's consensus call per question, nothing stored before
        entry = json.loads(path.read_text())["models"][MODEL]
        assert {k: entry[k] for k in ("datasets", "strategies", "sample", "seed")} == {
            "datasets": ["gsm8k"], "strategies": ["majority", "standard"], "sample": 40, "seed": 3}
        assert set(entry["accuracy"]["gsm8k"]) == {"baseline", "majority", "standard"}
        # a quick check stores its consensus answers and reuses them; the regeneration does not
        checked = ["ensemble", "check", "--model", MODEL, *consensus, *args]
        assert shaberi(*checked).returncode in (0, 1) and server.stats()["calls"] == 80
        assert shaberi(*checked).returncode in (0, 1) and server.stats()["calls"] == 80  # reused
        again = shaberi("ensemble", "regenerate-baseline", "--model", MODEL, *consensus, *args)
        assert again.returncode == 0 and server.stats()["calls"] == 120, again.stderr  # afresh
        # replaced: only what is given changes
        replaced = shaberi("ensemble", "regenerate-baseline", "--model", MODEL, "--strategies", "majority",
                           "--sample", "60", *args)
        assert replaced.returncode == 0 and server.stats()["calls"] == 120, replaced.stderr
    entry = json.loads(path.read_text())["models"][MODEL]
    assert (entry["strategies"], entry["sample"], entry["seed"]) == (["majority"], 60, 3)
    assert set(entry["accuracy"]["gsm8k"]) == {"baseline", "majority"}
    unknown = shaberi("ensemble", "regenerate-baseline", "--model", MODEL, "--strategies", "nope", *args)
    assert unknown.returncode == 2 and json.loads(path.read_text())["models"][MODEL] == entry
    for option, value, said in (("--sample", "0", "error: --sample 0: give the questions to draw per dataset"),
                                ("--significance", "1.5", "error: --significance 1.5: give a level between 0 and 1")):
        bad = shaberi("ensemble", "regenerate-baseline", "--model", MODEL, option, value, *args)
        assert bad.returncode == 2 and bad.stderr.startswith(said) and bad.stderr.count("\n") == 1, bad.stderr
        assert json.loads(path.read_text())["models"][MODEL] == entry  # the option's fault, the file as it was


def test_a_committed_cache_is_byte_stable_and_never_paid_for_twice(tmp_path):
    data = tmp_path / "d"
    gt = data / "gt" / "gsm8k"
    gt.mkdir(parents=True)
    with open(gt / "test.jsonl", "w") as fh:
        for i in range(8):
            fh.write(json.dumps({"question": f"Q{i}? <<answer: #### {i}>>", "answer": f"#### {i}"}) + "\n")
    with LoopbackServer(latency_ms=5) as server, LoopbackServer(latency_ms=5) as other:
        def generate(results: str, cache: str, *extra: str, at: LoopbackServer = server, n: int = 3
                     ) -> subprocess.CompletedProcess[str]:
            return shaberi("ensemble", "generate-cache", "--model", "m", "--base-url", at.base_url, "--datasets",
                           "gsm8k", "--n", str(n), "--data-dir", str(data), "--cache-dir", str(tmp_path / cache),
                           "--results-dir", str(tmp_path / results), *extra)

        assert generate("r1", "c1", "--limit", "5").returncode == 0 and server.stats()["calls"] == 15
        (first,) = (tmp_path / "c1").rglob("*.parquet")
        assert first.relative_to(tmp_path / "c1").as_posix() == "m/gsm8k-n3-t0.7.parquet"
        partial = first.read_bytes()
        # the same questions answered again from nothing, elsewhere, through another endpoint: the same bytes
        assert generate("r2", "c2", "--limit", "5", at=other).returncode == 0 and other.stats()["calls"] == 15
        assert (tmp_path / "c2" / "m" / "gsm8k-n3-t0.7.parquet").read_bytes() == partial
        # a fresh results root, the committed cache, another endpoint and other request options: the 15 answers
        # it holds are not asked again; the file grows by the three new questions only, in question order
        other.reset()
        grown = generate("r3", "c1", "--max-tokens", "1024", at=other)
        assert grown.returncode == 0 and other.stats()["calls"] == 9
        assert "24 of 24 answers (9 called now, 15 already there); written to " in grown.stdout
        table = pq.read_table(first)
        assert table.num_rows == 24 and table.column("question_id").to_pylist() == [
            str(q) for q in range(1, 9) for _ in range(3)]
        assert table.column_names == ["question_id", "sample_index", "model", "content", "error", "error_type",
                                      "finish_reason"]
        whole = first.read_bytes()
        other.reset()
        assert generate("r3", "c1", at=other).returncode == 0 and other.stats()["calls"] == 0
        assert first.read_bytes() == whole
        assert generate("r4", "c4").returncode == 0 and (tmp_path / "c4" / "m" / "gsm8k-n3-t0.7.parquet"
                                                         ).read_bytes() == whole
        # an older committed file never drops members paid for in a results root: the file's 15 are read in,
        # the 9 it lacks stay
        assert generate("r7", "c7").returncode == 0
        assert shaberi("ensemble", "quick-eval", "--model", "m", "--cache-dir", str(tmp_path / "c2"), "--data-dir",
                       str(data), "--results-dir", str(tmp_path / "r7")).returncode == 0
        assert query(tmp_path / "r7", "SELECT count(*) FROM answers WHERE strategy = ''") == [(24,)]
        # a single-model baseline committed beside it, in a directory of its own
        assert generate("r5", "c1/baselines", "--temperature", "0", n=1).returncode == 0
        assert (tmp_path / "c1" / "baselines" / "m" / "gsm8k-n1-t0.parquet").is_file()
        server.reset()
        assert generate("r6", "c1/baselines", "--temperature", "0", n=1).returncode == 0
        assert server.stats()["calls"] == 0
    # quick-eval on the committed cache alone: a results root it has never seen, zero calls (no server at all)
    done = shaberi("ensemble", "quick-eval", "--model", "m", "--cache-dir", str(tmp_path / "c1"),
                   "--data-dir", str(data), "--results-dir", str(tmp_path / "fresh"), "--out", str(tmp_path / "q.json"))
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "q.json").read_text())["datasets"]["gsm8k"]["baseline"] == [1] * 8
    assert query(tmp_path / "fresh", "SELECT count(*) FROM runs") == [(2,)]  # both files read in, no call made
    # the same model cached both ways: the ensemble is the N > 1 entry, the separate baseline the N = 1 one
    both = shaberi("ensemble", "quick-eval", "--model", "m", "--baseline-model", "m", "--cache-dir",
                   str(tmp_path / "c1"), "--data-dir", str(data), "--results-dir", str(tmp_path / "fresh"))
    assert both.returncode == 0, both.stderr
    assert query(tmp_path / "fresh", "SELECT count(*) FROM judgements WHERE run_id LIKE '%n1-t0%'") == [(8,)]
    # answers of another version of the dataset are refused, not graded against the wrong gold
    (gt / "test.jsonl").write_text((gt / "test.jsonl").read_text().replace("#### 3\"}", "#### 4\"}"))
    stale = shaberi("ensemble", "quick-eval", "--model", "m", "--cache-dir", str(tmp_path / "c1"), "--data-dir",
                    str(data), "--results-dir", str(tmp_path / "fresh2"))
    assert stale.returncode == 2 and "answers another version of gsm8k" in stale.stderr


def test_a_partly_generated_cache_is_reported_and_require_complete_refuses(tmp_path):
    repo = gate_repo(tmp_path)
    (path,) = (repo / ".cache" / "ensemble").rglob("*.parquet")
    table = pq.read_table(path)
    keep = [int(q) <= 60 or (int(q) <= 70 and s < 3) for q, s in zip(
        table.column("question_id").to_pylist(), table.column("sample_index").to_pylist(), strict=True)]
    table = table.filter(np.array(keep))  # 60 questions whole, 10 with 3 of 5 answers, 30 none
    rows = table.to_pylist()
    rows[0] |= {"content": None, "error": "HTTP 503", "error_type": "server"}  # and one answer an error
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), path)
    args = ["--model", MODEL, "--cache-dir", str(repo / ".cache"), "--data-dir", str(repo / "datasets"),
            "--results-dir", str(repo / "results")]
    done = shaberi("ensemble", "quick-eval", "--sample", "80", "--out", str(tmp_path / "p.json"), *args)
    assert "gsm8k: the cache holds answers to 70 of 100 questions (59 with all 5 and no error); sampled 70 of the " \
        "80 asked" in done.stdout, done.stdout
    outcome = json.loads((tmp_path / "p.json").read_text())["datasets"]["gsm8k"]
    assert (outcome["questions"], outcome["available"], outcome["complete"], outcome["asked"]) == (100, 70, 59, 80)
    report = shaberi("ensemble", "report", str(tmp_path / "p.json"))
    assert "Partly generated caches:" in report.stdout and "sampled 70 of the 80 asked" in report.stdout
    before = query(repo / "results", "SELECT count(*) FROM judgements")
    refused = shaberi("ensemble", "quick-eval", "--sample", "80", "--require-complete", *args)
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert refused.stderr.startswith("error: gsm8k: 80 questions asked, the cache ")
    assert "holds all 5 answers for 59 of the dataset's 100 (some answer for 70; 1 answers are errors)" in \
        refused.stderr
    assert query(repo / "results", "SELECT count(*) FROM judgements") == before  # nothing graded
    small = shaberi("ensemble", "quick-eval", "--sample", "50", "--require-complete", *args)
    # 59 complete questions would do, but the seed's draw of 50 is what is evaluated, and 9 of those lack some
    assert small.returncode == 2 and "and 9 of the 50 the seed draws lack some" in small.stderr


def test_datasets_of_a_job_run_at_once_under_one_shared_limit(tmp_path):
    data = tmp_path / "d"
    for name, column in (("gsm8k", "question"), ("math500", "problem")):
        (data / "gt" / name).mkdir(parents=True)
        with open(data / "gt" / name / "test.jsonl", "w") as fh:
            for i in range(3):
                fh.write(json.dumps({column: f"{name} {i}?", "answer": "1"}) + "\n")
    with LoopbackServer(latency_ms=400) as server:
        def generate(results: str, concurrency: int) -> None:
            done = shaberi("ensemble", "generate-cache", "--model", "m", "--base-url", server.base_url, "--datasets",
                           "gsm8k,math500", "--n", "1", "--concurrency", str(concurrency), "--concurrency-start",
                           str(concurrency), "--data-dir", str(data), "--results-dir", str(tmp_path / results))
            assert done.returncode == 0, done.stderr

        generate("r1", 6)  # one after the other, 3 would be the most in flight
        assert server.stats()["peak_in_flight"] == 6 and server.stats()["calls"] == 6
        server.reset()
        generate("r2", 4)  # one limit for both: never 4 per dataset
        assert server.stats()["peak_in_flight"] == 4 and server.stats()["calls"] == 6
    bad = shaberi("ensemble", "generate-cache", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--datasets",
                  "gsm8k", "--rpm", "0", "--data-dir", str(data), "--results-dir", str(tmp_path / "r3"))
    assert bad.returncode == 2 and bad.stderr.startswith("error: --rpm 0 is out of range")


@pytest.mark.parametrize(("n", "discordance"), [(100, 0.3), (500, 0.126)])
def test_the_detectable_regression_is_detected_with_80_percent_power_in_a_simulation(n, discordance):
    """The exact power computation against 20,000 simulated studies through scipy's own exact test."""
    level = 0.1 / 2  # α = 0.1 and the McNemar test beside an uninformative paired t-test: Holm's first step
    drop = detectable(n, discordance, level)
    rng = np.random.default_rng(0)
    lost, gained = (discordance + drop) / 2, (discordance - drop) / 2
    tables = rng.multinomial(n, [lost, gained, 1 - lost - gained], size=20_000)
    b, c = tables[:, 0], tables[:, 1]
    pvalues = np.where(b + c > 0, stats.binom.sf(b - 1, b + c, 0.5), 1.0)  # binomtest's one-sided p, vectorised
    assert pvalues[:50] == pytest.approx([stats.binomtest(int(x), int(x + y), 0.5, alternative="greater").pvalue
                                          if x + y else 1.0 for x, y in zip(b[:50], c[:50], strict=True)])
    assert abs(float(np.mean(pvalues <= level)) - 0.80) < 0.015
    assert power(n, discordance, drop, level) == pytest.approx(0.80, abs=1e-4)
    # the figure reported before (a paired t-test's at the full α, statsmodels' TTestPower) is detected less often
    from statsmodels.stats.power import TTestPower

    before = TTestPower().solve_power(nobs=n, alpha=0.1, power=0.8, alternative="larger") * np.sqrt(discordance)
    assert before < drop and power(n, discordance, before, level) < 0.7


def test_failed_consensus_calls_are_left_out_never_counted_wrong(tmp_path):
    """A consensus endpoint refusing some questions (401, not retried) must not look like a worse strategy, and
    one refusing every question must fail the job, not pass or regress it."""
    with LoopbackServer() as server:
        def check(repo: Path) -> subprocess.CompletedProcess[str]:
            return shaberi("ensemble", "check", "--model", MODEL, "--strategy", "standard", "--consensus-model",
                           f"synth@{server.base_url}", "--baseline-file", str(repo / "baselines" / "quick-eval.json"),
                           "--cache-dir", str(repo / ".cache"), "--data-dir", str(repo / "datasets"), "--results-dir",
                           str(repo / "results"), "--out", str(repo / "out.json"))

        some = gate_repo(tmp_path / "some", refuse=range(50, 60))
        done = check(some)
        assert done.returncode == 0, done.stdout + done.stderr  # standard answers right where it answers
        assert "gsm8k: standard: 10 of 100 consensus calls failed (left out, not counted wrong" in done.stdout
        standard = json.loads((some / "out.json").read_text())["datasets"]["gsm8k"]["strategies"]["standard"]
        assert standard["failed"] == 10 and standard["correct"].count(None) == 10 and 0 not in standard["correct"]
        server.reset()
        again = check(some)  # the failed ones are asked again, the rest reused
        assert server.stats()["calls"] == 10 and again.returncode == 0

        every = gate_repo(tmp_path / "every", refuse=range(N))
        failed = check(every)
        assert failed.returncode == 1 and "REGRESSION" not in failed.stderr
        assert failed.stderr.startswith("FAILED: standard on gsm8k: every consensus call failed (")
        report = shaberi("ensemble", "report", str(every / "out.json"))
        assert report.returncode == 1 and "**Not checked**: recorded-5: standard on gsm8k: every consensus call" \
            in report.stdout


@pytest.mark.parametrize(("entry", "message"), [
    ({"datasets": ["gsm8k"], "strategies": ["majority"], "seed": 0}, "models.recorded-5.sample should be a whole"),
    ({"datasets": ["gsm8k"], "strategies": "majority", "sample": 10, "seed": 0},
     'models.recorded-5.strategies should be a list of names, not "majority"'),
    ({"datasets": ["gsm8k"], "strategies": ["majority"], "sample": 10, "seed": 0, "alpha": "0.1"},
     'models.recorded-5.alpha should be a number between 0 and 1, not "0.1"'),
    ([1, 2], 'should be a JSON object with "models"'),
])
def test_a_malformed_baseline_file_is_bad_input_not_a_red_build(tmp_path, entry, message):
    path = tmp_path / "quick-eval.json"
    path.write_text(json.dumps({"models": {MODEL: entry}} if isinstance(entry, dict) else entry))
    for command in ("check", "regenerate-baseline"):
        done = shaberi("ensemble", command, "--model", MODEL, "--baseline-file", str(path), "--results-dir",
                       str(tmp_path / "r"))
        assert done.returncode == 2 and done.stderr.startswith("error: ") and message in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "r").exists()


def test_bad_cache_files_options_and_result_files_are_refused_before_anything_is_paid_or_written(tmp_path):
    repo = gate_repo(tmp_path / "repo")
    (path,) = (repo / ".cache" / "ensemble").rglob("*.parquet")
    args = ["--model", MODEL, "--cache-dir", str(repo / ".cache"), "--data-dir", str(repo / "datasets")]

    def one_line(done: subprocess.CompletedProcess[str], start: str) -> None:
        assert done.returncode == 2 and done.stderr.startswith(start), done.stderr
        assert len(done.stderr.strip().splitlines()) == 1

    good = path.read_bytes()
    path.write_bytes(good[:4] + b"\0" * 2000 + good[2004:])  # damaged in the middle, the footer intact
    broken = shaberi("ensemble", "quick-eval", *args, "--results-dir", str(tmp_path / "r1"))
    one_line(broken, "error: ")
    assert str(path) in broken.stderr and "OSError" in broken.stderr
    assert not (tmp_path / "r1" / "tables" / "runs").exists()  # nothing half-read
    path.write_bytes(good)
    # a dataset edited after the cache was made is refused in a results root that already holds the file too
    assert shaberi("ensemble", "quick-eval", *args, "--results-dir", str(tmp_path / "r2")).returncode == 1
    data = repo / "datasets" / "gt" / "gsm8k" / "test.jsonl"
    data.write_text(data.read_text().replace("#### 0\"}", "#### 5\"}", 1))
    one_line(shaberi("ensemble", "quick-eval", *args, "--results-dir", str(tmp_path / "r2")),
             f"error: {path} answers another version of gsm8k")

    with LoopbackServer() as server:
        generate = ["ensemble", "generate-cache", "--model", "m", "--base-url", server.base_url, "--datasets", "gsm8k",
                    "--data-dir", str(repo / "datasets"), "--results-dir", str(tmp_path / "r3")]
        (tmp_path / "afile").write_text("")
        for extra, start in [(["--cache-dir", str(tmp_path / "afile")], "error: --cache-dir"),
                             (["--temperature", "nan"], "error: --temperature nan is out of range"),
                             (["--max-tokens", "0"], "error: --max-tokens 0 is out of range"),
                             (["--max-tokens", "18446744073709551616"], "error: --max-tokens 18446744073709551616 is"),
                             (["--n", "18446744073709551616"], "error: --n 18446744073709551616 is out of range"),
                             (["--rpm", "inf"], "error: --rpm inf is out of range"),
                             (["--limit", "-3"], "error: --limit -3 is out of range"),
                             (["--timeout", "inf"], "error: --timeout inf is out of range")]:
            one_line(shaberi(*generate, *extra), start)
        assert server.stats()["calls"] == 0

    result = json.loads((tmp_path / "r2" / "quick-eval").glob("*.json").__next__().read_text())
    for change, start in [({"alpha": 5}, "alpha 5 is not between 0 and 1"), ({"family_tests": -4}, "family_tests -4"),
                          ({"datasets": []}, "AttributeError")]:
        (tmp_path / "bad.json").write_text(json.dumps(result | change))
        one_line(shaberi("ensemble", "report", str(tmp_path / "bad.json")), f"error: {tmp_path / 'bad.json'} is not a "
                 f"quick-eval result file ({start}")

    workflow = tmp_path / "w.yml"
    runs_on = "    runs-on: ubuntu-latest\n"
    workflow.write_text((REPO / "examples" / "ci" / "ensemble-gate.yml").read_text().replace(
        runs_on, runs_on + "    continue-on-error: true\n"))
    refused = subprocess.run([sys.executable, str(REPO / "examples" / "ci" / "run_workflow.py"), str(workflow),
                              "--repo", str(repo), "--work", str(tmp_path / "work")], capture_output=True, text=True)
    assert refused.returncode == 2 and "continue-on-error" in refused.stderr and "job " not in refused.stdout


def test_an_identical_file_from_another_pyarrow_is_kept_and_the_seed_s_draw_must_be_complete(tmp_path):
    repo = gate_repo(tmp_path / "repo")
    (path,) = (repo / ".cache" / "ensemble").rglob("*.parquet")
    table = pq.read_table(path)
    pq.write_table(table, path, compression="snappy")  # the same rows, other bytes (as another pyarrow writes)
    other = path.read_bytes()
    members = sorted((tmp_path / "repo-members").glob("*.jsonl"))
    again = shaberi("ensemble", "import-responses", "--dataset", "gsm8k", "--model", MODEL, *map(str, members),
                    "--cache-dir", str(repo / ".cache" / "ensemble"), "--data-dir", str(repo / "datasets"),
                    "--results-dir", str(tmp_path / "r"))
    assert again.returncode == 0 and path.read_bytes() == other  # no churn in git for unchanged rows

    rows = table.to_pylist()
    for r in rows:
        if r["question_id"] == "7" and r["sample_index"] == 2:
            r |= {"content": None, "error": "HTTP 503", "error_type": "server"}
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), path)
    args = ["--model", MODEL, "--cache-dir", str(repo / ".cache"), "--data-dir", str(repo / "datasets"),
            "--results-dir", str(tmp_path / "r2"), "--require-complete"]
    # 99 of 100 questions are complete, 10 are asked: refused when the seed draws question 7, run otherwise
    from shaberi.ensemble.entry import sample_ids

    ids = [str(i) for i in range(1, N + 1)]
    draws = {seed: "7" in sample_ids(ids, 10, seed, "gsm8k") for seed in range(50)}
    with_7, without_7 = next(s for s, d in draws.items() if d), next(s for s, d in draws.items() if not d)
    refused = shaberi("ensemble", "quick-eval", "--sample", "10", "--seed", str(with_7), *args)
    assert refused.returncode == 2 and "and 1 of the 10 the seed draws lack some" in refused.stderr
    assert shaberi("ensemble", "quick-eval", "--sample", "10", "--seed", str(without_7), *args).returncode in (0, 1)


def test_the_detectable_regression_when_nothing_differs():
    from shaberi.ensemble.gate import compare

    always = compare("d", "s", [1] * 100, [1] * 100, [1.0] * 100, 0.05)  # a baseline always right, nothing lost
    # every discordant question would be a loss: 5 losses (0.5^5 ≤ 0.05) are caught; 80 % power needs ~7 %
    assert always.mde == pytest.approx(detectable(100, always.mde, 0.05), abs=1e-4)
    assert 0.04 < always.mde < 0.1 and power(100, always.mde, always.mde, 0.05) == pytest.approx(0.8, abs=1e-4)
    lost = compare("d", "s", [1] * 100, [0] * 100, [1.0] * 100, 0.05)  # a constant loss: certain, not p = 1
    assert lost.p_ttest == 0.0


def job_file(path: Path, model: str, family: str, tests: int, planted: dict[str, tuple[int, int]],
             samples_mean: float) -> Path:
    """One CI job's result file over 100 gsm8k questions: a baseline right on the first 80; each strategy loses
    ``b`` of those and gains ``c`` of the other 20 (``planted``: strategy -> (b, c)); every question's mean of N
    is ``samples_mean``."""
    from shaberi.ensemble.result import DatasetOutcome, Result, StrategyOutcome

    baseline = [1] * 80 + [0] * 20
    strategies = {}
    for name, (b, c) in planted.items():
        correct = [0 if i < b else 1 if 80 <= i < 80 + c else x for i, x in enumerate(baseline)]
        strategies[name] = StrategyOutcome(correct, [1] * 100)
    outcome = DatasetOutcome("run", 5, [str(i) for i in range(1, 101)], baseline, [1] * 100, [samples_mean] * 100,
                             strategies)
    path.write_bytes(Result(model, 0, 100, list(planted), {"gsm8k": outcome}, 0.1, tests, family).to_json())
    return path


def recomputed(planted: dict[str, tuple[int, int]], samples_mean: float) -> dict[str, tuple[float, float]]:
    """Each strategy's (McNemar p, paired-t p), recomputed with scipy from the vectors ``job_file`` writes."""
    found = {}
    for name, (b, c) in planted.items():
        baseline = [1] * 80 + [0] * 20
        correct = [0 if i < b else 1 if 80 <= i < 80 + c else x for i, x in enumerate(baseline)]
        found[name] = (float(stats.binomtest(b, b + c, 0.5, alternative="greater").pvalue),
                       float(stats.ttest_rel(correct, [samples_mean] * 100, alternative="less").pvalue))
    return found


@pytest.mark.parametrize(("jobs", "samples_mean"), [
    # plain Holm over the configuration finds majority's regression, which its job's half of α misses
    ([{"majority": (11, 3)}, {"standard": (30, 0)}], 0.6),
    # the split finds standard's, which plain Holm over the configuration misses
    ([{"majority": (10, 0), "standard": (6, 0)}, {"elo": (1, 1), "council": (1, 1)}], 0.3),
])
def test_the_report_shows_holm_over_the_configuration_beside_the_jobs_verdicts_which_decide(tmp_path, jobs,
                                                                                           samples_mean):
    alpha = 0.1
    strategies = [s for job in jobs for s in job]
    tests = 2 * len(strategies)
    family = f"m: {', '.join(strategies)} × gsm8k, sample 100, seed 0"
    files = [job_file(tmp_path / f"job{i}.json", "m", family, tests, job, samples_mean) for i, job in enumerate(jobs)]
    # each job: Holm within its own tests at its share of α, on the family's scale
    split = {}
    for job in jobs:
        p = recomputed(job, samples_mean)
        adjusted = multipletests([p[s][0] for s in job] + [p[s][1] for s in job], method="holm")[1]
        adjusted = np.minimum(1.0, adjusted * tests / (2 * len(job)))
        split |= {s: min(adjusted[i], adjusted[len(job) + i]) for i, s in enumerate(job)}
    p = recomputed({s: b for job in jobs for s, b in job.items()}, samples_mean)
    pooled_p = multipletests([p[s][0] for s in strategies] + [p[s][1] for s in strategies], alpha=alpha,
                             method="holm")[1]
    pooled = {s: min(pooled_p[i], pooled_p[len(strategies) + i]) for i, s in enumerate(strategies)}
    differ = [s for s in strategies if (split[s] <= alpha) != (pooled[s] <= alpha)]
    assert len(differ) == 1  # the planted disagreement, as scipy and statsmodels see it
    (name,) = differ

    done = shaberi("ensemble", "report", *map(str, files))
    assert done.returncode == 1, done.stderr  # a job's own regression
    # the exit code follows the jobs' verdicts, as the CI jobs gave them, not Holm over the configuration
    flagged = [s for s in strategies if split[s] <= alpha]
    planted = {s: b_c for job in jobs for s, b_c in job.items()}
    assert done.stderr == "REGRESSION: " + ", ".join(
        f"{s} on gsm8k ({planted[s][1] - planted[s][0]:+.1f} points, adjusted p {split[s]:.3f})" for s in flagged
    ) + "\n"
    word = {True: "regression", False: "no regression"}

    def shown(x: float) -> str:  # as the report prints a p-value
        return "<0.001" if x < 0.001 else f"{x:.3f}"

    for s in strategies:
        row = next(line for line in done.stdout.splitlines() if line.startswith(f"| m | {s} | 100 |"))
        assert row.endswith(f"| {word[pooled[s] <= alpha]} ({shown(pooled[s])}) |"), row
        assert ("**regression**" in row) == (split[s] <= alpha)
    assert (f"**Holm over the whole configuration differs from the jobs' verdicts** on {name} on gsm8k "
            f"({word[pooled[name] <= alpha]} there, {word[split[name] <= alpha]} in its job): the exit code follows "
            "the jobs' verdicts") in done.stdout
    assert (f"  - Holm over the whole configuration (its {tests} p-values pooled, at α = 0.1): ") in done.stdout
    assert (f"it differs from the jobs' verdicts on {name} on gsm8k (configuration-wide: "
            f"{word[pooled[name] <= alpha]}, adjusted p {shown(pooled[name])}; its job: "
            f"{word[split[name] <= alpha]}, adjusted p {shown(split[name])})") in done.stdout
    assert "the family-wise error, is at most α however the configuration is split into jobs" in done.stdout
    assert "**The exit code follows these verdicts**" in done.stdout

    alone = shaberi("ensemble", "report", str(files[0]))  # one job's file: no configuration-wide verdict to show
    assert "  - Holm over the whole configuration: not computed without every job's file exactly once" in alone.stdout
    assert "differs from the jobs' verdicts" not in alone.stdout and alone.returncode == 1
