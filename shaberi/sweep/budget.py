"""Each judge endpoint's request slots, shared by every task of a sweep on Ray: one actor holds them.

On one machine the file leases (``llm/lease.py``) keep all processes together within a judge's maximum; across
machines a ``JudgeBudget`` actor plays that role. A request in flight holds a slot (``ClusterLease.acquire``
awaits the actor, which answers when one is free), and every answer is a signal: a 429 from any worker
lowers the endpoint's shared limit to three quarters of what was in flight (at most once a second), and
each round of successes (as many as the limit) raises it by one again, up to the maximum. Each worker's own
controller still adapts within that. A slot held longer than ``max_hold`` seconds (a worker that died
mid-request never releases it) is reclaimed.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ClusterLease", "JudgeBudget"]


@dataclass
class _Endpoint:
    slots: int
    limit: int
    held: dict[int, float] = field(default_factory=dict)  # slot -> since
    peak: int = 0
    acquired: int = 0
    refused: int = 0
    successes: int = 0
    last_cut: float = 0.0
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)


class JudgeBudget:
    """The actor's class (``ray.remote(JudgeBudget)``); plain, so that it is testable without Ray."""

    def __init__(self, max_hold: float = 900.0) -> None:
        self.max_hold = max_hold
        self.endpoints: dict[str, _Endpoint] = {}

    def _endpoint(self, key: str, slots: int) -> _Endpoint:
        if key not in self.endpoints:
            self.endpoints[key] = _Endpoint(slots, slots)
        return self.endpoints[key]

    async def acquire(self, key: str, slots: int) -> int:
        e = self._endpoint(key, slots)
        async with e.changed:
            while True:
                now = time.monotonic()
                for slot, since in list(e.held.items()):
                    if now - since > self.max_hold:
                        del e.held[slot]
                if len(e.held) < e.limit:
                    slot = next(i for i in range(e.slots) if i not in e.held)
                    e.held[slot] = now
                    e.acquired += 1
                    e.peak = max(e.peak, len(e.held))
                    return slot
                with contextlib.suppress(TimeoutError):  # look again for slots of a dead worker
                    await asyncio.wait_for(e.changed.wait(), timeout=1.0)

    async def release(self, key: str, slot: int) -> None:
        e = self.endpoints[key]
        async with e.changed:
            e.held.pop(slot, None)
            e.changed.notify()

    async def signal(self, key: str, refused: bool) -> None:
        e = self.endpoints.get(key)
        if e is None:
            return
        async with e.changed:
            if refused:
                e.refused += 1
                if time.monotonic() - e.last_cut > 1.0:
                    e.limit = max(1, int(min(e.limit, len(e.held) + 1) * 0.75))
                    e.last_cut, e.successes = time.monotonic(), 0
            else:
                e.successes += 1
                if e.successes >= e.limit and e.limit < e.slots:
                    e.limit, e.successes = e.limit + 1, 0
                    e.changed.notify()

    def stats(self) -> dict[str, dict[str, Any]]:
        """Per endpoint: the maximum, the shared limit now, the peak in flight, requests and 429s."""
        return {key: {"slots": e.slots, "limit": e.limit, "peak_in_flight": e.peak, "requests": e.acquired,
                      "rate_limited": e.refused} for key, e in self.endpoints.items()}


class ClusterLease:
    """A judge client's ``Lease`` (``llm/lease.py``) held by the sweep's ``JudgeBudget`` actor."""

    def __init__(self, actor: Any, key: str, slots: int) -> None:
        self.actor, self.key, self.slots = actor, key, slots

    async def acquire(self) -> int:
        return int(await self.actor.acquire.remote(self.key, self.slots))

    def release(self, slot: int) -> None:
        self.actor.release.remote(self.key, slot)  # not awaited: the actor applies its calls in order

    def signal(self, refused: bool) -> None:
        self.actor.signal.remote(self.key, refused)

    def close(self) -> None:
        pass
