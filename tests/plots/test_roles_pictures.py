"""E12 in pictures: a timeline marks each move's drain and warm-up on its GPU's lane, and the
reading GPUs serving over time step at the moves (plots/roles.py)."""

from __future__ import annotations

import numpy as np
from helpers import run_rows
from matplotlib.figure import Figure

from disagg_simpy.plots.roles import draw_moves, reading_serving
from disagg_simpy.plots.timeline import gpu_lane_y

ROWS = [("0", 100, 5), ("0", 100, 3), ("0.030", 100, 3), ("0.080", 100, 2), ("0.0826", 100, 2)]
SPLIT = [{"name": "s", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 2,
          "roles": {"schedule": [{"from_s": 0.025, "reading_gpus": 2}], "switch_s": 0.010}}]


def test_a_move_is_drawn_as_its_drain_then_its_warm_up(tmp_path):
    res = run_rows(tmp_path, ROWS, SPLIT)
    sw = res.records["s"].switches  # GPU 1: asked 25 ms, drained 72.6 ms, serving 82.6 ms (tests/model/test_roles.py)
    ax = Figure().subplots()
    roles = list(res.gpu_roles("s"))
    draw_moves(ax, sw, lambda g: gpu_lane_y(g, roles), (0.0, 0.2), 0.2)
    boxes = {c.get_gid(): c.get_paths()[0].vertices for c in ax.collections}
    assert set(boxes) == {"moves-draining", "moves-warming"}
    xs = {gid: (v[:, 0].min(), v[:, 0].max()) for gid, v in boxes.items()}
    np.testing.assert_allclose(xs["moves-draining"], (0.025, 0.0726))
    np.testing.assert_allclose(xs["moves-warming"], (0.0726, 0.0826))
    assert [t.get_text() for t in ax.texts] == ["→ reads"]


def test_reading_gpus_serving_step_at_the_moves():
    sw = {"requested_at_ns": [10 * 10**9, 20 * 10**9], "serving_at_ns": [15 * 10**9, 30 * 10**9],
          "to_role": ["writes", "reads"]}
    t, n = reading_serving(2, sw, 40.0)
    # leaving reading at 10 s (asked), joining reading at 30 s (serving)
    assert list(zip(t.tolist(), n.tolist())) == [(0.0, 2), (10.0, 1), (30.0, 2), (40.0, 2)]


def test_the_page_carries_each_move_for_the_player(tmp_path):
    """The page's data: a moving GPU's lane says so, and its move's times in ns (the player draws
    the drain and the warm-up on the lane); a static arrangement has no `moves` key."""
    from disagg_simpy.page import embedded_data, page_html

    static = {"name": "p", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 2}
    res = run_rows(tmp_path, ROWS, SPLIT + [static])
    data = embedded_data(page_html(res))
    moving, plain = data["arrangements"]
    assert moving["moves"] == [{"gpu": 1, "to": "reads", "why": "schedule", "asked": 25_000_000,
                                "drained": 72_600_000, "serving": 82_600_000}]
    assert moving["lanes"] == ["GPU 0", "GPU 1 (moves)", "GPU 2"]
    assert "moves" not in plain and plain["lanes"] == ["GPU 0", "GPU 1", "GPU 2"]
