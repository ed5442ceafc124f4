"""Shaberi: batch evaluation of LLMs on Japanese chat benchmarks, on a Parquet + DuckDB spine.

Stages, one module each: ``generate`` (answers), ``judge`` (judgements, read by ``extract``), the
``passes`` (score deltas); ``pipeline`` runs them for ``shaberi run``. Tables are declared in ``schema``,
stored by ``store``, queried through ``sql``; every LLM call goes through ``client``, every endpoint is parsed
by ``endpoints``. ``cli`` is the command line; ``shaberi.open(root)`` (``api``) is the Python API for notebooks.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["__version__", "open"]


def __getattr__(name: str) -> Any:
    if name == "open":  # imported on first use: the command line does not pay for DuckDB and polars here
        from .api import open

        return open
    raise AttributeError(f"module 'shaberi' has no attribute {name!r}")
