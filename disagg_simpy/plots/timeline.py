"""Timeline of one arrangement over a window of the run: GPUs on top, sampled replies below.

Only what crosses the window is drawn, clipped to it, with one collection per kind of mark
(never one artist per iteration or word), so a window of a one-hour run draws as fast as one
of a 30 s run. Each collection has a gid ("iterations-reading", "freezes", ...) for tests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.cm import ScalarMappable
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.colors import Normalize
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from . import style as st
from .data import (
    Window,
    frames_of,
    freeze_s,
    gaps_of,
    late_reason,
    sample_replies,
)
from .roles import draw_moves, move_handles

ROLE_TEXT = {"reads": "reads prompts", "writes": "writes replies", "both": "reads + writes"}
LANE = 0.8  # height of a GPU lane's blocks
KV_CMAP = "Purples"  # E4: share of a GPU's KV memory held, from 0 (white) to full


def gpu_lane_y(gpu, roles: list[str]) -> np.ndarray:
    """Lane heights, GPU 0 on top; a split leaves lane `ship_lane_y` free between its reading
    and its writing GPUs for the KV cache ships."""
    gpu = np.asarray(gpu, dtype=float)
    n_lanes = len(roles) + ("reads" in roles)
    return np.where(gpu < roles.count("reads"), n_lanes - 1 - gpu, len(roles) - 1 - gpu)


def ship_lane_y(roles: list[str]) -> float:
    return float(len(roles) - roles.count("reads"))


def draw_gpu_lanes(
    ax: Axes, iterations: pd.DataFrame, requests: pd.DataFrame, roles: list[str], window: Window, norm: Normalize,
    kv_capacity=None, names: list[str] | None = None,
) -> Axes:
    """One lane per GPU (with TP, per instance: `names` labels the lanes, default 'GPU g'); a
    block per iteration in `window` (clipped to it): orange shaded by
    prompt tokens read, grey if it only writes. A split gets a lane between its reading and
    writing GPUs with a falling line per KV cache ship, from its start to its end, and a dotted
    line while a ship waits for its link (E5). With a KV memory limit (E4) a thin band under each
    lane shows how full the GPU's memory is at each iteration (darker = fuller); `kv_capacity` is
    one number or one per GPU."""
    start, end = window
    n = len(roles)
    it = iterations[(iterations["started_at_s"] < end) & (iterations["ended_at_s"] > start)]
    x0 = it["started_at_s"].clip(lower=start).to_numpy()
    x1 = it["ended_at_s"].clip(upper=end).to_numpy()
    y = gpu_lane_y(it["gpu"].to_numpy(), roles)
    tokens = it["n_prompt_tokens_read"].to_numpy()
    reads = tokens > 0
    # white edges separate back-to-back iterations while blocks are a few pixels wide
    edge: dict[str, Any] = {"edgecolors": "white", "linewidths": 0.5 if len(it) < 300 * n else 0.0}
    writing = PolyCollection(st.boxes(x0[~reads], x1[~reads], y[~reads], LANE), facecolors=st.WRITE_COLOUR, **edge)
    writing.set_gid("iterations-writing")
    ax.add_collection(writing)
    reading = PolyCollection(
        st.boxes(x0[reads], x1[reads], y[reads], LANE), array=tokens[reads], cmap=st.read_cmap(), norm=norm, **edge
    )
    reading.set_gid("iterations-reading")
    ax.add_collection(reading)

    # name the token count of blocks wide enough to hold it
    wide = reads & (x1 - x0 > 0.09 * (end - start))
    for a, b, yy, t in zip(x0[wide], x1[wide], y[wide], tokens[wide]):
        text = ax.text((a + b) / 2, yy, f"{t:,} tokens", ha="center", va="center", fontsize=8,
                       color="white" if norm(t) > 0.45 else "black", clip_on=True)
        text.set_gid("block-label")

    if kv_capacity is not None:
        _draw_kv_band(ax, it, x0, x1, y, kv_capacity)

    if "reads" in roles:
        _draw_ships(ax, requests, window, ship_lane_y(roles))

    names = names or [f"GPU {g}" for g in range(n)]
    labels = [f"{names[g]}: {ROLE_TEXT[r]}" for g, r in enumerate(roles)]
    ticks = list(gpu_lane_y(np.arange(n), roles))
    if "reads" in roles:
        labels.append("KV cache ships ↓")
        ticks.append(ship_lane_y(roles))
    ax.set_yticks(ticks)
    ax.set_yticklabels(labels)
    ax.set_ylim(-0.6, max(ticks) + 0.6)
    ax.set_xlim(start, end)
    ax.tick_params(axis="y", length=0)
    for s in ("top", "right", "left"):
        ax.spines[s].set_visible(False)
    return ax


def _draw_ships(ax: Axes, requests: pd.DataFrame, window: Window, y: float) -> None:
    """A falling line per ship from its start to its end; a dotted line on the lane while a ship
    waits for its link (from its request to its start, E5)."""
    start, end = window
    nothing = pd.Series(0.0, index=requests.index)
    requested = requests["first_word_at_s"] + requests.get("handoff_wait_s", nothing).fillna(0)
    ship_start = requested + requests.get("link_wait_s", nothing).fillna(0)
    ships = requests["joined_at_s"].notna() & (requests["joined_at_s"] > ship_start)
    shown = ships & (ship_start < end) & (requests["joined_at_s"] > start)
    y_ship = np.full(int(shown.sum()), y)
    lines = LineCollection(
        st.segments(ship_start[shown], y_ship + LANE / 2, requests["joined_at_s"][shown], y_ship - LANE / 2),
        colors=st.SHIP_COLOUR, linewidths=1.5,
    )
    lines.set_gid("kv-ships")
    ax.add_collection(lines)
    waits = (ship_start > requested) & (requested < end) & (ship_start > start)
    y_wait = np.full(int(waits.sum()), y + LANE / 2)
    dotted = LineCollection(
        st.segments(requested[waits].clip(lower=start), y_wait, ship_start[waits].clip(upper=end), y_wait),
        colors=st.SHIP_COLOUR, linewidths=1.2, linestyles=(0, (1, 1.5)),
    )
    dotted.set_gid("link-waits")
    ax.add_collection(dotted)


def _draw_kv_band(ax: Axes, it: pd.DataFrame, x0: np.ndarray, x1: np.ndarray, y: np.ndarray, capacity) -> None:
    """E4: a thin band under each GPU lane, one block per iteration, shaded by the share of the
    GPU's KV memory held when it started (reading R10)."""
    capacity = np.asarray(capacity)
    if capacity.ndim:  # one per GPU (a split's sides may differ)
        capacity = capacity[it["gpu"].to_numpy()]
    share = it["kv_used_tokens"].to_numpy(dtype=float, na_value=np.nan) / capacity
    band = PolyCollection(st.boxes(x0, x1, y - LANE / 2 - 0.07, 0.1), array=share, cmap=KV_CMAP,
                          norm=Normalize(0, 1), edgecolors="none")
    band.set_gid("kv-use")
    ax.add_collection(band)


def draw_reply_lanes(ax: Axes, sample: pd.DataFrame, words: pd.DataFrame, slo, window: Window,
                     unit: str = "GPU", preempted: pd.DataFrame | None = None) -> Axes:
    """One lane per sampled reply (earliest on top): a dotted line while its prompt waits, an
    orange line while it is read, a diamond at word 1, a blue bar while its KV cache ships, a
    tick per later word, a red bar over each gap above the freeze limit, a cross where it was
    preempted (E9: `preempted` has request_id, at_s); replies that are not on time sit on a grey
    band."""
    start, end = window
    n = len(sample)
    lane = pd.Series(n - 1 - np.arange(n, dtype=float), index=sample["request_id"].to_numpy())
    y = lane.to_numpy()

    late = ~sample["on_time"].to_numpy(dtype=bool)
    band = PolyCollection(
        st.boxes(np.full(late.sum(), start), np.full(late.sum(), end), y[late], 0.9),
        facecolors=st.LATE_BAND, edgecolors="none",
    )
    band.set_gid("late-band")
    ax.add_collection(band)

    def spans(a: str, b: str, colour, width: float, gid: str, style="solid") -> None:
        x0 = sample[a].to_numpy(dtype=float)
        x1 = sample[b].to_numpy(dtype=float)
        unfinished = sample["finished_at_s"].isna().to_numpy()
        x1 = np.where(np.isnan(x1) & unfinished, end, x1)  # not reached when the run stopped
        keep = ~np.isnan(x0) & (x1 > x0) & (x0 < end) & (x1 > start)
        lines = LineCollection(
            st.segments(np.maximum(x0[keep], start), y[keep], np.minimum(x1[keep], end), y[keep]),
            colors=colour, linewidths=width, linestyles=style,
        )
        lines.set_gid(gid)
        ax.add_collection(lines)

    spans("arrived_at_s", "read_started_at_s", st.WAIT_COLOUR, 1.2, "waiting", style=(0, (1, 1.5)))
    spans("read_started_at_s", "first_word_at_s", "#E69F00", 2.5, "reading")
    spans("first_word_at_s", "joined_at_s", st.SHIP_COLOUR, 5, "ships")
    cached = _draw_cached(ax, sample, y, window)

    gaps = gaps_of(words).over(freeze_s(slo)).in_window(window)
    gy = lane.loc[gaps.request_id].to_numpy()
    freezes = LineCollection(
        st.segments(np.maximum(gaps.from_s, start), gy, np.minimum(gaps.to_s, end), gy),
        colors=st.FREEZE_COLOUR, linewidths=4,
    )
    freezes.set_gid("freezes")
    ax.add_collection(freezes)

    shown = words[(words["at_s"] >= start) & (words["at_s"] <= end)]
    later = shown[shown["word"] > 1]
    wy = lane.loc[later["request_id"]].to_numpy()
    ticks = LineCollection(
        st.segments(later["at_s"], wy - 0.3, later["at_s"], wy + 0.3), colors=st.WORD_COLOUR, linewidths=0.8
    )
    ticks.set_gid("words")
    ax.add_collection(ticks)
    first = shown[shown["word"] == 1]
    dots = ax.scatter(first["at_s"], lane.loc[first["request_id"]], marker="D", s=28, c="black", zorder=3)
    dots.set_gid("first-words")
    if preempted is not None:
        marks = preempted[preempted["request_id"].isin(lane.index) & (preempted["at_s"] >= start)
                          & (preempted["at_s"] <= end)]
        crosses = ax.scatter(marks["at_s"], lane.loc[marks["request_id"]], marker="X", s=40, c=st.PREEMPT_COLOUR,
                             zorder=4)
        crosses.set_gid("preemptions")

    labels = [f"#{r.request_id} {_gpus(r, unit)}{c}  " + ("✓ on time" if r.on_time else f"✗ {late_reason(r, slo)}")
              for r, c in zip(sample.itertuples(), cached)]
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=8)
    for label, is_late in zip(ax.get_yticklabels(), late):
        label.set_color("#8B0000" if is_late else "black")
    ax.set_ylim(-0.6, max(n, 1) - 0.4)
    ax.set_xlim(start, end)
    ax.tick_params(axis="y", length=0)
    for s in ("top", "right", "left"):
        ax.spines[s].set_visible(False)
    return ax


def _draw_cached(ax: Axes, sample: pd.DataFrame, y: np.ndarray, window: Window) -> list[str]:
    """E13: a green line just above the reading line of each reply whose prompt was partly cached
    (the cached part was not read, so it takes no time), and its label's text, ' 58% cached'."""
    if "cached_tokens" not in sample.columns:
        return [""] * len(sample)
    share = sample["cached_tokens"].to_numpy(dtype=float) / sample["n_prompt_tokens"].to_numpy(dtype=float)
    x0, x1 = sample["read_started_at_s"].to_numpy(dtype=float), sample["first_word_at_s"].to_numpy(dtype=float)
    keep = (share > 0) & ~np.isnan(x0) & ~np.isnan(x1) & (x0 < window[1]) & (x1 > window[0])
    lines = LineCollection(st.segments(np.maximum(x0[keep], window[0]), y[keep] + 0.22,
                                       np.minimum(x1[keep], window[1]), y[keep] + 0.22),
                           colors=CACHED_COLOUR, linewidths=2.5)
    lines.set_gid("cached-reads")
    ax.add_collection(lines)
    return [f" {100 * s:.0f}% cached" if s > 0 else "" for s in share]


CACHED_COLOUR = "#009E73"  # E13: a read whose prompt was partly cached


def _sample_text(sample: pd.DataFrame, requests: pd.DataFrame, window: Window, n: int, on_time_share) -> str:
    """How the replies shown were picked, and where the window could not follow that rule."""
    n_late = int((~sample["on_time"].astype(bool)).sum())
    text = f"{len(sample)} replies in progress in this window"
    if len(sample) == n and pd.notna(on_time_share):
        text += f", late and on time as in the whole run ({pct_text(100 * on_time_share)} on time)"
        want_late = n - round(n * on_time_share)
        if n_late < want_late:
            text += f"; the window holds only {n_late} late" if n_late else "; the window holds no late reply"
        elif n_late > want_late:
            n_on = len(sample) - n_late
            text += f"; the window holds only {n_on} on time" if n_on else "; the window holds no reply on time"
    return text + "\nrequest id, reading→writing GPU, verdict over the whole reply; evenly by arrival"


def _gpus(r, unit: str = "GPU") -> str:
    """'GPU 1' (colocated) or 'GPU 0→3' (read on 0, written on 3); 'instance 0→1' with TP."""
    read, write = r.reading_gpu, r.writing_gpu
    if pd.isna(write) or write == read:
        return f"{unit} {read}"
    return f"{unit} {read}→{write}"


def _secs(x: float) -> str:
    """Seconds with at most 2 decimals: 1.33, 5, 12.5."""
    return f"{x:.2f}".rstrip("0").rstrip(".")


def pct_text(value: float) -> str:
    """On-time share for a title: one decimal below 10% (0.4% is not 0%)."""
    return f"{value:.1f}%" if value < 9.95 else f"{value:.0f}%"


def _legend_handles(split: bool, slo, kv: bool = False, link: bool = False, cached: bool = False,
                    paged: bool = False) -> list:
    h = [
        Patch(facecolor="#F08A2C", label="iteration that reads prompt tokens\n(darker = more tokens)"),
        Patch(facecolor=st.WRITE_COLOUR, label="iteration that only writes words"),
        Line2D([], [], color=st.WAIT_COLOUR, ls=(0, (1, 1.5)), lw=1.2, label="prompt waits to be read"),
        Line2D([], [], color="#E69F00", lw=2.5, label="prompt being read"),
        Line2D([], [], color="black", marker="D", ls="none", ms=5, label="first word"),
        Line2D([], [], color=st.WORD_COLOUR, marker="|", ls="none", ms=9, label="a later word"),
        *([Line2D([], [], color=st.FREEZE_COLOUR, lw=4, label=f"freeze: gap > {slo.freeze_ms:g} ms")]
          if slo.freeze_ms is not None else []),  # (no freeze is drawn when the limit is off)
        Patch(facecolor=st.LATE_BAND, label="reply not on time"),
    ]
    if split:
        ship = "KV cache ships to the\nwriting GPU (start to end)"
        h.insert(2, Line2D([], [], color=st.SHIP_COLOUR, lw=2.5, label=ship))
    if link:
        h.insert(3, Line2D([], [], color=st.SHIP_COLOUR, lw=1.2, ls=(0, (1, 1.5)), label="ship waits for its link"))
    if kv:
        h.insert(2, Patch(facecolor="#6A51A3", label="KV memory held (band under a\nGPU; darker = fuller)"))
    if cached:
        h.insert(4, Line2D([], [], color=CACHED_COLOUR, lw=2.5, label="its prompt's beginning was cached\n(not read; share in its label)"))
    if paged:
        h.append(Line2D([], [], color=st.PREEMPT_COLOUR, marker="X", ls="none", ms=6,
                        label="preempted (KV freed: read again\nor swapped out, E9)"))
    return h


def save_timeline(result, name: str, path: Path, window: Window, n_replies: int, norm: Normalize | None = None) -> Path:
    """`timeline-<name>.png`: the GPUs and a sample of replies of one arrangement in `window`.
    Shades of reading run up to the most tokens this arrangement's iterations read, unless
    `norm` is given; late and on-time replies are sampled as the whole run has them."""
    arrangement = next(a for a in result.scenario.arrangements if a.name == name)
    requests, iterations, _ = frames_of(result, name)
    norm = norm or st.reading_norm(iterations)
    roles = result.gpu_roles(name)
    summary = result.summary.set_index("arrangement").loc[name]
    on_time_share = summary["on_time_pct"] / 100
    sample = sample_replies(requests, window, n_replies, on_time_share)
    words = result.words(name, sample["request_id"])
    split = arrangement.is_split
    slo = result.scenario.slo

    with st.style():
        n_lanes = len(roles) + split
        fig = st.new_figure(14, 2.2 + 0.55 * n_lanes + 0.24 * max(len(sample), 3))
        top, bottom = fig.subplots(
            2, 1, sharex=True, height_ratios=[0.55 * n_lanes + 0.5, 0.24 * max(len(sample), 3) + 0.4]
        )
        kv_capacity = result.records[name].kv_capacity_tokens
        names = [arrangement.instance_name(g) for g in range(len(roles))]
        switches = result.records[name].switches  # E12: lanes keep the start's roles; moves drawn on them
        if switches:
            names = [f"{n} (moves)" if g in switches["gpu"] else n for g, n in enumerate(names)]
        draw_gpu_lanes(top, iterations, requests, roles, window, norm, kv_capacity, names)
        if switches:
            draw_moves(top, switches, lambda g: gpu_lane_y(g, roles), window, result.records[name].stopped_at_ns / 1e9)
        log = result.records[name].preemptions  # E9
        preempted = None if log is None else pd.DataFrame({"request_id": log["request_id"],
                                                           "at_s": log["at_ns"] / 1e9})
        draw_reply_lanes(bottom, sample, words, slo, window, arrangement.unit, preempted)
        how = arrangement.description
        fig.suptitle(
            f"{name}, {result.seed_text}: {pct_text(summary['on_time_pct'])} of {int(summary['n_requests']):,} "
            "measured replies on time\n"
            f"{how}",
            fontsize=13, fontweight="bold",
        )
        spec = result.scenario.speculative  # E16: 1 + the accepted draft tokens
        each = "one word" if spec is None else f"1 to {1 + spec.tokens} words (speculative decoding, E16)"
        top.set_title(f"GPUs: one block per iteration; an iteration writes {each} for every reply on its GPU", loc="left")
        bottom.set_title(_sample_text(sample, requests, window, n_replies, on_time_share), loc="left")
        bottom.set_xlabel(f"time since traffic started (s); window {_secs(window[0])} to {_secs(window[1])} s")
        top.tick_params(axis="x", labelbottom=True)
        fig.colorbar(
            ScalarMappable(norm=norm, cmap=st.read_cmap()), ax=top, location="right", fraction=0.03, pad=0.01,
            label="prompt tokens read",
            extend="max" if norm.vmax < iterations["n_prompt_tokens_read"].max() else "neither",
        )
        link = arrangement.kv_link_mode != "independent"
        cached = result.scenario.prefix_cache_tokens is not None
        handles = _legend_handles(split, slo, kv_capacity is not None, link, cached, paged=preempted is not None)
        fig.legend(handles=handles + (move_handles() if switches else []), loc="outside right lower", frameon=False)
        return st.save_figure(fig, path)
