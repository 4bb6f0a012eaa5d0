"""Paired differences: every arrangement sees the same requests, so compare them seed by seed.

With several seeds, the difference of two arrangements' on-time shares is taken within each
seed (same requests), and its mean gets a 95% interval over seeds (results/intervals.py). Pairing removes the
seed-to-seed swing both share (a burst hurts every arrangement), so the interval of a
difference is much narrower than the two intervals side by side would suggest.
"""

from __future__ import annotations

import math

import pandas as pd

from .intervals import DIFFERENCE, Interval, interval

#: The column `with_paired_difference` adds: on-time minus the best arrangement's, in points.
VS_BEST = "on_time_vs_best_pct"


def best_arrangement(summary: pd.DataFrame) -> str | None:
    """The arrangement with the highest mean on-time share over seeds (first listed on a tie);
    None when no seed measured any request."""
    means = summary.groupby("arrangement", sort=False, observed=True)["on_time_pct"].mean()
    return None if means.isna().all() else str(means.idxmax())


def with_paired_difference(summary: pd.DataFrame) -> pd.DataFrame:
    """`summary` (one row per arrangement x seed) with `on_time_vs_best_pct` after
    `on_time_pct`: each row's on-time share minus the best arrangement's in the same seed
    (0 for the best itself; negative = behind). Its mean and interval over seeds
    (results/intervals.py) are the paired 95% interval."""
    best = best_arrangement(summary)
    by_seed = summary.loc[summary["arrangement"] == best].set_index("seed")["on_time_pct"]
    out = summary.copy()
    diff = out["on_time_pct"].to_numpy(dtype=float) - out["seed"].map(by_seed).to_numpy(dtype=float)  # NaN if no best
    out.insert(list(out.columns).index("on_time_pct") + 1, VS_BEST, diff)
    return out


def paired_difference(summary: pd.DataFrame, a: str, b: str, column: str = "on_time_pct") -> Interval:
    """Mean over seeds of on-time(a) - on-time(b) (or another `column`), paired by seed, and its
    95% interval (`n`: the seeds both have a figure for), cut to -100 to 100 points for a
    share (two shares differ by no more: a wider interval comes from few, spread seeds)."""
    pivot = summary.pivot_table(index="seed", columns="arrangement", values=column, observed=True)
    return interval((pivot[a] - pivot[b]).dropna(), DIFFERENCE if column.endswith("_pct") else None)


def verdict_line(summary: pd.DataFrame) -> str:
    """One sentence on the best arrangement against the runner-up, paired by seed:
    'split-2-2 beats chunked-512 by 6.1 points on time (95% interval 3.8 to 8.4, paired over
    20 seeds)', or
    that the two are too close to call when the interval includes 0."""
    means = summary.groupby("arrangement", sort=False, observed=True)["on_time_pct"].mean().dropna()
    if len(means) < 2:
        return "" if len(means) else "no measured request in any seed: nothing to compare"
    order = means.sort_values(ascending=False, kind="stable").index
    best, second = str(order[0]), str(order[1])
    d = paired_difference(summary, best, second)
    if d.n < 2 or math.isnan(d.low):
        return f"{best} is ahead of {second} by {d.mean:.1f} points on time (one seed: no interval)"
    text = f"{d.mean:.1f} points on time (95% interval {d.low:.1f} to {d.high:.1f}, paired over {d.n} seeds)"
    if d.low > 0:
        return f"{best} beats {second} by {text}"
    return f"{best} and {second} are too close to call: {best} leads by {text}"
