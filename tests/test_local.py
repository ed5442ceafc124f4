"""The embedded local model: the GGUF joined from its packages and checked, served for real, and the demo
running every stage on it (a real model answering and judging, on this machine's CPU)."""

from __future__ import annotations

import hashlib
import json
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from shaberi.errors import DataError, UsageError
from shaberi.llm.local import LocalModel, LocalServer, free_port, gguf_path, model_dir

from .conftest import query, shaberi


def fake_parts(root: Path, chunks: list[bytes]) -> tuple[str, ...]:
    """Data-only packages laid out like the registry's: <name>/__init__.py and <name>/data/partNN.bin."""
    names = []
    for i, chunk in enumerate(chunks, start=1):
        name = f"shaberi_test_part{i}"
        (root / name / "data").mkdir(parents=True)
        (root / name / "__init__.py").write_text("")
        (root / name / "data" / f"part{i:02d}.bin").write_bytes(chunk)
        names.append(name)
    return tuple(names)


def test_the_gguf_is_joined_in_order_checked_and_then_reused(tmp_path, monkeypatch):
    chunks = [b"GGUF" + b"a" * 1000, b"b" * 5000, b"c" * 3]
    modules = fake_parts(tmp_path / "site", chunks)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setenv("SHABERI_MODEL_DIR", str(tmp_path / "models"))
    whole = b"".join(chunks)
    good = LocalModel("tiny", modules, len(whole), hashlib.sha256(whole).hexdigest(), "local")
    path = gguf_path(good)
    assert path.read_bytes() == whole
    mtime = path.stat().st_mtime_ns
    assert gguf_path(good) == path and path.stat().st_mtime_ns == mtime  # joined once

    bad = LocalModel("tiny-bad", modules, len(whole), "0" * 64, "local")
    with pytest.raises(DataError, match="sha256"):
        gguf_path(bad)
    assert sorted(p.name for p in (tmp_path / "models").iterdir()) == ["tiny.gguf", "tiny.sha256"]

    missing = LocalModel("tiny-missing", ("no_such_part_package",), 1, "0" * 64, "local")
    with pytest.raises(UsageError, match=r"pip install 'shaberi\[local\]'"):
        gguf_path(missing)


def test_the_model_folder_is_never_inside_the_committable_ensemble_cache(tmp_path, monkeypatch):
    """SHABERI_CACHE_DIR is the ensemble's cache, committed with ``git add -f``: a serve-local or demo with it set
    used to assemble the 400 MB model inside it. The model has its own folder, the user's cache by default."""
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv("SHABERI_MODEL_DIR", raising=False)
    committed = tmp_path / "repo" / ".cache"
    monkeypatch.setenv("SHABERI_CACHE_DIR", str(committed))
    assert model_dir() == home / ".cache" / "shaberi" / "models"
    assert not model_dir().is_relative_to(committed)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert model_dir() == tmp_path / "xdg" / "shaberi" / "models"
    monkeypatch.setenv("SHABERI_MODEL_DIR", str(tmp_path / "models"))
    assert model_dir() == tmp_path / "models"

    chunks = [b"GGUF" + b"x" * 100]
    modules = fake_parts(tmp_path / "site", chunks)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    path = gguf_path(LocalModel("tiny", modules, len(chunks[0]), hashlib.sha256(chunks[0]).hexdigest(), "local"))
    assert path.parent == tmp_path / "models" and not committed.exists()

    monkeypatch.setenv("SHABERI_MODEL_DIR", str(committed / "models"))  # set inside it by hand: refused
    with pytest.raises(UsageError, match=r"inside SHABERI_CACHE_DIR .* set SHABERI_MODEL_DIR to a folder outside it"):
        model_dir()


def test_serve_local_refuses_a_model_folder_inside_the_committable_cache_before_writing_anything(tmp_path):
    committed = tmp_path / ".cache"
    proc = shaberi("serve-local", env={"SHABERI_CACHE_DIR": str(committed),
                                       "SHABERI_MODEL_DIR": str(committed / "models")})
    assert proc.returncode == 2 and proc.stderr.startswith("error: the local model's folder "), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not committed.exists()


def test_the_embedded_model_is_installed_and_verified():
    path = gguf_path()  # the six registry packages, joined and sha256-checked (cached after the first time)
    assert path.stat().st_size == 491_400_064 and path.read_bytes()[:4] == b"GGUF"


def test_the_served_weights_are_not_repacked():
    """llama.cpp repacks the weights for the CPU (AMX on Sapphire Rapids, where it segfaults at the first answer;
    CPU_REPACK elsewhere): the server Shaberi starts keeps them as mapped, on every machine. The stock server
    repacks them on this one: the log says so."""
    for program, repacked in ((LocalServer.program, False), ("llama_cpp.server", True)):
        server = LocalServer(threads=1)
        server.program = program
        with server:
            pass
        buffers = [line for line in server.log.read_text(errors="replace").splitlines() if "model buffer size" in line]
        assert any("CPU_Mapped" in line for line in buffers), buffers
        if not repacked:
            assert not any("REPACK" in line or "AMX" in line for line in buffers), buffers
        elif not any("REPACK" in line or "AMX" in line for line in buffers):
            pytest.skip(f"ours maps them; the stock server repacks nothing on this CPU either: {buffers}")


def test_serve_local_answers_one_question_through_every_stage_and_stops_cleanly(tmp_path, data_dir):
    """The local model served for real (usage tokens and all) answers and judges one Rakuda question, the three
    passes check it, and SIGTERM stops the server. The whole demo runs on its own (pytest -m demo)."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "shaberi", "serve-local", "--port", str(port), "--threads", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url, model = f"http://127.0.0.1:{port}/v1", "qwen2.5-coder-0.5b-instruct-q4_k_m"
    try:
        line = proc.stdout.readline()  # printed once the server lists its model
        assert f"at {url}" in line, proc.stderr.read() if proc.poll() is not None else line
        with urllib.request.urlopen(f"{url}/models", timeout=10) as resp:
            assert json.load(resp)["data"][0]["id"] == model
        done = shaberi("run", "--model", model, "--base-url", url, "--benchmark", "rakuda", "--limit", "1",
                       "--max-tokens", "64", "--judge", model, "--judge-max-tokens", "64", "--concurrency", "1",
                       "--passes", "lang_mixing,repetition,format_validation", "--results-dir", str(tmp_path),
                       "--data-dir", str(data_dir), timeout=600)
        if done.returncode != 0:  # say what the model server said (its CPU's features, how it ended) too
            proc.send_signal(signal.SIGTERM)
            said = proc.communicate(timeout=30)[1]
            log = re.search(r"see (\S+\.log)", said)
            tail = Path(log.group(1)).read_text(errors="replace")[-3000:] if log else ""
            pytest.fail(f"{done.stderr[-2000:]}\nserve-local: {said[-500:]}\n{tail}")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0 and "stopped" in proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
    with pytest.raises(OSError):  # nothing listens any more: the model server went with it
        urllib.request.urlopen(f"{url}/models", timeout=2)
    ((content, tokens),) = query(tmp_path, "SELECT content, completion_tokens FROM answers")
    assert content and 0 < tokens <= 64 + 1  # llama.cpp counts the token it stopped at too
    ((score, method, error, output),) = query(tmp_path, "SELECT score, parse_method, error, judge_output "
                                                        "FROM judgements")
    assert output and ((score is not None and method) or (score is None and error))  # a score, or why not
    assert query(tmp_path, "SELECT pass_name, count(*) FROM pass_deltas GROUP BY 1 ORDER BY 1") == [
        ("format_validation", 1), ("lang_mixing", 1), ("repetition", 1)]


@pytest.mark.demo
@pytest.mark.timeout(900)
def test_the_demo_runs_every_stage_on_the_local_model(tmp_path):
    """The README's first command with --limit 1: a real model answers and judges one question per benchmark."""
    done = shaberi("demo", "--limit", "1", "--results-dir", str(tmp_path), timeout=850)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Overall" in done.stdout
    answers = query(tmp_path, "SELECT benchmark, content, completion_tokens FROM answers ORDER BY 1")
    assert [a[0] for a in answers] == ["elyza", "mt_bench", "rakuda", "tengu"]
    assert all(a[1] and a[2] > 0 for a in answers)
    judged = query(tmp_path, "SELECT benchmark, score, parse_method, error, judge_output FROM judgements")
    assert len(judged) == 4
    for bench, score, method, error, output in judged:  # a parsed score, or a null that says why
        assert output and ((score is not None and method) or (score is None and error)), bench
    assert query(tmp_path, "SELECT pass_name, count(*) FROM pass_deltas GROUP BY 1 ORDER BY 1") == [
        ("format_validation", 4), ("lang_mixing", 4), ("repetition", 4)]
    usage = dict(query(tmp_path, "SELECT stage, sum(prompt_tokens) + sum(completion_tokens) FROM token_usage "
                                 "GROUP BY 1"))
    assert usage["generation"] > 0 and usage["judging"] > 0
    (folder,) = [p for p in tmp_path.iterdir() if (p / "demo" / "manifest.json").is_file()]
    manifest = json.loads((folder / "demo" / "manifest.json").read_text())
    assert manifest["status"] == "ok" and manifest["passes"] == ["lang_mixing@1", "repetition@1",
                                                                 "format_validation@1"]
    assert (folder / "demo" / "artifacts" / "shaberi" / "passes" / "lang_mixing").is_dir()
