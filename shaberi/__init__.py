"""Shaberi: batch evaluation of LLMs on Japanese chat benchmarks, on a Parquet + DuckDB spine.

The data flows one way: a benchmark's dataset (``benchmarks``) becomes questions, ``generate`` answers them,
``judging`` judges the answers (its verdicts read by ``extract``), the ``passes`` add score deltas, and the
views and ``reports`` read the tables. ``pipeline`` runs the stages for ``shaberi run``; ``ensemble`` is the
consensus pipeline on ground-truth benchmarks. Below them, ``llm`` talks to models and ``tables`` declares,
stores, selects and queries the results. ``cli`` is the command line; ``shaberi.open(root)`` (``api``) the Python API
for notebooks; ``registry`` the one registry every extension point (and plugin) goes through.
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
