"""The sweep's live table (model × stage: done/total, tokens, errors) and its summary.

``SweepProgress`` is a plain object on one machine and the class of a Ray actor on a cluster: each model's task
reports its runs' counters to it every second (``counts`` reads them off a run's live ``Outcome``), and the
driver renders ``table`` from its ``snapshot``.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from rich.table import Table

__all__ = ["STAGES", "SweepProgress", "counts", "table"]

STAGES = ("generate", "judge", "passes")


def counts(outcome: Any) -> dict[str, list[int]]:
    """[done, total, tokens, errors] per stage of one run's live ``pipeline.Outcome``."""
    gen = outcome.generation.benchmarks.values()
    j, p = outcome.judging, outcome.passes
    return {"generate": [sum(b.done for b in gen), sum(b.total for b in gen), sum(b.tokens for b in gen),
                         sum(b.errors for b in gen)],
            "judge": [j.done, j.total, j.tokens, j.failed],
            "passes": [p.done, p.total, 0, p.failed]}


class SweepProgress:
    def __init__(self) -> None:
        self.cells: dict[tuple[str, str], dict[str, list[int]]] = {}  # (model, tag) -> stage -> counters
        self.status: dict[str, str] = {}
        self.attempts: Counter[str] = Counter()
        self.pids: dict[str, int] = {}
        self.started: dict[str, float] = {}
        self.ended: dict[str, float] = {}

    def start(self, model: str, pid: int) -> None:
        self.attempts[model] += 1
        self.pids[model] = pid
        self.status[model] = "running"
        self.started.setdefault(model, time.time())

    def update(self, model: str, tag: str, stages: dict[str, list[int]]) -> None:
        """A run's counters now; a stage this invocation does not run (judging after the server stopped) keeps
        what the earlier one reported."""
        cell = self.cells.setdefault((model, tag), {})
        for stage, values in stages.items():
            if values[1] or stage not in cell:
                cell[stage] = values

    def finish(self, model: str, status: str) -> None:
        self.status[model] = status
        self.ended[model] = time.time()

    def snapshot(self) -> dict[str, Any]:
        models: dict[str, dict[str, Any]] = {}
        for (model, _tag), stages in self.cells.items():
            row = models.setdefault(model, {s: [0, 0, 0, 0] for s in STAGES})
            for stage, values in stages.items():
                row[stage] = [a + b for a, b in zip(row[stage], values, strict=True)]
        return {"models": models, "status": dict(self.status), "attempts": dict(self.attempts),
                "pids": dict(self.pids), "seconds": {m: self.ended.get(m, time.time()) - t
                                                     for m, t in self.started.items()}}


def table(snapshot: dict[str, Any], models: list[str], title: str) -> Table:
    out = Table(title=title, title_justify="left")
    out.add_column("Model")
    for stage in STAGES:
        out.add_column(stage, justify="right")
    out.add_column("Tokens", justify="right")
    out.add_column("Errors", justify="right")
    out.add_column("Status")
    for model in models:
        row = snapshot["models"].get(model, {s: [0, 0, 0, 0] for s in STAGES})
        attempts = snapshot["attempts"].get(model, 0)
        status = snapshot["status"].get(model, "waiting") + (f" (attempt {attempts})" if attempts > 1 else "")
        out.add_row(model, *(f"{row[s][0]}/{row[s][1]}" for s in STAGES), f"{sum(row[s][2] for s in STAGES):,}",
                    str(sum(row[s][3] for s in STAGES)), status)
    return out
