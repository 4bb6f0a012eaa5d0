"""Costs of an answer (docs/cost.md): what an arrangement's GPUs cost an hour and draw, and
what one on-time request costs at the rate it carries on time; the columns are `columns.COST`.

Dollars per million on-time requests = dollars per hour / (on-time requests per second x
3,600) x 1e6. In goodput.csv and plan.csv the on-time rate is the goodput (its 95% interval
gives the dollars' interval, ends swapped); in summary.csv it is the measured requests on time
over the measured window. An arrangement that carries nothing on time costs infinitely much per
request (`inf`); one whose GPU kind is unknown has empty costs.
"""

from __future__ import annotations

import math

import pandas as pd

from ..scenario import gpu_kinds
from .columns import COST_COLUMNS

SECONDS_PER_HOUR = 3600.0


def verdict_words(slo) -> tuple[str, str]:
    """(short, long) words for the requests the cost columns count, after the scenario's rule (as
    the rest of plan words it): ('on time', 'on time') for the explainer's limits; ('meeting
    rule', 'meeting the rule') under another per-request rule; ('served', 'served at a rate meeting
    the rule') under the percentiles criterion, which judges whole runs, not requests."""
    if slo is None or slo.is_default_kind:
        return "on time", "on time"
    if slo.criterion == "percentiles":
        return "served", "served at a rate meeting the rule"
    return "meeting rule", "meeting the rule"


def per_million(dollars_per_hour: float, on_time_per_s: float) -> float:
    """USD per million on-time requests at `on_time_per_s` (inf at 0, NaN if either is unknown)."""
    if math.isnan(dollars_per_hour) or math.isnan(on_time_per_s):
        return math.nan
    if on_time_per_s <= 0:
        return math.inf
    return dollars_per_hour / (on_time_per_s * SECONDS_PER_HOUR) * 1e6


def cost_figures(scenario, a, on_time_per_s: float, low_per_s: float = math.nan,
                 high_per_s: float = math.nan) -> dict:
    """The cost columns of arrangement `a` carrying `on_time_per_s` on time (interval low-high)."""
    usd = gpu_kinds.dollars_per_hour(scenario, a)
    kw = gpu_kinds.power_kw(scenario, a)
    usd = math.nan if usd is None else usd
    kw = math.nan if kw is None else kw
    per_hour = on_time_per_s * SECONDS_PER_HOUR
    return {"gpu_kinds": gpu_kinds.kinds_text(scenario, a), "dollars_per_hour": usd,
            "dollars_per_million": per_million(usd, on_time_per_s),
            "dollars_per_million_low": per_million(usd, high_per_s),
            "dollars_per_million_high": per_million(usd, low_per_s),
            "on_time_per_gpu_hour": per_hour / a.n_gpus,
            "power_kw": kw, "on_time_per_kwh": per_hour / kw if kw > 0 else math.nan}


def with_costs(table: pd.DataFrame, scenario, rate: str = "goodput_per_s", force: bool = False) -> pd.DataFrame:
    """`table` (goodput.csv or plan.csv rows) with the cost columns after the others, at the
    on-time rate in column `rate` (and its interval where the table has one), when the
    scenario names a GPU kind or a price (`force`: always)."""
    if not (force or gpu_kinds.shows_costs(scenario)) or table.empty:
        return table
    by_name = {a.name: a for a in scenario.arrangements}
    rows = []
    for r in table.itertuples(index=False):
        low, high = (getattr(r, k, math.nan) for k in ("goodput_low_per_s", "goodput_high_per_s"))
        rows.append(cost_figures(scenario, by_name[r.arrangement], float(getattr(r, rate)), float(low), float(high)))
    costs = pd.DataFrame(rows, columns=list(COST_COLUMNS), index=table.index)
    out = pd.concat([table, costs], axis=1)
    out.attrs = table.attrs
    return out


def measured_on_time_per_s(scenario, n_requests: float, on_time_pct: float) -> float:
    """A run's on-time requests per second: measured requests on time over the measured window
    (NaN where the window is not known beforehand: `n_requests` traffic)."""
    w = scenario.workload
    if w.measure_s is None:
        return math.nan
    return n_requests * on_time_pct / 100 / (w.measure_s - w.warmup_s)
