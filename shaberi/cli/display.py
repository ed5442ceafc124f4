"""Live progress for the terminal: one bar per benchmark (done/total, tokens, requests/s, errors,
current concurrency), then judging and passes, refreshed from the stages' plain counters a few times a
second."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from ..pipeline import Outcome

__all__ = ["live_progress"]


@contextlib.asynccontextmanager
async def live_progress(console: Console) -> AsyncIterator[list]:
    """Yields a one-slot list; put the run's Outcome in it when the run starts."""
    slot: list = []
    bars = Progress(
        TextColumn("{task.description:<9}"),
        BarColumn(bar_width=24),
        MofNCompleteColumn(),
        TextColumn("{task.fields[tokens]:>9,} tok  {task.fields[rps]:>6.1f} req/s  "
                   "{task.fields[errors]} err  conc {task.fields[conc]}"),
        TimeElapsedColumn(),
        console=console,
        refresh_per_second=4,
    )
    stop = asyncio.Event()

    async def refresh() -> None:
        tasks: dict[str, TaskID] = {}
        started: dict[str, float] = {}
        while True:
            if slot:
                if not tasks:
                    bars.start()  # only once the run has started: bad input leaves the terminal untouched
                _update(bars, tasks, started, slot[0])
            if stop.is_set():
                return
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.25)

    task = asyncio.create_task(refresh())
    try:
        yield slot
    finally:
        stop.set()
        await task
        if bars.live.is_started:
            bars.stop()


def _update(bars: Progress, tasks: dict[str, TaskID], started: dict[str, float], outcome: Outcome) -> None:
    now = time.monotonic()
    limit = int(outcome.clients[0].control.limit) if outcome.clients else 0
    rows = [(name, b.total, b.done, b.done - b.cached, b.tokens, b.errors, limit)
            for name, b in outcome.generation.benchmarks.items()]
    j = outcome.judging
    if j.total:
        judge_limit = max(int(c.control.limit) for c in outcome.clients[1:]) if len(outcome.clients) > 1 else limit
        rows.append(("judging", j.total, j.done, j.judged, 0, j.null_scores, judge_limit))
    p = outcome.passes
    if p.total:
        rows.append(("passes", p.total, p.done, p.consulted, 0, p.failed, limit if p.consulted else 0))
    for name, total, done, called, tokens, errors, conc in rows:
        if name not in tasks:
            tasks[name] = bars.add_task(name, total=total, tokens=0, rps=0.0, errors=0, conc=0)
        if called and name not in started:
            started[name] = now
        elapsed = now - started.get(name, now)
        bars.update(tasks[name], total=total, completed=done, tokens=tokens, errors=errors,
                    rps=called / max(elapsed, 0.25), conc=conc)
