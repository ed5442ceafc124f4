"""A client's settings: timeouts, retries, rate limits and the adaptive limit's bounds. Apart from the client, so
that the command line declares its options with these defaults without importing the client (``cli.common``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import UsageError

__all__ = ["MAX_COUNT", "ClientConfig", "ControlConfig"]

MAX_COUNT = 2**31 - 1  # the most of a count given as an option (tokens, retries, answers): what every provider takes


@dataclass(frozen=True)
class ControlConfig:
    """The adaptive limit's bounds: requests in flight at the start, at the least and at the most."""

    start: int = 40
    min: int = 1
    max: int = 60

    def __post_init__(self) -> None:
        if not 1 <= self.min <= self.start <= self.max:
            raise UsageError(f"concurrency bounds must satisfy 1 <= min <= start <= max, got "
                             f"min={self.min} start={self.start} max={self.max}")


@dataclass(frozen=True)
class ClientConfig:
    """How one endpoint is called: per request (timeout, retries, backoff), per endpoint (paced under ``rpm``/``tpm``,
    a 429 retried for ``rate_limit_timeout``, a Retry-After honoured up to ``retry_after_max``), and the limit's
    bounds."""

    timeout: float = 600.0
    max_retries: int = 6
    backoff_base: float = 1.0
    backoff_max: float = 60.0
    rpm: float | None = None
    tpm: float | None = None
    retry_after_max: float = 300.0  # a longer Retry-After is cut to this, and said so (``notes``)
    rate_limit_timeout: float = 900.0  # a request refused (429) for this long fails as rate_limit
    control: ControlConfig = field(default_factory=ControlConfig)
