"""The residual picture of `fit`: measured against fitted time, one colour per kind of iteration."""

from __future__ import annotations

from pathlib import Path

import pandas as pd


def save_fit(rows: pd.DataFrame, path: Path, title: str) -> Path:
    """Left: fitted against measured ms (log-log, the diagonal is a perfect fit); right: relative
    error against measured ms. `rows` has columns ms, fitted_ms, kind."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4.8), layout="constrained")
    FigureCanvasAgg(fig)
    left, right = fig.subplots(1, 2)
    for i, (kind, group) in enumerate(rows.groupby("kind", sort=True)):
        style = {"s": 14, "alpha": 0.7, "color": f"C{i}", "label": f"{kind} ({len(group)} rows)"}
        left.scatter(group.ms, group.fitted_ms, **style)
        right.scatter(group.ms, 100 * (group.fitted_ms / group.ms - 1), **style)
    low, high = rows.ms.min(), rows.ms.max()
    left.plot([low, high], [low, high], color="0.4", lw=1)
    left.set(xscale="log", yscale="log", xlabel="measured ms", ylabel="fitted ms", title="fitted vs measured")
    right.axhline(0, color="0.4", lw=1)
    right.set(xscale="log", xlabel="measured ms", ylabel="relative error (%)", title="error by kind of iteration")
    left.legend(loc="upper left", fontsize=8)
    fig.suptitle(title)
    _readable_log_ticks(fig, [left.xaxis, left.yaxis, right.xaxis])
    from .style import save_figure

    save_figure(fig, path, dpi=100)
    return path


def _readable_log_ticks(fig, axes, gap_px: float = 4.0) -> None:
    """Label the log axes with plain numbers (1, 2, 5 per decade, never 3x10^1) and drop every label
    that would touch another tick label of the figure (the same axis, the other axis at a corner,
    the next panel), measured on the laid-out figure: a table spanning less than a decade or a
    dozen of them, or fitted times near 0, must not print labels over each other."""
    import math

    from matplotlib.ticker import FixedFormatter, FixedLocator, LogLocator, NullFormatter

    for axis in axes:
        low, high = sorted(axis.get_view_interval())
        few = math.log10(high / low) <= 2.5 if low > 0 else False  # 1, 2, 5 per decade over a few; else 1
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0) if few else (1.0,), numticks=40))
        axis.set_minor_formatter(NullFormatter())
    fig.canvas.draw()  # lays the figure out: the ticks are the ones it will be saved with
    for axis in axes:
        low, high = sorted(axis.get_view_interval())
        ticks = [t for t in axis.get_majorticklocs() if low <= t <= high]
        axis.set_major_locator(FixedLocator(ticks))
        axis.set_major_formatter(FixedFormatter([f"{t:g}" for t in ticks]))
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    others = [ax_axis for ax in fig.axes for ax_axis in (ax.xaxis, ax.yaxis) if ax_axis not in axes]
    kept = [t.get_window_extent(renderer).padded(gap_px / 2) for axis in others for t in axis.get_ticklabels()
            if t.get_visible() and t.get_text()]
    for axis in axes:
        shown = []
        for label in axis.get_ticklabels():
            box = label.get_window_extent(renderer).padded(gap_px / 2)
            free = not any(box.overlaps(other) for other in kept)
            shown.append(label.get_text() if free else "")
            kept += [box] if free else []
        axis.set_major_formatter(FixedFormatter(shown))
