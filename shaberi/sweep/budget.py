"""Each judge endpoint's request slots, shared by every task of a sweep on Ray: one actor holds them.

On one machine the file leases (``llm/lease.py``) keep all processes together within a judge's maximum; across
machines a ``JudgeBudget`` actor plays that role. A request in flight holds a slot (``ClusterLease.acquire``
awaits the actor, which answers when one is free), and its release carries what the endpoint answered. The
number of slots is decided by one ``llm.control.Controller`` per endpoint, the controller a single process
uses (issue 16's: slow start, a cut to just below the in-flight count a 429 was sent with, a hold below that
ceiling before probing it again, latency as a sign of a queue), fed by every worker's requests: the cluster
learns a cap its plan does not state as one process would, instead of each worker hitting it in turn. Each
worker's own controller still adapts within that. A slot held longer than ``max_hold`` seconds (a worker that
died mid-request never releases it) is reclaimed.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from ..llm.control import ControlConfig, Controller, Ticket
from ..llm.lease import Answer

__all__ = ["ClusterLease", "JudgeBudget"]


@dataclass
class _Endpoint:
    slots: int
    control: Controller
    held: dict[int, tuple[Ticket, float]] = field(default_factory=dict)  # slot -> (ticket, since)
    peak: int = 0
    acquired: int = 0
    refused: int = 0


class JudgeBudget:
    """The actor's class (``ray.remote(JudgeBudget)``, async); plain, so that it is testable without Ray."""

    def __init__(self, max_hold: float = 900.0) -> None:
        self.max_hold = max_hold
        self.endpoints: dict[str, _Endpoint] = {}
        self._reaper: asyncio.Task[None] | None = None

    def _endpoint(self, key: str, slots: int) -> _Endpoint:
        if key not in self.endpoints:
            config = ControlConfig(start=min(ControlConfig.start, slots), max=slots)
            self.endpoints[key] = _Endpoint(slots, Controller(config))
        if self._reaper is None:
            self._reaper = asyncio.get_running_loop().create_task(self._reap())
        return self.endpoints[key]

    async def acquire(self, key: str, slots: int) -> int:
        e = self._endpoint(key, slots)
        ticket = await e.control.acquire()
        e.held[ticket.seq] = (ticket, time.monotonic())
        e.acquired += 1
        e.peak = max(e.peak, len(e.held))
        return ticket.seq

    async def release(self, key: str, slot: int, answer: tuple[Any, ...] | None) -> None:
        e = self.endpoints[key]
        held = e.held.pop(slot, None)
        if held is None:  # reclaimed already
            return
        ticket, _ = held
        if answer is None:
            e.control.other(ticket)
        elif (a := Answer(*answer)).refused:
            e.refused += 1
            e.control.rate_limited(ticket)
        else:
            e.control.success(ticket, a.seconds, a.completion_tokens)

    async def _reap(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            now = time.monotonic()
            for e in self.endpoints.values():
                for slot, (ticket, since) in list(e.held.items()):
                    if now - since > self.max_hold:
                        del e.held[slot]
                        e.control.other(ticket)

    def stats(self) -> dict[str, dict[str, Any]]:
        """Per endpoint: the maximum, the shared limit now, the peak in flight, requests and 429s."""
        return {key: {"slots": e.slots, "limit": int(e.control.limit), "peak_in_flight": e.peak,
                      "requests": e.acquired, "rate_limited": e.refused} for key, e in self.endpoints.items()}


class ClusterLease:
    """A judge client's ``Lease`` (``llm/lease.py``) held by the sweep's ``JudgeBudget`` actor."""

    def __init__(self, actor: Any, key: str, slots: int) -> None:
        self.actor, self.key, self.slots = actor, key, slots

    async def acquire(self) -> int:
        return int(await self.actor.acquire.remote(self.key, self.slots))

    def release(self, slot: int, answer: Answer | None) -> None:
        # not awaited: the request is over either way; a plain tuple crosses to the actor
        self.actor.release.remote(self.key, slot, tuple(answer) if answer is not None else None)

    def close(self) -> None:
        pass
