"""The sweep's one actor on Ray: the judges' shared slots (``JudgeBudget``) and the models' progress
(``SweepProgress``), in one process. Each actor is a Ray worker process of its own, about 2.5 CPU-seconds to
start (measured); the two roles share nothing but that process."""

from __future__ import annotations

from .progress import SweepProgress
from .slots import LEASE, JudgeBudget

__all__ = ["SweepCoordinator"]


class SweepCoordinator(JudgeBudget, SweepProgress):
    """The actor's class (``ray.remote(SweepCoordinator)``, async): every method of both."""

    def __init__(self, lease: float = LEASE) -> None:
        JudgeBudget.__init__(self, lease)
        SweepProgress.__init__(self)
