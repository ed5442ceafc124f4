"""How many requests one endpoint gets at once, and when the next may go: learned from its answers.

Endpoints do not say their limits (an in-flight cap, requests or tokens a minute, a queue that grows),
so the client learns them the way TCP learns a path's, and listens when the endpoint does say:

``Controller`` (how many in flight)
    - The first window (``start`` requests) goes out spread ``FIRST_WINDOW_GAP`` apart until the first
      success, so a low cap answers 429 before many are sent; while nothing has answered, not even a 429,
      it widens a slot a turn towards the maximum (a cap above the start is found in the first round trip,
      not after doubling); then **slow start**: +1 slot per success
      (doubling each round trip) until the first congestion signal; then **additive increase**: +1 slot
      per round trip.
    - In-flight counts are taken when a request leaves (after any pacing or lease wait), not when it takes its
      slot: what the server saw.
    - A **429** on a request sent after the last decrease with no more in flight than it allows (so at most one
      decrease per round trip, and none for a slot taken before the cut that left after it) sets the
      limit just below the in-flight count the server refused (at most halving what was in use, or before
      any success the window meant to go out; a second 429 there is believed): a cap is found in one or two
      steps, not by halving and regrowing. A 429 again within a few round trips means the
      server limits something in-flight counts do not show (a rate): each repeat cuts deeper (×0.9, ×0.8,
      ×0.6, then ×0.5).
    - The level that failed is the **ceiling**: the limit regrows to just below it and probes it again only
      after holding ``HOLD`` round trips, twice as long each time the same wall answers, so a fixed cap
      costs a handful of 429s a run, not one every few round trips. When the requests sent lately with clearly
      more in flight (``UNDO_MARGIN``) nearly all succeed (refusals under ``STRAY_SHARE``), the 429 was a stray
      one, not a wall: that cut is undone (as TCP undoes a spurious retransmission's), so one early 429 cannot
      leave a run at 2. (Not a bare majority: a busy machine reads its answers late, its in-flight counts run
      ahead of the server's, and a wall then lets through a share of the requests counted above it.)
    - **Random refusals** (a gateway refusing a share of requests whatever the load) are told from a wall by
      the answers around them: a wall refuses nearly every request sent with as many in flight, a gateway a
      few of them. A 429 where most of the last two rounds' answers sent with as many or more in flight
      succeeded (or the first there, with random ones below it), while the last 128 answers or more were
      refused less than a fifth of the time, changes nothing, since lowering the limit would not make them
      rarer, and undoes a cut that one of them, refused higher up, caused.
    - **Latency**, for servers that queue instead of refusing (a local vLLM): each round's median latency
      per output token against a baseline, the lowest median of four consecutive answers lately (a short
      queue-free moment is enough to see it); every four answers are compared too, so growth (and slow
      start) stops at the first sign of a queue, and only a whole round without one resumes it. Above
      ``1.8×`` the limit stops growing; above ``2.5×`` it shrinks in proportion (once per round trip), as
      latency-based limiters (TCP Vegas, Netflix's gradient limiter) do, so the queue stays short instead
      of growing without bound (answers under ``QUEUE_SECONDS`` never count as queued). The margin is for
      the spread of real endpoints' latencies, which would otherwise read as a queue.
    - 5xx, timeouts and bad bodies say nothing about our share of the server: no change.

``Pacing`` (when the next may go)
    Requests and tokens per minute, from ``--rpm``/``--tpm`` and from OpenAI-style
    ``x-ratelimit-limit/remaining/reset-{requests,tokens}`` headers, pace sends evenly before the wall
    instead of after it (tokens through the mean tokens per request seen so far); a remaining budget of
    zero holds every send until the stated time. A ``Retry-After`` on a 429 is that request's wait, unless the
    controller reads the 429 as the endpoint's (refused again soon after a cut, and no wall explains it: a lone
    request refused, or requests sent lately with more in flight passed; a rate or a spent budget), when it holds
    every send too.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import re
import statistics
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from .config import ControlConfig

__all__ = ["ControlConfig", "Controller", "Pacing", "Ticket"]

FIRST_WINDOW_GAP = 0.005  # seconds between the first window's sends: 200/s, 30 requests in 0.15 s
HOLD = 4  # round trips below a ceiling before probing it again (doubles per repeat, up to HOLD_MAX)
HOLD_MAX = 256
UNDO_MARGIN = 2  # a cut is undone on successes sent with this many more in flight than the refused level
REPEAT_CUTS = (0.9, 0.8, 0.6, 0.5)  # a 429 again soon after a decrease: the limit was still too high
STRAY_SHARE = 0.2  # refusals at least this share of recent answers are never random ones (``Controller._stray``)
STRAY_SAMPLE = 128  # ... of at least this many answers: at 10 % random refusals, 20 % of the last 32 answers
# happens at 6 % of 429s, and each such cut shrinks a window of two rounds further; of 128, at 1 in 20,000
HOLD_GROWTH, SHRINK = 1.8, 2.5  # a round's latency over the baseline: stop growing / shrink
GROUP, GROUPS = 4, 240  # the baseline: the lowest median of 4 consecutive answers, of the last 240 such groups
TOKEN_WEIGHT = 16  # latency is compared per (output tokens + this): a long answer is no queue
QUEUE_SECONDS = 0.1  # answers faster than this are no queue worth shrinking for (a CPU-bound client's own
# event loop slows them too)


class Ticket(NamedTuple):
    """One request's send: its number, and how many were in flight with it (itself included)."""

    seq: int
    in_flight: int


@dataclass
class _Seen:
    """Recent answers (``Controller._recent``): all of them and their refusals; of those sent with a given level or
    more in flight, the refused and the succeeded; whether one sent with fewer was refused."""

    answers: int = 0
    refusals: int = 0
    refused: int = 0
    succeeded: int = 0
    below: bool = False


class Controller:
    """The in-flight limit. ``history`` records its changes as (seconds since ``started``, limit, why);
    ``started`` is ``time.monotonic()`` at creation, so a caller can order them against its own events."""

    def __init__(self, config: ControlConfig = ControlConfig()) -> None:
        self.config = config
        self.limit = float(config.start)
        self.held = 0  # slots taken (acquired, not yet answered)
        self.in_flight = 0  # of which sent
        self.ssthresh = float("inf")  # slow start while the limit is below this
        self.started = time.monotonic()
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._sent = 0
        self._answered = False  # a success yet: the first window is spread until then (a 429 keeps it spread)
        self._first_answer = asyncio.Event()
        self._refused = False  # a 429 yet: the first window stops widening
        self._next_first = 0.0
        self._recover = 0  # a 429 on a request sent before this one was already answered by a decrease
        self._last_cut = -float("inf")
        self._repeats = 0
        self._ceiling: int | None = None
        self._floored = False  # the last 429 cut stopped at half the window, above its in-flight count
        self._undo: tuple[float, float, int] | None = None  # (limit, ssthresh) before the last 429 cuts, and
        # the in-flight count the last was sent with
        self._hold = HOLD
        self._hold_until = 0.0
        self.rtt = 0.0  # smoothed latency of successes, seconds
        self._round: list[tuple[float, float]] = []  # (seconds per output token, seconds) of each answer
        self._group: list[tuple[float, float]] = []
        self._floors: deque[float] = deque(maxlen=GROUPS)
        self._peak = 0  # the most in flight since the last decrease
        self._answers: deque[tuple[int, bool]] = deque(maxlen=1024)  # (sent with how many in flight, refused)
        self._crowded = False  # the last round's latency said: do not grow
        self._last_record = -float("inf")
        self.history: list[tuple[float, int, str]] = [(0.0, config.start, "start")]

    # -- sending ---------------------------------------------------------------------------------
    async def acquire(self) -> None:
        """Wait for a free slot (in the first window, for its turn too); ``send`` when the request leaves."""
        if not self._answered and self.config.min < self.config.max:
            # spread the first window: a low cap answers before many are sent (a fixed window has nothing to find:
            # a batch's requests, which answer hours later, all go at once)
            now = time.monotonic()
            at = self._next_first = max(self._next_first, now) + FIRST_WINDOW_GAP
            if at - FIRST_WINDOW_GAP > now:  # until its turn, or the first answer: then the window is known
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._first_answer.wait(), at - FIRST_WINDOW_GAP - now)
            if not (self._answered or self._refused) and self.held >= int(self.limit) < self.config.max:
                # the window is out and nothing has answered, not even a 429 (which comes back at once): the
                # endpoint takes more, so the window widens a slot a turn, towards the maximum, instead of
                # waiting a whole round trip to double (a cap above the start is found in the first round)
                self._set(self.limit + 1, time.monotonic(), "increase")
        if self.held >= int(self.limit):  # the common case is a free slot: no coroutine for it
            await self._slot()
        self.held += 1

    def send(self) -> Ticket:
        """The request leaves now (after any pacing or lease wait): its ticket counts what is on the wire with
        it, what the server sees, not what merely holds a slot."""
        self.in_flight += 1
        self._sent += 1
        self._peak = max(self._peak, self.in_flight)
        return Ticket(self._sent, self.in_flight)

    async def _slot(self) -> None:
        while self.held >= int(self.limit):
            fut = asyncio.get_running_loop().create_future()
            self._waiters.append(fut)
            try:
                await fut
            except asyncio.CancelledError:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(fut)
                raise

    def _release(self, ticket: Ticket | None) -> None:
        self.held -= 1
        if ticket is not None:
            self.in_flight -= 1
        free = int(self.limit) - self.held
        while free > 0 and self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                free -= 1

    # -- outcomes ----------------------------------------------------------------------------------
    def success(self, ticket: Ticket, seconds: float, completion_tokens: int) -> None:
        now = time.monotonic()
        self.rtt = seconds if not self.rtt else 0.9 * self.rtt + 0.1 * seconds
        if not self._answered:  # the first success: the rest of the first window may go at once
            self._answered = True
            self._first_answer.set()
            if self._ceiling is not None:  # a wall found before any round trip was timed: hold below it now
                self._hold_until = max(self._hold_until, now + self._hold * seconds)
        self._observe_latency(now, seconds, seconds / (completion_tokens + TOKEN_WEIGHT))
        if self._crowded and self.limit < self.ssthresh:
            self.ssthresh = self.limit  # queueing began: slow start is over
        if not self._crowded and self.limit < self.config.max:
            step = 1.0 if self.limit < self.ssthresh else 1.0 / self.limit
            if self._ceiling is not None and int(self.limit + step) >= self._ceiling and now < self._hold_until:
                step = 0.0  # just below the wall that answered 429: hold before probing it again
            self._set(min(float(self.config.max), self.limit + step), now, "increase")
        self._answers.append((ticket.in_flight, False))
        if self._undo and ticket.in_flight >= self._undo[2] + UNDO_MARGIN and self._passed(self._undo[2]):
            (limit, self.ssthresh, _), self._undo = self._undo, None  # no wall where the 429 said: undo the cut
            self._forget_cut()
            self._set(max(self.limit, limit), now, "undo")
        if self._ceiling is not None and self.limit >= self._ceiling + 1:
            self._ceiling, self._hold = None, HOLD  # the probe passed: the wall has moved
        self._release(ticket)

    def rate_limited(self, ticket: Ticket) -> bool:
        """A 429. True when it is the endpoint's as a whole (a rate or a spent budget: refused again soon after
        a cut where no wall explains it), so a ``Retry-After`` on it holds every send; else it is about this
        request and our in-flight count, and only this request waits."""
        now = time.monotonic()
        self._answers.append((ticket.in_flight, True))
        self._refused = True
        endpoint = False
        if ticket.seq <= self._recover or ticket.in_flight > self.limit:
            pass  # sent before the last decrease, or with more in flight than it allows: answered by it already
            # (the second: a slot taken before the cut that left after it, as a busy machine's late sends do)
        elif self._stray(ticket.in_flight):  # one of a gateway's random refusals: no news about a wall
            if self._undo and ticket.in_flight <= self._undo[2] - UNDO_MARGIN:
                # refused clearly below where the last cut put a wall: that cut's 429 was one of them too; back to
                # the level it refused, the wall forgotten. (Not one below it: that is as likely the wall itself,
                # read low as our count lags the server's, as in ``_passed``, and its hold must go on doubling.)
                (before, self.ssthresh, level), self._undo = self._undo, None
                self._forget_cut()
                self._set(max(self.limit, min(before, level)), now, "undo")
        else:
            in_use = min(self.limit, self._peak) if self.rtt else self.limit
            limit: float
            if self._floored:  # the last cut doubted its 429; a second wall at this in-flight count is one
                limit, self._floored = ticket.in_flight - 1, False
            elif now - self._last_cut < 3 * max(self.rtt, 0.05) and not (
                    self._ceiling is not None and ticket.in_flight >= self._ceiling and now >= self._hold_until):
                # refused again soon after a cut, and not as a probe of the wall it found once the hold was over
                limit = self.limit * REPEAT_CUTS[min(self._repeats, len(REPEAT_CUTS) - 1)]
                self._repeats += 1
                # the endpoint's as a whole when no wall explains it: a lone request refused, or requests sent
                # lately with more in flight passed (else the cut was not deep enough yet, as when a busy machine
                # reads its answers late and more of a window leaves after a cut)
                endpoint = ticket.in_flight == 1 or self._passed(ticket.in_flight)
            else:
                # at most half of what was in use (before any success: of the window meant to go out), so a
                # 429 after a lull or in the first window's first milliseconds is not read as a cap of 2
                limit, self._repeats = max(ticket.in_flight - 1, in_use / 2), 0
                self._floored = limit > ticket.in_flight - 1
            limit = max(float(self.config.min), min(limit, self.limit - 1))
            # the same wall again (our count may run ahead of the server's, as in ``_passed``): hold twice as long
            repeat = self._ceiling is not None and ticket.in_flight <= self._ceiling + UNDO_MARGIN
            self._hold = min(self._hold * 2, HOLD_MAX) if repeat else HOLD
            self._ceiling = ticket.in_flight
            self._hold_until = now + self._hold * max(self.rtt, 0.05)
            # what undoing it restores: the state before this cut, or before the cut it follows soon after if
            # that one is still unconfirmed (a stray 429 answered by a second cut must not leave the first)
            restore = self._undo[:2] if self._undo and now - self._last_cut < 3 * max(self.rtt, 0.05) else (
                self.limit, self.ssthresh)
            undo = (*restore, ticket.in_flight)
            self._cut(limit, now, "429")
            self._undo = undo
        self._release(ticket)
        return endpoint

    def _recent(self, level: int, least: int = 16) -> _Seen:
        """What the last two rounds' answers (at least ``least`` of them) say about ``level`` in flight."""
        seen = _Seen()
        for n, no in itertools.islice(reversed(self._answers), max(2 * int(self.limit), least)):
            seen.answers += 1
            seen.refusals += no
            if n >= level:
                seen.refused += no
                seen.succeeded += not no
            else:
                seen.below = seen.below or no
        return seen

    def _passed(self, level: int) -> bool:
        """Requests sent lately with clearly more than ``level`` in flight nearly all succeeded: no wall there.
        (Not one success, nor a bare majority, nor at ``level`` itself: our count runs ahead of the server's by
        the answers on their way back or not yet read, more so on a busy machine, so a wall lets a share of the
        requests counted just above it through.)"""
        seen = self._recent(level + UNDO_MARGIN)
        return seen.succeeded > 1 and seen.refused < STRAY_SHARE * (seen.succeeded + seen.refused)

    def _stray(self, level: int) -> bool:
        """Whether a 429 sent with ``level`` in flight is one of a gateway's random refusals rather than news of a
        wall. A wall refuses most requests sent with as many in flight or more; random refusals are a small
        share at every level. So it is stray when refusals are under ``STRAY_SHARE`` of the last ``STRAY_SAMPLE``
        answers (or two rounds', if more: a share of a few dozen is noise, and a run whose limit fell would read
        more of it as a wall the lower it went) and, among the last two rounds' sent with ``level`` or more,
        successes are as many as refusals, or this is the only refusal there while refusals below it show random
        ones around (a second one before any success there is a wall)."""
        share = self._recent(level, STRAY_SAMPLE)
        if share.refusals >= STRAY_SHARE * share.answers:
            return False  # refused too often for chance: a wall or a rate
        seen = self._recent(level)
        return seen.refused <= seen.succeeded or (seen.refused == 1 and seen.below)

    def _forget_cut(self) -> None:
        """The last cut was undone: no wall, and no recent cut for a next 429 to repeat."""
        self._ceiling, self._hold, self._floored = None, HOLD, False
        self._last_cut, self._repeats = -float("inf"), 0

    def snapshot(self) -> list[tuple[float, int, str]]:
        """The history with the limit as it is now (increases are sampled once a second)."""
        return [*self.history, (round(time.monotonic() - self.started, 3), int(self.limit), "now")]

    def other(self, ticket: Ticket | None) -> None:
        """A 5xx, a timeout, a bad body, or nothing sent (cancelled while it waited): nothing learned about our
        share of the server."""
        self._release(ticket)

    # -- latency -------------------------------------------------------------------------------
    def _observe_latency(self, now: float, seconds: float, per_token: float) -> None:
        self._group.append((per_token, seconds))
        if len(self._group) == GROUP:
            median, raw = (statistics.median(x) for x in zip(*self._group, strict=True))
            self._group.clear()
            if self._floors and median > HOLD_GROWTH * min(self._floors) and raw >= QUEUE_SECONDS:
                # a group that queued stops growth (and slow start, as HyStart's delay test) at once; only a
                # whole round's median says the queue is gone
                self.ssthresh, self._crowded = min(self.ssthresh, self.limit), True
                if median > SHRINK * min(self._floors) and now - self._last_cut > max(self.rtt, 0.05):
                    self._cut(max(float(self.config.min), self.limit * max(0.5, HOLD_GROWTH * min(self._floors)
                                                                           / median)), now, "latency")
            self._floors.append(median)
        self._round.append((per_token, seconds))
        if len(self._round) < max(GROUP, min(int(self.limit), 64)) or not self._floors:
            return
        median, raw = (statistics.median(x) for x in zip(*self._round, strict=True))
        self._round.clear()
        ratio = median / min(self._floors) if min(self._floors) > 0 and raw >= QUEUE_SECONDS else 1.0
        self._crowded = ratio > HOLD_GROWTH
        if ratio > SHRINK and now - self._last_cut > max(self.rtt, 0.05):
            self._cut(max(float(self.config.min), self.limit * max(0.5, HOLD_GROWTH / ratio)), now, "latency")

    def _cut(self, limit: float, now: float, why: str) -> None:
        if self.history[-1][1] != int(self.limit):  # the level it was cut from: increases are sampled
            self.history.append((round(now - self.started, 3), int(self.limit), "increase"))
        self._undo = None
        self._last_cut = now
        self._recover = self._sent
        self._peak = self.in_flight
        self.ssthresh = limit
        self._set(limit, now, why)

    def _set(self, limit: float, now: float, why: str) -> None:
        before, self.limit = int(self.limit), limit
        # Growth moves one slot at a time: keep at most one sample a second of it; every cut.
        if int(limit) != before and (why != "increase" or now - self._last_record >= 1.0):
            self._last_record = now
            self.history.append((round(now - self.started, 3), int(limit), why))


# -- pacing ------------------------------------------------------------------------------------
_RESET = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def duration(value: str | None) -> float | None:
    """Seconds in an ``x-ratelimit-reset-*`` value: ``20ms``, ``1s``, ``6m0s``, or a bare number (``inf``
    stays inf: the caller caps every hold)."""
    if not value:
        return None
    with contextlib.suppress(ValueError):
        number = float(value)
        return None if math.isnan(number) else max(0.0, number)
    parts = _RESET.findall(value)
    return sum(float(n) * _UNITS[unit] for n, unit in parts) if parts else None


def _count(value: str | None) -> float | None:
    """A finite, non-negative header count, else None."""
    if value is None:  # the common case, without an exception: this runs for every response
        return None
    with contextlib.suppress(TypeError, ValueError):
        number = float(value)
        return number if math.isfinite(number) and number >= 0 else None
    return None


class Pacing:
    """Requests- and tokens-per-minute budgets, and holds the server asked for, as one schedule of sends.

    Sends are spaced evenly at the budgets' rate (a cell-rate schedule allowing a tenth of a second's
    catch-up), so a budget is met without ever reaching its wall. A tokens budget spaces each request by
    its tokens: the mean of answered requests', or before any answer an estimate from the request's size,
    so the first window is paced too."""

    def __init__(self, rpm: float | None = None, tpm: float | None = None) -> None:
        self.rpm, self.tpm = rpm, tpm  # the user's
        self.server_rpm: float | None = None
        self.server_tpm: float | None = None
        self.tokens_per_request = 0.0  # mean of what answered requests used
        self._answers = 0
        self._next = 0.0  # the schedule's next free time
        self.not_before = 0.0  # no send before this (Retry-After, a spent budget)

    def interval(self, estimate: float = 0.0) -> float:
        """Seconds between sends that the budgets ask for (0: nothing limits them); ``estimate``: this request's
        tokens while no answer has said how many a request takes."""
        tokens = self.tokens_per_request or estimate
        gaps = [60 / r for r in (self.rpm, self.server_rpm) if r]
        gaps += [60 * tokens / t for t in (self.tpm, self.server_tpm) if t]
        return max(gaps, default=0.0)

    async def wait(self, estimate: float = 0.0) -> None:
        while (hold := self.not_before - time.monotonic()) > 0:
            await asyncio.sleep(hold)
        gap = self.interval(estimate)
        if not gap:
            return
        now = time.monotonic()
        at = max(self._next, now - 0.1)
        self._next = at + gap
        if at > now:
            await asyncio.sleep(at - now)

    @property
    def idle(self) -> bool:
        """Nothing to wait for: no budget and no hold (the common case, checked without a coroutine)."""
        return not (self.rpm or self.tpm or self.server_rpm or self.server_tpm) and self.not_before <= time.monotonic()

    def hold(self, seconds: float) -> None:
        self.not_before = max(self.not_before, time.monotonic() + seconds)

    def used(self, tokens: int) -> None:
        """An answered request's tokens: the running mean converts a tokens budget into requests."""
        if tokens:
            self._answers += 1
            self.tokens_per_request += (tokens - self.tokens_per_request) / min(self._answers, 50)

    def observe(self, headers: Mapping[str, str]) -> float | None:
        """Learn the budgets a response's headers state; return how long to hold every send when one of
        them is spent (the caller caps it), else None."""
        if "x-ratelimit-limit-requests" not in headers and "x-ratelimit-remaining-requests" not in headers \
                and "x-ratelimit-limit-tokens" not in headers and "x-ratelimit-remaining-tokens" not in headers:
            return None
        if limit := _count(headers.get("x-ratelimit-limit-requests")):
            self.server_rpm = limit
        if limit := _count(headers.get("x-ratelimit-limit-tokens")):
            self.server_tpm = limit
        holds = []
        for kind, need in (("requests", 1.0), ("tokens", self.tokens_per_request)):
            left = _count(headers.get(f"x-ratelimit-remaining-{kind}"))
            reset = duration(headers.get(f"x-ratelimit-reset-{kind}"))
            if left is not None and reset and left < max(need, 1.0):
                holds.append(reset)  # spent: the next send would only be refused
        return max(holds, default=None)
