"""``shaberi sweep PLAN.toml``: every model of a plan (``sweep/plan.py``) on a Ray cluster, or here.

Exit codes: 0 every model's runs finished (``ok`` or ``partial``: some calls failed, the view says which); 1 a
model failed (its server never answered or died while answering, every call of a stage failed, or Ray gave up on
its task); 2 a bad plan or option, said in one line before anything is written.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer

from ..errors import UsageError
from ..sweep.plan import Plan, load_plan
from ..sweep.progress import SweepProgress, table
from ..tables.location import Root, as_root, write_bytes
from .common import app

__all__ = ["sweep"]


@app.command()
def sweep(
    plan_file: Annotated[Path, typer.Argument(metavar="PLAN.toml", help="The sweep plan (see shaberi/sweep/plan.py).")],
    results_dir: Annotated[Root | None, typer.Option(
        "--results-dir", envvar="SHABERI_RESULTS_DIR", parser=as_root, metavar="DIR|URL",
        help="Results root (a folder or s3://bucket/prefix) [default: the plan's results_dir].")] = None,
    data_dir: Annotated[Path | None, typer.Option("--data-dir", envvar="SHABERI_DATA_DIR",
                                                  help="Benchmark files [default: the plan's data_dir].")] = None,
    address: Annotated[str | None, typer.Option("--address", envvar="RAY_ADDRESS",
                                                help="The Ray cluster (host:port); default: one already running "
                                                "on this machine, else none.")] = None,
    local: Annotated[bool, typer.Option("--local", help="Run every model here, one after another, without Ray.")]
    = False,
) -> None:
    """Evaluate many models from one plan: one Ray task per model (its server started on the worker, judges'
    limits shared cluster-wide), or one after another on this machine without a cluster."""
    plan = load_plan(plan_file, results_dir, data_dir)
    ray = None if local else _connect(address)
    progress: Any = SweepProgress()
    sweep_id = f"{plan.tag}-{time.strftime('%Y%m%dT%H%M%S')}"
    started = time.time()
    title = f"Sweep {plan.tag}: {len(plan.models)} models × {plan.runs} run(s) " + (
        f"on Ray ({address or 'local cluster'})" if ray else "on this machine")
    models = [m.model for m in plan.models]
    live = _Live(lambda snapshot: table(snapshot, models, title))
    if ray is not None:
        from ..sweep.coordinator import SweepCoordinator
        from ..sweep.runner import run_on_ray

        coordinator = ray.remote(SweepCoordinator).options(num_cpus=0, max_concurrency=1000).remote()
        try:
            results = run_on_ray(plan, coordinator, sweep_id,
                                 lambda: live.show(ray.get(coordinator.snapshot.remote())))
            snapshot, judges = ray.get([coordinator.snapshot.remote(), coordinator.stats.remote()])
        except ray.exceptions.RayActorError as exc:  # the sweep's own coordinator: no model's work can go on
            actor = re.search(r"class_name: (\w+)", str(exc))
            typer.echo(f"error: the sweep's {actor[1] if actor else 'coordinating'} actor died ({type(exc).__name__});"
                       " what was stored is kept: run the same sweep again to resume", err=True)
            raise typer.Exit(1) from None
    else:
        from ..sweep.runner import run_local

        holder: dict[str, Any] = {}
        worker = threading.Thread(target=lambda: holder.update(results=_capture(holder, run_local, plan, progress)))
        worker.start()
        while worker.is_alive():
            live.show(progress.snapshot())
            worker.join(1.0)
        if "error" in holder:
            raise holder["error"]
        results, snapshot, judges = holder["results"], progress.snapshot(), {}
    live.show(snapshot, final=True)
    path = _summary(plan, sweep_id, "ray" if ray else "local", started, results, snapshot, judges)
    typer.echo(f"summary: {path}")
    failed = [r["model"] for r in results if r["status"] == "failed"]
    for r in results:
        if r.get("error"):
            typer.echo(f"{r['model']}: {r['error']}", err=True)
    if failed:
        raise typer.Exit(1)


def _capture(holder: dict[str, Any], fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except BaseException as exc:  # re-raised in the main thread, where the CLI's error handling is
        holder["error"] = exc
        return None


def _connect(address: str | None) -> Any:
    """Ray connected to ``address``, or to a cluster already running here; None (run here) when there is none
    or Ray is not installed, which a line says."""
    try:
        import ray
    except ImportError:
        typer.echo("note: Ray is not installed (pip install 'shaberi[cluster]'): running every model here", err=True)
        return None
    # The driver's C++ core prints its ERROR lines straight to stderr (a dying actor's "failed to push error to
    # driver"), around the one line the CLI gives; they stay in the session's python-core-driver log.
    os.environ.setdefault("RAY_BACKEND_LOG_LEVEL", "fatal")
    try:
        ray.init(address=address or "auto", log_to_driver=False, logging_level=logging.ERROR,
                 runtime_env={"env_vars": {k: v for k, v in os.environ.items() if k.startswith("SHABERI_")}})
    except ConnectionError as exc:
        if address:
            raise UsageError(f"--address {address}: no Ray cluster answers there ({exc})") from None
        typer.echo("note: no Ray cluster runs on this machine (ray start --head, or --address): running every model "
                   "here", err=True)
        return None
    return ray


class _Live:
    """The live table on a terminal (redrawn in place); elsewhere only the final one."""

    def __init__(self, render: Any) -> None:
        from rich.console import Console
        from rich.live import Live

        self.render, self.console = render, Console(stderr=True)
        self.live = Live(console=self.console, auto_refresh=False) if self.console.is_terminal else None
        if self.live:
            self.live.start()

    def show(self, snapshot: dict[str, Any], final: bool = False) -> None:
        if self.live:
            self.live.update(self.render(snapshot), refresh=True)
            if final:
                self.live.stop()
        elif final:
            self.console.print(self.render(snapshot))


def _summary(plan: Plan, sweep_id: str, mode: str, started: float, results: list[dict[str, Any]],
             snapshot: dict[str, Any], judges: dict[str, Any]) -> Root:
    """``<results>/sweeps/<sweep id>/summary.json``: the plan, each model's runs and counters, the judges'
    shared limits."""
    path = plan.results_dir / "sweeps" / sweep_id / "summary.json"
    body = {"sweep": sweep_id, "mode": mode, "started": started, "seconds": time.time() - started,
            "plan": {"tag": plan.tag, "runs": plan.runs, "benchmarks": plan.benchmarks, "limit": plan.limit,
                     "judges": [f"{j.name}@{j.base_url}" for j in plan.judges], "passes": plan.passes,
                     "models": [m.model for m in plan.models]},
            "models": [r | {"attempts": snapshot["attempts"].get(r["model"], 0),
                            "seconds": snapshot["seconds"].get(r["model"]),
                            "stages": snapshot["models"].get(r["model"], {})} for r in results],
            "judges": judges}
    write_bytes(path, orjson.dumps(body, option=orjson.OPT_INDENT_2))
    return path
