"""Every error Shaberi raises on purpose.

    ShaberiError
    ├── UsageError            bad input from the user: the CLI prints one line and exits 2
    │   ├── DataError         a dataset file is missing, empty or lacks the upstream columns
    │   ├── EndpointError     the base URL cannot be reached or rejects the key before any work starts
    │   ├── RunLockedError    another process is writing the same run
    │   └── PluginError       an installed plugin (an entry point of shaberi.*) cannot be loaded
    └── LLMError              one chat call failed for good (after retries where retrying makes sense)
        ├── PermanentError    HTTP 400/401/403/404 and other 4xx: never retried
        ├── RateLimitError    HTTP 429 on every attempt
        ├── ServerError       HTTP 5xx on every attempt
        ├── RequestTimeout    no answer within the per-request timeout
        ├── ConnectError      the connection failed
        └── BadResponseError  a 2xx whose body is not a chat completion
            └── UnreadableResponse  a completion whose message is not text (a dict, a number): not retried

``LLMError.error_type`` is the short string stored in the ``error_type`` column of answer rows.
"""

from __future__ import annotations

__all__ = [
    "BadResponseError",
    "ConnectError",
    "DataError",
    "EndpointError",
    "LLMError",
    "PermanentError",
    "PluginError",
    "RateLimitError",
    "RequestTimeout",
    "RunLockedError",
    "ServerError",
    "ShaberiError",
    "UnreadableResponse",
    "UsageError",
]


class ShaberiError(Exception):
    """Base class."""


class UsageError(ShaberiError):
    """The user's input is wrong; the message says what and how to fix it."""


class DataError(UsageError):
    pass


class EndpointError(UsageError):
    pass


class RunLockedError(UsageError):
    pass


class PluginError(UsageError):
    pass


class LLMError(ShaberiError):
    error_type = "llm_error"
    retryable = True

    def __init__(self, message: str, *, status: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after
        self.attempts = 0  # set by the client when it gives up


class PermanentError(LLMError):
    retryable = False

    @property
    def error_type(self) -> str:  # type: ignore[override]
        return f"http_{self.status}" if self.status else "permanent"


class RateLimitError(LLMError):
    error_type = "rate_limit"


class ServerError(LLMError):
    error_type = "server_error"


class RequestTimeout(LLMError):
    error_type = "timeout"


class ConnectError(LLMError):
    error_type = "connection"


class BadResponseError(LLMError):
    error_type = "bad_response"


class UnreadableResponse(BadResponseError):
    """A well-formed completion whose message is not text (a dict, a number, a non-text block): asking again
    would be paid for and answered the same way, so it is not retried; the answer becomes an error row."""

    retryable = False
