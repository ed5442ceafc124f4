"""``--max-cost``: a spending limit that stops a run cleanly, before the call that could pass it.

Before each request is sent (directly or into a provider batch; a retry too), the spend so far, every request in
flight's worst case and this one's worst case together must fit the limit; a request that would fit once those
in flight end waits for them. A request that timed out may have been answered and billed: its worst case counts
as spent. The spend so far is the ``cost`` view's total for the command's runs when it starts (earlier
invocations included: the limit is the run's, not the invocation's), then what each answered call reports. A
call's worst case is its request body's bytes as prompt tokens (a byte-level tokenizer never makes more tokens
than bytes, and the JSON around the messages outweighs a chat template's tokens) plus its completion limit, at the
model's rates (the batch rates through a batch). Prompt tokens a provider's cache served are counted at the full
input rate here: the limit errs toward stopping early, never late.

A call that could not fit even with nothing in flight raises ``BudgetSpent`` before it is sent. The dispatcher
then hands out no more work and lets the calls in flight land (``llm.dispatch``), so everything paid for is
recorded; the stage ends, the run's status is what its tables hold (``partial``), and the same command with a
higher limit carries on from there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import orjson

from ..errors import BudgetSpent, UsageError

__all__ = ["Budget", "Rate", "completion_bound", "free_note", "open_budget", "spent_usd"]

# Where a request body states its completion limit: chat completions' two names and the Responses API's.
_LIMITS = ("max_completion_tokens", "max_tokens", "max_output_tokens")


@dataclass(frozen=True)
class Rate:
    """USD per million tokens."""

    input: float
    output: float


def completion_bound(body: bytes) -> int | None:
    """The completion limit a request body states (None: it states none, and its cost has no bound)."""
    fields = orjson.loads(body)
    return next((v for k in _LIMITS if isinstance(v := fields.get(k), int) and not isinstance(v, bool)), None)


class Budget:
    """The limit, what is spent, and what the calls in flight may still cost; shared by every client of a command.
    ``rates``: by (model, through a batch)."""

    def __init__(self, limit: float, spent: float, rates: dict[tuple[str, bool], Rate]) -> None:
        self.limit, self.spent, self.rates = limit, spent, rates
        self.held = 0.0  # the worst cases of the calls in flight
        self.refused = 0  # calls not sent for want of room
        self.why = ""  # what stopped the first refused call
        self._freed: asyncio.Event | None = None  # set when a call in flight ends
        self.waiting = 0  # calls waiting for the calls in flight to end (shown: the limit holds the run back)
        self.free: dict[str, str] = {}  # unpriced models served on this machine, counted at $0: their base URLs

    async def reserve(self, model: str, body: bytes, batch: bool) -> float:
        """Hold this call's worst case, once it fits beside the calls in flight (they end, and free their holds),
        or raise ``BudgetSpent`` (nothing is sent) when it could not fit even with nothing in flight: so where a
        run stops depends on what it has spent, not on how many calls were in flight."""
        rate = self.rates.get((model, batch))
        if rate is None:  # every model the command asks is priced when it opens the budget
            self._refuse(model, f"{model} has no price")
        assert rate is not None
        bound = completion_bound(body)
        if bound is None:
            self._refuse(model, f"a request to {model} states no completion limit, so its cost has no bound")
        worst = (len(body) * rate.input + (bound or 0) * rate.output) / 1e6
        while True:
            if self.spent + worst > self.limit:
                self._refuse(model, f"${self.spent:.6g} spent + up to ${worst:.6g} for the next call to {model} = "
                             f"${self.spent + worst:.6g}, over the limit", worst)
            if self.spent + self.held + worst <= self.limit:
                self.held += worst
                return worst
            self._freed = self._freed or asyncio.Event()
            self.waiting += 1
            try:
                await self._freed.wait()
            finally:
                self.waiting -= 1

    def settle(self, held: float, model: str, batch: bool, prompt_tokens: int = 0, completion_tokens: int = 0,
               lost: bool = False) -> None:
        """A send ended: its worst case released, and what its answer reported (nothing for a failed send) spent;
        ``lost``: no answer came though one may have been billed (a timeout), so its worst case is spent."""
        self.held -= held
        if lost:
            self.spent += held
        elif prompt_tokens or completion_tokens:
            rate = self.rates[(model, batch)]
            self.spent += (prompt_tokens * rate.input + completion_tokens * rate.output) / 1e6
        if self._freed is not None:  # the calls waiting for room look again
            self._freed.set()
            self._freed = None

    def _refuse(self, model: str, why: str, worst: float | None = None) -> None:
        self.refused += 1
        self.why = self.why or why
        raise BudgetSpent(f"--max-cost ${self.limit:g}: {why}", self.limit, model, worst)


def spent_usd(results_dir: str | Path, pricing: Path | None, run_ids: list[str]) -> float:
    """The ``cost`` view's total for these runs: what ``view`` and the report say they cost."""
    from ..tables.sql import connect, query

    con = connect(results_dir, pricing, run_ids, upto="cost")
    return float(con.execute(query("reports.total_cost")).fetchone()[0])  # type: ignore[index]


def open_budget(limit: float, results_dir: str | Path, pricing: Path | None, run_ids: list[str],
                calls: Iterable[tuple[str, bool, str]]) -> Budget:
    """The budget of a command about to call these (model, through a batch, base URL) for these runs. A model the
    price table lacks is bad input (its calls could not be counted), unless every endpoint serving it is on this
    machine: a local model costs nothing, and is counted at $0 (``Budget.free`` says which, for a note)."""
    from ..tables.sql import connect, query
    from .endpoints import is_loopback

    if not limit > 0 or limit == float("inf"):  # NaN fails this too
        raise UsageError(f"--max-cost {limit:g} is out of range: give a spending limit in USD above 0, e.g. 5")
    con = connect(results_dir, pricing, run_ids, upto="cost")
    run = run_ids[0] if len(run_ids) == 1 else None  # a run priced before with its own --pricing: priced so again
    asked = list(dict.fromkeys(calls))
    rates: dict[tuple[str, bool], Rate] = {}
    for model, batch, _ in asked:
        if (row := con.execute(query("reports.price"), {"run": run, "model": model, "batch": batch}).fetchone()
                ) is not None:
            rates[(model, batch)] = Rate(*row)
    unpriced = {(m, b) for m, b, _ in asked if (m, b) not in rates}
    local = {m: url for m, _, url in asked if is_loopback(url)}
    if remote := sorted({m for m, b, url in asked if (m, b) in unpriced and not is_loopback(url)}):
        where = f"data/pricing.toml nor {pricing}" if pricing else "data/pricing.toml"
        raise UsageError(f"--max-cost counts every call's price, and {', '.join(map(repr, remote))} has none in "
                         f"{where}: give --pricing FILE with an entry [\"{remote[0]}\"] input = …, output = … "
                         "(USD per million tokens)")
    spent = float(con.execute(query("reports.total_cost")).fetchone()[0])  # type: ignore[index]
    budget = Budget(limit, spent, rates | {key: Rate(0.0, 0.0) for key in unpriced})
    budget.free = {m: local[m] for m, _ in sorted(unpriced)}
    return budget


def free_note(model: str, url: str) -> str:
    """What ``Budget.free`` means for one model, said once."""
    return (f"{model} has no price and is served on this machine ({url}): --max-cost counts its calls at $0 "
            "(--pricing FILE prices it)")
