"""Cost against accuracy: which systems are on the Pareto frontier of Pass@1 against mean cost per
attempt, at each n (as the HAL leaderboard draws it).

A system is on the frontier when no other placed system is at most as costly and at least as
accurate, one of the two strictly: the cheapest way to reach its Pass@1. Two systems at the very
same point do not dominate each other, so both are on the frontier. A system whose cost is not
fully known at an n (no known cost, or some counted attempts of unknown cost) is not placed: a
missing cost is not a zero cost, and the cheap-looking mean of the known costs would be a guess.
Such systems are listed apart and are never on the frontier.

Plain functions over plain values; the rows are anything with `slug` and `by_n` (SystemRow).
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

# Means are compared rounded to this many decimals, so float noise in two equal means (a third
# summed in different orders) never decides that one system dominates another.
DECIMALS = 9


@dataclass(frozen=True)
class CostPoint:
    """One system at one n: its slug, mean cost per attempt (USD) and Pass@1."""

    key: str
    cost: float
    pass1: float


def dominates(a: CostPoint, b: CostPoint) -> bool:
    """Whether `a` is at most as costly and at least as accurate as `b`, one of them strictly."""
    a_cost, b_cost = round(a.cost, DECIMALS), round(b.cost, DECIMALS)
    a_pass1, b_pass1 = round(a.pass1, DECIMALS), round(b.pass1, DECIMALS)
    return a_cost <= b_cost and a_pass1 >= b_pass1 and (a_cost < b_cost or a_pass1 > b_pass1)


def pareto_frontier(points: Iterable[CostPoint]) -> list[CostPoint]:
    """The points no other point dominates, cheapest first (then by key, so the order is stable).

    Quadratic, as the definition reads: a leaderboard has tens of systems per n, not thousands.
    """
    points = list(points)
    frontier = [point for point in points if not any(dominates(other, point) for other in points)]
    return sorted(frontier, key=lambda point: (point.cost, point.pass1, point.key))


def frontier_step_line(frontier: Sequence[CostPoint]) -> tuple[list[float], list[float]]:
    """The frontier's corners as (costs, pass1s), cheapest first, for a step line drawn across
    then up (Plotly's line shape "hv"): at any cost, the best Pass@1 reachable for that much."""
    ordered = sorted(frontier, key=lambda point: (point.cost, point.pass1))
    return [point.cost for point in ordered], [point.pass1 for point in ordered]


def cost_known(metrics: Any) -> bool:
    """Whether a system's mean cost at one n (an NMetrics) counts every counted attempt."""
    return metrics.cost_mean is not None and not metrics.cost_unknown


@dataclass(frozen=True)
class CostAccuracy:
    """Cost against accuracy at one n.

    placed: the systems with a Pass@1 and a fully known cost, in the rows' (the table's) order;
    frontier: those of them on the Pareto frontier, cheapest first;
    unknown: the rows measured at n (with a Pass@1) whose cost is not fully known, in the rows' order.
    """

    n: int
    placed: tuple[CostPoint, ...]
    frontier: tuple[CostPoint, ...]
    unknown: tuple[Any, ...]

    @property
    def frontier_keys(self) -> frozenset[str]:
        return frozenset(point.key for point in self.frontier)

    def as_dict(self) -> dict:
        return {
            "n": self.n,
            "frontier": [point.key for point in self.frontier],
            "cost_unknown": [row.slug for row in self.unknown],
        }


def cost_accuracy(rows: Sequence[Any], n_values: Iterable[int]) -> list[CostAccuracy]:
    """Cost against accuracy at each n in `n_values` where some row has a Pass@1."""
    charts = []
    for n in n_values:
        placed, unknown = [], []
        for row in rows:
            metrics = row.by_n.get(n)
            if metrics is None or metrics.pass1 is None:
                continue
            if cost_known(metrics):
                placed.append(CostPoint(key=row.slug, cost=metrics.cost_mean, pass1=metrics.pass1))
            else:
                unknown.append(row)
        if placed or unknown:
            charts.append(CostAccuracy(n=n, placed=tuple(placed), frontier=tuple(pareto_frontier(placed)),
                                       unknown=tuple(unknown)))
    return charts
