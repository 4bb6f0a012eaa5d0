"""Capacity pictures: `sweep.png` (on-time share against the offered rate, mean with its 95%
band, the target as a line), `goodput.png` (each arrangement's goodput with its bracket),
`plan.png` (the ranked arrangements' goodput with intervals) and `map.png` (the winner per
rate and traffic knob). They read the sweep's tables only."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.colors import to_rgb
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle

from . import style as st

RATE = "rate_per_s"


#: x-axis labels by grid key
X_LABELS = {RATE: "offered rate (requests/s)", "rate_per_gpu": "offered rate per GPU (requests/s per GPU)",
            "slo_scale": "SLO scale (every limit multiplied by it)"}


def save_sweep(bands: pd.DataFrame, keys: list[str], path: Path, title: str, target: float | None = None,
               x: str = RATE, limits: bool = False, share: str = "replies on time") -> Path:
    """One panel per value of the grid keys other than `x` (the rate, the rate per GPU or the SLO
    scale); in each, a line per arrangement (mean on-time over seeds) in a band (95% interval).
    With `limits`, also each limit alone: the share within the first-word limit (dashed) and
    within the mean-gap limit (dotted), as papers draw them beside the joint line."""
    others = [k for k in keys if k != x]
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
                b = block[block["arrangement"] == name].sort_values(x)
                xs = b[x].to_numpy(dtype=float)
                m = b["on_time_pct"].to_numpy(dtype=float)
                low = np.where(b["on_time_low_pct"].isna(), m, b["on_time_low_pct"]).astype(float)
                high = np.where(b["on_time_high_pct"].isna(), m, b["on_time_high_pct"]).astype(float)
                ax.plot(xs, m, marker="o", ms=3, lw=1.8, label=name, **styles[name])
                band = ax.fill_between(xs, np.clip(low, 0, 100), np.clip(high, 0, 100), color=styles[name]["color"],
                                       alpha=0.12, lw=0)
                band.set_gid(f"band:{name}")
                for edge in (low, high):  # edges in the arrangement's colour: overlapping bands stay apart
                    ax.plot(xs, np.clip(edge, 0, 100), color=styles[name]["color"], lw=0.8, ls=(0, (2, 2)),
                            gid=f"band-edge:{name}")
                for column, ls in (("first_word_ok_pct", "--"), ("mean_gap_ok_pct", ":")) if limits else ():
                    if column in b and b[column].notna().any():
                        line, = ax.plot(xs, b[column].to_numpy(dtype=float), lw=1.2, ls=ls, color=styles[name]["color"])
                        line.set_gid(f"{column}:{name}")
            if target is not None:  # its label right of the panel, where no curve runs
                ax.axhline(target, color="black", lw=1, ls=":")
                label = ax.annotate(f"target\n{target:g}%", xy=(1, target), xycoords=("axes fraction", "data"),
                                    xytext=(3, 0), textcoords="offset points", va="center", ha="left", fontsize=8)
                label.set_gid("target-label")
            if others:
                ax.set_title(", ".join(f"{k} = {v}" for k, v in zip(others, values)), fontsize=9)
            ax.set_ylim(-2, 102)
            ax.grid(alpha=0.3)
            ax.spines[["top", "right"]].set_visible(False)
        for ax in axes[n:]:
            ax.set_visible(False)
        for ax in axes[:n]:
            ax.set_xlabel(X_LABELS.get(x, x))
            ax.set_ylabel(f"{share} (%)")
        fig.suptitle(title, fontsize=12, fontweight="bold")
        handles, labels = axes[0].get_legend_handles_labels()
        if limits:
            handles += [Line2D([], [], color="black", lw=1.8, label=f"{share} (every limit)"),
                        Line2D([], [], color="black", lw=1.2, ls="--", label="first-word limit alone"),
                        Line2D([], [], color="black", lw=1.2, ls=":", label="mean-gap limit alone")]
            labels = [h.get_label() for h in handles]
        fig.legend(handles, labels, loc="outside lower center", ncols=min(len(names), 6), frameon=False)
        return st.save_figure(fig, path)


def save_goodput(table: pd.DataFrame, path: Path, title: str, carried: str = "with the target share on time") -> Path:
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
        ax.set_xlabel(f"offered requests/s carried {carried} (bar); first rate found to fail (|)")
        ax.spines[["top", "right"]].set_visible(False)
        ax.grid(axis="x", alpha=0.3)
        fig.suptitle(title, fontsize=11, fontweight="bold")
        return st.save_figure(fig, path)


def _cost_error_band(ax, table: pd.DataFrame, y: np.ndarray):
    """The top two's goodput range under cost error (plan.csv's cost_error_* columns, when plan
    checked them) as a wide grey band behind the seed interval's black line; its legend handle,
    or None where there is none."""
    if "cost_error_low_per_s" not in table:
        return None
    low, high = (table[k].to_numpy(float) for k in ("cost_error_low_per_s", "cost_error_high_per_s"))
    ok = ~np.isnan(low)
    if not ok.any():
        return None
    for yi, lo, hi in zip(y[ok], low[ok], high[ok]):
        line = ax.hlines(yi, lo, hi, color="0.55", lw=7, alpha=0.55, zorder=2)
        line.set_gid("cost-error-band")
    return Line2D([], [], color="0.55", lw=7, alpha=0.55, label="goodput with the costs off by the error checked")


def save_plan(table: pd.DataFrame, path: Path, title: str, labels: dict[str, str],
              carried: str = "with the target share on time") -> Path:
    """A bar per evaluated arrangement, best on top: its goodput, with its 95% interval (the
    same statistic: sweep/goodput.py `goodput_search`) as a black line; bars coloured by the
    arrangement's `label` (`labels`, by name: 'same GPU', 'chunks', 'split', ...). An arrangement
    the search left (`goodput_below_per_s`: its goodput is below that) gets a hatched, unfilled bar
    to that bound, so every row has a mark; the legend names only what is drawn."""
    names = [str(n) for n in table["arrangement"]]
    kinds = [labels[n] for n in names]
    colours = dict(zip(dict.fromkeys(["same GPU", "chunks", "split", *kinds]), st.ARRANGEMENT_COLOURS))
    y = np.arange(len(names))[::-1]
    good = table["goodput_per_s"].to_numpy(dtype=float)
    low = table["goodput_low_per_s"].to_numpy(dtype=float)
    high = table["goodput_high_per_s"].to_numpy(dtype=float)
    below = (table["goodput_below_per_s"] if "goodput_below_per_s" in table else pd.Series(np.nan, table.index))
    below = below.to_numpy(dtype=float)
    left = np.isnan(good) & ~np.isnan(below)
    with st.style():
        fig = st.new_figure(9.5, 1.4 + 0.32 * len(names))
        ax = fig.subplots()
        searched = ~np.isnan(good)
        ax.barh(y[searched], good[searched], color=[colours[k] for k, s in zip(kinds, searched) if s], height=0.7)
        if left.any():
            ax.barh(y[left], below[left], height=0.7, facecolor="none", hatch="///", lw=0.8, alpha=0.6,
                    edgecolor=[colours[k] for k, s in zip(kinds, left) if s])
        ok = ~np.isnan(low)
        banded = _cost_error_band(ax, table, y)
        ax.hlines(y[ok], low[ok], high[ok], color="black", lw=1.6)
        for yi, g, h, b in zip(y, good, high, below):  # right of the interval line, never struck through by it
            if np.isnan(g):
                text = "" if np.isnan(b) else f" below {b:.2f} (left)"
                t = ax.text(0 if np.isnan(b) else b, yi, text, va="center", fontsize=8, color="0.35")
                t.set_gid("goodput-bound")
                continue
            t = ax.text(g if np.isnan(h) else max(g, h), yi, f" {g:.2f}", va="center", fontsize=8)
            t.set_gid("goodput-value")
        ax.set_yticks(y)
        ax.set_yticklabels([f"{r}. {n}" for r, n in zip(table["rank"], names)], fontsize=8)
        ax.set_ylim(-0.6, len(names) - 0.4)
        ax.set_xlabel(f"goodput: offered requests/s carried {carried} (line: 95% interval)")
        ax.spines[["top", "right"]].set_visible(False)
        ax.grid(axis="x", alpha=0.3)
        drawn = {k for k, s in zip(kinds, searched | left) if s}
        handles = [Patch(color=c, label=k) for k, c in colours.items() if k in drawn]
        if left.any():
            handles.append(Patch(facecolor="none", edgecolor="0.35", hatch="///",
                                 label="left: goodput below the bar's end (two others beat it)"))
        if banded is not None:
            handles.append(banded)
        if handles:  # outside the axes: a long plan's bars reach every corner
            fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), frameon=False, fontsize=9)
        band_high = table["cost_error_high_per_s"].to_numpy(float) if banded is not None else np.array([])
        right = np.nanmax(np.r_[good, high, below, band_high, 1e-9])
        ax.set_xlim(0, right * (1.22 if left.any() else 1.1))  # room for the value or bound after each bar
        fig.suptitle(title, fontsize=11, fontweight="bold")
        return st.save_figure(fig, path)


def save_cost_plan(table: pd.DataFrame, path: Path, title: str, rate: float | None = None,
                   carried: str = "with the target share on time") -> Path:
    """A point per arrangement searched: dollars an hour across, goodput up (line: its 95%
    interval), coloured by its GPU kinds; those left by the pruning as grey markers at the rate
    their goodput is below; the rate to carry as a dashed line (`plan --rate`). `carried`: how the
    goodput is carried, after the rule (`Slo.carried_text`)."""
    rows = table[table["goodput_per_s"].notna()]
    kinds = list(dict.fromkeys(str(k) for k in rows["gpu_kinds"]))
    colours = dict(zip(kinds, st.ARRANGEMENT_COLOURS * (1 + len(kinds) // len(st.ARRANGEMENT_COLOURS))))
    with st.style():
        fig = st.new_figure(9.5, 5.5)
        ax = fig.subplots()
        banded = False  # (one legend entry for the bands)
        for kind in kinds:
            mine = rows[rows["gpu_kinds"] == kind]
            x, good = mine["dollars_per_hour"].to_numpy(float), mine["goodput_per_s"].to_numpy(float)
            low, high = mine["goodput_low_per_s"].to_numpy(float), mine["goodput_high_per_s"].to_numpy(float)
            ax.scatter(x, good, color=colours[kind], label=kind, zorder=3)
            ok = ~np.isnan(low)
            if "cost_error_low_per_s" in mine:  # the top two's goodput with the costs off (plan's cost-error check)
                band = ~np.isnan(mine["cost_error_low_per_s"].to_numpy(float))
                if band.any():
                    b = ax.vlines(x[band], mine["cost_error_low_per_s"].to_numpy(float)[band],
                                  mine["cost_error_high_per_s"].to_numpy(float)[band], color="0.55", lw=7,
                                  alpha=0.55, zorder=1, label="_" * banded + "goodput with the costs off by the error checked")
                    b.set_gid("cost-error-band")
                    banded = True
            ax.vlines(x[ok], low[ok], high[ok], color=colours[kind], lw=1.4)
            for xi, g, name in zip(x, good, mine["arrangement"]):
                ax.annotate(str(name), (xi, g), textcoords="offset points", xytext=(4, 3), fontsize=7)
        left = table[table["goodput_per_s"].isna() & table["goodput_below_per_s"].notna()]
        if len(left):  # left by the pruning: their goodput is below the marker (sweep/plan.py)
            ax.scatter(left["dollars_per_hour"], left["goodput_below_per_s"], marker="v", color="0.6", zorder=2,
                       label="left (not in the top two): goodput below the marker")
        if rate is not None:
            ax.axhline(rate, color="black", ls="--", lw=1, label=f"rate to carry ({rate:g}/s)")
        ax.set_xlabel("cost of the GPUs (USD per hour)")
        ax.set_ylabel(f"goodput (requests/s {carried}; line: 95% interval)")
        ax.spines[["top", "right"]].set_visible(False)
        ax.grid(alpha=0.3)
        ax.legend(loc="best", frameon=True, framealpha=0.9, fontsize=8)
        fig.suptitle(title, fontsize=11, fontweight="bold")
        return st.save_figure(fig, path)


def save_map(cells: pd.DataFrame, path: Path, title: str, marker: tuple[float, object] | None = None,
             arrangements: list[str] | None = None, words: str = "most replies on time") -> Path:
    """A cell per (rate, y value), coloured by the winning arrangement (it has the `words`:
    sweep/winners.py `winner_words`), paler the smaller its
    margin over the runner-up (full colour from 20 points), hatched where the two are too close
    to call; the scenario's own point as a star. Colours are every picture's
    (`style.arrangement_styles` by position in `arrangements`)."""
    names = [n for n in dict.fromkeys(cells["winner"]) if n]
    order = list(arrangements) if arrangements else sorted(names)
    colours = {n: s["color"] for n, s in st.arrangement_styles(order).items()}
    rates = sorted(cells["rate_per_s"].unique())
    ys = list(dict.fromkeys(cells["y_value"]))
    numeric = all(isinstance(v, (int, float)) for v in ys)
    dx = (rates[1] - rates[0]) if len(rates) > 1 else 1.0
    with st.style():
        fig = st.new_figure(11, 6.5)
        ax = fig.subplots()
        for row in cells.itertuples():
            if not row.winner:
                continue
            x = row.rate_per_s
            j = ys.index(row.y_value)
            margin = row.winner_on_time_pct - (row.runner_up_on_time_pct if row.runner_up else 0.0)
            strength = 0.3 + 0.7 * min(max(margin, 0.0) / 20.0, 1.0)
            colour = 1 - strength * (1 - np.array(to_rgb(colours[row.winner])))  # towards white
            rect = Rectangle((x - dx / 2, j - 0.5), dx, 1, facecolor=colour, edgecolor="white", lw=0.3,
                             hatch="///" if row.too_close else None)
            ax.add_patch(rect)
        ax.set_xlim(rates[0] - dx / 2, rates[-1] + dx / 2)
        ax.set_ylim(-0.5, len(ys) - 0.5)
        step = max(1, len(ys) // 12)
        ax.set_yticks(range(0, len(ys), step))
        ax.set_yticklabels([f"{v:g}" if numeric else str(v) for v in ys[::step]])
        at = _position(marker[1], ys, numeric) if marker is not None else None
        if marker is not None and at is not None:
            ax.plot(marker[0], at, marker="*", ms=18, color="white", mec="black", mew=1.5, ls="none")
        ax.set_xlabel("offered rate (requests/s)")
        ax.set_ylabel(str(cells["y_key"].iloc[0]).replace("_", " "))
        handles: list[Artist] = [Patch(color=colours[n], label=n) for n in order if n in names]
        handles.append(Patch(facecolor="white", edgecolor="black", hatch="///", label="too close to call"))
        if at is not None:
            handles.append(Line2D([], [], marker="*", ms=12, color="white", mec="black", ls="none",
                                  label="the scenario's own traffic"))
        fig.legend(handles=handles, loc="outside right center", frameon=False,
                   title=textwrap.fill(words, 32) + "\n(paler: smaller margin)")
        fig.suptitle(title, fontsize=11, fontweight="bold")
        return st.save_figure(fig, path)


def _position(value, ys: list, numeric: bool) -> float | None:
    """Where `value` falls on the map's y axis (cell index, interpolated between numbers)."""
    if value in ys:
        return float(ys.index(value))
    if not numeric or not isinstance(value, (int, float)) or not ys[0] <= value <= ys[-1]:
        return None
    return float(np.interp(value, ys, range(len(ys))))
