"""Follow one request through every arrangement: a row each, from arrival to last word.

Everything comes from the frames: the request's row of `requests`, its rows of `reads`
(which iterations read which chunk) joined to `iterations` (when they ran), and the writing
GPU's iterations (its words, and what froze them).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from . import style as st
from .data import frames_of, freeze_s, gaps_of, late_reason
from .timeline import ROLE_TEXT


def journey(result, name: str, request_id: int) -> dict:
    """One request in one arrangement: its `requests` row, the iterations that read it (with
    `n_tokens`), its words, the GPUs' iterations, and the GPU roles."""
    requests, iterations, reads = frames_of(result, name)
    row = requests[requests["request_id"] == request_id]
    mine = reads[reads["request_id"] == request_id][["gpu", "iteration", "n_tokens"]]
    read_its = mine.merge(iterations, on=["gpu", "iteration"], how="left").sort_values("started_at_s")
    return {
        "row": row.iloc[0],
        "read_iterations": read_its.reset_index(drop=True),
        "words": result.words(name, [request_id]),
        "iterations": iterations,
        "roles": result.gpu_roles(name),
        "gpu_name": next(a for a in result.scenario.arrangements if a.name == name).instance_name,  # TP: instances
        "stop_s": result.stream.cap_ns / 1e9,  # where a capped run stopped (an unfinished reply's end)
    }


def _lanes(j: dict) -> dict[str, float]:
    """Lane heights: the reading GPU, the writing GPU (if another one), the request."""
    r = j["row"]
    lanes = {"read": 2.0, "request": 0.0}
    if pd.notna(r.writing_gpu) and r.writing_gpu != r.reading_gpu:
        lanes["write"] = 1.0
    return lanes


def draw_journey(ax: Axes, j: dict, span: tuple[float, float], slo) -> Axes:
    """The request's lane and its GPUs' lanes, x in seconds since its arrival, within `span`."""
    r = j["row"]
    t0 = r.arrived_at_s
    lo, hi = span
    lanes = _lanes(j)
    it = j["iterations"]

    def gpu_lane(gpu: int, y: float) -> None:
        rows = it[(it["gpu"] == gpu) & (it["started_at_s"] - t0 < hi) & (it["ended_at_s"] - t0 > lo)]
        x0 = np.maximum(rows["started_at_s"].to_numpy() - t0, lo)
        x1 = np.minimum(rows["ended_at_s"].to_numpy() - t0, hi)
        reads = rows["n_prompt_tokens_read"].to_numpy() > 0
        colours = np.where(reads, "#F5C08A", st.WRITE_COLOUR)
        blocks = PolyCollection(st.boxes(x0, x1, np.full(len(x0), y), 0.7), facecolors=colours, edgecolors="white",
                                linewidths=0.4 if len(rows) < 300 else 0)
        blocks.set_gid(f"gpu-{gpu}-iterations")
        ax.add_collection(blocks)

    gpu_lane(int(r.reading_gpu), lanes["read"])
    if "write" in lanes:
        gpu_lane(int(r.writing_gpu), lanes["write"])

    ri = j["read_iterations"]
    ours = PolyCollection(
        st.boxes(ri["started_at_s"] - t0, ri["ended_at_s"] - t0, np.full(len(ri), lanes["read"]), 0.7),
        facecolors="#E66A00", edgecolors="black", linewidths=1.2,
    )
    ours.set_gid("request-reads")
    ax.add_collection(ours)

    y = lanes["request"]
    segs, styles = [], []
    first = r.first_word_at_s
    started = r.read_started_at_s
    # a step the run stopped in (safety cap) lasts to the run's last recorded instant
    stop = it["ended_at_s"].max() - t0 if pd.isna(r.finished_at_s) and len(it) else np.nan
    for a, b, colour, width, ls in (
        (0.0, started - t0, st.WAIT_COLOUR, 1.4, (0, (1, 1.5))),
        (started - t0, first - t0, "#E69F00", 3, "solid"),
        (first - t0, r.joined_at_s - t0, st.SHIP_COLOUR, 6, "solid"),
    ):
        b = stop if pd.isna(b) and pd.notna(a) else b
        if pd.notna(a) and pd.notna(b) and b > a:
            segs.append(((a, y), (b, y)))
            styles.append((colour, width, ls))
    if segs:
        ax.add_collection(LineCollection(segs, colors=[s[0] for s in styles], linewidths=[s[1] for s in styles],
                                         linestyles=[s[2] for s in styles]))

    words = j["words"]
    gaps = gaps_of(words).over(freeze_s(slo))
    gy = np.full(len(gaps), y)
    freezes = LineCollection(st.segments(gaps.from_s - t0, gy, gaps.to_s - t0, gy),
                             colors=st.FREEZE_COLOUR, linewidths=5)
    freezes.set_gid("freezes")
    ax.add_collection(freezes)
    later = words[words["word"] > 1]["at_s"].to_numpy() - t0
    ticks = LineCollection(st.segments(later, np.full(len(later), y - 0.3), later, np.full(len(later), y + 0.3)),
                           colors=st.WORD_COLOUR, linewidths=0.5)
    ticks.set_gid("words")
    ax.add_collection(ticks)
    ax.scatter([0.0], [y], marker=">", s=50, c="black", zorder=3)
    if pd.notna(first):
        ax.scatter([first - t0], [y], marker="D", s=36, c="black", zorder=3)

    ticks_y, labels = [lanes["read"], y], [f"{j['gpu_name'](int(r.reading_gpu))}: {ROLE_TEXT[j['roles'][int(r.reading_gpu)]]}",
                                             f"request #{int(r.request_id)}"]
    if "write" in lanes:
        ticks_y.insert(1, lanes["write"])
        labels.insert(1, f"{j['gpu_name'](int(r.writing_gpu))}: {ROLE_TEXT[j['roles'][int(r.writing_gpu)]]}")
    ax.set_yticks(ticks_y)
    ax.set_yticklabels(labels, fontsize=9)
    ax.set_ylim(-0.6, 2.6)
    ax.set_xlim(lo, hi)
    ax.tick_params(axis="y", length=0)
    ax.spines[["top", "right", "left"]].set_visible(False)
    return ax


def story(j: dict, slo) -> tuple[str, str]:
    """The journey in words: (up to the first word, the rest and the verdict)."""
    r = j["row"]
    ri = j["read_iterations"]
    parts = []
    gpu = j["gpu_name"](int(r.reading_gpu))
    if pd.isna(r.read_started_at_s):
        parts.append(f"still waiting for {gpu} when the run stopped")
    else:
        parts.append(f"waited {r.read_started_at_s - r.arrived_at_s:.2f} s")
        chunks = ri["n_tokens"].tolist()
        n = f"{len(chunks)} iteration{'s' * (len(chunks) != 1)}"
        detail = "+".join(str(c) for c in chunks) if len(chunks) <= 5 else f"{len(chunks)} chunks, {sum(chunks)}"
        if pd.notna(r.first_word_at_s):
            parts.append(f"read on {gpu} in {n} ({detail} tokens)")
        elif chunks:  # the iterations that read it so far; the one in progress is not recorded
            parts.append(f"{n} on {gpu} read {sum(chunks)} of its {r.n_prompt_tokens} tokens before the run stopped")
        else:
            parts.append(f"being read on {gpu} when the run stopped")
    before, parts = parts, []
    if pd.notna(r.joined_at_s) and r.joined_at_s > r.first_word_at_s:
        ship_ms = 1000 * (r.joined_at_s - r.first_word_at_s)
        parts.append(f"KV cache shipped in {ship_ms:.0f} ms to {j['gpu_name'](int(r.writing_gpu))}")
    if r.n_reply_words > 1 and pd.notna(r.writing_gpu):
        n_fz = int(r.n_freezes) if pd.notna(r.n_freezes) else 0
        gap = f", mean gap {r.mean_gap_ms:.0f} ms" if pd.notna(r.mean_gap_ms) else ""
        written = f"{r.n_reply_words} words" if pd.notna(r.finished_at_s) else (
            f"{len(j['words'])} of {r.n_reply_words} words (when the run stopped)")
        parts.append(f"{written} written on {j['gpu_name'](int(r.writing_gpu))}{gap}, {n_fz} freeze{'s' * (n_fz != 1)}")
    verdict = "✓ on time" if r.on_time else f"✗ not on time ({late_reason(r, slo)})"
    return "; ".join(before), "; ".join(parts + [verdict])


def _zoom_end(j: dict) -> float:
    """Seconds after arrival where the close-up ends: a little after word 2 (or word 1)."""
    r = j["row"]
    words = j["words"]
    key = words[words["word"] <= 3]["at_s"]
    if len(key):
        end = key.max()
    else:  # no word yet when the run stopped: show up to the stop
        end = j["stop_s"]
    end = end - r.arrived_at_s
    return end + max(0.03, 0.08 * end)


def save_follow(result, request_id: int, path: Path) -> Path:
    """`follow-<id>.png`: one row per arrangement, a close-up of the start and the whole reply."""
    with st.style():
        return st.save_figure(follow_figure(result, request_id), path)


def follow_figure(result, request_id: int):
    """`save_follow`'s figure. Under E16 an iteration writes 1 to 1 + k words of the reply at one
    instant, so a tick can stand for several words, and the title and legend say so."""
    spec = result.scenario.speculative
    together = "" if spec is None else f"; words written together (1 to {1 + spec.tokens} an iteration, E16) share a tick"
    names = [a.name for a in result.scenario.arrangements]
    styles = st.arrangement_styles(names)
    slo = result.scenario.slo
    journeys = [journey(result, n, request_id) for n in names]
    whole = max(
        (j["row"].finished_at_s if pd.notna(j["row"].finished_at_s) else j["stop_s"]) - j["row"].arrived_at_s
        for j in journeys
    )
    r0 = journeys[0]["row"]
    fig = st.new_figure(16, 1.0 + 2.6 * len(names))
    rows = fig.subfigures(len(names), 1, squeeze=False)[:, 0]
    shared = None
    for sub, name, j in zip(rows, names, journeys):
        first, rest = story(j, slo)
        sub.suptitle(f"{name}:  {first}\n{rest}", x=0.012, ha="left", fontsize=10)
        sub.patch.set_facecolor("none")
        swatch = sub.add_artist(Line2D([0.004, 0.004], [0.83, 0.99], lw=6, color=styles[name]["color"],
                                       transform=sub.transSubfigure))
        swatch.set_gid("arrangement-colour")
        close, full = sub.subplots(1, 2, width_ratios=[1, 1.6], sharey=True)
        draw_journey(close, j, (-0.02 * _zoom_end(j), _zoom_end(j)), slo)
        draw_journey(full, j, (-0.01 * whole, whole * 1.01), slo)
        close.set_title(f"close-up: arrival to word 3{together}", loc="left", fontsize=9)
        full.set_title("the whole reply", loc="left", fontsize=9)
        if shared is None:
            shared = full
        else:
            full.sharex(shared)
    for sub in rows[-1:]:
        for ax in sub.axes:
            ax.set_xlabel("seconds since the request arrived")
    fig.suptitle(
        f"Request #{request_id} ({int(r0.n_prompt_tokens)} prompt tokens, {int(r0.n_reply_words)} reply words, "
        f"arrived at {r0.arrived_at_s:.2f} s, {result.seed_text}) in each arrangement",
        fontsize=13, fontweight="bold",
    )
    handles = [
        Line2D([], [], color="black", marker=">", ls="none", label="arrival"),
        Line2D([], [], color=st.WAIT_COLOUR, ls=(0, (1, 1.5)), lw=1.4, label="waits to be read"),
        Patch(facecolor="#E66A00", edgecolor="black", label="iteration reading this prompt"),
        Patch(facecolor="#F5C08A", label="iteration reading other prompts"),
        Patch(facecolor=st.WRITE_COLOUR, label="iteration only writing"),
        Line2D([], [], color="black", marker="D", ls="none", label="first word"),
        Line2D([], [], color=st.SHIP_COLOUR, lw=5, label="KV cache ships"),
        Line2D([], [], color=st.WORD_COLOUR, marker="|", ls="none", ms=9,
               label="a later word" if spec is None else f"later words (1 to {1 + spec.tokens} a tick, E16)"),
        *([Line2D([], [], color=st.FREEZE_COLOUR, lw=5, label=f"freeze (gap > {slo.freeze_ms:g} ms)")]
          if slo.freeze_ms is not None else []),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), frameon=False, fontsize=8.5)
    return fig
