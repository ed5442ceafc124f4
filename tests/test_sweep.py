"""shaberi sweep on a real local Ray cluster (``ray start --head`` with two CPUs: two worker processes, stopped
alone at the end, never with ``ray stop``) against loopback servers, and the same plan run here one model after
another (``--local``): the same rows; a worker killed mid-task, retried by Ray, resuming without duplicates; a
judging worker killed while it holds the judge's slots, which come back within seconds; the judge's limit held
across workers; a served model moved to another port reusing its answers, and one that dies failing at once; a
results root on S3 (moto); bad plans."""

from __future__ import annotations

import asyncio
import contextlib
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
from shaberi.testing.ray import CLIENT_ENV, RayCluster, session_processes

from .conftest import query, shaberi, table_rows

VOLATILE = {"created_at", "updated_at", "latency_ms", "concurrency_history", "stages"}  # time, not content
MODELS = ["m1", "m2", "m3", "m4"]



def kill_titled(cluster: dict, title: str) -> list[str]:
    """SIGKILL the processes of the test's cluster whose command line matches ``title`` (Ray titles a worker by
    its task or actor); return their pids."""
    pids = subprocess.run(["pgrep", "-s", str(cluster["session"]), "-f", title], capture_output=True,
                          text=True).stdout.split()
    for pid in pids:
        os.kill(int(pid), signal.SIGKILL)
    return pids


@pytest.fixture(scope="module")
def cluster(s3):
    """A Ray cluster of the test's own (``testing.ray``: stopping it stops no other), its workers seeing the S3
    server's endpoint."""
    with RayCluster(cpus=2, env={**os.environ, **s3.env}) as head:
        yield {"address": head.address, "session": head.session,
               "env": {**s3.env, **CLIENT_ENV, "RAY_ADDRESS": head.address}}


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


def summary(root: Path) -> dict:
    [path] = root.glob("sweeps/*/summary.json")
    return json.loads(path.read_text())


@pytest.mark.timeout(900)  # two whole sweeps
def test_a_sweep_on_ray_writes_the_rows_of_the_same_runs_made_one_by_one(cluster, s3, tmp_path, data_dir):
    """2 models × 2 benchmarks × 2 runs, one model served by its task, judged by one judge whose limit (2 in
    flight) holds across both workers; the Ray sweep writes to S3, the one-by-one sweep to a folder."""
    serve = f"{sys.executable} -m shaberi.testing.server --port {{port}}"
    with LoopbackServer(latency_ms=50) as candidates, LoopbackServer(latency_ms=100) as judge:
        models = {MODELS[0]: candidates.base_url, MODELS[3]: serve}
        plan = write_plan(tmp_path / "plan.toml", judge.base_url, models, data_dir, runs=2,
                          passes=["format_validation"], limit=1, benchmarks=["rakuda", "mt_bench"])
        remote = s3.bucket("sweep") + "/evals"
        env = {**cluster["env"], "SHABERI_STATE_DIR": str(tmp_path / "state")}
        on_ray = shaberi("sweep", str(plan), "--results-dir", remote, env=env, timeout=600)
        assert on_ray.returncode == 0, on_ray.stderr
        assert judge.stats()["peak_in_flight"] <= 2
        judge_calls = judge.stats()["calls"]
        here = shaberi("sweep", str(plan), "--local", "--results-dir", str(tmp_path / "here"), timeout=600)
        assert here.returncode == 0, here.stderr
        assert judge.stats()["calls"] == 2 * judge_calls  # the same calls, made once by each sweep
    ray_rows, here_rows = table_rows(remote, VOLATILE), table_rows(tmp_path / "here", VOLATILE)
    for table in TABLES:
        assert ray_rows[table] == here_rows[table], (table, sorted(set(ray_rows[table]) ^ set(here_rows[table]))[:2])
    assert len({row[0] for row in ray_rows["judgements"]}) == 4 and len(ray_rows["judgements"]) == 4 * 2

    done = summary(tmp_path / "here")
    assert done["mode"] == "local" and [m["status"] for m in done["models"]] == ["ok"] * 2
    assert "Sweep wk: 2 models × 2 run(s)" in here.stderr and "m4" in here.stderr
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
        assert kill_titled(cluster, "ray::shaberi k1"), "the task's worker process (its title names the task)"
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


def test_a_judge_worker_killed_mid_request_gives_the_judge_slots_back_within_seconds(cluster, tmp_path, data_dir):
    """The judging task is killed -9 while it holds both of the judge's slots (judge_concurrency = 2): its
    retry, and any other task, judges again once the budget has not heard from the dead holder for its lease
    (15 s), not after the 900 s a slot could once be held; every judgement is made exactly once."""
    results = tmp_path / "r"
    with LoopbackServer() as candidate, LoopbackServer(latency_ms=1500) as judge:
        plan = write_plan(tmp_path / "plan.toml", judge.base_url, {"k2": candidate.base_url}, data_dir, limit=5,
                          benchmarks=["rakuda", "elyza"])
        proc = subprocess.Popen([sys.executable, "-m", "shaberi", "sweep", str(plan), "--results-dir", str(results)],
                                env={**os.environ, **cluster["env"]}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        try:
            deadline = time.monotonic() + 180
            while judge.stats()["in_flight"] < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert kill_titled(cluster, r"ray::shaberi k2 \(judge\)"), "the judging task's worker (its title names it)"
            killed, seen = time.monotonic(), judge.stats()["calls"]
            while judge.stats()["calls"] == seen and time.monotonic() < killed + 120:
                time.sleep(0.1)
            resumed = time.monotonic() - killed
            print(f"judging resumed {resumed:.1f} s after the kill")
            assert resumed < 120, "judging resumes before 120 s, whereas a dead worker's slots were held for 900 s"
            _, err = proc.communicate(timeout=300)
        finally:
            proc.kill()
            proc.wait()
        total = judge.stats()["calls"]
    assert proc.returncode == 0, err
    assert seen < 10 and 10 <= total <= 10 + 2  # every answer judged once, the two in flight at the kill again
    assert query(results, "SELECT count(*), count(DISTINCT (benchmark, question_id)) FROM judgements") == [(10, 10)]
    [model] = summary(results)["models"]
    assert model["status"] == "ok"
    assert summary(results)["judges"][judge.base_url]["reclaimed"] == 2


def test_the_sweeps_coordinator_actor_killed_is_one_line_and_a_rerun_resumes(cluster, tmp_path, data_dir):
    """The actor that holds the judges' slots (and the progress) dies (kill -9): the sweep stops with one line
    saying so (exit 1), no Ray traceback; the next sweep judges what is left, and every judgement is made once."""
    results = tmp_path / "r"
    with LoopbackServer() as candidate, LoopbackServer(latency_ms=1500) as judge:
        plan = write_plan(tmp_path / "plan.toml", judge.base_url, {"k3": candidate.base_url}, data_dir, limit=5,
                          benchmarks=["rakuda", "elyza"])
        env = {**os.environ, **cluster["env"]}
        proc = subprocess.Popen([sys.executable, "-m", "shaberi", "sweep", str(plan), "--results-dir", str(results)],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 180
            while judge.stats()["in_flight"] < 1 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert kill_titled(cluster, "ray::SweepCoordinator"), "the actor's process (its title names the class)"
            _, err = proc.communicate(timeout=300)
        finally:
            proc.kill()
            proc.wait()
        assert proc.returncode == 1, err
        lines = [line for line in err.splitlines() if line.strip()]
        assert "Traceback" not in err and lines[-1].startswith("error: the sweep's SweepCoordinator actor died"), err
        again = shaberi("sweep", str(plan), "--results-dir", str(results), env=cluster["env"], timeout=600)
        assert again.returncode == 0, again.stderr
    assert query(results, "SELECT count(*), count(DISTINCT (benchmark, question_id)) FROM judgements "
                          "WHERE error IS NULL") == [(10, 10)]


# A served model for the sweep's ``serve``: forwards to a loopback server (whose calls the test counts) and writes
# its pid, so that a test can kill it and only it.
FORWARD = """
import asyncio, os, sys
from aiohttp import ClientSession, web

port, target, pidfile = int(sys.argv[1]), sys.argv[2], sys.argv[3]


async def main():
    session = ClientSession()

    async def forward(request):
        async with session.request(request.method, target + request.path_qs, data=await request.read(),
                                   headers={"Content-Type": "application/json"}) as resp:
            return web.Response(status=resp.status, body=await resp.read(), content_type=resp.content_type)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", forward)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    with open(pidfile, "a") as fh:
        fh.write(f"{os.getpid()}\\n")
    await asyncio.Event().wait()


asyncio.run(main())
"""


def served(tmp_path: Path, backend: LoopbackServer) -> tuple[str, Path]:
    """A ``serve`` command with {port} that serves ``backend``'s answers, and the file its pids go to."""
    script, pids = tmp_path / "forward.py", tmp_path / "served.pids"
    script.write_text(FORWARD)
    return f"{sys.executable} {script} {{port}} {backend.base_url.removesuffix('/v1')} {pids}", pids


def test_a_rerun_whose_served_port_is_taken_pays_for_no_answer_again(cluster, tmp_path, data_dir):
    """The served model's port is derived from its name; another process holds it when the sweep runs again, so
    the model is served on the next port: the same model, the same requests, and every answer is reused."""
    from shaberi.sweep.runner import _port

    results, port = tmp_path / "r", _port("s1")
    with LoopbackServer() as backend, LoopbackServer() as judge:
        serve, _ = served(tmp_path, backend)
        plan = write_plan(tmp_path / "plan.toml", judge.base_url, {"s1": serve}, data_dir, limit=5,
                          benchmarks=["rakuda", "elyza"])
        env = {**cluster["env"], "SHABERI_STATE_DIR": str(tmp_path / "state")}
        first = shaberi("sweep", str(plan), "--results-dir", str(results), env=env, timeout=600)
        assert first.returncode == 0, first.stderr
        assert backend.stats()["calls"] == 10 and judge.stats()["calls"] == 10
        assert query(results, "SELECT base_url FROM runs") == [(f"http://127.0.0.1:{port}/v1",)]
        with socket.socket() as holder:
            holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers bind: past TIME_WAIT
            holder.bind(("127.0.0.1", port))
            holder.listen()
            again = shaberi("sweep", str(plan), "--results-dir", str(results), env=env, timeout=600)
        assert again.returncode == 0, again.stderr
        regenerated, rejudged = backend.stats()["calls"] - 10, judge.stats()["calls"] - 10
    print(f"answers regenerated on the rerun with port {port} held: {regenerated}")
    [(url,)] = query(results, "SELECT base_url FROM runs")
    assert url != f"http://127.0.0.1:{port}/v1"  # served elsewhere this time
    assert (regenerated, rejudged) == (0, 0)
    assert query(results, "SELECT count(*) FROM answers WHERE error IS NULL") == [(10,)]


@pytest.mark.parametrize("wrapped", [False, True], ids=["direct", "behind a shell"])
def test_a_served_model_that_dies_mid_run_fails_that_model_at_once(tmp_path, data_dir, wrapped):
    """The served model's process is killed while it answers: the sweep notices the server is gone and fails the
    model with the reason (exit 1) within seconds, instead of retrying every request against a dead port for
    minutes; what was answered is kept, and the next sweep resumes from it. Behind a shell that outlives it
    (``bash -c 'vllm serve …; sleep'``), the port that no longer answers says so."""
    results = tmp_path / "r"
    with LoopbackServer(latency_ms=300) as backend, LoopbackServer() as judge:
        serve, pids = served(tmp_path, backend)
        if wrapped:
            serve = f"bash -c '{serve}; sleep 300'"
        plan = write_plan(tmp_path / "plan.toml", judge.base_url, {"s2": serve}, data_dir, limit=5,
                          benchmarks=["rakuda", "elyza"], concurrency=1)
        proc = subprocess.Popen([sys.executable, "-m", "shaberi", "sweep", str(plan), "--local", "--results-dir",
                                 str(results)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 120
            while backend.stats()["calls"] < 3 and time.monotonic() < deadline:
                time.sleep(0.05)
            os.kill(int(pids.read_text().split()[0]), signal.SIGKILL)
            killed = time.monotonic()
            _, err = proc.communicate(timeout=150)
            noticed = time.monotonic() - killed
        finally:
            proc.kill()
            proc.wait()
        print(f"a dead served model noticed {noticed:.1f} s after the kill")
        assert noticed < 90, "far below the ~5 minutes of retries against a dead port"
        assert proc.returncode == 1, err
        assert "the server of s2" in err and ("stopped listening" if wrapped else "exited with -9") in err, err
        answered = backend.stats()["calls"]
        assert 3 <= answered < 10
        again = shaberi("sweep", str(plan), "--local", "--results-dir", str(results), timeout=300)
        assert again.returncode == 0, again.stderr
        assert backend.stats()["calls"] <= 10 + 1  # resumed: only what was in flight at the kill is asked again
    assert query(results, "SELECT count(*) FROM answers WHERE error IS NULL") == [(10,)]


MODEL = "[[models]]\nmodel = 'm'\nbase_url = 'http://h/v1'\n"
JUDGE = "[[judges]]\nmodel = 'j'\nbase_url = 'http://h/v1'\n"


@pytest.mark.parametrize(("body", "says"), [
    ("tag = 'x'\n", "models is missing"),
    ("tag = 'x'\ndata_dir = '.'\n[[models]]\nmodel = 'm'\n", "give base_url"),
    ("tag = 'x'\ndata_dir = '.'\n[[models]]\nmodel = 'm'\nserve = 'vllm serve m'\n", "must contain {port}"),
    ("tag = 'x'\nruns = 0\ndata_dir = '.'\n[[models]]\nmodel = 'm'\nbase_url = 'http://h/v1'\n", "runs = 0"),
    ("tag = 'x'\nbenchmarks = ['nope']\n[[models]]\nmodel = 'm'\nbase_url = 'http://h/v1'\n", "unknown benchmark"),
    ("tag = 'x'\nmodle = 1\n", "unknown key modle"),
    ("tag = [\n", "not valid TOML"),
    (f"tag = 'x'\npasses = ['nope']\n{MODEL}", "unknown pass nope"),
    (f"tag = 'x'\npasses = [3]\n{MODEL}", "should list pass names"),
    ("tag = 'x'\n[[models]]\nmodel = 'm'\nbase_url = 'gpu-3:8000'\n", "is not an http(s) URL"),
    (f"tag = 'x'\n[[judges]]\nmodel = 'j'\nbase_url = 'gpt-4.1'\n{MODEL}", "is not an http(s) URL"),
    (f"tag = 'x'\n{JUDGE}{JUDGE}{MODEL}", "judge 'j' is listed twice"),
    ("tag = 'x'\n[[models]]\nmodel = 'm'\nserve = '\"unterminated {port}'\n", "cannot be read as a command"),
    ("tag = 'x'\n[[models]]\nmodel = 'm'\nbase_url = 'http://h:99999/v1'\n", "is not a valid URL"),
    ("tag = 'x'\n[[models]]\nmodel = 'm'\nbase_url = 'http://h /v1'\n", "holds a space"),
    (f"tag = 'x'\ndata_dir = '.'\njudge_prompts = 'no-such-clone'\n{MODEL}", "judge_prompts: --judge-prompts"),
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
    from shaberi.llm.params import Verbatim
    from shaberi.sweep.slots import JudgeBudget

    cuts: list[int] = []
    with LoopbackServer(latency_ms=50, capacity=3) as judge:
        async def main() -> dict:
            budget = JudgeBudget()
            config = ClientConfig(control=ControlConfig(start=8, max=8))
            workers = [ChatClient(judge.base_url, config=config) for _ in range(2)]
            for w in workers:
                w.lease = _InLoop(budget, judge.base_url, 8)
            asks = [[{"role": "user", "content": f"q{w}-{i}"}] for w in range(2) for i in range(200)]
            try:
                done = await asyncio.gather(*(workers[i // 200].chat("j", m, Verbatim()) for i, m in enumerate(asks)))
            finally:
                for w in workers:
                    await w.aclose()
            assert all(c.content for c in done)
            await asyncio.sleep(0.05)  # the last releases
            cuts.extend(limit for _, limit, why in budget.endpoints[judge.base_url].control.history if why == "429")
            return budget.stats()[judge.base_url]

        stats = asyncio.run(main())
        server = judge.stats()
    refused = server["by_status"].get("429", 0)
    assert server["by_status"]["200"] == 400
    assert stats["requests"] == server["calls"] and stats["rate_limited"] == refused  # every answer heard
    assert min(cuts) <= 3  # learned: the cap, not the plan's 8 (the limit at the end may be a probe's, or the tail's)
    # held below it: the first window's 8 against the cap's 3, then a handful of probes of the wall, not a 429 every
    # round (~130)
    assert refused <= 8 - 3 + 10, server


def test_a_judge_budget_takes_back_the_slots_of_a_holder_it_no_longer_hears_from():
    """A holder that stops heart-beating (its worker died) loses every slot once the lease has passed; one that
    keeps beating keeps its slot for as long as it beats, many leases."""
    from shaberi.sweep.slots import JudgeBudget

    async def main() -> tuple[float, dict]:
        budget = JudgeBudget(lease=1.0)
        begun = time.monotonic()
        await budget.acquire("j", 2, "dead")
        await budget.acquire("j", 2, "dead")
        waiting = asyncio.create_task(budget.acquire("j", 2, "other"))
        slot = await asyncio.wait_for(waiting, 30)
        freed = time.monotonic() - begun
        await budget.release("j", slot, None)

        kept = await budget.acquire("k", 1, "live")
        blocked = asyncio.create_task(budget.acquire("k", 1, "other"))
        for _ in range(40):  # 4 s: four leases
            await budget.beat("live")
            await asyncio.sleep(0.1)
        assert not blocked.done(), "a live holder's slot was taken back"
        await budget.release("k", kept, (False, 4.0, 10))
        await asyncio.wait_for(blocked, 5)
        return freed, budget.stats()

    freed, stats = asyncio.run(main())
    assert 1.0 <= freed < 20  # not before the lease, and soon after it
    assert stats["j"]["reclaimed"] == 2 and stats["k"]["reclaimed"] == 0


class _Actor:
    """A ``JudgeBudget`` reached as ``ClusterLease`` reaches the actor (``actor.method.remote(...)``), from the event
    loop or from its heartbeat thread."""

    def __init__(self, budget, loop) -> None:
        self.budget, self.loop = budget, loop

    def __getattr__(self, name: str):
        method, loop = getattr(self.budget, name), self.loop

        class Call:
            @staticmethod
            def remote(*args):
                future = asyncio.run_coroutine_threadsafe(method(*args), loop)
                with contextlib.suppress(RuntimeError):
                    if asyncio.get_running_loop() is loop:
                        return asyncio.wrap_future(future)
                return future

        return Call


def test_a_cluster_lease_keeps_its_slot_through_a_request_longer_than_the_lease_and_frees_it_on_close():
    from shaberi.sweep.slots import ClusterLease, JudgeBudget

    async def main() -> dict:
        budget = JudgeBudget(lease=0.5)
        actor = _Actor(budget, asyncio.get_running_loop())
        long, other = ClusterLease(actor, "j", 1, beat=0.1), ClusterLease(actor, "j", 1, beat=0.1)
        await long.acquire()
        blocked = asyncio.create_task(other.acquire())
        await asyncio.sleep(3)  # six leases, the heartbeat thread beating
        assert not blocked.done(), "the live holder's slot was taken back"
        long.close()  # a client closed while it held a slot (a cancelled request): the slot is free at once
        await asyncio.wait_for(blocked, 5)
        other.close()
        await asyncio.sleep(0.1)
        return budget.stats()["j"]

    stats = asyncio.run(main())
    assert stats["requests"] == 2 and stats["reclaimed"] == 2  # long's slot on close, other's on close


def test_stopping_a_test_cluster_leaves_every_other_ray_cluster_of_the_machine_running(cluster):
    """Another head is started and stopped as the fixture does it: the module's cluster (standing for anyone
    else's) still runs, with every process it had; ``ray stop --force`` would have stopped both."""
    def daemons(head: dict) -> set[int]:  # its GCS and raylet (idle workers come and go)
        found = set()
        for pid in session_processes(head["session"]):
            with contextlib.suppress(OSError):
                if any(d in Path(f"/proc/{pid}/cmdline").read_bytes() for d in (b"gcs_server", b"raylet")):
                    found.add(pid)
        return found

    before = daemons(cluster)
    assert len(before) >= 2
    with RayCluster(cpus=1) as other:
        assert session_processes(other.session)
    assert session_processes(other.session) == [] and not Path(other.temp).exists()
    assert daemons(cluster) == before
    host, port = cluster["address"].split(":")
    with socket.create_connection((host, int(port)), timeout=10):  # its GCS still answers
        pass


def test_a_test_head_starts_though_its_dashboard_agent_is_slower_than_the_raylets_wait(tmp_path):
    """The head's dashboard agent starts 25 s late (a ``sitecustomize`` on its path sleeps), as on a busy machine:
    Ray's raylet waits a hard-coded 15 s for the agent's listen port and aborts; told the port up front
    (``_ray_head``), the head comes up, and its raylet is alive once the agent's 25 s are over."""
    (tmp_path / "sitecustomize.py").write_text(
        "import sys, time\nif any(a.endswith('dashboard/agent.py') for a in sys.argv):\n    time.sleep(25)\n")
    with RayCluster(cpus=1, env={**os.environ, "PYTHONPATH": str(tmp_path)}) as head:
        def raylets() -> list[int]:
            return [pid for pid in session_processes(head.session)
                    if b"raylet/raylet" in Path(f"/proc/{pid}/cmdline").read_bytes()]

        assert raylets()
        time.sleep(30)  # the agent up: the raylet did not abort
        assert raylets()
