"""A pairwise judge's position bias: of its verdicts that chose (no tie), the share that chose the answer shown first.
Without bias it is half; its 95 % interval is Wilson's (statsmodels), its p-value a two-sided binomial test against
a half (scipy). The counts are the ``pairwise_position`` view's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..tables.sql import query

if TYPE_CHECKING:
    import duckdb

    from .stage import Scope

__all__ = ["Position", "position"]


@dataclass(frozen=True)
class Position:
    """Where the judge's verdicts went: shown first, second, or a tie; ``share``: first of those that chose."""

    first: int
    second: int
    ties: int
    share: float | None
    low: float | None
    high: float | None
    p_value: float | None


def position(con: duckdb.DuckDBPyConnection, scope: Scope) -> Position:
    """Where the judge's verdicts on a job's pairs went (``pairwise_position``), the share shown first with its
    Wilson interval and a binomial test against a half."""
    from scipy import stats
    from statsmodels.stats.proportion import proportion_confint

    counted = con.execute(query("pairwise.position"), scope.params()).fetchone()
    first, second, ties = counted or (0, 0, 0)
    chose = first + second
    if not chose:
        return Position(first, second, ties, None, None, None, None)
    low, high = proportion_confint(first, chose, alpha=0.05, method="wilson")
    return Position(first, second, ties, first / chose, float(low), float(high),
                    float(stats.binomtest(first, chose, 0.5).pvalue))
