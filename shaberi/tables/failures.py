"""What the disk, the object store or a results part did, as Shaberi's errors: converted by the type of the
foreign error, where the results are read and written (as httpx's ``map_exceptions`` does at its transport).

    OSError ENOSPC                               DiskFull         (exit 1: the work ran, what was done is kept)
    OSError EACCES, EPERM, EROFS                 NotWritable      (exit 2)
    an object store's client (botocore, s3fs,    ObjectStorageError (exit 2)
      gcsfs, their aiohttp), by its type or a
      cause's, or raised inside their code
    duckdb.IOException naming a part gone         PartReplaced     (exit 1: a writer replaced it after it was listed)
    any other DuckDB or pyarrow error naming a   UnreadablePart   (exit 2: corrupt, truncated, not readable)
      part

DuckDB reads through its own C++ and, on object storage, through fsspec: the foreign error reaches Python as a
DuckDB error, its type lost, with the part's path in its text. The DuckDB type says what happened; the text
only names the part (as DuckDB was given it, glob-escaped, or as it found it: whichever is there), or the
object store's failure DuckDB carried.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import traceback
from collections.abc import Iterator

import duckdb

from ..errors import DiskFull, NotWritable, ObjectStorageError, PartReplaced, StorageError, UnreadablePart
from .location import READER_SCHEME, as_root, unglob

__all__ = ["converted", "storage_errors", "unreadable_part"]

_PART = re.compile(r"""(["'])(.+?\.parquet)\1""")  # quoted as DuckDB quotes it (a path may hold the other quote)
_READ_ONLY = (errno.EACCES, errno.EPERM, errno.EROFS)
_STORAGE_PACKAGES = ("botocore", "aiobotocore", "s3fs", "gcsfs", "google")
# What an object store's failure says inside the DuckDB or pyarrow error that carried it (its type is gone).
_OBJECT_STORE = ("Unable to locate credentials", "Could not connect to the endpoint URL", "NoSuchBucket",
                 "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "The specified bucket does not exist")


def unreadable_part(path: object, reason: str) -> UnreadablePart:
    return UnreadablePart(f"cannot read {path}: {reason[:200]}; move that part out of the results (its rows are "
                          "then missing) or restore it from a backup")


def converted(exc: BaseException) -> StorageError | None:
    """``exc`` as a ``StorageError`` when it is what the disk, the object store or a part did, else None."""
    if isinstance(exc, StorageError):
        return exc
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        return DiskFull(f"no space left on the device writing {exc.filename or 'the results'}: free some space and "
                        "run the same command again (what was done is kept)")
    if isinstance(exc, OSError) and exc.errno in _READ_ONLY:
        return NotWritable(f"cannot write {exc.filename or 'the results'} ({exc.strerror}): make the results "
                           "directory writable or choose another --results-dir")
    import pyarrow as pa  # here: a command that fails pays for it, not every command that reads

    carried = isinstance(exc, duckdb.Error | pa.ArrowException)
    if _from_object_storage(exc) or (carried and any(s in str(exc) for s in _OBJECT_STORE)):
        lines = [ln for ln in str(exc).splitlines() if ln.strip()] or [type(exc).__name__]
        line = next((ln for ln in lines if any(s in ln for s in _OBJECT_STORE)), lines[0])
        return ObjectStorageError(f"object storage: {line.strip()[:300]}; check the bucket, the credentials (AWS_* "
                                  "for s3://, GOOGLE_APPLICATION_CREDENTIALS for gs://), AWS_ENDPOINT_URL and the "
                                  "network")
    if not carried or not (part := _PART.search(text := str(exc))):
        return None
    # a read-only connection's part is named through its filesystem (``READER_SCHEME``): the part's own path
    named, reason = part.group(2).removeprefix(READER_SCHEME), text.splitlines()[0].replace(READER_SCHEME, "")
    # DuckDB names a part as it was given it (glob_literal's escapes: "No files found that match the pattern …")
    # or as it found it (a file it opened): the one that is there is the part; neither, and it was replaced.
    there = next((p for p in dict.fromkeys([named, unglob(named)]) if _exists(p)), None)
    if there is None and isinstance(exc, duckdb.IOException):
        return PartReplaced(f"{unglob(named)} was replaced by a run being written while this command read it: run "
                            "the same command again")
    return unreadable_part(there or named, reason)


@contextlib.contextmanager
def storage_errors() -> Iterator[None]:
    """Raise what the block's disk, object store or parts did as a ``StorageError`` (its cause kept)."""
    try:
        yield
    except Exception as exc:
        if (found := converted(exc)) is None or found is exc:
            raise
        raise found from exc


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
    try:
        return bool(as_root(path).exists())
    except Exception:  # cannot tell (no credentials, unreachable): treat it as there
        return True
