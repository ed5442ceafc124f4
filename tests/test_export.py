"""The JSONL + manifest layout: files, fields, a summary for multi-runs, a run killed between stages, a
reasoning model's run (megabytes of thinking) in bounded memory, and an export that fails without failing the run."""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import time

import pytest

from shaberi.testing import LoopbackServer

from .conftest import query, shaberi, write_rakuda

MANIFEST_KEYS = {"run_id", "tag", "base_tag", "status", "error", "stages", "stage_detail", "model",
                 "generation_config", "judges", "passes", "benchmarks", "tokens", "token_totals", "template_hashes",
                 "git", "package_versions", "created_at", "updated_at"}


def read_jsonl(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_layout_manifest_and_normalized_records(server, tmp_path):
    data = write_rakuda(tmp_path / "d", ["[[think]] 質問1", "質問2", "[[fail:401]] 質問3"])
    proc = shaberi("run", "--model", "org/model", "--tag", "exp", "--runs", "2", "--base-url", server.base_url,
                   "--benchmark", "rakuda", "--judge", "judge-a", "--results-dir", str(tmp_path / "r"),
                   "--data-dir", str(data))
    assert proc.returncode == 0, proc.stderr
    run = tmp_path / "r" / "org%2Fmodel" / "exp-run1"  # folder names: percent-encoded, reversible
    manifest = json.loads((run / "manifest.json").read_text())
    assert set(manifest) >= MANIFEST_KEYS
    # One answer of three failed: the generation is partial, the judging of what there is complete.
    assert manifest["status"] == "partial" and manifest["stages"] == {"generate": "partial", "judge": "ok"}
    assert manifest["stage_detail"]["generate"]["calls"] == 3 and manifest["stage_detail"]["generate"]["failed"] == 1
    assert manifest["model"] == {"name": "org/model", "base_url": server.base_url, "api_key_sha256": None}
    assert manifest["judges"][0]["name"] == "judge-a" and manifest["judges"][0]["last_judged_at"]
    rakuda = manifest["benchmarks"]["rakuda"]
    assert (rakuda["questions"], rakuda["answers"], rakuda["answer_errors"]) == (3, 3, 1)
    assert rakuda["error"].startswith("HTTP 401") and rakuda["dataset"]["rows"] == 3
    assert (rakuda["status"], rakuda["generate"]) == ("partial", "partial")
    assert rakuda["judge"]["judge-a"] | {"error": None} == {"status": "ok", "judged": 3, "scored": 2,
                                                            "judge_failed": 0, "not_judged": 0, "stale": 0,
                                                            "error": None}  # the errored answer has no score
    assert {t["stage"] for t in manifest["tokens"]} == {"generation", "judging"}
    totals = manifest["token_totals"]
    assert set(totals["by_stage"]) == {"generation", "judging"} and set(totals["by_benchmark"]) == {"rakuda"}
    assert totals["run"]["prompt_tokens"] == sum(t["prompt_tokens"] for t in manifest["tokens"]) > 0
    assert totals["run"]["requests"] == sum(t["requests"] for t in manifest["tokens"])
    assert "judging/rakuda" in manifest["template_hashes"] and "commit" in manifest["git"]

    art = run / "artifacts" / "shaberi"
    answers = read_jsonl(art / "answers" / "rakuda.jsonl")
    assert len(answers) == 3 and answers[0]["reasoning"] == "まず質問を整理します。"
    judged = read_jsonl(art / "judgements" / "judge_judge-a" / "rakuda.jsonl")
    assert [j["error"] for j in judged] == [None, None, "answer_error"]
    for name in ("answers", "judgements", "scores"):
        assert (art / "normalized" / f"{name}.jsonl").is_file()
    record = read_jsonl(art / "normalized" / "judgements.jsonl")[0]
    assert set(record) >= {"answer_id", "judge_model", "reasoning", "judge_output", "answer_prompt_tokens",
                           "answer_completion_tokens", "judge_prompt_tokens", "judge_completion_tokens"}
    assert record["answer_id"] == f"{manifest['run_id']}/rakuda/q0/0"
    # reasoning is the judge's, not the candidate's think text (which stays with the answer)
    assert record["judge_output"].startswith(record["reasoning"]) and "FINAL SCORE" not in record["reasoning"]
    assert "まず質問を整理します" not in record["reasoning"] and record["judge_prompt_tokens"] > 0
    assert record["answer_completion_tokens"] == answers[0]["answer_completion_tokens"] > 0
    metrics = json.loads((art / "metrics.json").read_text())
    assert {m["judge"] for m in metrics["benchmarks"]} == {"judge-a", "*"}
    assert metrics["tokens"]["run"] == totals["run"]

    # The family's summary is a file of its own: no run's manifest can be there.
    summary = json.loads((tmp_path / "r" / "org%2Fmodel" / "exp" / "family.json").read_text())
    assert summary["kind"] == "multi_run" and summary["tags"] == ["exp-run1", "exp-run2"]
    assert [(m["tag"], m["complete"], m["status"]) for m in summary["members"]] == [
        ("exp-run1", True, "partial"), ("exp-run2", True, "partial")]
    assert any(s["benchmark"] == "overall" and s["runs"] == 2 for s in summary["statistics"])
    assert not (tmp_path / "r" / "org%2Fmodel" / "exp" / "manifest.json").exists()
    # tokens and cost per member and for the family, as the cost view has them; statistics without the passes
    used = dict(((r, (req, p, c)) for r, req, p, c in query(
        tmp_path / "r", "SELECT run_id, sum(requests), sum(prompt_tokens), sum(completion_tokens) FROM cost "
                        "GROUP BY 1")))
    for m in summary["members"]:
        t = m["tokens"]
        assert (t["requests"], t["prompt_tokens"], t["completion_tokens"]) == used[m["run_id"]] and t["prompt_tokens"]
        assert t["cost_usd"] == 0 and t["priced"] is False  # loopback models, unpriced
    family = summary["tokens"]
    assert family["prompt_tokens"] == sum(m["tokens"]["prompt_tokens"] for m in summary["members"])
    assert family["requests"] == sum(m["tokens"]["requests"] for m in summary["members"])
    baseline = {(j, b): v for j, b, v in query(tmp_path / "r", "SELECT judge, benchmark, list(baseline_score ORDER BY "
                                                               "run_index) FROM benchmark_scores WHERE tag LIKE "
                                                               "'exp-run%' GROUP BY ALL")}
    for stat in (s for s in summary["statistics"] if s["benchmark"] != "overall"):
        values = baseline[(stat["judge"], stat["benchmark"])]
        assert stat["without_passes"]["values"] == values
        assert stat["without_passes"]["mean"] == pytest.approx(statistics.mean(values), abs=1e-9)

    (art / "metrics.json").unlink()
    again = shaberi("export", "--tag", "exp", "--results-dir", str(tmp_path / "r"))
    assert again.returncode == 0 and (art / "metrics.json").is_file()
    assert "exp (org/model), the family's summary" in again.stdout


def test_a_long_japanese_model_name_has_one_folder_within_the_file_systems_limit(server, tmp_path):
    """35 Japanese characters percent-encode to 315 bytes, past the 255 a folder name may have: the run crashed
    writing its manifest. The folder keeps the encoded start and a hash of the whole name; the manifest names it."""
    from urllib.parse import quote

    model = "日本語大規模言語モデル-指示調整版-スワロー-七十億パラメータ-第三版"
    data = write_rakuda(tmp_path / "d", ["質問1"])
    for tag in ("a", "b"):
        proc = shaberi("run", "--model", model, "--tag", tag, "--base-url", server.base_url, "--benchmark", "rakuda",
                       "--judge", "j", "--results-dir", str(tmp_path / "r"), "--data-dir", str(data))
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    (folder,) = [p for p in (tmp_path / "r").iterdir() if p.name not in ("tables", "journal", "locks")]
    assert len(folder.name.encode()) <= 200 and folder.name.startswith(quote(model)[:150])  # one, for both runs
    assert {json.loads((folder / t / "manifest.json").read_text())["model"]["name"] for t in "ab"} == {model}
    assert query(tmp_path / "r", "SELECT DISTINCT model FROM runs") == [(model,)]


def test_a_compact_export_trims_the_judges_reasoning_and_points_at_its_full_transcript(server, tmp_path):
    from shaberi.reports.export import COMPACT_REASONING

    long = "理由" * 700  # 1,400 characters of reasoning before the score line
    data = write_rakuda(tmp_path / "d", [f"<<judge: {long}\\nFINAL SCORE: 4>> 質問1",
                                         "<<judge: 短い理由\\nFINAL SCORE: 3>> 質問2"])
    results = tmp_path / "r"
    done = shaberi("run", "--model", "m", "--base-url", server.base_url, "--benchmark", "rakuda", "--judge", "j",
                   "--compact", "--results-dir", str(results), "--data-dir", str(data))
    assert done.returncode == 0, done.stderr
    run = results / "m" / "default"
    compact = read_jsonl(run / "artifacts" / "shaberi" / "normalized" / "judgements.jsonl")
    assert len(compact) == 2 and not any("judge_output" in r or "fallback_output" in r for r in compact)
    for record in compact:
        path, line = record["transcript"]["path"], record["transcript"]["line"]
        assert path == "artifacts/shaberi/judgements/judge_j/rakuda.jsonl"
        full = read_jsonl(run / path)[line - 1]  # the line it names holds the whole judgement
        assert full["answer_id"] == record["answer_id"] and full["judge_output"].startswith(full["reasoning"])
        if len(full["reasoning"]) > COMPACT_REASONING:
            assert record["reasoning_trimmed"] and record["reasoning"] == full["reasoning"][:COMPACT_REASONING] + "…"
        else:
            assert not record["reasoning_trimmed"] and record["reasoning"] == full["reasoning"]
    assert sorted(r["reasoning_trimmed"] for r in compact) == [False, True]
    # exported again without --compact: the normalized records whole again; with it, the same compact lines
    assert shaberi("export", "--results-dir", str(results)).returncode == 0
    whole = read_jsonl(run / "artifacts" / "shaberi" / "normalized" / "judgements.jsonl")
    assert all("judge_output" in r and "transcript" not in r for r in whole)
    assert shaberi("export", "--compact", "--results-dir", str(results)).returncode == 0
    assert read_jsonl(run / "artifacts" / "shaberi" / "normalized" / "judgements.jsonl") == compact


def test_a_run_killed_while_judging_has_a_valid_manifest(tmp_path, data_dir):
    with LoopbackServer(latency_ms=300) as slow:
        args = [sys.executable, "-m", "shaberi", "run", "--model", "m", "--base-url", slow.base_url, "--benchmark",
                "rakuda", "--limit", "4", "--judge", "j", "--results-dir", str(tmp_path), "--data-dir", str(data_dir)]
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env={k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"})
        path = tmp_path / "m" / "default" / "manifest.json"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if path.exists() and json.loads(path.read_text())["stages"].get("judge") == "running":
                break
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    manifest = json.loads(path.read_text())  # valid JSON: written by rename, never torn
    assert manifest["status"] == "running" and manifest["stages"] == {"generate": "ok", "judge": "running"}
    assert manifest["benchmarks"]["rakuda"]["answers"] == 4
    # The next reader sees that no process is writing it any more.
    view = shaberi("view", "--results-dir", str(tmp_path), "--format", "json")
    assert view.returncode == 0 and json.loads(view.stdout)["scores"][0]["status"] == "interrupted"
    assert shaberi("export", "--results-dir", str(tmp_path)).returncode == 0
    manifest = json.loads(path.read_text())
    assert manifest["status"] == "interrupted" and manifest["stages"] == {"generate": "ok", "judge": "interrupted"}


def _export_peak_mb(results, tag: str) -> tuple[int, int]:
    """(exit code, peak RSS in MB) of ``shaberi export --tag TAG``, measured on its own process."""
    probe = ("import resource, subprocess, sys; rc = subprocess.run([sys.executable, '-m', 'shaberi', 'export', "
             f"'--results-dir', {str(results)!r}, '--tag', {tag!r}], capture_output=True).returncode; "
             "print(rc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300).stdout.split()
    return int(out[0]), int(out[1])


def test_a_reasoning_models_run_exports_its_thinking_whole_in_bounded_memory(server, tmp_path):
    # 315 answers with 20,000 characters of thinking each (an R1 / Qwen3-thinking run); one of 5,000,000 alone.
    results = tmp_path / "r"
    for tag, texts in (("thinking", [f"[[think:20000]] 質問{i}" for i in range(315)]),
                       ("short", [f"質問{i}" for i in range(315)]), ("one-long", ["[[think:5000000]] 長い思考"])):
        proc = shaberi("run", "--model", "m", "--tag", tag, "--base-url", server.base_url, "--benchmark", "rakuda",
                       "--judge", "j", "--results-dir", str(results), "--data-dir",
                       str(write_rakuda(tmp_path / tag, texts)), timeout=600)
        assert proc.returncode == 0, proc.stderr
    assert query(results, "SELECT tag, status FROM runs ORDER BY tag") == [
        ("one-long", "ok"), ("short", "ok"), ("thinking", "ok")]
    art = results / "m" / "thinking" / "artifacts" / "shaberi"
    answers = read_jsonl(art / "answers" / "rakuda.jsonl")
    assert [a["question_id"] for a in answers] == [f"q{i}" for i in range(315)]  # in question order (q2 before q10)
    assert all(19_990 <= len(a["reasoning"]) <= 20_000 for a in answers)  # (stripped of the whitespace around it)
    stored = dict(query(results, "SELECT question_id, reasoning FROM answers WHERE run_id LIKE 'thinking%'"))
    assert all(a["reasoning"] == stored[a["question_id"]] for a in answers)  # every character, as stored
    judged = read_jsonl(art / "normalized" / "judgements.jsonl")
    assert len(judged) == 315 and all(j["score"] is not None and j["reasoning"] for j in judged)
    assert len(read_jsonl(art / "normalized" / "answers.jsonl")) == 315
    (long,) = read_jsonl(results / "m" / "one-long" / "artifacts" / "shaberi" / "answers" / "rakuda.jsonl")
    assert 4_999_990 <= len(long["reasoning"]) <= 5_000_000
    # Memory: exporting 19 MB of thinking (as JSON) costs little more than exporting short answers (measured:
    # +31 MB in bench/export_memory.py; the old export ran out of its 128 MB at this size).
    (rc_long, long_mb), (rc_short, short_mb) = _export_peak_mb(results, "thinking"), _export_peak_mb(results, "short")
    assert rc_long == rc_short == 0
    assert long_mb < short_mb + 100, (long_mb, short_mb)


def test_an_export_that_cannot_be_written_fails_alone_not_the_run(server, tmp_path):
    data = write_rakuda(tmp_path / "d", ["質問1", "質問2"])
    results = tmp_path / "r"
    (results / "m" / "t").mkdir(parents=True)
    (results / "m" / "t" / "artifacts").write_text("a file where the export's folder goes")
    args = ["--model", "m", "--tag", "t", "--base-url", server.base_url, "--benchmark", "rakuda", "--judge", "j",
            "--results-dir", str(results), "--data-dir", str(data)]
    proc = shaberi("run", *args)
    assert proc.returncode == 1
    assert "error: the export could not be written" in proc.stderr and "the run stays ok" in proc.stderr
    assert "Traceback" not in proc.stderr and "status: ok" in proc.stdout
    assert query(results, "SELECT status, error FROM runs") == [("ok", None)]  # the run is what its stages made it
    again = shaberi("run", *args)  # nothing to call again: the run is done, only its export is missing
    assert again.returncode == 1 and "0 called" in again.stdout and server.stats()["calls"] == 4
    assert shaberi("export", "--results-dir", str(results)).returncode == 1  # the same state, the same code
    (results / "m" / "t" / "artifacts").unlink()
    assert shaberi("export", "--results-dir", str(results)).returncode == 0
    assert len(read_jsonl(results / "m" / "t" / "artifacts" / "shaberi" / "answers" / "rakuda.jsonl")) == 2
    assert json.loads((results / "m" / "t" / "manifest.json").read_text())["status"] == "ok"
