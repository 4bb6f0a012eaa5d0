"""GPUs that change role (E12): reading and writing GPUs over time.

- `reading_serving` (results/over_time.py, shared with the pages): from an arrangement's moves, the
  reading instances serving at each moment.
- `draw_moves`: on a timeline's GPU lanes, each move's drain (hatched) and warm-up (grey), and
  the side it joins.
- `save_over_time` (`plan --over-time`'s plan_over_time.png): the offered rate per period, the reading
  GPUs over the day of the switching plan, the reactive policy and the best static split, and
  the on-time share per period of each.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.collections import PolyCollection

from ..results.over_time import reading_serving
from . import style as st

__all__ = ["reading_serving", "draw_moves", "move_handles", "save_over_time"]

NS = 1e9
DRAIN_COLOUR = "#F2C14E"
WARM_COLOUR = "#7F7F7F"


def draw_moves(ax: Axes, switches: dict, lane_y, window: tuple[float, float], stop_s: float) -> None:
    """Each move on its GPU's lane: hatched while it drains, grey while it warms up, and the side
    it joins written where it starts serving (`lane_y(gpu)`: the lane's height)."""
    start, end = window
    drain: list[tuple[float, float, float]] = []
    warm: list[tuple[float, float, float]] = []
    for gpu, asked, drained, serving, to in zip(switches["gpu"], switches["requested_at_ns"], switches["drained_at_ns"],
                                                switches["serving_at_ns"], switches["to_role"]):
        y = float(lane_y(gpu))
        a, d, s = asked / NS, (drained / NS if drained >= 0 else stop_s), (serving / NS if serving >= 0 else stop_s)
        for x0, x1, out in ((a, d, drain), (d, s, warm)):
            if x1 > start and x0 < end and x1 > x0:
                out.append((max(x0, start), min(x1, end), y))
        if serving >= 0 and start <= s <= end:
            ax.text(s, y + 0.45, f"→ {'reads' if to == 'reads' else 'writes'}", fontsize=8, va="bottom",
                    ha="left", clip_on=True).set_gid("move-label")
    for spans, kw, gid in ((drain, {"facecolors": "none", "edgecolors": DRAIN_COLOUR, "hatch": "///"}, "moves-draining"),
                           (warm, {"facecolors": WARM_COLOUR, "alpha": 0.5}, "moves-warming")):
        if spans:
            x0, x1, ys = (np.array(v) for v in zip(*spans))
            coll = PolyCollection(st.boxes(x0, x1, ys, 0.9), **kw)
            coll.set_gid(gid)
            ax.add_collection(coll)


def move_handles() -> list:
    """Legend entries of `draw_moves`."""
    from matplotlib.patches import Patch

    return [Patch(facecolor="none", edgecolor=DRAIN_COLOUR, hatch="///", label="GPU drains (leaving its side)"),
            Patch(facecolor=WARM_COLOUR, alpha=0.5, label="GPU warms up (switch_s)")]


def save_over_time(path: Path, title: str, best, day, table, names: list[str], n_gpus: int, best_static: str) -> Path:
    """plan_over_time.png: offered rate and reading GPUs over the day (first seed's moves), and the
    on-time share per period with its 95% interval, for the switching plan, the reactive policy
    and the best static split."""
    shown = ["switching", "reactive", best_static]
    end_s = best[-1].end_s
    first_seed = day["seed"].min()
    styles = st.arrangement_styles(shown)
    with st.style():
        fig = st.new_figure(12, 7.5)
        top, bottom = fig.subplots(2, 1, height_ratios=[1.2, 1])
        rate = top.twinx()
        edges = [p.start_s for p in best] + [end_s]
        rate.stairs([p.rate_per_s for p in best], edges, color="#BBBBBB", fill=True, alpha=0.35, label="offered rate")
        rate.set_ylabel("offered requests/s (grey)")
        for name in shown:
            row = day[(day.arrangement == name) & (day.seed == first_seed)].iloc[0]
            start = int(name.split("-")[1]) if name.startswith("split-") else best[0].best_reading
            moves = row["moves"]
            sw = {"requested_at_ns": [m[0] for m in moves], "serving_at_ns": [m[1] for m in moves],
                  "to_role": [m[2] for m in moves]}
            t, n = reading_serving(start, sw, end_s)
            top.step(t, n, where="post", label=f"{name}: reading GPUs serving", lw=2, zorder=3, **styles[name])
        top.set_zorder(rate.get_zorder() + 1)
        top.patch.set_visible(False)
        top.set_ylim(-0.2, n_gpus - 0.8)
        top.set_yticks(range(n_gpus))
        top.set_ylabel(f"reading GPUs (of {n_gpus})")
        top.set_xlim(0, end_s)
        top.set_xlabel(f"time of day (s); seed {first_seed}'s moves: a GPU leaves its side when asked and "
                       "joins the other after its warm-up")
        top.legend(loc="upper right", frameon=False)
        parts = [f"period_{p.index}" for p in best] + ["day"]
        x = np.arange(len(parts))
        width = 0.8 / len(shown)
        t = table.set_index(["arrangement", "part"])
        for i, name in enumerate(shown):
            mean = np.array([t.loc[(name, p)].on_time_pct for p in parts])
            low = np.array([t.loc[(name, p)].on_time_low_pct for p in parts])
            high = np.array([t.loc[(name, p)].on_time_high_pct for p in parts])
            err = np.nan_to_num(np.vstack([mean - low, high - mean]))
            bottom.bar(x + (i - (len(shown) - 1) / 2) * width, mean, width, yerr=err, capsize=3,
                       color=styles[name]["color"], label=name)
        bottom.set_xticks(x, [f"period {p.index}\n{p.start_s:g}-{p.end_s:g} s" for p in best] + ["whole day"])
        bottom.set_ylabel("on time % (95% interval over seeds)")
        bottom.set_ylim(0, 125)
        bottom.set_yticks(range(0, 101, 20))
        bottom.legend(loc="upper center", ncol=len(shown), frameon=False)
        fig.suptitle(title, fontsize=12, fontweight="bold")
        return st.save_figure(fig, path)
