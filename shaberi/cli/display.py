"""Live progress: one bar per benchmark (done/total, tokens, requests/s, errors, current limit), then judging
and passes, and a line per endpoint (limit, in flight, 429s, retries); refreshed from the stages' plain
counters a few times a second. When stderr is not a terminal (nohup, Slurm, CI) the same figures are
printed as one plain line every ``$SHABERI_PROGRESS_EVERY`` seconds (default 10) instead, and once at the
end. Last, a warning per pass whose model's verdicts could not be read (``unreadable_lines``)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.text import Text

from ..llm.batch_api import BatchTransport
from ..llm.client import ChatClient
from ..passes.runner import PassProgress
from ..pipeline import Outcome

__all__ = ["live_progress", "plain_lines", "unreadable_lines"]

def _plain_every() -> float:
    with contextlib.suppress(ValueError):
        return max(0.1, float(os.environ.get("SHABERI_PROGRESS_EVERY", "10")))
    return 10.0


@dataclass
class _Row:
    name: str
    total: int
    done: int
    calls: int  # of done, the ones this session called for (req/s counts these)
    tokens: int
    errors: int
    limit: int


@dataclass
class _Clock:
    """When each row's calls began and (its bar full) ended: req/s is over that span, frozen at the end."""

    started: dict[str, float] = field(default_factory=dict)
    ended: dict[str, float] = field(default_factory=dict)

    def rate(self, row: _Row, now: float) -> float:
        if row.calls and row.name not in self.started:
            self.started[row.name] = now
        if row.total and row.done >= row.total and row.name not in self.ended:
            self.ended[row.name] = now
        span = self.ended.get(row.name, now) - self.started.get(row.name, now)
        return row.calls / max(span, 0.25)


def _rows(outcome: Outcome) -> list[_Row]:
    clients = outcome.clients
    limit = int(clients[0].control.limit) if clients else 0
    rows = [_Row(name, b.total, b.done, b.done - b.cached, b.tokens, b.errors, limit)
            for name, b in outcome.generation.benchmarks.items()]
    j = outcome.judging
    if j.total:
        judge_limit = max(int(c.control.limit) for c in clients[1:]) if len(clients) > 1 else limit
        rows.append(_Row("judging", j.total, j.done, j.judged, j.tokens, j.null_scores, judge_limit))
    batches = [c.transport for c in clients if isinstance(c.transport, BatchTransport) and c.transport.submitted]
    if batches:  # the provider's progress on the batches under way: it moves while the judging bar waits on them
        done, total = (sum(t.counts()[i] for t in batches) for i in (0, 1))
        rows.append(_Row("batches", total, done, done, 0, 0, 0))
    p = outcome.passes
    if p.total:  # errors: failed calls and unreadable verdicts, as judging's are its null scores
        rows.append(_Row("passes", p.total, p.done, p.consulted, 0, p.failed + p.unreadable.total(),
                         limit if p.consulted else 0))
    return rows


def unreadable_lines(p: PassProgress) -> list[str]:
    """One line per pass whose model gave verdicts nobody could read: the run's end says so, never "0 flagged"."""
    return [f"{name}: {p.asked[name]:,} checked, {n:,} verdicts unreadable (no verdict read; asked again next run)"
            for name, n in p.unreadable.items() if n]


def _notes(client: ChatClient) -> list[str]:
    """What the user should know about an endpoint: the client's notes, and its batches' (lines asked again)."""
    return client.notes + (client.transport.notes if isinstance(client.transport, BatchTransport) else [])


def _endpoints(clients: list[ChatClient]) -> list[str]:
    """A line per endpoint (limit, in flight, requests, 429s, retries; the calls waiting for room under
    --max-cost), and one per endpoint calling through a Batch API on how its batches stand."""
    lines = []
    for client in clients:
        waiting = client.budget.waiting if client.budget else 0
        lines.append(f"{client.label}: limit {int(client.control.limit)}, in flight {client.control.in_flight}, "
                     f"{client.requests:,} requests, {client.rate_limited:,} 429s, {client.retries:,} retries"
                     + (f", {waiting:,} waiting for --max-cost room" if waiting else ""))
        if isinstance(client.transport, BatchTransport) and (batched := client.transport.summary()):
            lines.append(f"{client.label} {batched}")
    return lines


@contextlib.asynccontextmanager
async def live_progress(console: Console, told: set[str] | None = None) -> AsyncIterator[list]:
    """Yields a one-slot list; put the run's Outcome in it when the run starts. ``told``: the endpoint notes
    already printed (a family's runs share one, so a note is printed once per family, not once per run)."""
    slot: list = []
    stop = asyncio.Event()
    show = _Live(console) if console.is_terminal else _Plain(console)

    told = set() if told is None else told

    async def refresh() -> None:
        while True:
            if slot:
                for note in (n for c in slot[0].clients for n in _notes(c) if n not in told):
                    told.add(note)
                    console.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
                show.update(slot[0], final=stop.is_set())
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
        show.close()
        for line in unreadable_lines(slot[0].passes) if slot else []:
            console.print(f"warning: {line}", markup=False, highlight=False, soft_wrap=True)


class _Live:
    """Bars on a terminal, started only once the run has (bad input leaves the terminal untouched)."""

    def __init__(self, console: Console) -> None:
        self.bars = Progress(
            TextColumn("{task.description:<9}"),
            BarColumn(bar_width=24),
            MofNCompleteColumn(),
            TextColumn("{task.fields[tokens]:>9,} tok  {task.fields[rps]:>6.1f} req/s  "
                       "{task.fields[errors]} err  limit {task.fields[conc]}"),
            TimeElapsedColumn(),
        )
        self.endpoints = Text()
        self.live = Live(Group(self.bars, self.endpoints), console=console, refresh_per_second=4)
        self.tasks: dict[str, TaskID] = {}
        self.clock = _Clock()

    def update(self, outcome: Outcome, final: bool) -> None:
        if not self.live.is_started:
            self.live.start()
        now = time.monotonic()
        for row in _rows(outcome):
            if row.name not in self.tasks:
                self.tasks[row.name] = self.bars.add_task(row.name, total=row.total, tokens=0, rps=0.0, errors=0,
                                                          conc=0)
            self.bars.update(self.tasks[row.name], total=row.total, completed=row.done, tokens=row.tokens,
                             errors=row.errors, rps=self.clock.rate(row, now), conc=row.limit)
        self.endpoints.plain = "\n".join(_endpoints(outcome.clients))

    def close(self) -> None:
        if self.live.is_started:
            self.live.stop()


PLAIN_WIDTH = 119  # a log line a reader (and a log viewer) takes in without wrapping


def plain_lines(stamp: str, parts: list[str]) -> list[str]:
    """Parts joined by `` | `` into lines of at most PLAIN_WIDTH characters, each after the stamp; a part too long
    alone (an endpoint's long URL) goes on over indented lines, whole: a log keeps every figure and name."""
    import textwrap

    room = PLAIN_WIDTH - len(stamp)
    lines: list[str] = []
    joinable = False  # whether the last line may take the next part
    for part in parts:
        if len(part) > room:  # at its spaces; a word longer than a line (a URL) cut where it must be
            lines += textwrap.wrap(part, room, subsequent_indent="  ", break_on_hyphens=False)
            joinable = False
        elif joinable and len(lines[-1]) + 3 + len(part) <= room:
            lines[-1] += " | " + part
        else:
            lines.append(part)
            joinable = True
    return [(" " * len(stamp) if line.startswith("  ") else stamp) + line for line in lines]


class _Plain:
    """A line every few seconds, and one at the end: a log file shows progress, not nothing until the end."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.every = _plain_every()
        self.clock = _Clock()
        self.start = time.monotonic()
        self.last = -float("inf")
        self.said: list[str] = []

    def update(self, outcome: Outcome, final: bool) -> None:
        now = time.monotonic()
        rates = {row.name: self.clock.rate(row, now) for row in _rows(outcome)}  # every tick: exact spans
        if not final and now - self.last < self.every:
            return
        self.last = now
        elapsed = int(now - self.start)
        parts = [f"{r.name} {r.done}/{r.total} ({r.tokens:,} tok, {rates[r.name]:.1f} req/s, {r.errors} err)"
                 for r in _rows(outcome)]
        parts += _endpoints(outcome.clients)
        if final and parts == self.said:  # the last update said it already
            return
        self.said = parts
        stamp = f"[{elapsed // 3600:02d}:{elapsed // 60 % 60:02d}:{elapsed % 60:02d}] "
        for line in plain_lines(stamp, parts):
            self.console.print(line, markup=False, highlight=False, soft_wrap=True)

    def close(self) -> None:
        pass
