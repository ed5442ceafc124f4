"""A run's lock on object storage, where there is no flock: a lease taken by a conditional create.

The lock ``locks/<run_id>.lock`` is a prefix of generations ``<gen>`` (zero-padded), each a small JSON object
``{owner, host, pid, renewed_at}``. To take it, read the newest generation: if its holder renewed it within
``ttl`` seconds (and is not this work's own ``owner``, see below), the run is busy; otherwise create
generation + 1 with If-None-Match: * (``location.put_new``), so of two writers racing for a stale lock
exactly one wins. The holder renews its object every ``ttl / 4`` seconds from a daemon thread, and checks at
each renewal that no newer generation exists; if one does, the lease was taken over (this process stalled
longer than ``ttl``) and ``lost`` turns true, after which the store writes nothing more.

A holder that was a process of this machine and is gone (killed: it could not release) holds nothing.
``owner`` names a piece of work rather than a process (a sweep's model and run): a Ray task retried after its
worker died presents the same owner and takes its own lease over at once, where anyone else would wait for
it to expire. Freshness compares the holder's clock with the reader's: clocks must agree to well within
``ttl`` (default 60 s, ``SHABERI_LOCK_TTL``).
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from typing import Any

import orjson

from .location import Root, put_new, remove

__all__ = ["ObjectLock", "holder"]


def _ttl() -> float:
    return float(os.environ.get("SHABERI_LOCK_TTL", "60"))


def _generations(path: Root) -> list[tuple[int, Root]]:
    try:
        found = list(path.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted((int(p.name), p) for p in found if p.name.isdigit())


def _read(path: Root) -> dict[str, Any] | None:
    try:
        info = orjson.loads(path.read_bytes())
    except (FileNotFoundError, orjson.JSONDecodeError):
        return None
    return info if isinstance(info, dict) else None


def _dead(info: dict[str, Any]) -> bool:
    """Whether the holder was a process of this machine that is gone (killed: it could not release)."""
    if info.get("host") != socket.gethostname() or not isinstance(info.get("pid"), int):
        return False
    try:
        os.kill(info["pid"], 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def holder(path: Root) -> dict[str, Any] | None:
    """The lock's live holder (its newest generation, renewed within the ttl), or None."""
    gens = _generations(path)
    info = _read(gens[-1][1]) if gens else None
    return info if info and time.time() - float(info.get("renewed_at", 0)) < _ttl() else None


class ObjectLock:
    def __init__(self, path: Root, owner: str | None = None) -> None:
        self.path, self.owner, self.ttl = path, owner, _ttl()
        self.gen = 0
        self.lost = False
        self.held_by: dict[str, Any] = {}  # who held it when ``acquire`` failed
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _payload(self) -> bytes:
        return orjson.dumps({"owner": self.owner, "host": socket.gethostname(), "pid": os.getpid(),
                             "renewed_at": time.time()})

    def acquire(self) -> bool:
        gens = _generations(self.path)
        if gens:
            info = _read(gens[-1][1]) or {}
            fresh = time.time() - float(info.get("renewed_at", 0)) < self.ttl
            if fresh and not (self.owner is not None and info.get("owner") == self.owner) and not _dead(info):
                self.held_by = info
                return False
        self.gen = (gens[-1][0] if gens else 0) + 1
        if not put_new(self._mine(), self._payload()):
            return False
        self._thread = threading.Thread(target=self._renew, name="shaberi-lock", daemon=True)
        self._thread.start()
        return True

    def _mine(self) -> Root:
        return self.path / f"{self.gen:012d}"

    def _renew(self) -> None:
        while not self._stop.wait(self.ttl / 4):
            with contextlib.suppress(OSError):  # a failed renewal is retried at the next tick
                gens = _generations(self.path)
                if not gens or gens[-1][0] != self.gen:
                    self.lost = True
                    return
                self._mine().write_bytes(self._payload())

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.lost:
            return
        for gen, path in _generations(self.path):
            if gen <= self.gen:
                remove(path)
