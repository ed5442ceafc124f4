"""One model's work in a sweep, and the two ways to run every model's: Ray tasks, or one after another here.

A model's work (``evaluate_model``): start its server if the plan gives a ``serve`` command (on a port derived
from the model's name, the next free one when another process holds it; the server dies with the worker,
``PR_SET_PDEATHSIG``), wait until ``/v1/models`` answers, generate every run, stop the server, then judge and
run the passes (no GPU held meanwhile). A served model's requests are identified by what is served (its name
and ``serve`` command: ``RunRequest.served_as``), not by the port, so that a retry or a rerun on another port
reuses every stored answer. A server that dies mid-generation fails that model's work within seconds (its
process and its port are watched), instead of its requests being retried against a dead port for minutes.
Here, a model with a ``base_url`` runs all stages in one go. Each run is ``pipeline.run``, exactly what
``shaberi run`` does, so the rows are the same whoever runs it; its lock names the sweep's work (``owner``) so
that Ray's retry of a task whose worker died takes the run over at once and resumes it from what was stored.

``run_local``: each model in turn in this process, the judges sharing slots through the machine's file
leases. ``run_on_ray``: per model, a generation task with the resources the plan asks (``num_gpus``,
``num_cpus``), then a judging task that reserves none, so that judging one model overlaps generating the next;
both retried by Ray if their worker dies, the judges sharing slots and the progress reported through the sweep's
one actor (``coordinator.SweepCoordinator``).
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
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any, Literal, NamedTuple

from ..errors import EndpointError
from ..judging.promptsets import load as load_prompts
from ..llm.client import ClientConfig
from ..passes import build
from ..pipeline import Outcome, RunRequest, repeated, run
from ..status import combined
from .plan import ModelSpec, Plan
from .progress import counts

__all__ = ["Served", "evaluate_model", "requests", "run_local", "run_on_ray", "serving"]

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
                      judge_prompts=load_prompts(plan.judge_prompts),
                      judge_lease=judge_lease, owner=f"sweep {sweep or plan.tag}: {spec.model}",
                      served_as=served_identity(spec) if spec.serve else None)
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


class Served(NamedTuple):
    """A model's base URL, and ``check``: raises EndpointError once the server the sweep started is gone (its
    process exited, or its port stopped answering)."""

    url: str
    check: Callable[[], None] | None = None


def served_identity(spec: ModelSpec) -> str:
    """What a served model's requests are identified by: its name and serve command, ``{port}`` unexpanded."""
    return f"served:{spec.model}\n{spec.serve}"


def _tail(log: Any) -> str:
    log.seek(0)
    lines = log.read().decode(errors="replace").strip().splitlines()
    return f": {lines[-1][:300]}" if lines else ""


@contextlib.contextmanager
def serving(spec: ModelSpec) -> Iterator[Served]:
    """The model's base URL: the plan's, or a server started from ``serve`` until it answers, stopped after."""
    if spec.serve is None:
        yield Served(spec.base_url or "")
        return
    port = _port(spec.model)
    command = spec.serve.replace("{port}", str(port))
    # its output to a file, not a pipe nobody reads while it serves: a chatty server would block on a full pipe
    with tempfile.TemporaryFile(prefix="shaberi-serve-") as log:
        proc = subprocess.Popen(shlex.split(command), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=log, start_new_session=True, preexec_fn=_die_with_parent)
        url = f"http://127.0.0.1:{port}/v1"

        refused = [0]  # checks in a row that found nothing listening on the port

        def check() -> None:
            """Raise when the server is gone: its process exited, or nothing listens on its port any more (a
            ``bash -c``/docker wrapper outlives the server it started)."""
            if proc.poll() is not None:
                raise EndpointError(f"the server of {spec.model} ({command}) exited with {proc.returncode} while "
                                    f"answering{_tail(log)}; what it answered is kept: run the sweep again to resume")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                refused[0] = 0
            except ConnectionRefusedError:
                refused[0] += 1
            except OSError:  # a timeout: a busy host, not a dead server
                pass
            if refused[0] >= 4:
                raise EndpointError(f"the server of {spec.model} ({command}) stopped listening on port {port} while "
                                    f"answering{_tail(log)}; what it answered is kept: run the sweep again to resume")

        try:
            deadline = time.monotonic() + spec.ready_timeout
            while True:
                if proc.poll() is not None:
                    raise EndpointError(f"the server of {spec.model} ({command}) exited with {proc.returncode}"
                                        f"{_tail(log)}")
                with contextlib.suppress(OSError), urllib.request.urlopen(f"{url}/models", timeout=2) as resp:
                    if resp.status == 200:
                        break
                if time.monotonic() > deadline:
                    raise EndpointError(f"the server of {spec.model} ({command}) did not answer {url}/models "
                                        f"within {spec.ready_timeout:g} s (ready_timeout)")
                time.sleep(0.5)
            yield Served(url, check)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


async def _run(req: RunRequest, report: Report, check: Callable[[], None] | None = None) -> Outcome:
    """``pipeline.run``, reporting its counters every second while it runs; ``check`` (the served model's
    ``Served.check``) is called twice a second, and what it raises stops the run (cancelled: what was answered
    is kept) and is raised here."""
    live: list[Outcome] = []

    async def tick() -> None:
        while True:
            await asyncio.sleep(1.0)
            if live:
                report("update", req.model, req.tag, counts(live[0]))

    async def watch(check: Callable[[], None]) -> None:
        while True:
            await asyncio.sleep(0.5)
            check()

    work = asyncio.create_task(run(req, on_start=live.append))
    ticker = asyncio.create_task(tick())
    watcher = asyncio.create_task(watch(check)) if check else None
    try:
        if watcher is not None:
            await asyncio.wait({work, watcher}, return_when=asyncio.FIRST_COMPLETED)
            if watcher.done() and not work.done():
                work.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await work
                watcher.result()  # the server's death
            elif watcher.done():  # it died as the run ended: the run's outcome stands
                watcher.exception()
        outcome = await work
    finally:
        ticker.cancel()
        if watcher is not None:
            watcher.cancel()
    report("update", req.model, req.tag, counts(outcome))
    return outcome


Half = Literal["all", "generate", "judge"]


def evaluate_model(plan: Plan, spec: ModelSpec, report: Report, judge_lease: Callable[[str, int], Any] | None = None,
                   sweep: str = "", half: Half = "all") -> dict[str, Any]:
    """One model's runs (module docstring); returns each run's status and stages, as the summary shows them.
    ``half``: ``generate`` serves the model and generates only (when judges or passes follow), ``judge`` runs
    what follows generation, ``all`` both in turn."""
    later = ["judge"] * bool(plan.judges) + ["passes"] * bool(plan.passes)
    if half != "judge":
        report("start", spec.model, os.getpid())
    outcomes: dict[str, Outcome] = {}
    try:
        if half != "judge":
            first = ["generate"] if later and (spec.serve or half == "generate") else None
            with serving(spec) as served:
                for req in requests(plan, spec, served.url, first, judge_lease, sweep):
                    outcomes[req.tag] = asyncio.run(_run(req, report, served.check))
        if half != "generate" and later and (spec.serve or half == "judge"):
            for req in requests(plan, spec, "", later, judge_lease, sweep):
                outcomes[req.tag] = asyncio.run(_run(req, report))
    except Exception as exc:  # one model's failure is that model's, not the sweep's: said in the summary
        report("finish", spec.model, "failed")
        return {"model": spec.model, "status": "failed", "error": f"{type(exc).__name__}: {exc}", "runs": {}}
    result = {"model": spec.model, "status": _status(outcomes), "error": None,
              "runs": {tag: {"run_id": o.info.run_id, "status": o.status,
                             "stages": {k: v.get("status") for k, v in o.stages.items()}}
                       for tag, o in outcomes.items()}}
    if half != "generate" or not later or result["status"] == "failed":
        report("finish", spec.model, result["status"])
    return result


def _status(outcomes: dict[str, Outcome]) -> str:
    """A model's status over its runs, done side by side: the one rule (``status.combined``)."""
    return combined([o.status for o in outcomes.values()])


def _merge(generated: dict[str, Any], judged: dict[str, Any]) -> dict[str, Any]:
    """A model's summary entry from its two halves: the judging half's run statuses, both halves' stages."""
    runs = {}
    for tag, first in generated["runs"].items():
        later = judged["runs"].get(tag, {})
        runs[tag] = first | later | {"stages": first["stages"] | later.get("stages", {})}
    status = judged["status"] if generated["status"] != "failed" else "failed"
    return {"model": generated["model"], "status": status, "error": judged["error"] or generated["error"],
            "runs": runs}


def run_local(plan: Plan, progress: Any) -> list[dict[str, Any]]:
    """Every model in turn, in this process (``progress``: a ``SweepProgress``)."""
    def report(method: str, *args: Any) -> None:
        getattr(progress, method)(*args)

    return [evaluate_model(plan, spec, report) for spec in plan.models]


def run_on_ray(plan: Plan, coordinator: Any, sweep: str, poll: Callable[[], None]) -> list[dict[str, Any]]:
    """Each model's generation as a Ray task with the resources the plan asks (its server started in it); when
    it is done, what follows (judging, passes) as a second task that reserves no CPU: it waits on the judges,
    and the worker slot (the GPU) goes to the next model's generation meanwhile. Both retried by Ray if their
    worker dies. ``coordinator`` is the ``SweepCoordinator`` actor's handle, ``poll`` is called while the tasks
    run (the live table)."""
    import ray

    from .slots import ClusterLease

    def task(plan: Plan, spec: ModelSpec, coordinator: Any, half: Half) -> dict[str, Any]:
        def report(method: str, *args: Any) -> None:
            getattr(coordinator, method).remote(*args)

        return evaluate_model(plan, spec, report, lambda url, slots: ClusterLease(coordinator, url, slots), sweep,
                              half)

    remote = ray.remote(max_retries=3, retry_exceptions=False)(task)
    follows = bool(plan.judges or plan.passes)
    pending = {remote.options(num_cpus=spec.num_cpus, num_gpus=spec.num_gpus, name=f"shaberi {spec.model}").remote(
        plan, spec, coordinator, "generate"): (spec, "generate") for spec in plan.models}
    generated: dict[str, dict[str, Any]] = {}
    done: dict[str, dict[str, Any]] = {}
    while pending:
        ready, _ = ray.wait(list(pending), timeout=1.0)
        for ref in ready:
            spec, half = pending.pop(ref)
            try:
                result = ray.get(ref)
            except ray.exceptions.RayError as exc:  # retries exhausted, or the task cannot run at all
                done[spec.model] = {"model": spec.model, "status": "failed", "runs": {},
                                    "error": str(exc).strip().splitlines()[0][:300]}
                if not isinstance(exc, ray.exceptions.ActorDiedError):  # else the coordinator is gone: poll says so
                    coordinator.finish.remote(spec.model, "failed")  # (a call to it would only log its failure)
                continue
            if half == "generate" and follows and result["status"] != "failed":
                generated[spec.model] = result
                ref = remote.options(num_cpus=0, name=f"shaberi {spec.model} (judge)").remote(
                    plan, spec, coordinator, "judge")
                pending[ref] = (spec, "judge")
            else:
                done[spec.model] = _merge(generated[spec.model], result) if half == "judge" else result
        poll()
    return [done[spec.model] for spec in plan.models]
