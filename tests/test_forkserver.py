"""The fork server behind ``conftest.shaberi`` gives what ``subprocess.run`` would: exit codes, the environment and
directory asked for, and it survives a call that timed out."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from .forkserver import ForkServer


def test_a_forked_command_is_the_process_subprocess_would_start(tmp_path, monkeypatch):
    forks = ForkServer()
    env = {**os.environ, "SHABERI_RESULTS_DIR": str(tmp_path / "elsewhere")}
    try:
        (tmp_path / "inner").mkdir()
        monkeypatch.chdir(tmp_path)
        for args in (["--version"], ["view", "--tag", "v1"], ["nope"]):
            forked = forks.run(args, env, "inner", 60)  # relative to this process, as subprocess reads it
            real = subprocess.run([sys.executable, "-m", "shaberi", *args], capture_output=True, text=True, env=env,
                                  cwd="inner", timeout=60)
            assert (forked.returncode, forked.stdout, forked.stderr) == (real.returncode, real.stdout, real.stderr)
        with pytest.raises(FileNotFoundError):
            forks.run(["--version"], env, tmp_path / "missing", 60)
    finally:
        forks.close()
    assert not os.path.exists(forks._dir)


def test_a_call_that_times_out_is_killed_and_the_next_call_works(tmp_path, data_dir):
    forks = ForkServer()
    silent = tmp_path / "silent.py"  # an endpoint that accepts and never answers
    silent.write_text("import socket, time\ns = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
                      "print(s.getsockname()[1], flush=True)\ntime.sleep(600)\n")
    server = subprocess.Popen([sys.executable, str(silent)], stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())  # type: ignore[union-attr]
        with pytest.raises(subprocess.TimeoutExpired):
            forks.run(["run", "--model", "m", "--base-url", f"http://127.0.0.1:{port}/v1", "--results-dir",
                       str(tmp_path / "r"), "--data-dir", str(data_dir)], dict(os.environ), tmp_path, 3)
        again = forks.run(["--version"], dict(os.environ), tmp_path, 60)
        assert again.returncode == 0 and again.stdout.startswith("shaberi ")
    finally:
        server.kill()
        forks.close()
