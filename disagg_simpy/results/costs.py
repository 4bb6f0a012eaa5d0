"""Costs of an answer (docs/cost.md): what an arrangement's GPUs cost an hour and draw, and
what one request costs at a rate it carries.

Dollars per million requests = dollars per hour / (requests per second x 3,600) x 1e6. Two
rates, two names (results/columns.py): in goodput.csv and plan.csv, `dollars_per_million` is per
request at the goodput (its 95% interval gives the dollars' interval, ends swapped), where only
the target share of the requests meets the rule (`columns.COST`); in summary.csv,
`dollars_per_million_on_time` is per request on time, the measured requests on time over the
measured window (`columns.SUMMARY_COST`). A rate of 0 costs infinitely much per request
(`inf`); an arrangement whose GPU kind is unknown has empty costs.
"""

from __future__ import annotations

import math

import pandas as pd

from ..scenario import gpu_kinds
from .columns import COST_COLUMNS
from .intervals import NOT_NEGATIVE, Interval, bounds_of, interval

SECONDS_PER_HOUR = 3600.0


def per_million(dollars_per_hour: float, per_s: float) -> float:
    """USD per million requests at `per_s` requests a second (inf at 0, NaN if either is unknown)."""
    if math.isnan(dollars_per_hour) or math.isnan(per_s):
        return math.nan
    if per_s <= 0:
        return math.inf
    return dollars_per_hour / (per_s * SECONDS_PER_HOUR) * 1e6


def cost_figures(scenario, a, per_s: float, low_per_s: float = math.nan, high_per_s: float = math.nan) -> dict:
    """goodput.csv's and plan.csv's cost columns of arrangement `a` at its goodput `per_s`
    (interval low-high)."""
    usd = gpu_kinds.dollars_per_hour(scenario, a)
    kw = gpu_kinds.power_kw(scenario, a)
    usd = math.nan if usd is None else usd
    kw = math.nan if kw is None else kw
    per_hour = per_s * SECONDS_PER_HOUR
    return {"gpu_kinds": gpu_kinds.kinds_text(scenario, a), "dollars_per_hour": usd,
            "dollars_per_million": per_million(usd, per_s),
            "dollars_per_million_low": per_million(usd, high_per_s),
            "dollars_per_million_high": per_million(usd, low_per_s),
            "requests_per_gpu_hour": per_hour / a.n_gpus,
            "power_kw": kw, "requests_per_kwh": per_hour / kw if kw > 0 else math.nan}


def on_time_figures(scenario, a, n_requests: float, on_time_pct: float) -> dict:
    """summary.csv's cost columns of arrangement `a`'s run: per request on time
    (`measured_on_time_per_s`), `columns.SUMMARY_COST_COLUMNS`."""
    f = cost_figures(scenario, a, measured_on_time_per_s(scenario, n_requests, on_time_pct))
    return {"dollars_per_hour": f["dollars_per_hour"], "dollars_per_million_on_time": f["dollars_per_million"],
            "on_time_per_gpu_hour": f["requests_per_gpu_hour"], "power_kw": f["power_kw"],
            "on_time_per_kwh": f["requests_per_kwh"]}


def over_seeds(block: pd.DataFrame, column: str) -> Interval:
    """Summary figure `column`'s mean over seeds and its 95% interval (`block`: one arrangement's
    rows, one a seed). `dollars_per_million_on_time` is not a mean of per-seed ratios (which
    contradicts the row's own on-time rate): it is `per_million` at the mean on-time rate, its
    interval from the rate's, ends swapped, as `cost_figures` gives goodput's."""
    if column != "dollars_per_million_on_time":
        return interval(block[column], bounds_of(column))
    usd = float(block["dollars_per_hour"].iloc[0])
    if math.isnan(usd) or usd <= 0:  # unknown kind (all NaN) or free GPUs (all 0): no ratio to take
        return interval(block[column], bounds_of(column))
    rate = interval(usd / (block[column].astype(float) * SECONDS_PER_HOUR) * 1e6, NOT_NEGATIVE)  # on time per s
    return Interval(per_million(usd, rate.mean), per_million(usd, rate.high), per_million(usd, rate.low), rate.n)


def with_costs(table: pd.DataFrame, scenario, rate: str = "goodput_per_s", force: bool = False) -> pd.DataFrame:
    """`table` (goodput.csv or plan.csv rows) with the cost columns after the others, at the
    rate in column `rate` (and its interval where the table has one), when the
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
