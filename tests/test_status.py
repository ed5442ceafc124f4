"""Honest statuses and exit codes, family statistics from complete runs only, and a layout where nothing
collides: over real HTTP and the real command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from scipy import stats

import shaberi as shaberi_api
from shaberi.testing import LoopbackServer

from .conftest import query, shaberi, write_rakuda
from .conftest import run_cli as run


def manifest(results, model: str, tag: str) -> dict:
    from shaberi.reports.export import run_folder

    return json.loads((run_folder(results, model, tag) / "manifest.json").read_text())


def test_a_judge_that_fails_every_call_fails_the_command(server, tmp_path):
    data = write_rakuda(tmp_path / "d", ["質問1", "質問2", "質問3"])
    results = tmp_path / "r"
    with LoopbackServer() as judge_server:
        judge_server.fail_next(*[500] * 10)
        proc = run(server.base_url, results, data, "--benchmark", "rakuda", "--judge",
                   f"j@{judge_server.base_url}")
    assert proc.returncode == 1, proc.stderr
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("error:")]  # the rest is the progress display
    assert line == "error: judge stage: all 3 calls failed; most common: server_error: HTTP 500: forced by /_fail (3)"
    m = manifest(results, "m", "t")
    assert (m["status"], m["stages"]) == ("failed", {"generate": "ok", "judge": "failed"})
    assert m["benchmarks"]["rakuda"]["judge"]["j"]["status"] == "failed" and m["error"].startswith("judge stage")
    assert m["stage_detail"]["judge"] | {"started_at": 0, "finished_at": 0} == {
        "status": "failed", "calls": 3, "failed": 3, "error": "server_error: HTTP 500: forced by /_fail",
        "error_count": 3, "started_at": 0, "finished_at": 0, "benchmarks": ["rakuda"], "judges": ["j"]}
    view = json.loads(shaberi("view", "--tag", "t", "--format", "json", "--results-dir", str(results)).stdout)
    assert view["scores"][0]["status"] == "failed"
    rows = {r["benchmark"]: r for r in view["scores"][0]["rows"]}
    assert rows["Rakuda"]["score"] is None and rows["Rakuda"]["note"] == "all 3 judgements failed"
    # The next run that judges them all makes it whole again.
    again = run(server.base_url, results, data, "--benchmark", "rakuda", "--judge", "j", "--stages", "judge")
    assert again.returncode == 0 and manifest(results, "m", "t")["stages"]["judge"] == "ok"


def test_a_candidate_that_fails_every_call_and_a_base_url_without_v1(server, tmp_path):
    data = write_rakuda(tmp_path / "d", ["[[fail:500]] 質問1", "[[fail:500]] 質問2"])
    results = tmp_path / "r"
    proc = run(server.base_url, results, data, "--benchmark", "rakuda")
    assert proc.returncode == 1 and "error: generate stage: all 2 calls failed; most common: server_error: HTTP 500" \
        in proc.stderr
    assert manifest(results, "m", "t")["benchmarks"]["rakuda"]["generate"] == "failed"
    # Judging answers that all failed: nothing to judge, nothing called; the judge stage did not run.
    judged = run(server.base_url, results, data, "--benchmark", "rakuda", "--judge", "j")
    assert judged.returncode == 1 and "judged 0 (0 reused, 0 called" in judged.stdout
    assert "2 errored answers not sent" in judged.stdout
    assert manifest(results, "m", "t")["stages"] == {"generate": "failed", "judge": "not run"}
    judge_only = run(server.base_url, results, data, "--benchmark", "rakuda", "--judge", "j", "--stages", "judge")
    assert judge_only.returncode == 1 and "error: the run holds nothing usable" in judge_only.stderr
    bare = server.base_url.removesuffix("/v1")
    proc = run(bare, tmp_path / "r2", data, "--benchmark", "rakuda")
    assert proc.returncode == 2 and "probably lacks /v1" in proc.stderr and not (tmp_path / "r2").exists()


def test_one_benchmark_failing_beside_a_usable_one_is_partial_and_its_errors_are_never_reused(server, tmp_path):
    """Rakuda's every answer fails (401), ELYZA is answered and judged: the run holds usable work, so it is
    partial and exits 0, and the judge stage that judged ELYZA is ok (Rakuda had nothing to judge). A resume
    whose retries all fail again changes nothing: it says so, still reads partial and exits 0, as the first did
    (the same state, the same exit code); the errored answers it did not send to the judge are not counted as
    reused judgements."""
    data = write_rakuda(tmp_path / "d", ["[[fail:401]] 質問1", "[[fail:401]] 質問2"])
    with open(data / "ja" / "elyza_tasks_100.jsonl", "w", encoding="utf-8") as fh:
        for i in range(3):
            fh.write(json.dumps({"input": f"課題{i}", "output": "模範解答", "eval_aspect": "正確さ"},
                                ensure_ascii=False) + "\n")
    results = tmp_path / "r"
    args = ["--benchmark", "rakuda,elyza", "--judge", "j"]
    first = run(server.base_url, results, data, *args)
    assert first.returncode == 0, first.stderr
    assert f"next: shaberi view --tag t --results-dir {results} (scores)" in first.stdout  # what to run next
    m = manifest(results, "m", "t")
    assert (m["status"], m["stages"]) == ("partial", {"generate": "partial", "judge": "ok"})
    again = run(server.base_url, results, data, *args)
    assert again.returncode == 0 and "error:" not in again.stderr
    assert "note: generate stage: all 2 calls failed; most common: http_401: HTTP 401: injected fault (2); the run " \
           "stays partial" in again.stderr
    assert manifest(results, "m", "t")["status"] == "partial"
    assert manifest(results, "m", "t")["stages"] == {"generate": "partial", "judge": "ok"}
    assert run(server.base_url, results, data, *args).returncode == 0  # and again: the same state, the same code
    assert "judged 3 (3 reused, 0 called" in again.stdout and "2 errored answers not sent" in again.stdout
    tokens = shaberi("view", "--tag", "t", "--format", "csv", "--tokens", "--results-dir", str(results)).stdout
    judging = next(line for line in tokens.splitlines() if line.startswith("t,m,judging,"))
    assert judging.split(",")[3:5] == ["3", "3"]  # 3 judge calls made, 3 judgements reused: not 5
    assert shaberi("report", "--tag", "t", "--out", str(tmp_path / "t.html"), "--results-dir",
                   str(results)).returncode == 0
    html = (tmp_path / "t.html").read_text(encoding="utf-8")
    assert "Rakuda: 2 judgements, 2 without a score (2 errored answers, never judged)" in html
    assert "one judge (j): nothing to compare" in html
    assert run(server.base_url, results, data, "--benchmark", "elyza", tag="unjudged").returncode == 0
    assert shaberi("report", "--tag", "unjudged", "--out", str(tmp_path / "u.html"), "--results-dir",
                   str(results)).returncode == 0
    assert "no judge scored these answers" in (tmp_path / "u.html").read_text(encoding="utf-8")
    # A family: a member whose retries all fail again still holds ELYZA, so the next member is resumed too.
    assert run(server.base_url, results, data, *args, "--runs", "2", tag="fam").returncode == 0
    server.reset()
    again = run(server.base_url, results, data, *args, "--runs", "2", tag="fam")
    assert again.returncode == 0 and again.stdout.count("status: partial") == 2
    assert server.stats()["calls"] == 4  # each member's two Rakuda questions asked once more


def test_a_judge_failing_every_call_beside_one_that_scores_is_a_failed_judge_in_a_partial_run(server, tmp_path):
    data = write_rakuda(tmp_path / "d", ["質問1", "質問2", "質問3"])
    results = tmp_path / "r"
    with LoopbackServer() as broken:
        broken.fail_next(*[500] * 50)
        proc = run(server.base_url, results, data, "--benchmark", "rakuda", "--judge", "good", "--judge",
                   f"bad@{broken.base_url}")
    assert proc.returncode == 0, proc.stderr
    m = manifest(results, "m", "t")
    assert (m["status"], m["stages"]) == ("partial", {"generate": "ok", "judge": "partial"})
    judges = m["benchmarks"]["rakuda"]["judge"]
    assert (judges["good"]["status"], judges["bad"]["status"]) == ("ok", "failed")
    (section,) = json.loads(shaberi("view", "--tag", "t", "--format", "json", "--results-dir", str(results)).stdout
                            )["scores"]
    assert section["status"] == "partial"
    assert "judge bad failed (no score) on Rakuda: judge_error: server_error: HTTP 500: forced by /_fail" \
        in section["notes"]
    good = [s for (s,) in query(results, "SELECT score FROM judgements WHERE judge = 'good'")]
    rakuda = next(r for r in section["rows"] if r["benchmark"] == "Rakuda")
    assert len(good) == 3 and rakuda["score"] == pytest.approx(sum(good) / 3, abs=1e-9)  # the good judge's alone


def test_a_benchmark_whose_every_reply_is_unreadable_fails_and_the_run_is_partial(server, tmp_path):
    data = write_rakuda(tmp_path / "d", ["<<judge: 判断できません || 判断できません>> 質問1",
                                         "<<judge: 判断できません || 判断できません>> 質問2"])
    with open(data / "ja" / "elyza_tasks_100.jsonl", "w", encoding="utf-8") as fh:
        fh.write(json.dumps({"input": "課題", "output": "模範解答", "eval_aspect": "正確さ"}, ensure_ascii=False))
    results = tmp_path / "r"
    proc = run(server.base_url, results, data, "--benchmark", "rakuda,elyza", "--judge", "j")
    assert proc.returncode == 0, proc.stderr
    m = manifest(results, "m", "t")
    assert (m["status"], m["stages"]["judge"]) == ("partial", "partial")
    assert (m["benchmarks"]["rakuda"]["status"], m["benchmarks"]["elyza"]["status"]) == ("failed", "ok")
    (section,) = json.loads(shaberi("view", "--tag", "t", "--format", "json", "--results-dir", str(results)).stdout
                            )["scores"]
    rows = {r["benchmark"]: r for r in section["rows"]}
    assert section["status"] == "partial" and rows["Rakuda"]["score"] is None
    assert rows["Rakuda"]["note"] == "no scores (2 unparsed, 0 failed)"
    assert any(n.startswith("judge j failed (no score) on Rakuda: unparseable:") for n in section["notes"])


def test_a_rejudge_whose_calls_fail_leaves_the_scores_as_they_were(server, tmp_path):
    """A call that returned no judgement supersedes none that did: the failures stay as history, the scores,
    the statuses and the exit code stay as they were (with a note), and the next run tries the rejudge again."""
    data = write_rakuda(tmp_path / "d", ["質問1", "質問2", "質問3"])
    results = tmp_path / "r"
    assert run(server.base_url, results, data, "--benchmark", "rakuda", "--judge", "j").returncode == 0
    scores = "SELECT question_id, score FROM judgements ORDER BY 1"
    before = query(results, scores)
    server.fail_next(400, 400, 400)
    proc = run(server.base_url, results, data, "--benchmark", "rakuda", "--judge", "j", "--rejudge")
    assert proc.returncode == 0, proc.stderr
    assert "note: judge stage: all 3 calls failed; most common: http_400" in proc.stderr
    assert query(results, scores) == before and all(s is not None for _, s in before)
    assert query(results, "SELECT lineage, count(*), count(score) FROM judgement_history GROUP BY 1 ORDER BY 1") == [
        ("current", 3, 3), ("superseded", 3, 0)]
    assert (manifest(results, "m", "t")["status"], manifest(results, "m", "t")["stages"]["judge"]) == ("ok", "ok")
    server.reset()  # the rejudge's failures are asked again by the next run, and this time they answer
    assert run(server.base_url, results, data, "--benchmark", "rakuda", "--judge", "j").returncode == 0
    assert server.stats()["calls"] == 3
    assert query(results, "SELECT lineage, count(*) FROM judgement_history GROUP BY 1 ORDER BY 1") == [
        ("current", 3), ("superseded", 6)]


def test_reuse_is_counted_from_the_tables_once_however_often_a_run_is_resumed(server, tmp_path):
    data = write_rakuda(tmp_path / "d", ["質問1", "質問2", "質問3"])
    results = tmp_path / "r"
    for _ in range(4):  # the run, then three resumes with nothing to do
        assert run(server.base_url, results, data, "--benchmark", "rakuda", "--judge", "j").returncode == 0
    tokens = shaberi("view", "--tag", "t", "--format", "csv", "--tokens", "--results-dir", str(results)).stdout
    rows = {line.split(",")[2]: line.split(",")[3:5] for line in tokens.splitlines()[1:]}
    assert rows == {"generation": ["3", "3"], "judging": ["3", "3"], "Total": ["6", "6"]}  # requests, reused
    # A resume of one benchmark reuses that benchmark's rows only; a new judge's are no reuse of the stage.
    assert run(server.base_url, results, data, "--benchmark", "rakuda", "--judge", "j2", "--stages",
               "judge").returncode == 0
    assert query(results, "SELECT model, requests, cached_requests FROM token_usage WHERE stage = 'judging' "
                          "ORDER BY model") == [("j", 3, 0), ("j2", 3, 0)]


def test_a_run_killed_during_its_export_keeps_the_status_its_stages_gave_it(server, tmp_path):
    """The export is written from the tables after the run's status is: a kill there loses no work and changes
    no status (before, the run read as interrupted though every stage had ended ok); the same command again
    calls nothing and writes the export."""
    data = write_rakuda(tmp_path / "d", ["質問1", "質問2"])
    results = tmp_path / "r"
    kill_in_export = textwrap.dedent(f"""
        import os, sys
        import shaberi.pipeline as p
        def die(*a, **k):
            os.kill(os.getpid(), 9)
        p.export_run = die
        from shaberi.cli import main
        main(["run", "--model", "m", "--base-url", {server.base_url!r}, "--benchmark", "rakuda", "--judge", "j",
              "--results-dir", {str(results)!r}, "--data-dir", {str(data)!r}])
    """)
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    proc = subprocess.run([sys.executable, "-c", kill_in_export], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == -9
    # One status everywhere: the row, sql, the API, view and the manifest (written before the export).
    assert query(results, "SELECT status, stored_status FROM runs") == [("ok", "ok")]
    assert shaberi("sql", "SELECT status FROM runs", "--format", "csv", "--results-dir",
                   str(results)).stdout.split() == ["status", "ok"]
    assert shaberi_api.open(results).runs()["status"].to_list() == ["ok"]
    view = json.loads(shaberi("view", "--format", "json", "--results-dir", str(results)).stdout)
    assert view["scores"][0]["status"] == "ok"
    assert manifest(results, "m", "default")["status"] == "ok"
    assert not (results / "m" / "default" / "artifacts" / "shaberi" / "answers").exists()  # no export yet
    # Running the same command again calls nothing and writes the export.
    server.reset()
    again = run(server.base_url, results, data, "--benchmark", "rakuda", "--judge", "j", tag="default")
    assert again.returncode == 0 and server.stats()["calls"] == 0
    assert (results / "m" / "default" / "artifacts" / "shaberi" / "answers" / "rakuda.jsonl").is_file()


def test_family_statistics_use_complete_runs_only(server, tmp_path, data_dir):
    results = tmp_path / "r"
    common = ["--limit", "3", "--judge", "j"]
    assert run(server.base_url, results, data_dir, "--runs", "2", "--benchmark", "rakuda,elyza", *common,
               tag="fam").returncode == 0
    assert run(server.base_url, results, data_dir, "--benchmark", "rakuda", *common, tag="fam-run3").returncode == 0
    view = json.loads(shaberi("view", "--tag", "fam", "--format", "json", "--results-dir", str(results)).stdout)
    (section,) = view["scores"]
    why = "fam-run3 (elyza: 3 of 3 questions not answered and judged by j)"
    assert f"left out (family statistics count complete runs only): {why}" in section["notes"]
    as_csv = shaberi("view", "--tag", "fam", "--format", "csv", "--results-dir", str(results)).stdout.splitlines()
    assert all(why in line for line in as_csv[1:]) and len(as_csv) == 1 + 5  # on each row
    assert "m · fam (3 runs, 2 counted) · judge: j" in shaberi("view", "--tag", "fam", "--format", "markdown",
                                                               "--results-dir", str(results)).stdout
    rows = {r["benchmark"]: r for r in section["rows"]}
    overall = [v for (v,) in query(results, "SELECT overall FROM run_scores JOIN runs USING (run_id, model, tag) "
                                            "WHERE judge = 'j' AND tag IN ('fam-run1', 'fam-run2') ORDER BY tag")]
    assert rows["Overall"]["runs"] == 2 and rows["Overall"]["mean"] == pytest.approx(sum(overall) / 2, abs=1e-9)
    assert rows["Overall"]["std_dev"] == pytest.approx(stats.tstd(overall), abs=1e-9)  # views round to 9 decimals
    assert rows["Rakuda"]["runs"] == 2  # the partial member is left out of every benchmark, not only the overall
    family = json.loads((results / "m" / "fam" / "family.json").read_text())
    assert [(m["tag"], m["complete"], m["incomplete_benchmarks"]) for m in family["members"]] == [
        ("fam-run1", True, []), ("fam-run2", True, []), ("fam-run3", False, ["elyza"])]
    assert {tuple(s["excluded_runs"]) for s in family["statistics"]} == {("fam-run3",)}
    # The report and the leaderboard name the member they leave out too.
    report = shaberi("report", "--tag", "fam", "--out", str(tmp_path / "r.html"), "--results-dir", str(results))
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert report.returncode == 0
    assert f"left out (family statistics count complete runs only): {why}" in html
    assert "fam (3 runs, 2 counted)" in html
    assert html.count("<circle") == 2 * 3  # the run-to-run dots: the two complete runs × ELYZA, Rakuda, Overall
    import csv
    import io

    board = shaberi("leaderboard", "--tag", "fam", "--format", "csv", "--results-dir", str(results))
    (ranked,) = csv.DictReader(io.StringIO(board.stdout))
    assert board.returncode == 0 and (ranked["Runs"], ranked["Runs (j)"]) == ("2", "2")
    assert float(ranked["Average (All)"]) == pytest.approx(rows["Overall"]["mean"], abs=1e-12)
    board = shaberi("leaderboard", "--tag", "fam", "--format", "markdown", "--results-dir", str(results))
    assert f"note: m: {why.replace(' (', ' left out (')}" in board.stdout
    # A judge that judged only part of every member: no run is complete for it, and the view says so.
    assert run(server.base_url, results, data_dir, "--runs", "2", "--benchmark", "rakuda", "--stages", "judge",
               "--judge", "j3", "--limit", "2", tag="fam").returncode == 0
    view = json.loads(shaberi("view", "--tag", "fam", "--judge", "j3", "--format", "json", "--results-dir",
                              str(results)).stdout)
    rows = {r["benchmark"]: r for r in view["scores"][0]["rows"]}
    assert rows["Rakuda"]["mean"] is None and rows["Rakuda"]["note"] == "no complete run has a score"
    assert rows["MT-Bench"]["note"] == "not run"


def test_a_member_whose_benchmark_has_no_score_is_left_out_of_the_family_with_its_reason(server, tmp_path):
    """Run 2's Rakuda replies are all unreadable (its answers carry 'サンプル2': the seed of run 2): it answered
    and was judged, yet holds no Rakuda score, so its Overall is a one-benchmark mean. It is left out of every
    family statistic and named with the reason; the family's numbers are those of runs 1 and 3 (scipy)."""
    unread = "<<judge@j?サンプル2: 判断できません || 判断できません>>"
    data = write_rakuda(tmp_path / "d", [f"{unread} 質問{i}" for i in range(3)])
    with open(data / "ja" / "elyza_tasks_100.jsonl", "w", encoding="utf-8") as fh:
        for i in range(3):
            fh.write(json.dumps({"input": f"課題{i}", "output": "模範解答", "eval_aspect": "正確さ"},
                                ensure_ascii=False) + "\n")
    results = tmp_path / "r"
    assert run(server.base_url, results, data, "--runs", "3", "--benchmark", "rakuda,elyza", "--judge", "j",
               tag="fam").returncode == 0
    assert query(results, "SELECT tag, count(score) FROM judgements JOIN runs USING (run_id) "
                          "WHERE benchmark = 'rakuda' GROUP BY 1 ORDER BY 1") == [
        ("fam-run1", 3), ("fam-run2", 0), ("fam-run3", 3)]
    (section,) = json.loads(shaberi("view", "--tag", "fam", "--format", "json", "--results-dir", str(results)
                                    ).stdout)["scores"]
    assert "left out (family statistics count complete runs only): fam-run2 (rakuda: no score by j)" \
        in section["notes"]
    overall = [v for (v,) in query(results, "SELECT overall FROM run_scores JOIN runs USING (run_id, model, tag) "
                                            "WHERE judge = '*' AND tag IN ('fam-run1', 'fam-run3') ORDER BY tag")]
    row = next(r for r in section["rows"] if r["benchmark"] == "Overall")
    low, high = stats.t.interval(0.95, 1, loc=sum(overall) / 2, scale=stats.sem(overall))
    assert row["runs"] == 2 and row["mean"] == pytest.approx(sum(overall) / 2, abs=1e-9)
    # Clipped to the overall's scale: Rakuda 1–10 and ELYZA 2–10 (1–5 × 2) average to 1.5–10.
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((max(low, 1.5), min(high, 10.0)), abs=1e-9)
    assert low < 1.5 or high > 10


def test_leaderboard_ranks_complete_rows_first_and_names_no_mt_bench(server, tmp_path, data_dir):
    results = tmp_path / "r"
    assert run(server.base_url, results, data_dir, "--limit", "2", "--judge", "j", tag="lb",
               model="complete").returncode == 0
    only_rakuda = write_rakuda(tmp_path / "d", ["<<judge: FINAL SCORE: 10>> 質問1", "<<judge: FINAL SCORE: 10>> 2"])
    assert run(server.base_url, results, only_rakuda, "--benchmark", "rakuda", "--judge", "j", tag="lb",
               model="partial").returncode == 0
    proc = shaberi("leaderboard", "--tag", "lb", "--format", "csv", "--results-dir", str(results))
    assert proc.returncode == 0, proc.stderr
    import csv
    import io

    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    assert [(r["model_name"], r["Complete"], r["JA-MT questions"]) for r in rows] == [
        ("complete", "4/4", "60"), ("partial", "1/4", "")]
    assert float(rows[1]["Average (All)"]) == 10.0 > float(rows[0]["Average (All)"])  # higher, yet ranked after


def test_no_two_runs_share_a_manifest_or_a_folder(server, tmp_path):
    data = write_rakuda(tmp_path / "d", ["質問1", "質問2"])
    results = tmp_path / "r"
    for model, tag, extra in [("m", "exp", []), ("m", "exp", ["--runs", "2"]), ("org/m", "a", []),
                              ("org__m", "a", []), ("org/m", "a/", [])]:
        assert run(server.base_url, results, data, "--benchmark", "rakuda", "--judge", "j", *extra, tag=tag,
                   model=model).returncode == 0
    assert manifest(results, "m", "exp")["tag"] == "exp"  # the single run's, not the family's
    family = json.loads((results / "m" / "exp" / "family.json").read_text())
    assert family["tags"] == ["exp-run1", "exp-run2"]
    names = {(manifest(results, model, tag)["model"]["name"], manifest(results, model, tag)["tag"])
             for model, tag in [("org/m", "a"), ("org__m", "a"), ("org/m", "a/")]}
    assert names == {("org/m", "a"), ("org__m", "a"), ("org/m", "a/")}
    from urllib.parse import unquote

    assert sorted(unquote(p.name) for p in results.iterdir() if p.is_dir() and p.name not in (
        "tables", "locks", "journal")) == ["m", "org/m", "org__m"]
    single = json.loads(shaberi("view", "--tag", "exp", "--format", "json", "--results-dir", str(results)).stdout)
    assert not single["multi_run"]
    # The passes on one member: its manifest keeps the earlier stages, the family summary is rewritten.
    before = (results / "m" / "exp" / "family.json").stat().st_mtime_ns
    proc = shaberi("run", "--model", "m", "--tag", "exp-run1", "--stages", "passes", "--passes", "repetition",
                   "--results-dir", str(results))
    assert proc.returncode == 0, proc.stderr
    assert manifest(results, "m", "exp-run1")["stages"] == {"generate": "ok", "judge": "ok", "passes": "ok"}
    assert (results / "m" / "exp" / "family.json").stat().st_mtime_ns > before


def test_ctrl_c_leaves_a_run_interrupted_not_failed_and_says_how_to_resume(tmp_path, data_dir):
    import signal
    import time

    from shaberi.testing import LoopbackServer

    args = ["run", "--model", "m", "--benchmark", "rakuda", "--limit", "12", "--concurrency", "2",
            "--results-dir", str(tmp_path / "r"), "--data-dir", str(data_dir)]
    with LoopbackServer(latency_ms=300, models=("m",)) as slow:
        proc = subprocess.Popen([sys.executable, "-m", "shaberi", *args, "--base-url", slow.base_url],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while slow.stats()["calls"] < 4 and time.monotonic() < deadline:
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130 and "interrupted: what was stored is kept" in err and "Traceback" not in err
        ((status, stages),) = query(tmp_path / "r", "SELECT status, stages FROM runs")
        assert status == "interrupted" and '"generate":{"status":"interrupted"' in stages.replace(" ", "")
        again = shaberi(*args, "--base-url", slow.base_url)
    assert again.returncode == 0 and "12 answers (" in again.stdout and "status: ok" in again.stdout


@pytest.mark.parametrize(("parts", "whole"), [
    (["ok", "ok"], "ok"), (["failed", "failed"], "failed"), (["ok", "failed"], "partial"),
    (["ok", "not run"], "ok"), (["not run"], "not run"), ([], "ok"), (["ok", "interrupted"], "interrupted"),
    (["complete", "error"], "partial"), (["partial", "running", "ok"], "running")])
def test_parts_side_by_side_combine_by_one_rule_in_sql_python_and_the_sweep(parts, whole):
    """combined_status (sql/005_status.sql) is the rule: a SQL reader, status.combined and a sweep's model over its
    runs give the same word."""
    from types import SimpleNamespace

    import duckdb

    from shaberi.status import combined
    from shaberi.sweep.runner import _status
    from shaberi.tables.sql import define_status

    con = duckdb.connect()
    define_status(con)
    assert con.execute("SELECT combined_status($p::VARCHAR[])", {"p": parts}).fetchone() == (whole,)
    assert combined(parts) == whole
    assert _status({f"t-run{i}": SimpleNamespace(status=s) for i, s in enumerate(parts)}) == whole  # type: ignore[arg-type]
