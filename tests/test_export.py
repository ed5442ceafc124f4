"""The JSONL + manifest layout: files, fields, a summary for multi-runs, and a run killed between stages."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from shaberi.testing import LoopbackServer

from .conftest import shaberi, write_rakuda

MANIFEST_KEYS = {"run_id", "tag", "base_tag", "status", "error", "stages", "model", "generation_config", "judges",
                 "passes", "benchmarks", "tokens", "template_hashes", "git", "package_versions", "created_at",
                 "updated_at"}


def read_jsonl(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_layout_manifest_and_normalized_records(server, tmp_path):
    data = write_rakuda(tmp_path / "d", ["[[think]] 質問1", "質問2", "[[fail:401]] 質問3"])
    proc = shaberi("run", "--model", "org/model", "--tag", "exp", "--runs", "2", "--base-url", server.base_url,
                   "--benchmark", "rakuda", "--judge", "judge-a", "--results-dir", str(tmp_path / "r"),
                   "--data-dir", str(data))
    assert proc.returncode == 0, proc.stderr
    run = tmp_path / "r" / "org__model" / "exp-run1"
    manifest = json.loads((run / "manifest.json").read_text())
    assert set(manifest) >= MANIFEST_KEYS
    assert manifest["status"] == "ok" and manifest["stages"] == {"generate": "done", "judge": "done"}
    assert manifest["model"] == {"name": "org/model", "base_url": server.base_url, "api_key_sha256": None}
    assert manifest["judges"][0]["name"] == "judge-a" and manifest["judges"][0]["last_judged_at"]
    rakuda = manifest["benchmarks"]["rakuda"]
    assert (rakuda["questions"], rakuda["answers"], rakuda["answer_errors"]) == (3, 3, 1)
    assert rakuda["error"].startswith("HTTP 401") and rakuda["dataset"]["rows"] == 3
    assert {t["stage"] for t in manifest["tokens"]} == {"generation", "judging"}
    assert "judging/rakuda" in manifest["template_hashes"] and "commit" in manifest["git"]

    art = run / "artifacts" / "shaberi"
    answers = read_jsonl(art / "answers" / "rakuda.jsonl")
    assert len(answers) == 3 and answers[0]["reasoning"] == "まず質問を整理します。"
    judged = read_jsonl(art / "judgements" / "judge_judge-a" / "rakuda.jsonl")
    assert [j["error"] for j in judged] == [None, None, "answer_error"]
    for name in ("answers", "judgements", "scores"):
        assert (art / "normalized" / f"{name}.jsonl").is_file()
    record = read_jsonl(art / "normalized" / "judgements.jsonl")[0]
    assert set(record) >= {"answer_id", "judge_model", "reasoning", "judge_output", "prompt_tokens",
                           "completion_tokens"}
    assert record["answer_id"] == f"{manifest['run_id']}/rakuda/q0/0"
    metrics = json.loads((art / "metrics.json").read_text())
    assert {m["judge"] for m in metrics["benchmarks"]} == {"judge-a", "*"}

    summary = json.loads((tmp_path / "r" / "org__model" / "exp" / "manifest.json").read_text())
    assert summary["kind"] == "multi_run" and summary["tags"] == ["exp-run1", "exp-run2"]
    assert any(s["benchmark"] == "overall" and s["runs"] == 2 for s in summary["statistics"])

    (art / "metrics.json").unlink()
    again = shaberi("export", "--tag", "exp", "--results-dir", str(tmp_path / "r"))
    assert again.returncode == 0 and (art / "metrics.json").is_file()
    assert "exp (org/model), 2 runs" in again.stdout


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
    assert manifest["status"] == "running" and manifest["stages"] == {"generate": "done", "judge": "running"}
    assert manifest["benchmarks"]["rakuda"]["answers"] == 4
