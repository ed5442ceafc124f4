"""Where the project's non-Python files are: the repository's top-level folders in a checkout,
``shaberi/_resources/`` in an installed wheel (pyproject's force-include puts them there)."""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

__all__ = ["resource_dir", "sha256_file"]

_PKG = Path(__file__).resolve().parent


@cache
def resource_dir(name: str) -> Path:
    """``prompts`` (what models are asked), ``sql`` (the views), ``data`` (samples, model families,
    pricing) or ``templates`` (the HTML report's page)."""
    for candidate in (_PKG / "_resources" / name, _PKG.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"shaberi's {name}/ folder is missing from this installation")


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
