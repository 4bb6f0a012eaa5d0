"""The timeline's reply lanes draw each phase of a reply from the right columns.

One hand-built split reply whose times all differ: a segment drawn from a wrong column (say
reading from `arrived_at_s`) moves an end, so each segment's x-extent is checked exactly.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from disagg_simpy.plots.timeline import draw_reply_lanes

SLO = SimpleNamespace(first_word_s=2.0, mean_gap_ms=50.0, freeze_ms=250.0)  # M7's defaults

# request 7: arrives 1.0 s, waits for its reading GPU until 1.2, is read until word 1 at 1.5,
# ships its KV cache until 1.6, then words 2..4 at 1.8 (a 300 ms gap: a freeze), 1.85, 2.3
# (450 ms: a freeze). Request 9 (one word, on time, no ship) arrives later: the lane below.
SAMPLE = pd.DataFrame({
    "request_id": [7, 9],
    "arrived_at_s": [1.0, 1.1],
    "n_prompt_tokens": [800, 300],
    "n_reply_words": [4, 1],
    "reading_gpu": pd.array([0, 1], dtype="Int64"),
    "read_started_at_s": [1.2, 1.3],
    "first_word_at_s": [1.5, 1.35],
    "writing_gpu": pd.array([2, pd.NA], dtype="Int64"),
    "joined_at_s": [1.6, np.nan],
    "finished_at_s": [2.3, 1.35],
    "first_word_s": [0.5, 0.25],
    "mean_gap_ms": [800 / 3, np.nan],
    "max_gap_ms": [450.0, np.nan],
    "n_freezes": pd.array([2, 0], dtype="Int64"),
    "on_time": [False, True],
})
WORDS = pd.DataFrame({"request_id": [7, 7, 7, 7, 9], "word": [1, 2, 3, 4, 1], "at_s": [1.5, 1.8, 1.85, 2.3, 1.35]})
LANE = {7: 1.0, 9: 0.0}  # earliest arrival on top


@pytest.fixture
def ax():
    return Figure().subplots()  # no pyplot: nothing to close, no backend needed


def spans(ax, gid: str) -> list[tuple[float, float, float]]:
    """(x0, x1, y) of each horizontal segment in the collection with this gid."""
    found = [c for c in ax.collections if c.get_gid() == gid]
    assert len(found) == 1, f"expected one collection {gid!r}, got {len(found)}"
    out = []
    for seg in found[0].get_segments():
        (x0, y0), (x1, y1) = seg
        assert y0 == y1, f"{gid}: a lane segment is horizontal"
        out.append((float(x0), float(x1), float(y0)))
    return sorted(out)


@pytest.mark.parametrize(
    ("gid", "want"),
    [
        ("waiting", [(1.0, 1.2, LANE[7]), (1.1, 1.3, LANE[9])]),  # arrived_at_s -> read_started_at_s
        ("reading", [(1.2, 1.5, LANE[7]), (1.3, 1.35, LANE[9])]),  # read_started_at_s -> first_word_at_s
        ("ships", [(1.5, 1.6, LANE[7])]),  # first_word_at_s -> joined_at_s (a one-word reply has none)
        ("freezes", [(1.5, 1.8, LANE[7]), (1.85, 2.3, LANE[7])]),  # gaps over 250 ms, word to word
    ],
)
def test_each_phase_of_a_reply_spans_its_own_columns(ax, gid, want):
    draw_reply_lanes(ax, SAMPLE, WORDS, SLO, (0.0, 3.0))
    assert spans(ax, gid) == want


def test_words_and_first_words_sit_at_their_times(ax):
    draw_reply_lanes(ax, SAMPLE, WORDS, SLO, (0.0, 3.0))
    first = next(c for c in ax.collections if c.get_gid() == "first-words")
    assert sorted(map(tuple, first.get_offsets().tolist())) == [(1.35, LANE[9]), (1.5, LANE[7])]
    ticks = next(c for c in ax.collections if c.get_gid() == "words")
    assert sorted(float(s[0][0]) for s in ticks.get_segments()) == [1.8, 1.85, 2.3]


def test_segments_are_clipped_to_the_window(ax):
    draw_reply_lanes(ax, SAMPLE, WORDS, SLO, (1.15, 2.0))
    assert spans(ax, "waiting") == [(1.15, 1.2, LANE[7]), (1.15, 1.3, LANE[9])]
    assert spans(ax, "freezes") == [(1.5, 1.8, LANE[7]), (1.85, 2.0, LANE[7])]
