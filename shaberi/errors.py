"""Every error Shaberi raises on purpose.

    ShaberiError              the CLI prints one line and exits with its ``exit_code``
    ├── LeaseLostError        the run's lease was taken over while this process wrote it (exit 1: the work failed)
    ├── UsageError            bad input from the user: exit 2
    │   ├── DataError         a dataset file is missing, empty or lacks the upstream columns
    │   ├── EndpointError     the base URL cannot be reached or rejects the key before any work starts
    │   ├── RunLockedError    another process is writing the same run
    │   └── PluginError       an installed plugin (an entry point of shaberi.*) cannot be loaded
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

import errno
import os
import re
import traceback

__all__ = [
    "BadResponseError",
    "ConnectError",
    "DataError",
    "EndpointError",
    "LLMError",
    "LeaseLostError",
    "PermanentError",
    "PluginError",
    "RateLimitError",
    "RequestTimeout",
    "RunLockedError",
    "ServerError",
    "ShaberiError",
    "UnreadableResponse",
    "UsageError",
    "storage_error",
    "unreadable_part",
]


_PART = re.compile(r"""['"]([^'"]+\.parquet)['"]""")
_READ_ONLY = (errno.EACCES, errno.EPERM, errno.EROFS)


def unreadable_part(path: object, reason: str) -> str:
    return (f"cannot read {path}: {reason[:200]}; move that part out of the results (its rows are then missing) "
            "or restore it from a backup")


_OBJECT_STORE = ("Unable to locate credentials", "Could not connect to the endpoint URL", "NoSuchBucket",
                 "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "The specified bucket does not exist")


def storage_error(exc: BaseException) -> tuple[str, int] | None:
    """One line and an exit code for what the disk did, not the code: a results part that cannot be read (a
    corrupt or truncated file: 2), a results directory that cannot be written (2), a full disk (1: the work ran,
    and what was done is kept). None for anything else."""
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        return f"no space left on the device writing {exc.filename or 'the results'}: free some space and run the " \
               "same command again (what was done is kept)", 1
    if isinstance(exc, OSError) and exc.errno in _READ_ONLY:
        return f"cannot write {exc.filename or 'the results'} ({exc.strerror}): make the results directory " \
               "writable or choose another --results-dir", 2
    text = str(exc)
    if _from_object_storage(exc) or any(s in text for s in _OBJECT_STORE):  # DuckDB, pyarrow: inside their errors
        lines = [ln for ln in text.splitlines() if ln.strip()] or [type(exc).__name__]
        line = next((ln for ln in lines if any(s in ln for s in _OBJECT_STORE)), lines[0])
        return (f"object storage: {line.strip()[:300]}; check the bucket, the credentials (AWS_* for s3://, "
                "GOOGLE_APPLICATION_CREDENTIALS for gs://), AWS_ENDPOINT_URL and the network"), 2
    if type(exc).__module__.lstrip("_").startswith(("duckdb", "pyarrow")) and (part := _PART.search(text)):
        from .tables.location import unglob  # DuckDB names a part as it was given it (glob_literal)

        path = unglob(part.group(1)) if "duckdb" in type(exc).__module__ else part.group(1)
        if not _exists(path):  # not broken: a run being written replaced it after it was listed
            return f"{path} was replaced by a run being written while this command read it: run the same command " \
                   "again", 1
        return unreadable_part(path, text.splitlines()[0].replace(part.group(0), "it")), 2
    return None


_STORAGE_PACKAGES = ("botocore", "aiobotocore", "s3fs", "gcsfs", "google")


def _from_object_storage(exc: BaseException) -> bool:
    """Whether the error comes from an object store's client: its type or a cause's is theirs (s3fs raises a
    PermissionError from botocore's 403), or it was raised inside their code (gcsfs offline: aiohttp's error)."""
    seen: BaseException | None = exc
    while seen is not None:
        if type(seen).__module__.startswith(_STORAGE_PACKAGES):
            return True
        seen = seen.__cause__ or seen.__context__
    frames = traceback.extract_tb(exc.__traceback__)
    return any(f"{os.sep}{name}{os.sep}" in frame.filename for frame in frames for name in ("s3fs", "gcsfs"))


def _exists(path: str) -> bool:
    from .tables.location import as_root

    try:
        return bool(as_root(path).exists())
    except Exception:  # cannot tell (no credentials, unreachable): treat it as there
        return True


class ShaberiError(Exception):
    """Base class."""

    exit_code = 2


class LeaseLostError(ShaberiError):
    """Another writer took over the run's lease (this one stopped renewing it in time): what this process did
    is kept, nothing more is written. Not bad input: the work ran and failed."""

    exit_code = 1


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
