"""Capacity pictures: `sweep.png` (on-time share against the offered rate, mean with its 95%
band, the target as a line) and `goodput.png` (each arrangement's goodput with its bracket).
They read the sweep's tables only."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from . import style as st

RATE = "rate_per_s"


def save_sweep(bands: pd.DataFrame, keys: list[str], path: Path, title: str, target: float | None = None) -> Path:
    """One panel per value of the grid keys other than the rate; in each, a line per
    arrangement (mean on-time over seeds) in a band (95% interval)."""
    others = [k for k in keys if k != RATE]
    panels = list(bands.groupby(others, sort=False)) if others else [((), bands)]
    names = list(dict.fromkeys(bands["arrangement"]))
    styles = st.arrangement_styles(names)
    n = len(panels)
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    with st.style():
        fig = st.new_figure(max(5.2 * cols + 1.0, 9.0), 3.8 * rows + 1.6)
        axes = np.atleast_1d(fig.subplots(rows, cols, sharex=True, sharey=True, squeeze=False)).ravel()
        for ax, (values, block) in zip(axes, panels):
            values = values if isinstance(values, tuple) else (values,)
            for name in names:
                b = block[block["arrangement"] == name].sort_values(RATE)
                x = b[RATE].to_numpy(dtype=float)
                m = b["on_time_pct"].to_numpy(dtype=float)
                h = np.nan_to_num(b["half_width_pct"].to_numpy(dtype=float))
                ax.plot(x, m, marker="o", ms=3, lw=1.8, label=name, **styles[name])
                ax.fill_between(x, np.clip(m - h, 0, 100), np.clip(m + h, 0, 100), color=styles[name]["color"],
                                alpha=0.18, lw=0)
            if target is not None:
                ax.axhline(target, color="black", lw=1, ls=":")
                ax.text(ax.get_xlim()[0], target, f" target {target:g}%", va="bottom", fontsize=8)
            if others:
                ax.set_title(", ".join(f"{k} = {v}" for k, v in zip(others, values)), fontsize=9)
            ax.set_ylim(-2, 102)
            ax.grid(alpha=0.3)
            ax.spines[["top", "right"]].set_visible(False)
        for ax in axes[n:]:
            ax.set_visible(False)
        for ax in axes[:n]:
            ax.set_xlabel("offered rate (requests/s)")
            ax.set_ylabel("replies on time (%)")
        fig.suptitle(title, fontsize=12, fontweight="bold")
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower center", ncols=min(len(names), 6), frameon=False)
        return st.save_figure(fig, path)


def save_goodput(table: pd.DataFrame, path: Path, title: str) -> Path:
    """A bar per arrangement: its goodput (requests/s at the target), a line from it to the
    lowest rate found to fail, and the per-GPU figure and the limit that binds first."""
    names = [str(n) for n in table["arrangement"]]
    styles = st.arrangement_styles(names)
    y = np.arange(len(names))[::-1]
    good = table["goodput_per_s"].to_numpy(dtype=float)
    fail = table["failing_rate_per_s"].to_numpy(dtype=float)
    with st.style():
        fig = st.new_figure(9.5, 1.2 + 0.55 * len(names))
        ax = fig.subplots()
        ax.barh(y, good, color=[styles[n]["color"] for n in names], height=0.6)
        ok = ~np.isnan(fail)
        ax.hlines(y[ok], good[ok], fail[ok], color="black", lw=2)
        ax.plot(fail[ok], y[ok], "|", color="black", ms=12, mew=2)
        right = np.nanmax(np.r_[good, fail, 1e-9])
        for yi, row in zip(y, table.itertuples()):
            text = f"{row.goodput_per_s:.2f}/s ({row.goodput_per_gpu_per_s:.2f} per GPU)"
            if row.binding_limit:
                text += f"; above it, {row.binding_limit.replace('_', ' ')} fails first"
            ax.text(right * 1.02, yi, text, va="center", fontsize=9)
        ax.set_yticks(y)
        ax.set_yticklabels(names)
        ax.set_xlim(0, right * 1.9)
        ax.set_xlabel("offered requests/s carried with the target share on time (bar); first rate found to fail (|)")
        ax.spines[["top", "right"]].set_visible(False)
        ax.grid(axis="x", alpha=0.3)
        fig.suptitle(title, fontsize=11, fontweight="bold")
        return st.save_figure(fig, path)
