"""Files the views write (``report --out``, ``leaderboard --out``): whole or not at all, and bad paths refused
as bad input (one line, exit 2) before anything is written."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from ..errors import UsageError

__all__ = ["write_atomic"]


def write_atomic(path: Path, write: Callable[[Path], object]) -> Path:
    """Write ``path`` through a temporary name beside it (``write(tmp)``), renamed into place: a failure leaves no
    torn file. A symbolic link's target is written (the link stays); a directory, a device or a folder that
    cannot be made is refused."""
    target = Path(os.path.realpath(path))
    if target.exists() and not target.is_file():
        raise UsageError(f"--out {path} is {'a directory' if target.is_dir() else 'not a regular file'}: "
                         "give a file name")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {path}: cannot make its folder {target.parent} ({exc.strerror})") from None
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        os.replace(tmp, target)
    except OSError as exc:
        raise UsageError(f"--out {path}: cannot write it ({exc.strerror})") from None
    finally:
        tmp.unlink(missing_ok=True)
    return path
