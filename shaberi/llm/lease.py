"""Machine-wide request slots per endpoint, so several shaberi processes share one endpoint's capacity.

Two runs judging against the same local judge would otherwise each send up to their own maximum and
together overload it. Slot ``i`` of an endpoint is the file ``<lease dir>/<sha of base URL>/<i>.lock``;
a request in flight holds an exclusive ``flock`` on one slot. The kernel drops the locks of a process
that dies, so a crash never leaks a slot. The lease directory is ``$SHABERI_LEASE_DIR``, else
``<tmp>/shaberi-leases-<uid>``: per machine and user, whatever results root each process writes to.
Every process uses slots ``0..max-1`` of its own configured maximum, so together they never exceed the
largest maximum any of them configured.

``Lease`` is the seam: a sweep on Ray gives its judges a lease held by a cluster-wide actor instead
(``sweep/slots.py``), which also hears what the endpoint answered to each slot's request (``Answer``) so
that all workers share one view of what the endpoint allows.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import os
import tempfile
from pathlib import Path
from typing import NamedTuple, Protocol

__all__ = ["Answer", "EndpointLease", "Lease", "lease_dir"]


class Answer(NamedTuple):
    """What the endpoint said to a slot's request: refused (429), or answered after ``seconds``."""

    refused: bool
    seconds: float = 0.0
    completion_tokens: int = 0


class Lease(Protocol):
    """Request slots of one endpoint shared beyond this client: one is held while a request is in flight."""

    async def acquire(self) -> int: ...
    def release(self, slot: int, answer: Answer | None) -> None:
        """The request is over; ``answer`` None: nothing learned about the endpoint's limits (5xx, timeout)."""
    def close(self) -> None: ...


def lease_dir() -> Path:
    configured = os.environ.get("SHABERI_LEASE_DIR")
    return Path(configured) if configured else Path(tempfile.gettempdir()) / f"shaberi-leases-{os.getuid()}"


class EndpointLease:
    def __init__(self, base_url: str, slots: int, root: Path | None = None) -> None:
        self.dir = (root or lease_dir()) / hashlib.sha256(base_url.encode()).hexdigest()[:16]
        self.dir.mkdir(parents=True, exist_ok=True)
        self.slots = slots
        self._fds: dict[int, int] = {}
        self._held: set[int] = set()
        self._next = 0

    async def acquire(self) -> int:
        """A free slot's number; waits (polling) while every slot is held by some process."""
        delay = 0.002
        while True:
            for _ in range(self.slots):
                slot, self._next = self._next, (self._next + 1) % self.slots
                if slot not in self._held and self._try(slot):
                    self._held.add(slot)
                    return slot
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.05)

    def release(self, slot: int, answer: Answer | None = None) -> None:
        """``answer`` is not needed: each process's own controller learns the endpoint's limits on one machine."""
        self._held.discard(slot)
        fcntl.flock(self._fds[slot], fcntl.LOCK_UN)

    def _try(self, slot: int) -> bool:
        if slot not in self._fds:
            self._fds[slot] = os.open(self.dir / f"{slot}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fds[slot], fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
        self._held.clear()
