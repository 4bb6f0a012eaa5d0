"""What a trace looks like: arrival-process and length statistics, as a dict, a text block and a PNG.

Read by people choosing a trace and stored in run.json, so every number is a plain int/float/None.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .errors import InputError
from .files import atomic_path

_NS_PER_S = 1_000_000_000
_PERCENTILES = (50, 90, 99)
_LENGTHS = (  # (statistics prefix, column, plot name, unit)
    ("prompt_tokens", "n_prompt_tokens", "prompt", "tokens"),
    ("reply_words", "n_reply_words", "reply", "words, i.e. generated tokens"),
)


def _arrival_stats(t_ns: np.ndarray) -> dict:
    t_ns = t_ns - t_ns[0]
    duration_ns = int(t_ns[-1])
    gaps_ns = np.diff(t_ns).astype(np.float64)
    mean_gap_ns = gaps_ns.mean() if gaps_ns.size else 0.0
    _, n_same = np.unique(t_ns, return_counts=True)
    n_full_minutes = duration_ns // (60 * _NS_PER_S)
    per_minute = np.bincount(t_ns // (60 * _NS_PER_S))[:n_full_minutes]
    return {
        "duration_s": duration_ns / _NS_PER_S,
        "mean_rate_per_s": t_ns.size / (duration_ns / _NS_PER_S) if duration_ns else None,
        "interarrival_cv": float(gaps_ns.std() / mean_gap_ns) if mean_gap_ns > 0 else None,
        "tied_arrivals_pct": 100.0 * int(n_same[n_same > 1].sum()) / t_ns.size,
        "busiest_second_per_s": int(np.bincount(t_ns // _NS_PER_S).max()),
        "busiest_minute_per_s": float(per_minute.max() / 60) if n_full_minutes else None,
        "n_full_minutes": int(n_full_minutes),
    }


def describe_trace(df: pd.DataFrame) -> dict:
    """Statistics of a trace read by `read_trace`: size, duration, rate, burstiness (CV of the gaps,
    share of tied arrivals, busiest 1-s bin and full minute counted from the first arrival) and
    prompt/reply length percentiles (numpy's default linear interpolation), mean, min and max."""
    stats: dict = {"n_requests": len(df)}
    arrival_keys = ("duration_s", "mean_rate_per_s", "interarrival_cv", "tied_arrivals_pct",
                    "busiest_second_per_s", "busiest_minute_per_s", "n_full_minutes")
    if "arrived_at_ns" in df and len(df):
        stats.update(_arrival_stats(df["arrived_at_ns"].to_numpy(dtype=np.int64)))
    else:
        stats.update(dict.fromkeys(arrival_keys))
    for name, column, _, _ in _LENGTHS:
        values = df[column].to_numpy(dtype=np.int64)
        if values.size:
            for p, v in zip(_PERCENTILES, np.percentile(values, _PERCENTILES)):
                stats[f"{name}_p{p}"] = float(v)
            stats.update({f"{name}_mean": float(values.mean()), f"{name}_min": int(values.min()),
                          f"{name}_max": int(values.max())})
        else:
            stats.update(dict.fromkeys(f"{name}_{s}" for s in ("p50", "p90", "p99", "mean", "min", "max")))
    return stats


def _fmt(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def format_description(stats: dict) -> str:
    """`describe_trace`'s statistics as an aligned, human-readable text block."""
    rows = [
        ("requests", _fmt(stats["n_requests"], ","), ""),
        ("duration", _fmt(stats["duration_s"], ",.1f"), "s"),
        ("mean rate", _fmt(stats["mean_rate_per_s"], ".3f"), "req/s"),
        ("CV of inter-arrival gaps", _fmt(stats["interarrival_cv"], ".2f"), ""),
        ("arrivals sharing a timestamp", _fmt(stats["tied_arrivals_pct"], ".1f"), "%"),
        ("busiest 1-s bin", _fmt(stats["busiest_second_per_s"], "d"), "req/s"),
        ("busiest full minute", _fmt(stats["busiest_minute_per_s"], ".2f"),
         f"req/s (of {_fmt(stats['n_full_minutes'], 'd')} full minutes)"),
    ]
    width = max(len(label) for label, _, _ in rows)
    value_width = max(len(v) for _, v, _ in rows)
    lines = [f"{label:<{width}}  {v:>{value_width}} {unit if v != '-' else ''}".rstrip() for label, v, unit in rows]
    columns = ("p50", "p90", "p99", "mean", "min", "max")
    table = [["lengths", *columns]]
    for name, *_ in _LENGTHS:
        table.append([name.replace("_", " ")] + [_fmt(stats[f"{name}_{c}"], ",.1f" if c in ("p90", "p99", "mean")
                                                      else ",.0f") for c in columns])
    widths = [max(len(row[j]) for row in table) for j in range(len(columns) + 1)]
    lines.append("")
    for row in table:
        lines.append("  ".join([row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:], widths[1:])]))
    return "\n".join(lines)


def plot_description(df: pd.DataFrame, path) -> None:
    """Write a PNG: arrivals per second over time, and histograms of prompt and reply lengths.

    Written to a temporary file in the same folder and renamed, so a reader never sees half a PNG.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    path = Path(path)
    if not path.parent.is_dir():
        raise InputError(f"{path}: path: got a folder that does not exist, expected an existing folder")
    fig = Figure(figsize=(10, 9), layout="constrained")
    FigureCanvasAgg(fig)
    ax_rate, *ax_lengths = fig.subplots(3, 1)
    if "arrived_at_ns" in df and len(df):
        t_ns = df["arrived_at_ns"].to_numpy(dtype=np.int64)
        per_second = np.bincount((t_ns - t_ns[0]) // _NS_PER_S)
        ax_rate.plot(np.arange(per_second.size), per_second, lw=0.6, label="arrivals in each 1-s bin")
        if per_second.size >= 60:
            smooth = np.convolve(per_second, np.ones(60) / 60, mode="valid")
            ax_rate.plot(np.arange(smooth.size) + 30, smooth, lw=1.5, label="60-s moving average")
        ax_rate.set_xlabel("time since first arrival (s)")
        ax_rate.set_ylabel("arrival rate (req/s)")
        ax_rate.legend(loc="upper right")
    else:
        ax_rate.text(0.5, 0.5, "no arrival times (lengths-only trace)", ha="center", va="center",
                     transform=ax_rate.transAxes)
        ax_rate.set_axis_off()
    ax_rate.set_title(f"Arrivals over time ({len(df):,} requests)")
    for ax, color, (_, column, label, unit) in zip(ax_lengths, ("C0", "C1"), _LENGTHS):
        values = df[column].to_numpy(dtype=np.int64)
        ax.hist(values, bins=60, color=color, label=f"{label} lengths")
        if values.size:
            median = np.median(values)
            ax.axvline(median, color="k", ls="--", lw=1, label=f"median {median:,.0f} {unit.split(',')[0]}")
        ax.set_title(f"{label.capitalize()} length distribution")
        ax.set_xlabel(f"{label} length ({unit})")
        ax.set_ylabel("requests")
        ax.legend(loc="upper right")
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
