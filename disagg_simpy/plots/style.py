"""Colours, fonts and the atomic PNG writer shared by every figure (matplotlib, Agg only).

Figures are bare `Figure`s, never pyplot: nothing touches the global backend, and `savefig`
renders PNGs with Agg, so no screen is needed. Arrangements take colours from the Okabe-Ito
colour-blind-safe palette by their position in the scenario, plus a line style, so a name
looks the same in every figure of a run. Orange is kept for iterations that read prompts,
red for freezes.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import cast

import matplotlib
import numpy as np
from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import ListedColormap, Normalize
from matplotlib.figure import Figure
from numpy.typing import ArrayLike

from ..files import atomic_path

#: Okabe-Ito colours; orange only after five arrangements, vermillion never (orange marks
#: reading iterations, red marks freezes).
ARRANGEMENT_COLOURS = ("#0072B2", "#009E73", "#CC79A7", "#56B4E9", "#000000", "#E69F00", "#F0E442")
LINE_STYLES = ("-", "--", "-.", ":", (0, (6, 2, 1, 2, 1, 2)))

WRITE_COLOUR = "#A9B4C2"  # iterations that only write words
SHIP_COLOUR = "#0072B2"  # KV cache shipments
FREEZE_COLOUR = "#D62728"  # gaps between words over the freeze limit
PREEMPT_COLOUR = "#7B3294"  # E9: a reply preempted (its KV freed)
WORD_COLOUR = "#333333"
WAIT_COLOUR = "#8C8C8C"
LATE_BAND = "#ECECEC"  # background of a reply lane that is not on time
SEED_MARKER = "#000000"

DPI = 110
FONT = {"font.size": 10, "axes.titlesize": 11, "axes.labelsize": 10, "legend.fontsize": 9}


def read_cmap() -> ListedColormap:
    """Iterations that read prompt tokens: orange, darker the more tokens they read."""
    return ListedColormap(colormaps["Oranges"](np.linspace(0.35, 0.95, 256)), name="reading")


def tokens_norm(max_tokens: int) -> Normalize:
    """Shade scale of tokens read, from 0 to `max_tokens` (at least 1)."""
    return Normalize(0, max(int(max_tokens), 1), clip=True)


def reading_norm(iterations) -> Normalize:
    """The shade scale of one arrangement's timeline: up to the most tokens any of its iterations
    read (512 for chunks of 512), so its blocks use the whole scale."""
    tokens = iterations["n_prompt_tokens_read"]
    return tokens_norm(tokens.max() if len(tokens) else 1)


def arrangement_styles(names) -> dict[str, dict]:
    """`{name: {"color": ..., "linestyle": ...}}` by position, the same in every figure."""
    styles = {}
    for i, name in enumerate(names):
        styles[name] = {
            "color": ARRANGEMENT_COLOURS[i % len(ARRANGEMENT_COLOURS)],
            "linestyle": LINE_STYLES[i % len(LINE_STYLES)],
        }
    return styles


#: Vertices of polygons or segments: an (n, m, 2) array, which matplotlib's collections take as is
#: (and fastest), typed as their stubs' sequence of array-likes.
Vertices = Sequence[ArrayLike]


def boxes(x0: np.ndarray, x1: np.ndarray, y: np.ndarray, height: float) -> Vertices:
    """Rectangles [x0, x1] x [y - height/2, y + height/2] as PolyCollection vertices."""
    x0, x1, y = (np.asarray(v, dtype=float) for v in (x0, x1, y))
    lo, hi = y - height / 2, y + height / 2
    corners = [np.column_stack(p) for p in ((x0, lo), (x0, hi), (x1, hi), (x1, lo))]
    return cast(Vertices, np.stack(corners, axis=1).reshape(len(x0), 4, 2))


def segments(x0, y0, x1, y1) -> Vertices:
    """Line segments (x0, y0)-(x1, y1) as LineCollection vertices."""
    cols = [np.asarray(v, dtype=float) for v in (x0, y0, x1, y1)]
    return cast(Vertices, np.stack([np.column_stack(cols[:2]), np.column_stack(cols[2:])], axis=1).reshape(len(cols[0]), 2, 2))


def style():
    """The font sizes of every figure; draw and save inside `with style():`."""
    return matplotlib.rc_context(FONT)


def new_figure(width_in: float, height_in: float) -> Figure:
    """A bare Agg figure (no pyplot state) with constrained layout."""
    return agg_figure(Figure(figsize=(width_in, height_in), dpi=DPI, layout="constrained"))


def agg_figure(fig: Figure) -> Figure:
    """`fig` on an Agg canvas: the layout measures its text with the renderer that draws it."""
    FigureCanvasAgg(fig)
    return fig


def save_figure(fig: Figure, path: Path, dpi: float = DPI) -> Path:
    """Write `fig` as a PNG atomically: a temp file in the same folder, then a rename.

    The layout is computed once, then the picture drawn once: `savefig` alone would first draw
    every artist without pixels to lay them out (a third of a picture's time), then again.
    The pixels are the same either way."""
    fig.set_dpi(dpi)  # as savefig would for the whole save: the layout at the dpi it is drawn at
    engine = fig.get_layout_engine()
    if engine is not None:
        try:
            engine.execute(fig)
        except ValueError:  # as Figure.draw: drawn without this layout
            pass
        with matplotlib.rc_context({"figure.autolayout": False, "figure.constrained_layout.use": False}):
            fig.set_layout_engine(None)  # no engine at all ("none" keeps a placeholder, and the extra draw)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=dpi)
    return Path(path)
