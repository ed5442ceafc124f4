"""view-scores over real runs: one run, `--runs 3` end to end, every format, missing benchmarks."""

from __future__ import annotations

import csv
import io
import json
import re

import numpy as np
import pytest
from scipy import stats

from .conftest import query, shaberi


@pytest.fixture(scope="module")
def three_runs(tmp_path_factory, data_dir):
    from shaberi.testing import LoopbackServer

    results = tmp_path_factory.mktemp("runs")
    with LoopbackServer() as server:
        proc = shaberi("run", "--model", "m", "--base-url", server.base_url, "--runs", "3", "--tag", "exp",
                       "--benchmark", "elyza,tengu,rakuda", "--limit", "6", "--judge", "j", "--results-dir",
                       str(results), "--data-dir", str(data_dir))
        assert proc.returncode == 0, proc.stderr
    return results


def test_runs_3_makes_three_tagged_runs_with_their_own_seeds(three_runs):
    rows = query(three_runs, "SELECT tag, base_tag, run_index, generation_config FROM runs ORDER BY run_index")
    assert [r[:3] for r in rows] == [("exp-run1", "exp", 1), ("exp-run2", "exp", 2), ("exp-run3", "exp", 3)]
    assert [json.loads(r[3])["seed"] for r in rows] == [1, 2, 3]
    assert query(three_runs, "SELECT min(n) FROM (SELECT count(DISTINCT content) AS n FROM answers "
                             "GROUP BY benchmark, question_id)") == [(3,)]  # each run samples anew


def test_view_of_the_runs_in_json_matches_scipy(three_runs):
    proc = shaberi("view", "--tag", "exp", "--format", "json", "--clustered-se", "--results-dir", str(three_runs))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["multi_run"] and len(report["scores"]) == 1
    rows = {r["benchmark"]: r for r in report["scores"][0]["rows"]}
    assert list(rows) == ["ELYZA-tasks-100", "Tengu-Bench", "MT-Bench", "Rakuda", "Overall"]
    assert rows["MT-Bench"]["mean"] is None and rows["MT-Bench"]["runs"] == 0  # not run: shown, never 0
    per_run = [v for (v,) in query(three_runs, "SELECT score FROM benchmark_scores WHERE benchmark = 'tengu' "
                                               "AND judge = 'j' ORDER BY run_index")]
    t = rows["Tengu-Bench"]
    ci = stats.t.interval(0.95, 2, loc=stats.tmean(per_run), scale=stats.sem(per_run))
    assert t["runs"] == 3 and t["mean"] == pytest.approx(sum(per_run) / 3, abs=1e-9)
    assert (t["ci_low"], t["ci_high"]) == pytest.approx(ci, abs=1e-9)
    assert t["se_clustered"] is not None
    stages = {r["stage"]: r for r in report["tokens"]}
    assert stages["generation"]["requests"] == 54 and stages["judging"]["requests"] == 54
    assert list(stages)[-1] == "Total"  # tokens and $ summed over the stages
    for column in ("requests", "cached_requests", "prompt_tokens", "completion_tokens", "cost_usd"):
        assert stages["Total"][column] == sum(r[column] for name, r in stages.items() if name != "Total")


def test_view_formats_single_run_and_table(three_runs):
    results = str(three_runs)
    table = shaberi("view", "--tag", "exp", "--results-dir", results)
    assert table.returncode == 0 and "Std Dev" in table.stdout and "95% CI" in table.stdout
    assert "Overall" in table.stdout
    md = shaberi("view", "--tag", "exp", "--runs", "2", "--format", "markdown", "--results-dir", results)
    assert "| Benchmark | Mean | Std Dev | 95% CI (runs) | Range |" in md.stdout and "(2 runs)" in md.stdout
    assert "95% CI: run to run only (2 runs, 1 degree of freedom)" in md.stdout
    single = shaberi("view", "--tag", "exp-run2", "--format", "csv", "--results-dir", results)
    lines = list(csv.reader(io.StringIO(single.stdout)))
    assert lines[0] == ["tag", "model", "judge", "status", "benchmark", "score", "baseline", "n", "null", "errors",
                        "not_judged", "se_clustered", "ci_questions_low", "ci_questions_high", "note", "section_notes"]
    assert len(lines) == 6 and all(len(r) == len(lines[0]) for r in lines)  # one table: nothing after its rows
    by_bench = {r[4]: r for r in lines[1:6]}
    assert by_bench["MT-Bench"][-2] == "not run" and by_bench["Overall"][-2] == "not every benchmark has a score"
    assert by_bench["Rakuda"][3] == "ok" and by_bench["Rakuda"][0] == "exp-run2"
    assert float(by_bench["Rakuda"][5]) == query(three_runs, "SELECT score FROM benchmark_scores b JOIN runs r USING "
                                                             "(run_id) WHERE r.tag = 'exp-run2' AND benchmark = "
                                                             "'rakuda' AND judge = 'j'")[0][0]
    tokens = list(csv.reader(io.StringIO(shaberi("view", "--tag", "exp-run2", "--format", "csv", "--tokens",
                                                 "--results-dir", results).stdout)))
    assert tokens[0] == ["tag", "model", "stage", "requests", "cached_requests", "prompt_tokens", "completion_tokens",
                         "cost_usd", "priced"]
    assert [r[1:3] for r in tokens[1:]] == [["m", "generation"], ["m", "judging"], ["m", "Total"]]
    refused = shaberi("view", "--tag", "exp-run2", "--tokens", "--results-dir", results)
    assert refused.returncode == 2 and "--tokens" in refused.stderr


def test_view_bad_input(three_runs):
    for args, needle in [(["--tag", "nope"], "no run tagged 'nope'"), (["--tag", "exp", "--runs", "5"],
                         "only 3 runs"), (["--tag", "exp", "--judge", "x"], "judge 'x' has no judgements"),
                         (["--tag", "exp", "--format", "xml"], "--format 'xml'")]:
        proc = shaberi("view", *args, "--results-dir", str(three_runs))
        assert proc.returncode == 2 and needle in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_view_scores_is_view(three_runs):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", "import sys; from shaberi.cli import view_scores_main; "
                           "sys.argv[0] = 'view-scores'; view_scores_main()", "--tag", "exp", "--format", "json",
                           "--results-dir", str(three_runs)], capture_output=True, text=True)
    assert proc.returncode == 0 and json.loads(proc.stdout)["multi_run"], proc.stderr


def test_view_says_answered_not_judged_and_all_errored_never_not_run(server, tmp_path):
    """Rakuda's every answer fails (HTTP 401), ELYZA's are answered; generated without judging (a partial run:
    ELYZA is usable), then the family and one run are viewed, then judged and viewed again: each state named
    as it is."""
    data = tmp_path / "d" / "ja"
    data.mkdir(parents=True)
    with open(data / "rakuda.jsonl", "w", encoding="utf-8") as fh:
        for i in range(3):
            fh.write(json.dumps({"category": "c", "question_id": f"q{i}", "text": f"質問{i} [[fail:401]]"},
                                ensure_ascii=False) + "\n")
    with open(data / "elyza_tasks_100.jsonl", "w", encoding="utf-8") as fh:
        for i in range(4):
            fh.write(json.dumps({"input": f"課題{i}", "output": "答え", "eval_aspect": "正確さ"},
                                ensure_ascii=False) + "\n")
    results = str(tmp_path / "r")
    common = ["run", "--model", "m", "--base-url", server.base_url, "--benchmark", "elyza,rakuda", "--runs", "2",
              "--judge", "j", "--max-retries", "0", "--results-dir", results, "--data-dir", str(data.parent)]
    assert shaberi(*common, "--stages", "generate").returncode == 0  # Rakuda failed beside a usable ELYZA

    def notes(*args: str) -> dict[str, str]:
        proc = shaberi("view", *args, "--format", "json", "--results-dir", results)
        assert proc.returncode == 0, proc.stderr
        return {r["benchmark"]: r["note"] for r in json.loads(proc.stdout)["scores"][0]["rows"]}

    for tag, runs in (("default", 2), ("default-run1", 1)):  # the family, and one run of it
        got = notes("--tag", tag)
        assert got["ELYZA-tasks-100"] == f"answered, not judged ({4 * runs} answers)", tag
        assert got["Rakuda"] == f"all {3 * runs} answers errored" and got["Tengu-Bench"] == "not run", tag
    assert shaberi("run", "--model", "m", "--tag", "default-run1", "--judge", f"j@{server.base_url}", "--stages",
                   "judge", "--results-dir", results, "--data-dir", str(data.parent)).returncode == 0
    got = notes("--tag", "default-run1")
    assert got["ELYZA-tasks-100"] == "" and got["Rakuda"] == "all 3 answers errored"


def test_the_question_interval_is_about_the_number_shown(server, tmp_path):
    """Two runs of Rakuda; run 1's reply to q0 is unreadable, so run 1 has 5 scores and run 2 has 6. The family's
    number is the mean of the two runs' means, not of the 11 scores; --clustered-se gives that number's SE clustered
    by question (recomputed here from its definition: the sandwich of the weighted mean, CR1), and the interval over
    questions is centred on it. One run's interval is the t-interval over its questions (scipy)."""
    from .conftest import write_rakuda

    scores = {1: [None, 6, 8, 5, 9, 4], 2: [3, 7, 7, 6, 8, 5]}  # by seed: run 1, run 2
    texts = []
    for i in range(6):
        marks = ""
        for seed, s in scores.items():
            reply = "読めません || 読めません" if s[i] is None else f"FINAL SCORE: {s[i]}"
            marks += f"<<answer#{seed}: 回答{seed}-{i}>><<judge@j?回答{seed}-{i}: {reply}>>"
        texts.append(f"{marks} 質問{i}")
    data = write_rakuda(tmp_path / "d", texts)
    results = str(tmp_path / "r")
    assert shaberi("run", "--model", "m", "--base-url", server.base_url, "--runs", "2", "--benchmark", "rakuda",
                   "--judge", "j", "--results-dir", results, "--data-dir", str(data)).returncode == 0
    view = json.loads(shaberi("view", "--format", "json", "--clustered-se", "--results-dir", results).stdout)
    row = next(r for r in view["scores"][0]["rows"] if r["benchmark"] == "Rakuda")
    run_means = [np.mean([v for v in s if v is not None]) for s in scores.values()]
    shown = np.mean(run_means)
    pooled = np.mean([v for s in scores.values() for v in s if v is not None])
    assert row["mean"] == pytest.approx(shown, abs=1e-9) and abs(pooled - shown) > 0.01
    # The weighted mean's sandwich variance, clustered by question, with CR1's G/(G − 1).
    y = [(q, v, 1 / (2 * sum(x is not None for x in s))) for s in scores.values() for q, v in enumerate(s)
         if v is not None]
    meat = sum(sum(w * (v - shown) for qq, v, w in y if qq == q) ** 2 for q in range(6))
    se = np.sqrt(6 / 5 * meat)  # the weights sum to 1
    half = stats.t.ppf(0.975, 5) * se
    assert row["se_clustered"] == pytest.approx(se, rel=1e-9)
    assert (row["ci_questions_low"], row["ci_questions_high"]) == pytest.approx((shown - half, shown + half), rel=1e-9)
    # One run: the t-interval over its questions' scores, centred on its score.
    single = json.loads(shaberi("view", "--tag", "default-run2", "--format", "json", "--clustered-se",
                                "--results-dir", results).stdout)
    row = next(r for r in single["scores"][0]["rows"] if r["benchmark"] == "Rakuda")
    low, high = stats.t.interval(0.95, 5, loc=np.mean(scores[2]), scale=stats.sem(scores[2]))
    assert row["score"] == pytest.approx(np.mean(scores[2])) and row["se_clustered"] == pytest.approx(
        stats.sem(scores[2]), rel=1e-9)
    assert (row["ci_questions_low"], row["ci_questions_high"]) == pytest.approx((low, high), rel=1e-9)
    overall = next(r for r in single["scores"][0]["rows"] if r["benchmark"] == "Overall")
    assert overall["se_clustered"] == pytest.approx(stats.sem(scores[2]), rel=1e-9)  # one benchmark: the same


def test_one_models_run_tagged_f_never_hides_another_models_family_f(server, tmp_path):
    """m1 runs as the family f-run1, f-run2; m2 runs once tagged f. Every reader takes f per model: m1's family
    and m2's run, side by side (view, leaderboard), and a comparison asks which model f means."""
    from .conftest import write_rakuda

    data = write_rakuda(tmp_path / "d", [f"質問{i}" for i in range(3)])
    results = str(tmp_path / "r")
    common = ["--base-url", server.base_url, "--benchmark", "rakuda", "--judge", "j", "--results-dir", results,
              "--data-dir", str(data)]
    assert shaberi("run", "--model", "m1", "--tag", "f", "--runs", "2", *common).returncode == 0
    assert shaberi("run", "--model", "m2", "--tag", "f", *common).returncode == 0
    view = json.loads(shaberi("view", "--tag", "f", "--format", "json", "--results-dir", results).stdout)
    assert {(s["model"], len(s["runs"])) for s in view["scores"]} == {("m1", 2), ("m2", 1)}
    kinds = {s["model"]: "mean" in s["rows"][0] for s in view["scores"]}
    assert kinds == {"m1": True, "m2": False}  # a family's section, and a run's
    lines = list(csv.reader(io.StringIO(shaberi("view", "--tag", "f", "--format", "csv", "--results-dir",
                                                results).stdout)))
    assert {"mean", "score"} <= set(lines[0]) and all(len(r) == len(lines[0]) for r in lines)
    board = list(csv.DictReader(io.StringIO(shaberi("leaderboard", "--tag", "f", "--format", "csv",
                                                    "--results-dir", results).stdout)))
    assert {(r["model_name"], r["Runs"]) for r in board} == {("m1", "2"), ("m2", "1")}
    vague = shaberi("compare", "f", "m2@f", "--results-dir", results)
    assert vague.returncode == 2 and "side A 'f' holds several models (m1, m2)" in vague.stderr
    assert shaberi("compare", "m1@f", "m2@f", "--results-dir", results).returncode == 0


def test_a_tags_models_rank_complete_first_and_a_judge_one_of_them_lacks_is_said(server, tmp_path, data_dir):
    """m1's Rakuda replies are all unreadable (its answers carry サンプル1: seed 1), so its Overall is over three
    benchmarks; m2's over four. Complete first, as the leaderboard ranks, in view and the report (with the tag's
    token total); view --judge k names m3, which k never judged, instead of refusing."""
    data = tmp_path / "d" / "ja"
    data.mkdir(parents=True)
    for path in (data_dir / "ja").iterdir():
        if path.name != "rakuda.jsonl":
            (data / path.name).symlink_to(path)
    lines = (data_dir / "ja" / "rakuda.jsonl").read_text(encoding="utf-8").splitlines()[:2]
    (data / "rakuda.jsonl").write_text("\n".join(
        line.replace('"text": "', '"text": "<<judge@j?サンプル1: 読めません || 読めません>>') for line in lines),
        encoding="utf-8")
    results = str(tmp_path / "r")
    common = ["--base-url", server.base_url, "--tag", "t", "--limit", "2", "--results-dir", results, "--data-dir",
              str(data.parent)]
    for model, seed, judge in (("m1", "1", "j"), ("m2", "2", "j"), ("m3", "3", "k")):
        assert shaberi("run", "--model", model, "--seed", seed, "--judge", judge, *common).returncode == 0
    view = json.loads(shaberi("view", "--tag", "t", "--format", "json", "--results-dir", results).stdout)
    overall = {s["model"]: next(r for r in s["rows"] if r["benchmark"] == "Overall") for s in view["scores"]}
    assert overall["m1"]["note"] == "not every benchmark has a score" and overall["m2"]["note"] == ""
    order = [s["model"] for s in view["scores"]]
    assert order.index("m2") < order.index("m1") and order.index("m3") < order.index("m1")  # complete first
    assert any("judged by different judges (m1: j; m2: j; m3: k)" in n for n in view["notes"])
    by_k = json.loads(shaberi("view", "--tag", "t", "--judge", "k", "--format", "json", "--results-dir", results
                              ).stdout)
    assert [s["model"] for s in by_k["scores"]] == ["m3"]
    assert by_k["notes"] == ["m1: not judged by k (its judges: j)", "m2: not judged by k (its judges: j)"]
    html = tmp_path / "t.html"
    assert shaberi("report", "--tag", "t", "--out", str(html), "--results-dir", results).returncode == 0
    page = html.read_text(encoding="utf-8")
    blocks = re.findall(r"<h3>(m\d) · t", page)
    assert blocks == order  # the report ranks as view does
    totals = [t for t in view["tokens"] if t["stage"] == "Total"]
    tag_total = next(t for t in totals if t["model"] == "all models")
    assert tag_total["requests"] == sum(t["requests"] for t in totals if t["model"] != "all models")
    assert "<h3>All models of t</h3>" in page and f"<td>{tag_total['requests']:,}</td>" in page
