"""`over_time.png`: the offered rate and each arrangement's on-time share, window by window, for
traffic that changes over time (a schedule, a rate curve, a trace). Reads `over_time.csv`'s
frame only (every seed's rows: with several seeds, the mean over them)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes

from ..results.over_time import mean_over_seeds
from . import style as st

#: (divisor, unit) of the time axis by the span: seconds, minutes, hours
_UNITS = ((7200, 3600.0, "h"), (600, 60.0, "min"), (0, 1.0, "s"))


def time_unit(span_s: float) -> tuple[float, str]:
    """(seconds per unit, unit) for a time axis over `span_s` seconds."""
    return next((per, unit) for above, per, unit in _UNITS if span_s >= above)


def draw_offered_rate(ax: Axes, frame: pd.DataFrame, per: float, unit: str, boundaries_s=()) -> Axes:
    """The offered rate per window as steps (every arrangement sees the same requests)."""
    first = frame[frame["arrangement"] == frame["arrangement"].iloc[0]]
    edges = np.append(first["window_start_s"].to_numpy(), first["window_end_s"].to_numpy()[-1]) / per
    rate = first["offered_rate_per_s"].to_numpy()
    ax.stairs(rate, edges, baseline=None, color="#555555", lw=1.5, label="offered rate (the same for every arrangement)")
    for i, b in enumerate(boundaries_s):
        ax.axvline(b / per, color="#999999", ls=":", lw=1, label="period boundary (schedule)" if i == 0 else None)
    ax.set_ylabel("offered rate (requests/s)")
    ax.set_ylim(bottom=0)
    ax.set_title("Requests arriving per second, in each window")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return ax


def draw_on_time_over_time(ax: Axes, frame: pd.DataFrame, names: list[str], per: float, unit: str,
                           boundaries_s=()) -> Axes:
    """Each arrangement's on-time share per window, a point at the window's middle."""
    styles = st.arrangement_styles(names)
    for name in names:
        rows = frame[frame["arrangement"] == name]
        middle = (rows["window_start_s"].to_numpy() + rows["window_end_s"].to_numpy()) / 2 / per
        ax.plot(middle, rows["on_time_pct"].to_numpy(), marker="o", ms=3, label=name, **styles[name])
    for b in boundaries_s:
        ax.axvline(b / per, color="#999999", ls=":", lw=1)
    ax.set_ylim(-2, 102)
    ax.set_ylabel("on time (% of measured requests)")
    ax.set_xlabel(f"arrival time ({unit})")
    ax.set_title("Share of the requests arriving in each window that were on time")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, title="arrangement")
    return ax


def save_over_time(frame: pd.DataFrame, names: list[str], path: Path, title: str, boundaries_s=()) -> Path:
    """`over_time.png`: offered rate (top) and on-time share (bottom) per window, on one time
    axis; dotted lines at a schedule's period boundaries."""
    n_seeds = frame["seed"].nunique() if "seed" in frame else 1
    mean = mean_over_seeds(frame)
    span = float(mean["window_end_s"].max())
    per, unit = time_unit(span)
    with st.style():
        fig = st.new_figure(11, 7)
        top, bottom = fig.subplots(2, 1, sharex=True)
        draw_offered_rate(top, mean, per, unit, boundaries_s)
        draw_on_time_over_time(bottom, mean, names, per, unit, boundaries_s)
        seeds = f", mean of {n_seeds} seeds" if n_seeds > 1 else ""
        fig.suptitle(f"{title}: offered rate and on-time share over time{seeds}", fontsize=12, fontweight="bold")
        return st.save_figure(fig, path)
