"""PNG pictures of a run, for design docs: what the explainer shows, as files.

    write_plots(result, folder)  ->  summary.png, late.png, timeline-<arrangement>.png, [follow-<id>.png],
                                     [over_time.png]

The model never imports this package (nor matplotlib); pictures read the run result only
(`RunResult`: its frames, word times, gaps and GPU roles). A picture option that does not fit
the run raises `PlotOptionError`, naming the option.
`draw_*` functions take frames and an Axes and return the Axes; `save_*` functions build a
bare Figure (no pyplot, rendered by Agg) and write one PNG atomically.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..files import make_folder
from ..results.over_time import boundaries_s
from .backend import matplotlib  # noqa: F401  (first: matplotlib imports whatever MPLBACKEND says)
from .data import (
    PlotOptionError,
    Window,
    check_follow,
    check_window,
    default_window,
    empty_window_note,
    run_end_s,
    sample_replies,
)
from .follow import draw_journey, journey, save_follow
from .late import draw_late_limits, draw_time_parts, save_late
from .over_time import draw_offered_rate, draw_on_time_over_time, save_over_time
from .style import arrangement_styles
from .summary import (
    draw_first_word_cdf,
    draw_gap_cdf,
    draw_on_time_bars,
    save_summary,
)
from .timeline import draw_gpu_lanes, draw_reply_lanes, save_timeline

DEFAULT_N_REPLIES = 25

__all__ = [
    "DEFAULT_N_REPLIES",
    "PlotOptionError",
    "Window",
    "arrangement_styles",
    "check_plot_options",
    "default_window",
    "draw_first_word_cdf",
    "empty_window_note",
    "draw_gap_cdf",
    "draw_gpu_lanes",
    "draw_journey",
    "draw_late_limits",
    "draw_offered_rate",
    "draw_on_time_over_time",
    "draw_on_time_bars",
    "draw_reply_lanes",
    "draw_time_parts",
    "journey",
    "plot_file_names",
    "sample_replies",
    "save_follow",
    "save_late",
    "save_over_time",
    "save_summary",
    "save_timeline",
    "timeline_name",
    "write_plots",
]


def timeline_name(arrangement: str) -> str:
    """`timeline-<arrangement>.png`, with characters unsafe in file names replaced by '_'."""
    return "timeline-" + re.sub(r"[^A-Za-z0-9._-]", "_", arrangement) + ".png"


def plot_file_names(arrangements, follow: int | None = None, over_time: bool = False) -> list[str]:
    """The names `write_plots` writes for these arrangement names (and a followed request, and
    the picture over time)."""
    names = ["summary.png", "late.png", *(timeline_name(a) for a in arrangements)]
    return names + ([f"follow-{follow}.png"] if follow is not None else []) + (["over_time.png"] if over_time else [])


def check_plot_options(result, window: Window | None, follow: int | None) -> Window:
    """Check `window` and `follow` against the run (PlotOptionError); returns the window to draw."""
    if window is None:
        window = default_window(result)
        if window[0] >= run_end_s(result):  # a run cut short before it: draw from the start
            window = (0.0, window[1] - window[0])
    else:
        check_window(result, window)
    if follow is not None:
        check_follow(result, follow)
    return window


def write_plots(
    result,
    folder: Path,
    window: Window | None = None,
    n_replies: int = DEFAULT_N_REPLIES,
    follow: int | None = None,
    by_seed=None,
    pooled=None,
    over_time=None,
) -> list[Path]:
    """Write `summary.png`, `late.png`, a `timeline-<arrangement>.png` per arrangement over `window`
    (default: 4 s from a third of the way into the measured window) with `n_replies` sampled
    replies, and `follow-<id>.png` if `follow` is a request id. Checks `window` and `follow`
    against the run (PlotOptionError) before writing anything; returns the paths written.
    `by_seed`, the summary of several seeds (`result` being one of them), puts every seed and
    the mean with its interval on the summary's on-time panel; `pooled` (every seed's run)
    pools the summary's distributions over the seeds. `over_time`, the `over_time.csv` frame
    (every seed's rows), draws `over_time.png`."""
    window = check_plot_options(result, window, follow)
    if n_replies < 1:
        raise PlotOptionError("replies", f"got {n_replies}, expected a whole number from 1")
    folder = make_folder(Path(folder), "plots folder")
    paths = [save_summary(result, folder / "summary.png", by_seed, pooled), save_late(result, folder / "late.png")]
    for arrangement in result.scenario.arrangements:
        name = arrangement.name
        paths.append(save_timeline(result, name, folder / timeline_name(name), window, n_replies))
    if follow is not None:
        paths.append(save_follow(result, follow, folder / f"follow-{follow}.png"))
    if over_time is not None:
        paths.append(save_over_time(over_time, [a.name for a in result.scenario.arrangements],
                                    folder / "over_time.png", result.scenario.name, boundaries_s(result.scenario)))
    return paths
