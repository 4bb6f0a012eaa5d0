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
    from .style import save_figure

    save_figure(fig, path, dpi=100)
    return path
