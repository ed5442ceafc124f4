"""Fixtures: the real datasets (SHABERI_DATA_DIR), a loopback LLM server, and a CLI runner."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from shaberi.tables.sql import connect
from shaberi.testing import LoopbackServer

from .forkserver import ForkServer

REPO = Path(__file__).resolve().parent.parent
# Judge-endpoint slots are machine-wide (shaberi.llm.lease); keep the suite's own, inherited by subprocesses.
os.environ["SHABERI_LEASE_DIR"] = tempfile.mkdtemp(prefix="shaberi-test-leases-")
# The views' entries (shaberi.tables.memo) and remote roots' journals: the suite's own, not the user's ~/.cache.
os.environ["SHABERI_STATE_DIR"] = tempfile.mkdtemp(prefix="shaberi-test-state-")


# The files that take longest, started first: under xdist's --dist loadfile a file runs on one worker, and the last
# long file to start would leave the other workers idle at the end.
FIRST = ["test_sweep.py", "test_object_storage.py", "test_status.py", "test_paths.py", "test_compare.py",
         "test_ensemble_ci.py", "test_original.py", "test_rate_control.py", "test_local.py", "test_leaderboard.py",
         "test_passes.py", "test_lineage.py", "test_judge.py", "test_report.py", "test_cli.py", "test_ensemble.py",
         "test_legacy.py", "test_notebook.py"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    order = {name: i for i, name in enumerate(FIRST)}
    items.sort(key=lambda item: order.get(item.path.name, len(FIRST)))  # stable: each file's own order kept


@pytest.fixture(scope="session")
def data_dir() -> Path:
    path = Path(os.environ.get("SHABERI_DATA_DIR", REPO.parent / "shared" / "datasets"))
    if not (path / "ja").is_dir():
        pytest.fail(f"benchmark data not found at {path}; set SHABERI_DATA_DIR to the shared datasets folder")
    return path


@pytest.fixture(scope="session")
def _server():
    with LoopbackServer(latency_ms=5) as server:
        yield server


@pytest.fixture
def server(_server: LoopbackServer) -> LoopbackServer:
    """A shared loopback server with its call statistics cleared."""
    _server.reset()
    return _server


def write_rakuda(data_dir: Path, texts: list[str]) -> Path:
    """A tiny data dir whose Rakuda file holds these question texts (fault markers welcome)."""
    (data_dir / "ja").mkdir(parents=True, exist_ok=True)
    with open(data_dir / "ja" / "rakuda.jsonl", "w", encoding="utf-8") as fh:
        for i, text in enumerate(texts):
            fh.write(json.dumps({"category": "test", "question_id": f"q{i}", "text": text}, ensure_ascii=False) + "\n")
    return data_dir


def judged_rakuda_runs(base: Path, texts_by_tag: dict[str, list[str]]) -> Path:
    """One Rakuda run of model m per tag over these question texts, judged by j on a loopback server, with
    the format_validation pass; returns the results root."""
    import asyncio

    from shaberi.llm.client import ClientConfig
    from shaberi.llm.endpoints import ModelAt
    from shaberi.passes import build
    from shaberi.pipeline import RunRequest, run

    with LoopbackServer() as server:
        for tag, texts in texts_by_tag.items():
            data = write_rakuda(base / f"d-{tag}", texts)
            asyncio.run(run(RunRequest(model="m", base_url=server.base_url, results_dir=base / "r", data_dir=data,
                                       benchmarks=["rakuda"], tag=tag, judges=[ModelAt("j", server.base_url)],
                                       passes=build("format_validation"),
                                       client=ClientConfig(timeout=5, max_retries=0))))
    return base / "r"


def run_pilot(app, steps) -> None:
    """Run a textual app headless at 200x60 and drive it with ``await steps(app, pilot)``."""
    import asyncio

    async def go():
        async with app.run_test(size=(200, 60)) as pilot:
            await pilot.pause()
            await steps(app, pilot)

    asyncio.run(go())


FORKS = ForkServer()


def shaberi(*args: str, env: dict | None = None, timeout: float = 120,
            cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run the real command line in a process of its own, as a user would (forked from a server that has
    imported it: tests/forkserver.py)."""
    base = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "SHABERI_RESULTS_DIR")}
    return FORKS.run(list(args), {**base, **(env or {})}, cwd, timeout)


def in_terminal(*args: str, columns: int = 120, timeout: float = 120) -> tuple[int, str]:
    """Run the command line with its output on a real terminal (a pseudo-terminal ``columns`` wide, as a user's
    window): its exit code and what it showed, escape codes taken out."""
    import fcntl
    import pty
    import re
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "OPENAI_API_KEY")} | {"TERM": "xterm"}
    proc = subprocess.Popen([sys.executable, "-m", "shaberi", *args], stdin=subprocess.DEVNULL, stdout=slave,
                            stderr=slave, env=env)
    os.close(slave)
    out = bytearray()
    with contextlib.suppress(OSError):  # EIO once the command has exited and its side of the terminal closed
        while chunk := os.read(master, 65536):
            out += chunk
    os.close(master)
    code = proc.wait(timeout)
    return code, re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07", "", out.decode()).replace("\r\n", "\n")


@pytest.fixture(scope="session", autouse=True)
def _fork_server():
    yield
    FORKS.close()
    shutil.rmtree(os.environ["SHABERI_LEASE_DIR"], ignore_errors=True)
    shutil.rmtree(os.environ["SHABERI_STATE_DIR"], ignore_errors=True)


def query(results: Path, sql: str) -> list[tuple]:
    return connect(results).execute(sql).fetchall()


def table_rows(root: object, leave_out: set[str]) -> dict[str, list[tuple]]:
    """Every table's rows, sorted, without the columns left out (times), through one connection: opening a root
    on S3 lists every part, a second or more against the test server."""
    from shaberi.tables.schema import TABLES

    con, found = connect(root), {}  # type: ignore[arg-type]
    for table, spec in TABLES.items():
        columns = ", ".join(f'"{c}"' for c in spec.columns if c not in leave_out)
        found[table] = con.execute(f"SELECT {columns} FROM {table} ORDER BY ALL").fetchall()
    return found


def kill_when(server, args: list[str], calls: int) -> int:
    """Start ``shaberi ARGS``, SIGKILL it once the server has seen ``calls`` chat calls (a kill -9 mid-flight),
    and return how many it had seen then."""
    import signal
    import time

    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    proc = subprocess.Popen([sys.executable, "-m", "shaberi", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env)
    deadline = time.monotonic() + 60
    while server.stats()["calls"] < calls and time.monotonic() < deadline:
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    return server.stats()["calls"]


@pytest.fixture(scope="module")
def s3():
    """A real S3 endpoint (moto's server) for a test module, its AWS_* variables set meanwhile."""
    from shaberi.testing.s3 import S3Server

    with S3Server() as server, pytest.MonkeyPatch.context() as env:
        for name, value in server.env.items():
            env.setenv(name, value)
        yield server


def said(exc: BaseException) -> tuple[str, int] | None:
    """What the command line prints for ``exc`` and its exit code, or None (a bug: a traceback)."""
    from shaberi.tables.failures import converted

    found = converted(exc)
    return (str(found), found.exit_code) if found is not None else None


def run_cli(base_url: str, results: Path, data: Path, *args: str, tag: str = "t", model: str = "m"
            ) -> subprocess.CompletedProcess[str]:
    """``shaberi run`` of ``model`` against ``base_url``, without retries: a fault the server plants is an error at
    once."""
    return shaberi("run", "--model", model, "--tag", tag, "--base-url", base_url, "--max-retries", "0",
                   "--results-dir", str(results), "--data-dir", str(data), *args)


def evaluate(server: LoopbackServer, results: Path, data: Path, *, judges: tuple[str, ...] | list[str] = ("judge-a",),
             benchmarks: tuple[str, ...] | list[str] = ("rakuda",), model: str = "m", client: object = None,
             **request: object) -> object:
    """One run through the Python API (``pipeline.run``) against ``server``, judged there by ``judges``, with a
    client that retries fast (``client``: another)."""
    import asyncio

    from shaberi.llm.client import ClientConfig
    from shaberi.llm.endpoints import ModelAt
    from shaberi.pipeline import RunRequest, run

    fast = ClientConfig(timeout=2.0, max_retries=1, backoff_base=0.01, backoff_max=0.02)
    req = RunRequest(model=model, base_url=server.base_url, results_dir=results, data_dir=data,
                     benchmarks=list(benchmarks), judges=[ModelAt(j, server.base_url) for j in judges],
                     client=client or fast, **request)  # type: ignore[arg-type]
    return asyncio.run(run(req))
