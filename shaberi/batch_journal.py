"""A stage's provider batches in the tables: journaled when submitted, collected by the next run instead of paid
for twice (``llm.batch_api`` sends them; the ``batches`` table holds them).

A batch is journaled, and its part written, before anything waits on it: a run killed while it runs reads as
``waiting`` (``shown_status``), and the same command collects it for its requests (by their ``custom_id``: what
the model was sent). Once every request of a stage is answered, its batches are marked collected.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from .llm.batch_api import BatchTransport
from .llm.client import ChatClient, Completion
from .tables.rows import Stage
from .tables.rows import batch as batch_row
from .tables.store import Journal, Store

__all__ = ["bind", "collected", "via"]


def bind(clients: Sequence[ChatClient], store: Store, journal: Journal, run_id: str, stage: Stage
         ) -> list[BatchTransport]:
    """The batch transports of these clients, told which requests earlier batches of the run answer and where a
    new batch is journaled."""
    transports = [c.transport for c in dict.fromkeys(clients) if isinstance(c.transport, BatchTransport)]
    if transports:
        known = {cid: b["batch_id"] for b in store.read("batches", run_id).to_pylist()
                 if b["status"] == "submitted" and b["stage"] == stage for cid in b["custom_ids"] or []}
        for transport in transports:
            transport.bind(known, functools.partial(_submitted, journal, run_id, transport.base_url, stage))
    return transports


def collected(journal: Journal, run_id: str, transports: list[BatchTransport], stage: Stage, finished: bool = True
              ) -> None:
    """The stage's dispatchers are done and recorded every answer they got: the batches whose results it read are
    done with, and when every request of the stage is answered (``finished``; not when the spending limit stopped
    it), those submitted earlier that it no longer needed too (their results were recorded before a kill). So a
    later ``--rejudge`` or ``--rerun`` asks afresh instead of taking their old replies."""
    journal.append_many([("batches", batch_row(run_id, b, t.base_url, stage, [], "collected"))
                         for t in transports for b in t.collected(finished)])


def via(reply: Completion) -> dict[str, str | None]:
    """How a reply came, for its row: ``sync``, or ``batch`` with the batch's id."""
    return {"via": "batch" if reply.batch_id else "sync", "batch_id": reply.batch_id}


def _submitted(journal: Journal, run_id: str, endpoint: str, stage: Stage, batch_id: str, custom_ids: list[str]
               ) -> None:
    journal.append("batches", batch_row(run_id, batch_id, endpoint, stage, custom_ids, "submitted"))
    journal.flush()  # a part at once: readers see the run waiting on it even if it is killed
