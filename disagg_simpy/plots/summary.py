"""The summary figure: on-time share per arrangement (with the scenario's reference figures, if it
declares any), and the distributions behind it: the wait for the first word and the gaps between
words."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator

from ..results.intervals import SHARE, interval
from . import style as st

#: How the reference figures look (in the bars and in the figure's legend).
SEED_MARK: dict[str, Any] = {"marker": "D", "s": 60, "facecolor": "white", "edgecolor": st.SEED_MARKER, "linewidth": 1.6}


def _plain(x, _pos=None) -> str:
    """Tick labels like 0.1, 1, 10 (not 10^-1)."""
    return f"{x:g}"


def draw_on_time_bars(ax: Axes, summary: pd.DataFrame, styles: dict, reference: dict | None = None,
                      by_seed: pd.DataFrame | None = None) -> Axes:
    """A bar per arrangement (its on-time %), with a diamond at the reference figure where
    `reference` ({arrangement: on-time %}, the scenario's `reference.on_time_pct`) gives one.
    With `by_seed` (one row per arrangement x seed), the bar is the mean over seeds, each seed
    is a dot and a black line spans the mean's 95% interval."""
    reference = reference or {}
    names = [str(n) for n in summary["arrangement"]]
    pct = summary["on_time_pct"].to_numpy(dtype=float)
    x = np.arange(len(names))
    if by_seed is not None and by_seed["seed"].nunique() < 2:
        by_seed = None  # one seed: no interval to draw
    many = by_seed is not None
    if by_seed is not None:
        groups = {str(k): g["on_time_pct"] for k, g in by_seed.groupby("arrangement", sort=False, observed=True)}
        stats = [interval(groups[n], SHARE) for n in names]
        pct = np.array([i.mean for i in stats])
    bars = ax.bar(x, pct, color=[styles[n]["color"] for n in names], width=0.65, alpha=0.55 if many else 1.0)
    for bar in bars:
        bar.set_gid("on-time-bar")
    if by_seed is not None:
        jitter = np.random.default_rng(0).uniform(-0.22, 0.22, size=len(by_seed))  # fixed: same picture every run
        for i, n in enumerate(names):
            values = groups[n].to_numpy(dtype=float)
            dots = ax.scatter(i + jitter[: len(values)], values, s=9, color=styles[n]["color"], edgecolor="black",
                              linewidth=0.3, zorder=3)
            dots.set_gid("seed-dots")
        below = np.nan_to_num(np.array([i.mean - i.low for i in stats]))
        above = np.nan_to_num(np.array([i.high - i.mean for i in stats]))
        ci = ax.errorbar(x, pct, yerr=np.vstack([below, above]), fmt="_", color="black", ms=22, mew=2.2, elinewidth=2.2,
                         capsize=6, zorder=4)
        ci[0].set_gid("mean-interval")
    seed = [(i, reference[n]) for i, n in enumerate(names) if n in reference]
    if seed:
        si, sv = zip(*seed)
        marks = ax.scatter(si, sv, zorder=3, **SEED_MARK)
        marks.set_gid("seed-markers")
    # values go in the tick labels, where they never collide with bars or markers
    labels = [f"{n}\n{v:.1f}%" if v < 9.95 else f"{n}\n{v:.0f}%" for n, v in zip(names, pct)]
    ax.set_xticks(x)
    ax.set_xticklabels(labels, rotation=30 if len(names) > 5 else 0, ha="right" if len(names) > 5 else "center",
                       fontsize=9)
    ax.set_ylim(0, 112)
    ax.set_yticks(range(0, 101, 20))
    ax.set_ylabel("replies on time (%)")
    ax.set_title("Replies on time" + (f" (mean of {by_seed['seed'].nunique()} seeds, 95% interval; dots: seeds)"
                                      if by_seed is not None else ""), pad=32, fontsize=10 if many else None)
    ax.spines[["top", "right"]].set_visible(False)
    return ax


#: Height of one row of limit labels above a panel (points): 9-pt text and a little air.
LABEL_ROW_PT = 13


def _limits(ax: Axes, limits: list[tuple[float, str]]) -> int:
    """Dotted vertical lines at the on-time limits, named above the axes (clear of the curves);
    returns the rows of labels used, so the title can clear them."""
    for x, _ in limits:
        line = ax.axvline(x, color="black", lw=1.2, ls=":")
        line.set_gid("limit")
    lo, hi = np.log(ax.get_xlim())  # call after the curves and the log scale are set
    xs = np.log([x for x, _ in limits])
    crowded = len(xs) > 1 and np.min(np.diff(np.sort(xs))) < 0.35 * (hi - lo)
    for row, (x, text) in enumerate(limits):  # labels close together go on separate rows
        label = ax.annotate(text, (x, 1.0), xycoords=ax.get_xaxis_transform(), xytext=(0, 3 + LABEL_ROW_PT * row * crowded),
                            textcoords="offset points", ha="center", va="bottom", fontsize=9)
        label.set_gid("limit-label")
    return len(limits) if crowded else 1


def _cdf(ax: Axes, values: np.ndarray, counts: np.ndarray, total: int, style: dict, label: str) -> None:
    if len(values) == 0:  # no finished reply (a run the cap cut short): nothing to draw
        return
    order = np.argsort(values)
    v, c = values[order], counts[order]
    share = 100.0 * np.cumsum(c) / total if total else np.zeros(len(c))
    ax.step(np.r_[v[:1], v], np.r_[0.0, share], where="post", lw=1.8, label=label, **style)


def _on_grid(ax: Axes, grid: np.ndarray, shares: list[float], style: dict, label: str) -> None:
    """A distribution known at grid points only (pooled over seeds): a line through them, from
    the last grid point below the smallest value to the first at 100% (or the grid's end)."""
    if not shares:
        return
    s = np.asarray(shares)
    start = max(int(np.argmax(s > 0)) - 1, 0)
    end = int(np.argmax(s >= s[-1])) + 1
    ax.plot(grid[start:end], s[start:end], lw=1.8, label=label, **style)


def draw_first_word_cdf(ax: Axes, requests: pd.DataFrame, styles: dict, slo, pooled=None) -> Axes:
    """Share of measured replies whose first word came within x seconds of arrival (replies
    that never got one keep the curve below 100%); with `pooled` (results/pooled.Pooled), of
    every seed's replies, exact at each point of its grid."""
    from ..results.pooled import FIRST_WORD_GRID_S

    for name, style in styles.items():
        if pooled is not None:
            _on_grid(ax, FIRST_WORD_GRID_S, pooled.first_word_shares(name), style, name)
            continue
        waits = requests.loc[requests["arrangement"] == name, "first_word_s"].to_numpy(dtype=float)
        got = waits[~np.isnan(waits)]
        _cdf(ax, got, np.ones(len(got), dtype=np.int64), len(waits), style, name)
    ax.set_xscale("log")
    rows = _limits(ax, [(slo.first_word_s, f"{slo.first_word_s:g} s: first-word limit")] if slo.first_word_s else [])
    ax.xaxis.set_major_formatter(FuncFormatter(_plain))
    return _cdf_axes(ax, "wait from arrival to the first word (s, log scale)",
                     "replies (%) with at most this wait", "Wait for the first word" + _pooled_text(pooled), rows)


WIDE_DECADES = 2.5  # a gap axis spanning more decades gets a tick per decade only


def draw_gap_cdf(ax: Axes, result, styles: dict, slo, pooled=None) -> Axes:
    """Share of all gaps between consecutive words (of finished replies) up to x ms; with
    `pooled`, of every seed's gaps, exact at each point of its grid."""
    from ..results.pooled import GAP_GRID_MS

    for name, style in styles.items():
        if pooled is not None:
            _on_grid(ax, GAP_GRID_MS, pooled.gap_shares(name), style, name)
            continue
        values, counts = result.gap_distribution(name)
        _cdf(ax, values * 1000, counts, int(counts.sum()), style, name)
    ax.set_xscale("log")
    rows = _limits(ax, [(v, text.format(v)) for v, text in ((slo.mean_gap_ms, "{:g} ms: mean-gap limit"),
                                                             (slo.freeze_ms, "{:g} ms: freeze")) if v is not None])
    low, high = ax.get_xlim()  # 1-2-5 ticks over a couple of decades; decades alone over more (they would crowd)
    wide = low <= 0 or high / low > 10**WIDE_DECADES
    ax.xaxis.set_major_locator(LogLocator(subs=(1.0,) if wide else (1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(_plain))
    ax.xaxis.set_minor_formatter(FuncFormatter(lambda *_: ""))
    return _cdf_axes(ax, "gap between consecutive words of a reply (ms, log scale)",
                     "gaps (%) at most this long", "Gaps between words" + _pooled_text(pooled), rows)


def _pooled_text(pooled) -> str:
    return f" (all {len(pooled.seeds)} seeds pooled)" if pooled is not None else ""


def _cdf_axes(ax: Axes, xlabel: str, ylabel: str, title: str, label_rows: int = 1) -> Axes:
    """Labels, title (above `label_rows` rows of limit labels) and the plain look shared by both
    CDF panels."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, 101)
    ax.set_title(title, pad=19 + LABEL_ROW_PT * label_rows)
    ax.grid(alpha=0.3)
    ax.spines[["top", "right"]].set_visible(False)
    return ax


def save_summary(result, path: Path, by_seed: pd.DataFrame | None = None, pooled=None) -> Path:
    """`summary.png`: on-time bars, first-word wait CDF and word-gap CDF, one colour per
    arrangement. With `by_seed` (the summary of several seeds), the bars show every seed and
    the mean with its interval; the distributions pool every seed with `pooled`
    (results/pooled.Pooled: counts on fixed grids, added seed by seed), else are `result`'s
    seed, as the title says."""
    names = [a.name for a in result.scenario.arrangements]
    styles = st.arrangement_styles(names)
    slo = result.scenario.slo
    with st.style():
        fig = st.new_figure(16, 5.4)
        bars, first, gaps = fig.subplots(1, 3, width_ratios=[1, 1.15, 1.15])
        ref = result.scenario.reference
        draw_on_time_bars(bars, result.summary, styles, ref.on_time_pct if ref else None, by_seed)
        pooled = pooled if pooled is not None and len(pooled.seeds) > 1 else None
        draw_first_word_cdf(first, result.requests, styles, slo, pooled)
        draw_gap_cdf(gaps, result, styles, slo, pooled)
        n = int(result.summary["n_requests"].iloc[0]) if len(result.summary) else 0
        what = f"the same {n:,} measured requests served {len(names)} ways (seed {result.seed})"
        if by_seed is not None and by_seed["seed"].nunique() > 1:
            seeds = by_seed["seed"].nunique()
            shown = (f"all {len(pooled.seeds)} seeds pooled, exact at 25 points a decade" if pooled is not None
                     else f"{result.seed_text}, {n:,} measured requests")
            what = f"each seed's requests served the same {len(names)} ways (on time: {seeds} seeds; distributions: {shown})"
        fig.suptitle(
            f"{result.scenario.name}: {what}\n"
            f"on time = {slo.words()}",
            fontsize=12, fontweight="bold",
        )
        handles = [Line2D([], [], lw=2.2, label=n, **styles[n]) for n in names]
        if ref:
            handles.append(Line2D([], [], ls="none", marker="D", ms=7, mfc="white", mec=st.SEED_MARKER, mew=1.6,
                                  label=f"on time in {ref.source}"))
        fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 8), frameon=False)
        return st.save_figure(fig, path)
