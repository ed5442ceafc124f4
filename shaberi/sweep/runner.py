"""One model's work in a sweep, and the two ways to run every model's: Ray tasks, or one after another here.

A model's work (``evaluate_model``): start its server if the plan gives a ``serve`` command (on a port derived
from the model's name, so that a retry on the same machine asks the same URL and its stored answers are
reused; the server dies with the worker, ``PR_SET_PDEATHSIG``), wait until ``/v1/models`` answers, generate
every run, stop the server, then judge and run the passes (no GPU held meanwhile). A model with a
``base_url`` runs all stages in one go. Each run is ``pipeline.run``, exactly what ``shaberi run`` does, so the
rows are the same whoever runs it; its lock names the sweep's work (``owner``) so that Ray's retry of a task
whose worker died takes the run over at once and resumes it from what was stored.

``run_local``: each model in turn in this process, the judges sharing slots through the machine's file
leases. ``run_on_ray``: one task per model with the resources the plan asks (``num_gpus``, ``num_cpus``), retried
by Ray if its worker dies, the judges sharing slots through a ``JudgeBudget`` actor, progress through a
``SweepProgress`` actor.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import shlex
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from ..errors import EndpointError
from ..llm.client import ClientConfig
from ..passes import build
from ..pipeline import Outcome, RunRequest, repeated, run
from .plan import ModelSpec, Plan
from .progress import counts

__all__ = ["evaluate_model", "requests", "run_local", "run_on_ray", "serving"]

Report = Callable[..., Any]  # report("update", model, tag, stages): a SweepProgress method, local or remote


def requests(plan: Plan, spec: ModelSpec, base_url: str, stages: list[str] | None,
             judge_lease: Callable[[str, int], Any] | None = None, sweep: str = "") -> list[RunRequest]:
    """The model's runs as ``shaberi run`` would make them from the same options."""
    client = ClientConfig()
    if plan.concurrency:
        client = replace(client, control=replace(client.control, max=plan.concurrency,
                                                 start=min(client.control.start, plan.concurrency),
                                                 min=min(client.control.min, plan.concurrency)))
    base = RunRequest(model=spec.model, base_url=base_url, results_dir=plan.results_dir, data_dir=plan.data_dir,
                      benchmarks=plan.benchmarks, tag=plan.tag, api_key_env=spec.api_key_env, limit=plan.limit,
                      stages=stages, client=client, judges=list(plan.judges), judge_api_key_env=plan.judge_api_key_env,
                      judge_concurrency=plan.judge_concurrency,
                      passes=build(",".join(plan.passes)) if plan.passes else [],
                      judge_lease=judge_lease, owner=f"sweep {sweep or plan.tag}: {spec.model}")
    return repeated(base, plan.runs)


def _port(model: str) -> int:
    """A free port, the same for a model on every attempt while it stays free."""
    first = 20000 + int(hashlib.sha256(model.encode()).hexdigest(), 16) % 20000
    for port in range(first, first + 64):
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers bind: past TIME_WAIT
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise EndpointError(f"no free port near {first} to serve {model}")


def _die_with_parent() -> None:
    """In the server's process: be sent SIGTERM when the worker that started it dies (Linux prctl)."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


@contextlib.contextmanager
def serving(spec: ModelSpec) -> Iterator[str]:
    """The model's base URL: the plan's, or a server started from ``serve`` until it answers, stopped after."""
    if spec.serve is None:
        yield spec.base_url or ""
        return
    port = _port(spec.model)
    command = spec.serve.replace("{port}", str(port))
    proc = subprocess.Popen(shlex.split(command), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True, preexec_fn=_die_with_parent)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + spec.ready_timeout
        while True:
            if proc.poll() is not None:
                tail = (proc.stderr.read() if proc.stderr else b"").decode(errors="replace").strip().splitlines()
                raise EndpointError(f"the server of {spec.model} ({command}) exited with {proc.returncode}"
                                    f"{': ' + tail[-1] if tail else ''}")
            with contextlib.suppress(OSError), urllib.request.urlopen(f"{url}/models", timeout=2) as resp:
                if resp.status == 200:
                    break
            if time.monotonic() > deadline:
                raise EndpointError(f"the server of {spec.model} ({command}) did not answer {url}/models within "
                                    f"{spec.ready_timeout:g} s (ready_timeout)")
            time.sleep(0.5)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


async def _run(req: RunRequest, report: Report) -> Outcome:
    """``pipeline.run``, reporting its counters every second while it runs."""
    live: list[Outcome] = []

    async def tick() -> None:
        while True:
            await asyncio.sleep(1.0)
            if live:
                report("update", req.model, req.tag, counts(live[0]))

    ticker = asyncio.create_task(tick())
    try:
        outcome = await run(req, on_start=live.append)
    finally:
        ticker.cancel()
    report("update", req.model, req.tag, counts(outcome))
    return outcome


def evaluate_model(plan: Plan, spec: ModelSpec, report: Report, judge_lease: Callable[[str, int], Any] | None = None,
                   sweep: str = "") -> dict[str, Any]:
    """One model's runs (module docstring); returns each run's status and stages, as the summary shows them."""
    report("start", spec.model, os.getpid())
    outcomes: dict[str, Outcome] = {}
    status = "failed"
    try:
        later = ["judge"] * bool(plan.judges) + ["passes"] * bool(plan.passes)
        first = ["generate"] if spec.serve and later else None
        with serving(spec) as url:
            for req in requests(plan, spec, url, first, judge_lease, sweep):
                outcomes[req.tag] = asyncio.run(_run(req, report))
        if first:
            for req in requests(plan, spec, "", later, judge_lease, sweep):
                outcomes[req.tag] = asyncio.run(_run(req, report))
        statuses = {o.status for o in outcomes.values()}
        status = "ok" if statuses == {"ok"} else "failed" if statuses == {"failed"} else "partial"
    except Exception as exc:  # one model's failure is that model's, not the sweep's: said in the summary
        report("finish", spec.model, "failed")
        return {"model": spec.model, "status": "failed", "error": f"{type(exc).__name__}: {exc}", "runs": {}}
    report("finish", spec.model, status)
    return {"model": spec.model, "status": status, "error": None,
            "runs": {tag: {"run_id": o.info.run_id, "status": o.status,
                           "stages": {k: v.get("status") for k, v in o.stages.items()}}
                     for tag, o in outcomes.items()}}


def run_local(plan: Plan, progress: Any) -> list[dict[str, Any]]:
    """Every model in turn, in this process (``progress``: a ``SweepProgress``)."""
    def report(method: str, *args: Any) -> None:
        getattr(progress, method)(*args)

    return [evaluate_model(plan, spec, report) for spec in plan.models]


def run_on_ray(plan: Plan, progress: Any, budget: Any, sweep: str, poll: Callable[[], None]) -> list[dict[str, Any]]:
    """One Ray task per model (module docstring); ``progress`` and ``budget`` are actor handles, ``poll`` is
    called while the tasks run (the live table)."""
    import ray

    from .budget import ClusterLease

    def task(plan: Plan, spec: ModelSpec, progress: Any, budget: Any) -> dict[str, Any]:
        def report(method: str, *args: Any) -> None:
            getattr(progress, method).remote(*args)

        return evaluate_model(plan, spec, report, lambda url, slots: ClusterLease(budget, url, slots), sweep)

    remote = ray.remote(max_retries=3, retry_exceptions=False)(task)
    pending = {remote.options(num_cpus=spec.num_cpus, num_gpus=spec.num_gpus,
                              name=f"shaberi {spec.model}").remote(plan, spec, progress, budget): spec
               for spec in plan.models}
    done: dict[str, dict[str, Any]] = {}
    while pending:
        ready, _ = ray.wait(list(pending), timeout=1.0)
        for ref in ready:
            spec = pending.pop(ref)
            try:
                done[spec.model] = ray.get(ref)
            except ray.exceptions.RayError as exc:  # retries exhausted, or the task cannot run at all
                done[spec.model] = {"model": spec.model, "status": "failed", "runs": {},
                                    "error": str(exc).strip().splitlines()[0][:300]}
                progress.finish.remote(spec.model, "failed")
        poll()
    return [done[spec.model] for spec in plan.models]
