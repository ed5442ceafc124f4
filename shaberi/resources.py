"""Where the project's non-Python files are: the repository's top-level folders in a checkout,
``shaberi/_resources/`` in an installed wheel (pyproject's force-include puts them there); and the plugins' template
folders (``PROMPTS``), searched after shaberi's own ``prompts/``."""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

from .registry import Registry

__all__ = ["PROMPTS", "resource_dir", "sha256_file"]

_PKG = Path(__file__).resolve().parent
# A plugin benchmark's ``prompts=`` folder, registered by ``benchmarks.register`` (or by the plugin itself). Here, below
# both the benchmarks and the templates that read it.
PROMPTS: Registry[Path] = Registry("prompt folder")


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
