"""shaberi sweep on a real local Ray cluster (``ray start --head`` with two CPUs: two worker processes) against
loopback servers, and the same plan run here one model after another (``--local``): the same rows; a worker
killed mid-task, retried by Ray, resuming without duplicates; the judge's limit held across workers; a results
root on S3 (moto); bad plans."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shaberi.tables.schema import TABLES
from shaberi.testing import LoopbackServer

from .conftest import query, shaberi

VOLATILE = {"created_at", "updated_at", "latency_ms", "concurrency_history", "stages"}  # time, not content
MODELS = ["m1", "m2", "m3", "m4"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, s3):
    """A Ray head on 127.0.0.1 with two CPUs, its workers seeing the S3 server's endpoint and a state dir."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, **s3.env, "RAY_USAGE_STATS_ENABLED": "0"}
    ray = [sys.executable, "-m", "ray.scripts.scripts"]
    subprocess.run([*ray, "start", "--head", "--num-cpus", "2", "--port", str(port), "--node-ip-address", "127.0.0.1",
                    "--include-dashboard=false", "--disable-usage-stats"], env=env, check=True, capture_output=True)
    try:
        yield {"address": f"127.0.0.1:{port}", "env": {**s3.env, "RAY_ADDRESS": f"127.0.0.1:{port}"}}
    finally:
        subprocess.run([*ray, "stop", "--force"], env=env, capture_output=True)


def write_plan(path: Path, judge_url: str, models: dict[str, str], data: Path, **extra: object) -> Path:
    lines = [f"{k} = {json.dumps(v)}" for k, v in {"tag": "wk", "benchmarks": ["elyza", "tengu", "mt_bench", "rakuda"],
                                                  "limit": 2, "data_dir": str(data),
                                                  "judge_concurrency": 2, **extra}.items()]
    lines += ["[[judges]]", 'model = "j"', f'base_url = "{judge_url}"']
    for model, source in models.items():
        key = "serve" if "{port}" in source else "base_url"
        lines += ["[[models]]", f'model = "{model}"', f"{key} = {json.dumps(source)}"]
    path.write_text("\n".join(lines) + "\n")
    return path


def rows(root: object, table: str) -> list[tuple]:
    columns = ", ".join(f'"{c}"' for c in TABLES[table].columns if c not in VOLATILE)
    return query(root, f"SELECT {columns} FROM {table} ORDER BY ALL")


def summary(root: Path) -> dict:
    [path] = root.glob("sweeps/*/summary.json")
    return json.loads(path.read_text())


@pytest.mark.timeout(1500)  # two whole sweeps, 2–3 minutes on an idle 2-core machine: more beside other work
def test_a_sweep_on_ray_writes_the_rows_of_the_same_runs_made_one_by_one(cluster, s3, tmp_path, data_dir):
    """4 models × 4 benchmarks, one of them served by its task, judged by one judge whose limit (2 in flight)
    holds across both workers; the Ray sweep writes to S3, the one-by-one sweep to a folder."""
    serve = f"{sys.executable} -m shaberi.testing.server --port {{port}}"
    with LoopbackServer(latency_ms=50) as candidates, LoopbackServer(latency_ms=100) as judge:
        models = {m: candidates.base_url for m in MODELS[:3]} | {MODELS[3]: serve}
        plan = write_plan(tmp_path / "plan.toml", judge.base_url, models, data_dir, runs=2,
                          passes=["format_validation"], limit=1)
        remote = s3.bucket("sweep") + "/evals"
        env = {**cluster["env"], "SHABERI_STATE_DIR": str(tmp_path / "state")}
        on_ray = shaberi("sweep", str(plan), "--results-dir", remote, env=env, timeout=600)
        assert on_ray.returncode == 0, on_ray.stderr
        assert judge.stats()["peak_in_flight"] <= 2
        judge_calls = judge.stats()["calls"]
        here = shaberi("sweep", str(plan), "--local", "--results-dir", str(tmp_path / "here"), timeout=600)
        assert here.returncode == 0, here.stderr
        assert judge.stats()["calls"] == 2 * judge_calls  # the same calls, made once by each sweep
    for table in TABLES:
        ray_rows, here_rows = rows(remote, table), rows(tmp_path / "here", table)
        assert ray_rows == here_rows, (table, sorted(set(ray_rows) ^ set(here_rows))[:2])
    assert query(remote, "SELECT count(DISTINCT run_id), count(*) FROM judgements") == [(8, 8 * 4)]

    done = summary(tmp_path / "here")
    assert done["mode"] == "local" and [m["status"] for m in done["models"]] == ["ok"] * 4
    assert "Sweep wk: 4 models × 2 run(s)" in here.stderr and "m4" in here.stderr
    view = shaberi("view", "--tag", "wk", "--model", "m4", "--results-dir", remote, env=s3.env)
    assert view.returncode == 0 and "Overall" in view.stdout


def test_a_worker_killed_mid_task_is_retried_by_ray_and_resumes_without_duplicates(cluster, tmp_path, data_dir):
    results = tmp_path / "r"
    with LoopbackServer(latency_ms=200) as slow, LoopbackServer() as judge:
        plan = write_plan(tmp_path / "plan.toml", judge.base_url, {"k1": slow.base_url}, data_dir, limit=5,
                          concurrency=2, benchmarks=["rakuda", "elyza"])
        proc = subprocess.Popen([sys.executable, "-m", "shaberi", "sweep", str(plan), "--results-dir", str(results)],
                                env={**os.environ, **cluster["env"]}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        deadline = time.monotonic() + 120
        while slow.stats()["calls"] < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        workers = subprocess.run(["pgrep", "-f", "ray::shaberi k1"], capture_output=True, text=True).stdout.split()
        assert workers, "the task's worker process (its title names the task)"
        for pid in workers:
            os.kill(int(pid), signal.SIGKILL)
        seen = slow.stats()["calls"]
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        total = slow.stats()["calls"]
    assert seen < 10
    assert 10 <= total <= 10 + 2  # every question once, and at most the two calls in flight at the kill again
    assert query(results, "SELECT count(*), count(DISTINCT (benchmark, question_id)) FROM answers") == [(10, 10)]
    assert query(results, "SELECT count(*) FROM judgements") == [(10,)]
    [model] = summary(results)["models"]
    assert model["status"] == "ok" and model["attempts"] == 2


@pytest.mark.parametrize(("body", "says"), [
    ("tag = 'x'\n", "models is missing"),
    ("tag = 'x'\ndata_dir = '.'\n[[models]]\nmodel = 'm'\n", "give base_url"),
    ("tag = 'x'\ndata_dir = '.'\n[[models]]\nmodel = 'm'\nserve = 'vllm serve m'\n", "must contain {port}"),
    ("tag = 'x'\nruns = 0\ndata_dir = '.'\n[[models]]\nmodel = 'm'\nbase_url = 'http://h/v1'\n", "runs = 0"),
    ("tag = 'x'\nbenchmarks = ['nope']\n[[models]]\nmodel = 'm'\nbase_url = 'http://h/v1'\n", "unknown benchmark"),
    ("tag = 'x'\nmodle = 1\n", "unknown key modle"),
    ("tag = [\n", "not valid TOML"),
])
def test_a_bad_plan_is_one_line_and_exit_2_with_nothing_written(tmp_path, body, says):
    plan = tmp_path / "plan.toml"
    plan.write_text(body)
    done = shaberi("sweep", str(plan), "--local", "--results-dir", str(tmp_path / "r"))
    assert done.returncode == 2 and says in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not (tmp_path / "r").exists()


class _InLoop:
    """``ClusterLease``'s calls made on a ``JudgeBudget`` in this event loop instead of through Ray."""

    def __init__(self, budget, key: str, slots: int) -> None:
        self.budget, self.key, self.slots, self.pending = budget, key, slots, set()

    async def acquire(self) -> int:
        return await self.budget.acquire(self.key, self.slots)

    def release(self, slot: int, answer) -> None:
        task = asyncio.get_running_loop().create_task(
            self.budget.release(self.key, slot, tuple(answer) if answer else None))
        self.pending.add(task)
        task.add_done_callback(self.pending.discard)

    def close(self) -> None:
        pass


def test_workers_sharing_a_judge_budget_learn_a_cap_the_plan_does_not_state():
    """Two workers' clients (each allowed 8, as judge_concurrency says) share one budget against a judge that
    refuses beyond 3 in flight: the budget's controller finds the cap from everyone's 429s and holds below it,
    so that few requests are refused, and every call is answered."""
    from shaberi.llm.client import ChatClient, ClientConfig
    from shaberi.llm.control import ControlConfig
    from shaberi.sweep.budget import JudgeBudget

    with LoopbackServer(latency_ms=50, capacity=3) as judge:
        async def main() -> dict:
            budget = JudgeBudget()
            config = ClientConfig(control=ControlConfig(start=8, max=8))
            workers = [ChatClient(judge.base_url, config=config) for _ in range(2)]
            for w in workers:
                w.lease = _InLoop(budget, judge.base_url, 8)
            body = [json.dumps({"model": "j", "messages": [{"role": "user", "content": f"q{w}-{i}"}]}).encode()
                    for w in range(2) for i in range(200)]
            try:
                done = await asyncio.gather(*(workers[i // 200].chat(b) for i, b in enumerate(body)))
            finally:
                for w in workers:
                    await w.aclose()
            assert all(c.content for c in done)
            await asyncio.sleep(0.05)  # the last releases
            return budget.stats()[judge.base_url]

        stats = asyncio.run(main())
        server = judge.stats()
    refused = server["by_status"].get("429", 0)
    assert server["by_status"]["200"] == 400
    assert stats["requests"] == server["calls"] and stats["rate_limited"] == refused  # every answer heard
    assert stats["limit"] <= 3  # learned: the cap, not the plan's 8
    assert refused / server["calls"] < 0.03, server  # a handful of probes, not a 429 every round
