"""Pictures as rendered (issue 24): no label struck through or run together, colours the same
for an arrangement in every picture, legends off the data. Checked on the drawn figure's text
and artist bounding boxes (Agg renderer), not on pixels."""

from __future__ import annotations

import types

import numpy as np
import pandas as pd
import pytest

from disagg_simpy.plots import style as st


@pytest.fixture
def drawn(monkeypatch):
    """save_figure keeping the figure (drawn, so bounding boxes are final) instead of writing it."""
    figures = []

    def keep(fig, path, dpi=None):
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        FigureCanvasAgg(fig).draw()
        figures.append(fig)
        return path

    monkeypatch.setattr(st, "save_figure", keep)
    return figures


def _box(artist, fig):
    return artist.get_window_extent(fig.canvas.get_renderer())


def _overlap(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def test_plans_value_labels_are_not_struck_through_by_interval_lines(drawn, tmp_path):
    from disagg_simpy.plots.capacity import save_plan

    table = pd.DataFrame({"rank": [1, 2, 3], "arrangement": ["split-2-2", "chunked-512", "split-3-1"],
                          "kind": ["disaggregated", "colocated", "disaggregated"], "chunk_tokens": [None, 512, None],
                          "goodput_per_s": [15.8, 14.4, 7.62], "goodput_low_per_s": [15.1, 13.0, 7.1],
                          "goodput_high_per_s": [16.9, 15.2, 8.53]})
    save_plan(table, tmp_path / "plan.png", "plan",
              {"split-2-2": "split", "chunked-512": "chunks", "split-3-1": "split"})
    fig = drawn[0]
    ax = fig.axes[0]
    labels = [t for t in ax.texts if t.get_gid() == "goodput-value"]
    lines = ax.collections[-1]  # the interval lines (hlines)
    assert len(labels) == 3
    for text, segment in zip(labels, lines.get_segments()):
        (x0, y), (x1, _) = segment
        ends = ax.transData.transform([(x0, y), (x1, y)])
        assert _box(text, fig).x0 >= ends[1][0] - 0.5, text.get_text()  # the label starts where the line ends


def test_the_cost_plans_cost_error_bands_stand_at_each_of_the_top_twos_dollars(drawn, tmp_path):
    """plan --gpu-kinds' plan.png: the top two's goodput with the costs off as grey vertical
    bands at their dollars an hour, one legend entry for both."""
    from disagg_simpy.plots.capacity import save_cost_plan

    table = pd.DataFrame({"arrangement": ["h100-same-1", "a100-same-1", "a100-same-2"],
                          "gpu_kinds": ["h100-80gb", "a100-80gb", "a100-80gb"], "dollars_per_hour": [2.9, 1.64, 3.28],
                          "goodput_per_s": [26.8, 10.8, 20.0], "goodput_low_per_s": [25.0, 10.0, np.nan],
                          "goodput_high_per_s": [28.0, 11.5, np.nan], "goodput_below_per_s": [np.nan] * 3,
                          "cost_error_low_per_s": [24.6, 9.0, np.nan], "cost_error_high_per_s": [39.9, 11.5, np.nan]})
    save_cost_plan(table, tmp_path / "plan.png", "plan")
    ax = drawn[0].axes[0]
    bands = [c for c in ax.collections if c.get_gid() == "cost-error-band"]
    spans = sorted((float(seg[0][0]), float(seg[0][1]), float(seg[1][1])) for c in bands for seg in c.get_segments())
    assert spans == [(1.64, 9.0, 11.5), (2.9, 24.6, 39.9)]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels.count("goodput with the costs off by the error checked") == 1


def test_plans_cost_error_band_spans_its_range_behind_the_seed_interval(drawn, tmp_path):
    """plan.csv's cost_error_* columns (the top two, when plan checked them) drawn as a grey band
    from the low to the high goodput, behind the black seed-interval line, with a legend entry."""
    from disagg_simpy.plots.capacity import save_plan

    table = pd.DataFrame({"rank": [1, 2, 3], "arrangement": ["split-2-2", "chunked-512", "split-3-1"],
                          "goodput_per_s": [15.8, 14.4, 7.62], "goodput_low_per_s": [15.1, 13.0, 7.1],
                          "goodput_high_per_s": [16.9, 15.2, 8.53], "cost_error_low_per_s": [13.9, 12.0, np.nan],
                          "cost_error_high_per_s": [17.5, 15.0, np.nan]})
    save_plan(table, tmp_path / "plan.png", "plan", {"split-2-2": "split", "chunked-512": "chunks", "split-3-1": "split"})
    fig = drawn[0]
    ax = fig.axes[0]
    bands = [c for c in ax.collections if c.get_gid() == "cost-error-band"]
    spans = sorted((float(seg[0][0]), float(seg[1][0]), float(seg[0][1])) for c in bands for seg in c.get_segments())
    assert spans == [(12.0, 15.0, 1.0), (13.9, 17.5, 2.0)]  # rows 1 and 2 from the top (y 2, 1); none on the third
    intervals = ax.collections[-1]
    assert all(b.get_zorder() <= intervals.get_zorder() for b in bands)
    legend = fig.legends[0]
    assert "goodput with the costs off by the error checked" in [t.get_text() for t in legend.get_texts()]
    assert ax.get_xlim()[1] >= 17.5


def _bands():
    rows = []
    for name, base in (("same-gpu", 30.0), ("chunked-512", 85.0), ("split-2-2", 95.0)):
        for rate in (8.0, 12.0, 16.0):
            m = base - rate
            rows.append({"rate_per_s": rate, "arrangement": name, "on_time_pct": m, "on_time_low_pct": m - 4,
                         "on_time_high_pct": min(m + 3, 100), "seeds": 5})
    return pd.DataFrame(rows)


def test_sweeps_target_label_is_off_the_curves_and_bands_keep_their_colours(drawn, tmp_path):
    from disagg_simpy.plots.capacity import save_sweep

    save_sweep(_bands(), ["rate_per_s"], tmp_path / "sweep.png", "sweep", target=90.0)
    fig = drawn[0]
    ax = fig.axes[0]
    label = next(t for t in ax.texts if t.get_gid() == "target-label")
    assert _box(label, fig).x0 >= ax.get_window_extent().x1  # right of the panel: no curve there
    styles = st.arrangement_styles(["same-gpu", "chunked-512", "split-2-2"])
    for name, s in styles.items():
        edges = [line for line in ax.lines if line.get_gid() == f"band-edge:{name}"]
        assert len(edges) == 2 and all(line.get_color() == s["color"] for line in edges)


def test_the_map_colours_an_arrangement_as_every_other_picture_does(drawn, tmp_path):
    from matplotlib.colors import to_hex

    from disagg_simpy.plots.capacity import save_map

    names = ["same-gpu", "chunked-512", "split-2-2", "split-1-3", "split-3-1"]
    cells = pd.DataFrame([{"rate_per_s": r, "y_key": "long_prompt_share", "y_value": y, "winner": w,
                           "winner_on_time_pct": 90.0, "runner_up": "same-gpu", "runner_up_on_time_pct": 50.0,
                           "too_close": False}
                          for r, w in zip((5.0, 10.0, 15.0, 20.0), ("split-2-2", "chunked-512", "split-1-3", "split-3-1"))
                          for y in (0.1, 0.2)])
    save_map(cells, tmp_path / "map.png", "map", None, names)
    legend = drawn[0].legends[0]
    shown = {t.get_text(): to_hex(h.get_facecolor()) for t, h in zip(legend.get_texts(), legend.legend_handles)
             if t.get_text() in names}
    styles = st.arrangement_styles(names)
    assert shown == {n: styles[n]["color"].lower() for n in shown} and len(shown) == 4
    assert len(set(shown.values())) == len(shown)


class _Gaps:
    """A run's gap distribution spanning four decades (10 ms to 100 s), as on the realistic scenario."""

    def gap_distribution(self, name):
        return np.geomspace(0.01, 100, 50), np.ones(50, dtype=np.int64)


def test_the_gap_axis_tick_labels_do_not_run_together_over_many_decades():
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from disagg_simpy.plots.summary import draw_gap_cdf

    fig = st.new_figure(15, 5)
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, 3, width_ratios=[1, 1.15, 1.15])
    slo = types.SimpleNamespace(mean_gap_ms=50, freeze_ms=250)
    ax = draw_gap_cdf(axes[2], _Gaps(), st.arrangement_styles(["a", "b"]), slo)
    fig.canvas.draw()
    low, high = ax.get_xlim()
    labels = [t for t, x in zip(ax.get_xticklabels(), ax.get_xticks()) if t.get_text() and low <= x <= high]
    boxes = [_box(t, fig) for t in labels]
    assert len(boxes) >= 3
    assert not any(_overlap(a, b) for a, b in zip(boxes, boxes[1:])), [t.get_text() for t in labels]


def test_describe_names_the_trace_and_keeps_legends_off_the_bars():
    from disagg_simpy.plots.trace import description_figure

    rng = np.random.default_rng(0)
    n = 500
    df = pd.DataFrame({"arrived_at_ns": np.sort(rng.integers(0, 300 * 10**9, n)),
                       "n_prompt_tokens": rng.integers(10, 30000, n), "n_reply_words": rng.integers(1, 2000, n)})
    fig = description_figure(df, "azure-code")
    fig.canvas.draw()
    assert "azure-code" in fig._suptitle.get_text()
    for ax in fig.axes:
        legend = ax.get_legend()
        assert legend is not None and _box(legend, fig).x0 >= ax.get_window_extent().x1 - 1


def test_late_pngs_ship_part_says_it_holds_the_wait_for_kv_memory():
    from disagg_simpy.plots.late import ship_label

    plain = pd.DataFrame({"handoff_wait_s": [np.nan], "link_wait_s": [np.nan]})
    assert ship_label(plain) == "KV ship"
    held = pd.DataFrame({"handoff_wait_s": [0.2], "link_wait_s": [np.nan]})
    assert ship_label(held) == "KV ship (with the wait for KV memory)"
    both = pd.DataFrame({"handoff_wait_s": [0.2], "link_wait_s": [0.0]})
    assert ship_label(both) == "KV ship (with the wait for KV memory and the link)"


def _plan_table(n_left: int) -> pd.DataFrame:
    """Two searched arrangements and `n_left` the search left (their goodput below a bound)."""
    rows = [{"arrangement": "split-3-3", "goodput_per_s": 22.5, "goodput_low_per_s": 21.9, "goodput_high_per_s": 23.0,
             "goodput_below_per_s": np.nan},
            {"arrangement": "split-3-3-chunked-2048", "goodput_per_s": 22.3, "goodput_low_per_s": np.nan,
             "goodput_high_per_s": np.nan, "goodput_below_per_s": np.nan}]
    rows += [{"arrangement": f"chunked-{2 ** (8 + i)}" if i < 3 else f"split-1-5-chunked-{i}", "goodput_per_s": np.nan,
              "goodput_low_per_s": np.nan, "goodput_high_per_s": np.nan, "goodput_below_per_s": 22.3 - i / 10}
             for i in range(n_left)]
    table = pd.DataFrame(rows)
    return table.assign(rank=range(1, len(table) + 1))


def test_plan_draws_a_mark_for_every_row_and_a_legend_of_what_is_drawn(drawn, tmp_path):
    """plan.png drew bars for 2 of 40 rows (the search leaves most arrangements with only a bound)
    and a legend for colours no bar had: every row now has a bar (filled: its goodput; hatched: the
    bound its goodput is below), and each legend entry matches a drawn bar's colour and fill."""
    from matplotlib.colors import to_rgba
    from matplotlib.patches import Rectangle

    from disagg_simpy.plots.capacity import save_plan

    table = _plan_table(38)
    labels = {n: "split" if n.startswith("split") else "chunks" for n in table.arrangement}
    save_plan(table, tmp_path / "plan.png", "plan", labels)
    fig = drawn[0]
    ax = fig.axes[0]
    bars = [p for p in ax.patches if isinstance(p, Rectangle) and p.get_width() > 0]
    rows = {round(b.get_y() + b.get_height() / 2) for b in bars}
    assert rows == set(range(len(table)))  # one bar on every row
    legend = fig.legends[0] if fig.legends else ax.get_legend()
    looks = {(to_rgba(b.get_facecolor()), bool(b.get_hatch()), to_rgba(b.get_edgecolor())[:3]) for b in bars}
    for handle, text in zip(legend.legend_handles, legend.get_texts()):
        if handle.get_hatch():  # the hatched entry: some bar is hatched
            assert any(hatched for _, hatched, _ in looks), text.get_text()
        else:  # a kind's colour: some filled bar has it
            assert any(face[:3] == to_rgba(handle.get_facecolor())[:3] and not hatched
                       for face, hatched, _ in looks) or any(edge == to_rgba(handle.get_facecolor())[:3]
                                                             for _, hatched, edge in looks if hatched), text.get_text()
    names = {t.get_text() for t in legend.get_texts()}
    assert "same GPU" not in names and {"split", "chunks"} <= names  # no colour that is not drawn
    bounds = [t.get_text() for t in ax.texts if t.get_gid() == "goodput-bound"]
    assert len(bounds) == 38 and all(b.startswith(" below ") for b in bounds)
    boxes = [_box(t, fig) for t in ax.texts]
    assert all(b.x1 <= _box(ax, fig).x1 + 1 for b in boxes)  # the values and bounds stay inside the axes


@pytest.mark.parametrize(("low", "high", "near_zero"), [(7.5, 38.0, False), (0.0743, 621.4, False),
                                                       (1.0, 1e12, True)])
def test_fit_log_axes_never_print_labels_over_each_other(drawn, tmp_path, low, high, near_zero):
    """fit.png printed tick labels over each other: the log-log panel's two 10^0 at its corner, its
    last x label over the next panel's first, the fitted axis reaching 1e-10 when a fit came out near
    0 (issue 37's huge row). Over tables from under a decade to twelve, no two tick labels of the
    figure touch (as the renderer measures them) and each log axis keeps at least two."""
    import itertools

    from disagg_simpy.plots.fit import save_fit

    ms = np.geomspace(low, high, 60)
    fitted = ms * (1 + 0.3 * np.sin(np.arange(60)))
    if near_zero:  # half the rows fitted at ~0, as a fit zeroed by one huge row gives
        fitted = np.where(np.arange(60) % 2, 1e-9, fitted)
    rows = pd.DataFrame({"ms": ms, "fitted_ms": fitted,
                         "kind": np.where(np.arange(60) % 3, "writing only", "whole prompt")})
    save_fit(rows, tmp_path / "fit.png", "fit")
    fig = drawn[0]
    renderer = fig.canvas.get_renderer()
    labels = [t for ax in fig.axes for axis in (ax.xaxis, ax.yaxis) for t in axis.get_ticklabels()
              if t.get_visible() and t.get_text()]
    for a, b in itertools.combinations(labels, 2):
        assert not _overlap(a.get_window_extent(renderer), b.get_window_extent(renderer)), (a.get_text(), b.get_text())
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            if axis.get_scale() == "log":
                assert sum(bool(t.get_text()) for t in axis.get_ticklabels()) >= 2, axis.axis_name
