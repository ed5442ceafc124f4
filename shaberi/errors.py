"""Every error Shaberi raises on purpose. This module imports nothing of the package: any module may raise these.

    ShaberiError              the CLI prints one line and exits with its ``exit_code``
    ├── LeaseLostError        the run's lease was taken over while this process wrote it (exit 1: the work failed)
    ├── BudgetSpent           the next call's worst case would pass --max-cost: nothing more is sent (exit 1)
    ├── StorageError          what the disk or the object store did (converted where the results are read and
    │   │                     written: ``tables.failures``)
    │   ├── DiskFull          no space left (exit 1: the work ran, what was done is kept)
    │   ├── PartReplaced      a part a run being written replaced after this command listed it (exit 1: read again)
    │   ├── NotWritable       the results cannot be written (read-only, no permission)
    │   ├── ObjectStorageError  the bucket, the credentials or the network of s3:// or gs://
    │   └── UnreadablePart    a corrupt or truncated results part
    ├── UsageError            bad input from the user: exit 2
    │   ├── DataError         a dataset file is missing, empty or lacks the upstream columns
    │   ├── EndpointError     the base URL cannot be reached or rejects the key before any work starts
    │   ├── RunLockedError    another process is writing the same run
    │   └── PluginError       an installed plugin (an entry point of group shaberi) cannot be loaded
    └── LLMError              one chat call failed for good (after retries where retrying makes sense)
        ├── PermanentError    HTTP 400/401/403/404 and other 4xx: never retried
        ├── RateLimitError    HTTP 429 on every attempt for --rate-limit-timeout seconds
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
    "BudgetSpent",
    "ConnectError",
    "DataError",
    "DiskFull",
    "EndpointError",
    "LLMError",
    "LeaseLostError",
    "NotWritable",
    "ObjectStorageError",
    "PartReplaced",
    "PermanentError",
    "PluginError",
    "PromptSetFailed",
    "RateLimitError",
    "RequestTimeout",
    "RunLockedError",
    "ServerError",
    "ShaberiError",
    "StorageError",
    "UnreadablePart",
    "UnreadableResponse",
    "UsageError",
]


class ShaberiError(Exception):
    """Base class."""

    exit_code = 2


class LeaseLostError(ShaberiError):
    """Another writer took over the run's lease (this one stopped renewing it in time): what this process did
    is kept, nothing more is written. Not bad input: the work ran and failed."""

    exit_code = 1


class BudgetSpent(ShaberiError):
    """The spending limit (``--max-cost``) leaves no room for the next call's worst case. Raised before that call
    is sent, never after: the calls already paid are recorded, and the same command resumes with a higher limit.
    ``model`` and ``worst``: the call refused and its worst case in USD, when it had one."""

    exit_code = 1

    def __init__(self, message: str, limit: float, model: str, worst: float | None = None) -> None:
        super().__init__(message)
        self.limit, self.model, self.worst = limit, model, worst


class StorageError(ShaberiError):
    """What the disk, the object store or a results part did, not the code; one line, exit 2 unless stated."""


class DiskFull(StorageError):
    exit_code = 1


class PartReplaced(StorageError):
    exit_code = 1


class NotWritable(StorageError):
    pass


class ObjectStorageError(StorageError):
    pass


class UnreadablePart(StorageError):
    pass


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


class PromptSetFailed(ShaberiError):
    """A clone of the original's process exited, hung or answered with something else after the run started: the
    judge stage fails, what was paid for is kept, and the same command resumes. Not bad input: the work ran."""

    exit_code = 1


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
