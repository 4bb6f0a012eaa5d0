"""A picture of a trace: arrivals per second and the prompt and reply lengths (`describe --plot`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import InputError
from ..units import NS_PER_S as _NS_PER_S
from ..workload.trace_stats import _LENGTHS, rate_over_time


def plot_description(df: pd.DataFrame, path, name: str | None = None) -> None:
    """Write a PNG: arrivals per second over time, and histograms of prompt and reply lengths,
    titled with the trace's `name` (its id or file); legends beside the panels, off the bars.

    Written to a temporary file in the same folder and renamed, so a reader never sees half a PNG.
    """
    path = Path(path)
    if not path.parent.is_dir():
        raise InputError(f"{path}: path: got a folder that does not exist, expected an existing folder")
    from .style import save_figure

    save_figure(description_figure(df, name), path, dpi=100)


def description_figure(df: pd.DataFrame, name: str | None = None):
    """The figure `plot_description` writes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 9), layout="constrained")
    FigureCanvasAgg(fig)
    ax_rate, *ax_lengths = fig.subplots(3, 1)
    if "arrived_at_ns" in df and len(df):
        t_ns = df["arrived_at_ns"].to_numpy(dtype=np.int64)
        draw_arrivals(ax_rate, t_ns - t_ns[0])
        draw_window_rate(ax_rate, rate_over_time(df))
    else:
        ax_rate.text(0.5, 0.5, "no arrival times (lengths-only trace)", ha="center", va="center",
                     transform=ax_rate.transAxes)
        ax_rate.set_axis_off()
    ax_rate.set_title(f"Arrivals over time ({len(df):,} requests)")
    for ax, color, (_, column, label, unit) in zip(ax_lengths, ("C0", "C1"), _LENGTHS):
        draw_lengths(ax, df[column].to_numpy(dtype=np.int64), color, label, unit)
    if name is not None:
        fig.suptitle(f"Trace {name}", fontsize=13, fontweight="bold")
    return fig


#: At most this many bins of arrivals: 1-s bins, wider ones for a longer trace (a trace may
#: span 1e9 s; one bin per second would not fit in memory).
MAX_BINS = 20_000


def draw_arrivals(ax, t_ns: np.ndarray):
    """Arrivals per second over time, in 1-s bins (or, over a long span, the fewest whole
    seconds that keep MAX_BINS bins), with a moving average over 60 bins; returns the Axes."""
    span_s = int(t_ns[-1] // _NS_PER_S) + 1
    width_s = max(1, -(-span_s // MAX_BINS))
    counts = np.bincount(t_ns // (width_s * _NS_PER_S))
    rate = counts / width_s
    x = np.arange(counts.size) * width_s
    label = "arrivals in each 1-s bin" if width_s == 1 else f"arrivals per second in each {width_s:,}-s bin"
    ax.plot(x, rate, lw=0.6, label=label)
    if counts.size >= 60:
        smooth = np.convolve(rate, np.ones(60) / 60, mode="valid")
        ax.plot(x[: smooth.size] + 30 * width_s, smooth, lw=1.5, label=f"{60 * width_s:,}-s moving average")
    ax.set_xlabel("time since first arrival (s)")
    ax.set_ylabel("arrival rate (req/s)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return ax


def draw_window_rate(ax, windows: pd.DataFrame | None):
    """The mean rate in each window of `rate_over_time` (the table `describe` prints), as steps."""
    if windows is None:
        return ax
    edges = np.append(windows["window_start_s"].to_numpy(), windows["window_end_s"].to_numpy()[-1])
    width = windows["window_end_s"].iloc[0] - windows["window_start_s"].iloc[0]
    ax.stairs(windows["rate_per_s"].to_numpy(), edges, baseline=None, color="k", lw=2, zorder=5,
              label=f"mean per {width:g}-s window")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return ax


#: Lengths spanning at least this ratio (two decades) get a log axis: on a linear one nearly
#: every request falls into the first bars.
LOG_SPAN = 100


def draw_lengths(ax, values: np.ndarray, color: str, label: str, unit: str):
    """A histogram of lengths (60 bins, log-spaced on a log axis where they span decades) with
    the median marked; returns the Axes."""
    log = values.size > 0 and values.min() > 0 and values.max() >= LOG_SPAN * values.min()
    bins = np.geomspace(values.min(), values.max(), 61) if log else 60
    ax.hist(values, bins=bins, color=color, label=f"{label} lengths")
    if log:
        ax.set_xscale("log")
    if values.size:
        median = np.median(values)
        ax.axvline(median, color="k", ls="--", lw=1, label=f"median {median:,.0f} {unit.split(',')[0]}")
    ax.set_title(f"{label.capitalize()} length distribution")
    ax.set_xlabel(f"{label} length ({unit}{', log scale' if log else ''})")
    ax.set_ylabel("requests")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return ax
