"""Each judge endpoint's request slots, shared by every task of a sweep on Ray: one actor holds them.

On one machine the file leases (``llm/lease.py``) keep all processes together within a judge's maximum; across
machines a ``JudgeBudget`` actor plays that role. A request in flight holds a slot (``ClusterLease.acquire``
awaits the actor, which answers when one is free), and its release carries what the endpoint answered. The
number of slots is decided by one ``llm.control.Controller`` per endpoint, the controller a single process
uses (issue 16's: slow start, a cut to just below the in-flight count a 429 was sent with, a hold below that
ceiling before probing it again, latency as a sign of a queue), fed by every worker's requests: the cluster
learns a cap its plan does not state as one process would, instead of each worker hitting it in turn. Each
worker's own controller still adapts within that.

A worker killed mid-request never releases its slots, and the kernel does not drop them as it drops a dead
process's file locks. So slots are leased to a holder (one ``ClusterLease``, with an id of its own) that heart-
beats from a thread every ``BEAT`` seconds while it lives; the actor takes back every slot of a holder it has not
heard from for ``lease`` seconds (15), so the rest of the sweep judges again within seconds of a death, while a
live worker keeps a slot through a request of any length. The price: a worker frozen longer than the lease
(SIGSTOP, a partition) is taken for dead, and its request still in flight exceeds the limit until it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from ..llm.control import ControlConfig, Controller, Ticket
from ..llm.lease import Answer

__all__ = ["BEAT", "LEASE", "ClusterLease", "JudgeBudget"]

LEASE = 15.0  # seconds without a heartbeat after which a holder's slots are taken back
BEAT = 3.0  # seconds between a holder's heartbeats: several per lease, so one late beat costs nothing


@dataclass
class _Endpoint:
    slots: int
    control: Controller
    held: dict[int, tuple[Ticket, str]] = field(default_factory=dict)  # slot -> (ticket, holder)
    peak: int = 0
    acquired: int = 0
    refused: int = 0
    reclaimed: int = 0


class JudgeBudget:
    """The actor's class (``ray.remote(JudgeBudget)``, async); plain, so that it is testable without Ray."""

    def __init__(self, lease: float = LEASE) -> None:
        self.lease = lease
        self.endpoints: dict[str, _Endpoint] = {}
        self.heard: dict[str, float] = {}  # holder -> when it last acquired or beat (monotonic)
        self._reaper: asyncio.Task[None] | None = None

    def _endpoint(self, key: str, slots: int) -> _Endpoint:
        if key not in self.endpoints:
            config = ControlConfig(start=min(ControlConfig.start, slots), max=slots)
            self.endpoints[key] = _Endpoint(slots, Controller(config))
        if self._reaper is None:
            self._reaper = asyncio.get_running_loop().create_task(self._reap())
        return self.endpoints[key]

    async def acquire(self, key: str, slots: int, holder: str = "") -> int:
        e = self._endpoint(key, slots)
        await e.control.acquire()
        ticket = e.control.send()  # the holder sends as soon as it has the slot
        e.held[ticket.seq] = (ticket, holder)
        self.heard[holder] = time.monotonic()  # a holder that died while it waited is reaped from now on
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

    async def beat(self, holder: str) -> None:
        """The holder lives: its slots are its own for another ``lease`` seconds."""
        self.heard[holder] = time.monotonic()

    async def forget(self, holder: str) -> None:
        """The holder is done (its client closed): whatever it still holds is free now."""
        self._take_back(holder)
        self.heard.pop(holder, None)

    def _take_back(self, holder: str) -> int:
        taken = 0
        for e in self.endpoints.values():
            for slot, (ticket, who) in list(e.held.items()):
                if who == holder:
                    del e.held[slot]
                    e.control.other(ticket)  # nothing learned about the endpoint
                    e.reclaimed += 1
                    taken += 1
        return taken

    async def _reap(self) -> None:
        while True:
            await asyncio.sleep(min(1.0, self.lease / 4))
            now = time.monotonic()
            for holder, heard in list(self.heard.items()):
                if now - heard > self.lease:
                    self._take_back(holder)
                    del self.heard[holder]

    def stats(self) -> dict[str, dict[str, Any]]:
        """Per endpoint: the maximum, the shared limit now, the peak in flight, requests, 429s, and slots taken
        back from holders that died or closed holding them."""
        return {key: {"slots": e.slots, "limit": int(e.control.limit), "peak_in_flight": e.peak,
                      "requests": e.acquired, "rate_limited": e.refused, "reclaimed": e.reclaimed}
                for key, e in self.endpoints.items()}


class ClusterLease:
    """A judge client's ``Lease`` (``llm/lease.py``) held by the sweep's ``JudgeBudget`` actor, under a holder id
    of its own that a daemon thread heart-beats until ``close``: a thread, so that a busy event loop (a long
    synchronous read of the tables) never looks like a death."""

    def __init__(self, actor: Any, key: str, slots: int, beat: float = BEAT) -> None:
        self.actor, self.key, self.slots = actor, key, slots
        self.holder = uuid.uuid4().hex
        self._stop = threading.Event()
        self._beat = beat
        self._thread: threading.Thread | None = None

    async def acquire(self) -> int:
        if self._thread is None:
            self._thread = threading.Thread(target=self._beats, name=f"judge lease {self.holder[:8]}", daemon=True)
            self._thread.start()
        return int(await self.actor.acquire.remote(self.key, self.slots, self.holder))

    def release(self, slot: int, answer: Answer | None) -> None:
        # not awaited: the request is over either way; a plain tuple crosses to the actor
        self.actor.release.remote(self.key, slot, tuple(answer) if answer is not None else None)

    def _beats(self) -> None:
        while not self._stop.wait(self._beat):
            with contextlib.suppress(Exception):  # the actor gone (the sweep over): nothing to keep
                self.actor.beat.remote(self.holder)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            with contextlib.suppress(Exception):
                self.actor.forget.remote(self.holder)
