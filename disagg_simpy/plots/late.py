"""`late.png`: why replies are late. Left, the share of measured requests late by the one limit
they broke (or several); right, where the time of late and of on-time requests went.

Both read the run's frames only: the breakdown columns of `summary` and the time columns of
`requests` (mean seconds per finished request).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes

from . import style as st

#: summary column -> (label, colour), in stacking order
LIMITS = {
    "late_first_word_only_pct": ("first word only", "#E69F00"),
    "late_mean_gap_only_pct": ("mean gap only", "#CC79A7"),
    "late_froze_only_pct": ("freezes only", st.FREEZE_COLOUR),
    "late_several_pct": ("several limits", "#555555"),
}

#: requests column -> (label, colour), in time order; writing is drawn without its frozen part
PARTS = {
    "queued_s": ("queued", "#BBBBBB"),
    "reading_s": ("reading", "#F4A259"),
    "shipping_s": ("KV ship", st.SHIP_COLOUR),
    "joining_s": ("joining", "#56B4E9"),
    "writing_s": ("writing (not frozen)", st.WRITE_COLOUR),
    "frozen_s": ("frozen", st.FREEZE_COLOUR),
}


def draw_late_limits(ax: Axes, summary: pd.DataFrame) -> Axes:
    """A bar per arrangement: its late share, stacked by the limit broken."""
    names = [str(n) for n in summary["arrangement"]]
    y = np.arange(len(names))[::-1]
    left = np.zeros(len(names))
    for column, (label, colour) in LIMITS.items():
        share = summary[column].to_numpy(dtype=float)
        if np.isnan(share).all():  # a limit that is off (null) breaks nothing: not drawn
            continue
        bars = ax.barh(y, np.nan_to_num(share), left=left, color=colour, label=label, height=0.6)
        for bar in bars:
            bar.set_gid(f"limit:{column}")
        left += np.nan_to_num(share)
    late = 100.0 - summary["on_time_pct"].to_numpy(dtype=float)
    for yi, v in zip(y, late):
        ax.text(min(v, 100) + 1, yi, f"{v:.1f}% late", va="center", fontsize=9)
    ax.set_yticks(y, names)
    ax.set_xlim(0, 118)
    ax.set_xticks(range(0, 101, 20))
    ax.set_xlabel("measured requests (%)")
    ax.set_title("Late requests, by the limit they broke")
    if ax.get_legend_handles_labels()[0]:  # no late request: no key to draw
        ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.04), ncols=2, frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    return ax


def time_means(requests: pd.DataFrame, names: list[str]) -> pd.DataFrame:
    """Mean seconds of each part per finished request, by arrangement and verdict (rows
    `(name, on_time)`; NaN where no request has that verdict). Writing leaves out its frozen part."""
    done = requests[requests["finished_at_s"].notna()]
    means = done.groupby(["arrangement", "on_time"], observed=True)[list(PARTS)].mean()
    means["writing_s"] = means["writing_s"] - means["frozen_s"].fillna(0.0)  # (empty: the freeze limit is off)
    index = pd.MultiIndex.from_product([names, [False, True]], names=["arrangement", "on_time"])
    return means.reindex(index)


def ship_label(requests: pd.DataFrame) -> str:
    """'KV ship', saying what else that part holds when an option adds a wait to it: the wait
    for KV memory on the writing side (E4) and for the link (E5) come before the ship ends."""
    waits = [what for column, what in (("handoff_wait_s", "KV memory"), ("link_wait_s", "the link"))
             if column in requests and requests[column].notna().any()]
    return "KV ship" + (f" (with the wait for {' and '.join(waits)})" if waits else "")


def draw_time_parts(ax: Axes, requests: pd.DataFrame, names: list[str]) -> Axes:
    """Two bars per arrangement, late and on time: the mean time from arrival to last word, by part."""
    means = time_means(requests, names)
    y = (3 * len(names) - 1) - np.concatenate([[3 * i, 3 * i + 1] for i in range(len(names))])
    left = np.zeros(len(means))
    for column, (label, colour) in PARTS.items():
        if column == "frozen_s" and requests[column].isna().all() and requests["finished_at_s"].notna().any():
            continue  # the freeze limit is off: nothing is frozen
        if column == "shipping_s":
            label = ship_label(requests)
        width = np.nan_to_num(means[column].to_numpy(dtype=float))
        bars = ax.barh(y, width, left=left, color=colour, label=label, height=0.85)
        for bar in bars:
            bar.set_gid(f"part:{column}")
        left += width
    done = requests[requests["finished_at_s"].notna()]
    counts = done.groupby(["arrangement", "on_time"], observed=True).size()
    labels = [f"{n}: {'on time' if ok else 'late'} ({counts.get((n, ok), 0):,})" for n, ok in means.index]
    ax.set_yticks(y, labels, fontsize=8.5)
    ax.set_xlabel("mean time from arrival to last word (s)")
    ax.set_title("Where the time went (finished requests)")
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.04), ncols=3, frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    return ax


def save_late(result, path: Path) -> Path:
    """`late.png`: the limits late requests broke, and where late and on-time requests' time went."""
    names = [a.name for a in result.scenario.arrangements]
    slo = result.scenario.slo
    with st.style():
        fig = st.new_figure(15, 1.6 + 0.75 * max(len(names), 2))
        limits, parts = fig.subplots(1, 2, width_ratios=[1, 1.3])
        draw_late_limits(limits, result.summary)
        draw_time_parts(parts, result.requests, names)
        fig.suptitle(
            f"{result.scenario.name} ({result.seed_text}): why replies are late ({slo.words()})",
            fontsize=12, fontweight="bold",
        )
        return st.save_figure(fig, path)
