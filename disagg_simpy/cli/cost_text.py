"""The cost cells of the goodput and plan tables (results/costs.py), when a table has them."""

from __future__ import annotations

import math

from ..results.columns import COST_CELLS, cost_heading


def header() -> list[str]:
    """The cost cells' header: per request at the goodput, under any rule (results/columns.py COST)."""
    return [cost_heading(name) for name in COST_CELLS]


def money(x: float) -> str:
    """'12.34', 'inf' (a rate of 0), '-' (unknown)."""
    if math.isnan(x):
        return "-"
    return "inf" if math.isinf(x) else f"{x:,.2f}"


def cells(r) -> list[str]:
    """A row's cost cells (a namedtuple row of goodput.csv or plan.csv with the cost columns)."""
    per_m = money(r.dollars_per_million)
    if not (math.isnan(r.dollars_per_million_low) or math.isnan(r.dollars_per_million_high)):
        per_m += f" ({money(r.dollars_per_million_low)}-{money(r.dollars_per_million_high)})"
    return [money(r.dollars_per_hour), per_m,
            "-" if math.isnan(r.requests_per_gpu_hour) else f"{r.requests_per_gpu_hour:,.0f}",
            "-" if math.isnan(r.power_kw) else f"{r.power_kw:.1f}"]


def has_costs(table) -> bool:
    return "dollars_per_hour" in table.columns
