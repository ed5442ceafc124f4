"""Run many LLM calls with one worker per concurrency slot, sending before any bookkeeping.

Why: answers tend to arrive in bursts, and every microsecond a worker spends journaling a row or
rendering the next prompt delays the next send of every worker behind it in the burst (measured: about
2.5 % of wall time in a latency-bound run). So workers take items planned ahead of time from ``ready``
and drop outcomes in ``finished``; a callback one loop iteration later records them and plans more. An
outcome waits at most that one iteration for its journal write: like the call itself, it is "in flight"
until then.

A call refused by the spending limit (``BudgetSpent``, raised before anything is sent) stops the handing out of
work: the calls in flight land and are recorded, then ``run`` raises it.

A call waiting out a refusal's ``Retry-After`` (``parked``) holds no slot of the endpoint's, and must not hold a
worker either: a gateway refusing a tenth of requests at random with ``Retry-After: 1`` would otherwise keep
about as many workers asleep as there are slots, and the run would take twice as long. So while a call is parked
its dispatcher starts another worker, and one worker stops once it is back (``Dispatcher._park``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from typing import Generic, TypeVar

from ..errors import BudgetSpent, LLMError

__all__ = ["Dispatcher", "parked"]

T = TypeVar("T")
R = TypeVar("R")

_PARK: ContextVar[Callable[[bool], None] | None] = ContextVar("shaberi_park", default=None)


@contextlib.contextmanager
def parked() -> Iterator[None]:
    """The calling request waits, holding no slot, before it is sent again: the worker running it (if a
    ``Dispatcher``'s) is not counted meanwhile, so another takes up the work."""
    park = _PARK.get()
    if park is None:
        yield
        return
    park(True)
    try:
        yield
    finally:
        park(False)


class Dispatcher(Generic[T, R]):
    def __init__(
        self,
        work: Iterator[T],
        call: Callable[[T], Awaitable[R]],
        record: Callable[[T, R | None, LLMError | None], None],
        workers: int,
    ) -> None:
        self.work, self.call, self.record, self.workers = work, call, record, workers
        self.ready: deque[T] = deque()
        self.finished: list[tuple[T, R | None, LLMError | None]] = []
        self.scheduled = self.closed = False
        self.failure: BaseException | None = None
        self.spent: BudgetSpent | None = None  # the spending limit refused a call: no more are started

    async def run(self) -> None:
        self.active = 0  # workers not parked
        self.tasks: set[asyncio.Task[None]] = set()
        for _ in range(self.workers):
            self._start()
        try:
            while self.tasks:  # a parked call starts a worker meanwhile: wait for those too
                done, _ = await asyncio.wait(self.tasks, return_when=asyncio.FIRST_EXCEPTION)
                self.tasks -= done
                for task in done:
                    task.result()  # a worker's failure (not an LLMError: those are outcomes) ends the run
        finally:
            for t in self.tasks:
                t.cancel()
            self.closed = True
            self._drain()
        if self.failure is not None:
            raise self.failure
        if self.spent is not None:
            raise self.spent

    def _start(self) -> None:
        self.active += 1
        self.tasks.add(asyncio.create_task(self._worker()))

    def _park(self, parking: bool) -> None:
        """A worker's call is parked (True) or back (False): while it is parked, another worker runs."""
        self.active += -1 if parking else 1
        if parking and self.active < self.workers and not self.closed:
            self._start()

    async def _worker(self) -> None:
        _PARK.set(self._park)  # this task's context: the calls it runs find their dispatcher
        try:
            await self._work()
        finally:
            self.active -= 1

    async def _work(self) -> None:
        while self.failure is None and self.spent is None and self.active <= self.workers:
            # (more active than workers: a parked call is back, so this worker stops between calls)
            if not self.ready:
                self._plan_ahead()
                if not self.ready:
                    return
            item = self.ready.popleft()
            try:
                outcome: tuple[T, R | None, LLMError | None] = (item, await self.call(item), None)
            except LLMError as exc:
                outcome = (item, None, exc)
            except BudgetSpent as exc:  # not sent: nothing to record, and nothing more to start
                self.spent = self.spent or exc
                return
            self.finished.append(outcome)  # after the await: _drain swaps the list meanwhile
            if not self.scheduled:
                self.scheduled = True
                asyncio.get_running_loop().call_soon(self._drain)

    def _plan_ahead(self) -> None:
        while self.spent is None and len(self.ready) < self.workers and (item := next(self.work, None)) is not None:
            self.ready.append(item)

    def _drain(self) -> None:
        self.scheduled = False
        finished, self.finished = self.finished, []
        for outcome in finished:  # every finished (paid) call is recorded, even after recording one failed
            try:
                self.record(*outcome)
            except BaseException as exc:  # a failed journal write must stop the run, not vanish in a callback
                self.failure = self.failure or exc
        if not self.closed and self.failure is None:
            try:
                self._plan_ahead()
            except BaseException as exc:
                self.failure = exc
