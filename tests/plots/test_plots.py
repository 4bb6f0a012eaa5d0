"""The pictures: drawn artists checked against the frames (no pixel baselines), and CLI smoke
tests that open each PNG. One short run of the default scenario is shared by the module."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import matplotlib.image as mpimg
import numpy as np
import pandas as pd
import pytest
import yaml
from helpers import DEFAULT, ONE_GPU_THREE_WAYS, ROOT, small_traffic_scenario
from matplotlib.figure import Figure

from disagg_simpy import load_scenario, run
from disagg_simpy.cli import main
from disagg_simpy.cli.plot_flags import parse_window
from disagg_simpy.errors import InputError
from disagg_simpy.plots import (
    default_window,
    draw_gap_cdf,
    draw_gpu_lanes,
    draw_journey,
    draw_late_limits,
    draw_on_time_bars,
    draw_reply_lanes,
    draw_time_parts,
    journey,
    sample_replies,
)
from disagg_simpy.plots.data import (
    check_follow,
    check_window,
    frames_of,
    run_end_s,
)
from disagg_simpy.plots.style import tokens_norm
from disagg_simpy.plots.timeline import gpu_lane_y

SLACK_S = 1e-9


@pytest.fixture(scope="module")
def res():
    return run(load_scenario(DEFAULT).with_overrides(**{"workload.measure_s": 8}))


@pytest.fixture(scope="module")
def small_yaml(tmp_path_factory) -> Path:
    """The default scenario cut to 5 s, one seed and two arrangements, for quick CLI runs."""
    raw = yaml.safe_load(DEFAULT.read_text())
    raw["workload"]["measure_s"] = 5
    raw.pop("max_sim_s", None)
    raw.pop("seeds", None)  # one seed
    raw["arrangements"] = [a for a in raw["arrangements"] if a["name"] in ("same-gpu", "split-2-2")]
    path = tmp_path_factory.mktemp("scenario") / "small.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.fixture(scope="module")
def same_gpu_yaml(small_yaml) -> Path:
    """small_yaml with same-gpu alone: for the CLI tests that look at its pictures only (each
    arrangement costs a timeline picture, about a second)."""
    raw = yaml.safe_load(small_yaml.read_text())
    raw["arrangements"] = [a for a in raw["arrangements"] if a["name"] == "same-gpu"]
    path = small_yaml.with_name("same-gpu.yaml")
    path.write_text(yaml.safe_dump(raw))
    return path


def names(res) -> list[str]:
    return [a.name for a in res.scenario.arrangements]



def by_gid(ax, gid: str):
    found = [c for c in ax.collections if c.get_gid() == gid]
    assert len(found) == 1, f"expected one collection {gid!r}, got {len(found)}"
    return found[0]


def n_paths(coll) -> int:
    return len(coll.get_segments()) if hasattr(coll, "get_segments") else len(coll.get_paths())


def in_window(frame: pd.DataFrame, a: str, b: str, window) -> pd.DataFrame:
    return frame[(frame[a] < window[1]) & (frame[b] > window[0])]


def timeline_axes(res, name, window, n=25):
    """Draw one arrangement's timeline panels; return (gpu axes, reply axes, sample)."""
    requests, iterations, _ = frames_of(res, name)
    sample = sample_replies(requests, window, n)
    fig = Figure()
    top, bottom = fig.subplots(2, 1)
    norm = tokens_norm(res.requests["n_prompt_tokens"].max())
    draw_gpu_lanes(top, iterations, requests, res.gpu_roles(name), window, norm)
    draw_reply_lanes(bottom, sample, res.words(name, sample["request_id"]), res.scenario.slo, window)
    return top, bottom, sample


def freezes_from_run(res, name, sample, window) -> int:
    """Freezes of the sampled replies that overlap `window`, from the model's own words."""
    words = res.words(name)
    words = words[words["request_id"].isin(sample["request_id"])]
    rid, at = words["request_id"].to_numpy(), words["at_s"].to_numpy()
    same = rid[1:] == rid[:-1]
    a, b = at[:-1][same], at[1:][same]
    over = b - a > res.scenario.slo.freeze_ms / 1000 + SLACK_S
    return int((over & (b > window[0]) & (a < window[1])).sum())


# -- what the pictures derive from the frames --------------------------------------------


def test_words_of_some_requests_equal_those_rows_of_all_words(res):
    for name in names(res):
        ids = res.requests.loc[res.requests["arrangement"] == name, "request_id"].to_numpy()[::7]
        got = res.words(name, ids[::-1])  # any order in, id order out
        want = res.words(name)
        want = want[want["request_id"].isin(ids)].reset_index(drop=True)
        pd.testing.assert_frame_equal(got, want)


def test_sample_is_even_and_in_progress_during_the_window(res):
    window = default_window(res)
    requests = frames_of(res, "same-gpu")[0]
    sample = sample_replies(requests, window, 20)
    assert len(sample) == 20
    assert (sample["arrived_at_s"] < window[1]).all()
    assert (sample["finished_at_s"] >= window[0]).all()
    assert sample["request_id"].is_monotonic_increasing
    assert len(sample_replies(requests, window, 10_000)) < 10_000  # all of them, no repeats


def test_default_window_is_4_s_from_a_third_into_the_measured_window(res):
    assert default_window(res) == pytest.approx((8 / 3, 8 / 3 + 4))


# -- timelines ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["same-gpu", "chunked-512", "split-2-2", "split-3-1"])
def test_orange_blocks_are_the_reading_iterations_in_the_window(res, name):
    window = default_window(res)
    top, _, _ = timeline_axes(res, name, window)
    iterations = in_window(frames_of(res, name)[1], "started_at_s", "ended_at_s", window)
    reading = by_gid(top, "iterations-reading")
    assert n_paths(reading) == int((iterations["n_prompt_tokens_read"] > 0).sum()) > 0
    assert n_paths(by_gid(top, "iterations-writing")) == int((iterations["n_prompt_tokens_read"] == 0).sum())
    # shaded by tokens read, clipped to the window
    np.testing.assert_array_equal(reading.get_array(), iterations.loc[iterations["n_prompt_tokens_read"] > 0,
                                                                      "n_prompt_tokens_read"])
    xs = np.concatenate([p.vertices[:, 0] for p in reading.get_paths()])
    assert xs.min() >= window[0] and xs.max() <= window[1]


@pytest.mark.parametrize("name", ["split-2-2", "split-1-3", "split-3-1"])
def test_split_arrangements_have_no_orange_on_writing_lanes(res, name):
    window = default_window(res)
    top, _, _ = timeline_axes(res, name, window)
    roles = res.gpu_roles(name)
    lane_role = {float(y): role for y, role in zip(gpu_lane_y(np.arange(len(roles)), roles), roles)}
    centres = [float(np.mean(p.vertices[:4, 1])) for p in by_gid(top, "iterations-reading").get_paths()]
    assert centres and {lane_role[round(c, 9)] for c in centres} == {"reads"}
    writing = [float(np.mean(p.vertices[:4, 1])) for p in by_gid(top, "iterations-writing").get_paths()]
    assert {lane_role[round(c, 9)] for c in writing} == {"writes"}


@pytest.mark.parametrize("name", ["same-gpu", "split-3-1", "split-2-2"])
def test_red_segments_are_the_freezes_of_the_sampled_replies(res, name):
    window = default_window(res)
    _, bottom, sample = timeline_axes(res, name, window)
    want = freezes_from_run(res, name, sample, window)
    assert n_paths(by_gid(bottom, "freezes")) == want
    if name == "same-gpu":
        assert want > 0  # the default load freezes same-gpu replies


def test_over_the_whole_run_red_segments_add_up_to_n_freezes(res):
    window = (0.0, run_end_s(res) + 1)
    _, bottom, sample = timeline_axes(res, "same-gpu", window, n=30)
    assert n_paths(by_gid(bottom, "freezes")) == int(sample["n_freezes"].sum()) > 0


def test_reply_lanes_show_each_word_and_the_verdict(res):
    window = default_window(res)
    _, bottom, sample = timeline_axes(res, "split-2-2", window)
    words = res.words("split-2-2")
    words = words[words["request_id"].isin(sample["request_id"])]
    shown = words[(words["at_s"] >= window[0]) & (words["at_s"] <= window[1])]
    assert n_paths(by_gid(bottom, "words")) == int((shown["word"] > 1).sum())
    assert len(by_gid(bottom, "first-words").get_offsets()) == int((shown["word"] == 1).sum())
    assert n_paths(by_gid(bottom, "late-band")) == int((~sample["on_time"]).sum())
    assert len(bottom.get_yticklabels()) == len(sample)


def test_ships_drawn_for_splits_only(res):
    window = default_window(res)
    for name in ("same-gpu", "split-2-2"):
        top, _, _ = timeline_axes(res, name, window)
        ships = [c for c in top.collections if c.get_gid() == "kv-ships"]
        if name == "same-gpu":
            assert ships == []
        else:
            requests = frames_of(res, name)[0]
            want = in_window(requests[requests["joined_at_s"] > requests["first_word_at_s"]],
                             "first_word_at_s", "joined_at_s", window)
            assert n_paths(ships[0]) == len(want) > 0


# -- summary and follow -------------------------------------------------------------------


def test_reference_markers_only_for_names_the_reference_gives(res):
    summary = pd.DataFrame({"arrangement": ["same-gpu", "mine", "split-2-2"], "on_time_pct": [3.0, 50.0, 90.0]})
    styles = {n: {"color": "C0", "linestyle": "-"} for n in summary["arrangement"]}
    reference = {"same-gpu": 1.0, "split-2-2": 100.0, "elsewhere": 5.0}
    ax = draw_on_time_bars(Figure().add_subplot(), summary, styles, reference)
    heights = [p.get_height() for p in ax.patches if p.get_gid() == "on-time-bar"]
    assert heights == [3.0, 50.0, 90.0]
    marks = by_gid(ax, "seed-markers").get_offsets()
    assert marks.tolist() == [[0, 1.0], [2, 100.0]]


def _summary_figure(result, monkeypatch) -> Figure:
    """The figure `save_summary` draws, without writing it."""
    import disagg_simpy.plots.style as style
    from disagg_simpy.plots import save_summary

    drawn = []
    monkeypatch.setattr(style, "save_figure", lambda fig, path: drawn.append(fig) or Path(path))
    save_summary(result, Path("unused.png"))
    return drawn[0]


def test_reference_diamonds_only_where_the_scenario_declares_them(res, monkeypatch):
    """The default scenario declares the explainer's figures; the same arrangements in a scenario
    without `reference:` (another model, another trace) get no diamond."""
    fig = _summary_figure(res, monkeypatch)
    bars = fig.axes[0]
    marks = by_gid(bars, "seed-markers").get_offsets()[:, 1].tolist()
    assert marks == [res.scenario.reference.on_time_pct[n] for n in names(res)] == [1, 89, 100, 10, 10]
    assert any("explainer page" in t.get_text() for t in fig.legends[0].get_texts())
    bare = run(res.scenario.model_copy(update={"reference": None}).with_overrides(**{"workload.measure_s": 2}))
    fig = _summary_figure(bare, monkeypatch)
    assert [c for c in fig.axes[0].collections if c.get_gid() == "seed-markers"] == []
    assert not any("page" in t.get_text() for t in fig.legends[0].get_texts())


class _WideGaps:
    """A stand-in result whose gaps run from 12 ms to 6 s (a Mooncake-like run)."""

    def gap_distribution(self, name):
        return np.geomspace(0.012, 6.0, 50), np.ones(50, dtype=np.int64)


def test_limit_labels_never_touch_the_panel_title(res):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = Figure(figsize=(16, 5.4), layout="constrained")
    FigureCanvasAgg(fig)
    ax = draw_gap_cdf(fig.subplots(1, 3)[2], _WideGaps(), {"x": {"color": "C0"}}, res.scenario.slo)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    title = ax.title.get_window_extent(renderer)
    labels = [t.get_window_extent(renderer) for t in ax.texts if t.get_gid() == "limit-label"]
    assert len(labels) == 2 and labels[0].y1 < labels[1].y1  # crowded: two rows
    assert not any(label.overlaps(title) for label in labels)
    assert not labels[0].overlaps(labels[1])


def test_trace_lengths_spanning_decades_get_a_log_axis():
    from disagg_simpy.plots.trace import draw_lengths

    spread = np.array([1, 2, 3, 5, 10, 40, 100, 400, 2000, 9000])
    assert draw_lengths(Figure().add_subplot(), spread, "C0", "reply", "words").get_xscale() == "log"
    narrow = np.array([100, 150, 200, 400])
    assert draw_lengths(Figure().add_subplot(), narrow, "C0", "reply", "words").get_xscale() == "linear"


def test_timeline_sample_keeps_the_runs_share_of_late_replies():
    """100 replies in progress, 40 late: with a whole-run share of 45% on time, 25 sampled
    replies hold 11 on time; where the window has too few late replies, on-time ones fill in."""
    n = 100
    requests = pd.DataFrame({
        "request_id": np.arange(n), "arrived_at_s": np.linspace(0, 9, n), "finished_at_s": np.full(n, 20.0),
        "on_time": np.arange(n) % 5 >= 2,  # 60 on time, 40 late, interleaved
    })
    sample = sample_replies(requests, (10.0, 14.0), 25, on_time_share=0.45)
    assert len(sample) == 25 and sample["request_id"].is_monotonic_increasing
    assert int(sample["on_time"].sum()) == 11
    few_late = requests.assign(on_time=np.arange(n) >= 6)  # 6 late only
    sample = sample_replies(few_late, (10.0, 14.0), 25, on_time_share=0.45)
    assert len(sample) == 25 and int((~sample["on_time"]).sum()) == 6


def test_a_timelines_colour_scale_runs_to_what_its_iterations_read(res, monkeypatch):
    import disagg_simpy.plots.style as style
    from disagg_simpy.plots import save_timeline

    drawn = []
    monkeypatch.setattr(style, "save_figure", lambda fig, path: drawn.append(fig) or Path(path))
    for name in ("chunked-512", "same-gpu"):
        save_timeline(res, name, Path("unused.png"), default_window(res), 5)
        bars = [a for a in drawn[-1].axes if getattr(a, "_colorbar", None) is not None]
        read = frames_of(res, name)[1]["n_prompt_tokens_read"].max()
        assert len(bars) == 1 and bars[0]._colorbar.norm.vmax == read
    assert read > 512  # same-gpu reads whole prompts


def test_gap_cdf_has_a_curve_per_arrangement_and_the_slo_limits(res):
    ax = draw_gap_cdf(Figure().add_subplot(), res, {n: {"color": "C0"} for n in names(res)}, res.scenario.slo)
    assert [ln.get_label() for ln in ax.get_lines() if ln.get_gid() != "limit"] == names(res)
    limits = sorted(ln.get_xdata()[0] for ln in ax.get_lines() if ln.get_gid() == "limit")
    assert limits == [res.scenario.slo.mean_gap_ms, res.scenario.slo.freeze_ms]
    assert ax.get_xscale() == "log"


def test_late_bars_are_the_summary_shares_and_the_mean_time_parts(res):
    from disagg_simpy.plots.late import LIMITS, PARTS, time_means

    ax = draw_late_limits(Figure().add_subplot(), res.summary)
    for column in LIMITS:
        widths = [p.get_width() for p in ax.patches if p.get_gid() == f"limit:{column}"]
        assert widths == pytest.approx(res.summary[column].fillna(0).tolist(), abs=1e-9)
    ax = draw_time_parts(Figure().add_subplot(), res.requests, names(res))
    means = time_means(res.requests, names(res))
    done = res.requests[res.requests.finished_at_s.notna()]
    for name in names(res):
        for ok in (False, True):
            rows = done[(done.arrangement == name) & (done.on_time == ok)]
            total = (rows.finished_at_s - rows.arrived_at_s).mean() if len(rows) else 0.0
            assert means.loc[(name, ok), list(PARTS)].fillna(0).sum() == pytest.approx(total, abs=1e-9)
    for column in PARTS:
        widths = [p.get_width() for p in ax.patches if p.get_gid() == f"part:{column}"]
        assert widths == pytest.approx(means[column].fillna(0).tolist(), abs=1e-9)


def test_follow_shows_each_chunk_and_each_freeze(res):
    requests = frames_of(res, "chunked-512")[0]
    rid = int(requests.loc[requests["n_prompt_tokens"] > 2000, "request_id"].iloc[0])
    for name in ("chunked-512", "same-gpu", "split-2-2"):
        j = journey(res, name, rid)
        reads = res.reads[(res.reads["arrangement"] == name) & (res.reads["request_id"] == rid)]
        assert j["read_iterations"]["n_tokens"].tolist() == reads["n_tokens"].tolist()
        whole = (-1.0, 1000.0)
        ax = draw_journey(Figure().add_subplot(), j, whole, res.scenario.slo)
        assert n_paths(by_gid(ax, "request-reads")) == len(reads)
        assert n_paths(by_gid(ax, "freezes")) == int(j["row"].n_freezes)
        assert n_paths(by_gid(ax, "words")) == int(j["row"].n_reply_words) - 1
    assert len(journey(res, "chunked-512", rid)["read_iterations"]) > 1


def test_window_and_follow_errors(res):
    for text in ("5:3", "3:3", "abc", "1:2:3", "-1:2", "nan:4", "1:inf"):
        with pytest.raises(InputError, match="--window: got"):
            parse_window(text)
    assert parse_window("1.5:4") == (1.5, 4.0)
    with pytest.raises(InputError, match="the run ends at"):
        check_window(res, (10_000.0, 10_004.0))
    with pytest.raises(InputError, match="^follow: got 999999"):
        check_follow(res, 999_999)


# -- the CLI ------------------------------------------------------------------------------


def assert_png(path: Path, min_w: int = 800, min_h: int = 300) -> np.ndarray:
    """The file is a PNG of a sensible size, and not blank."""
    img = mpimg.imread(path)
    h, w = img.shape[:2]
    assert w >= min_w and h >= min_h, (path, w, h)
    rgb = img[..., :3]
    assert (rgb.min(axis=2) < 0.9).mean() > 0.02, f"{path} is (nearly) blank"
    assert rgb.std() > 0.05
    return img


def cli(args: list[str], capsys) -> tuple[int, str, str]:
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_writes_plots_under_out_by_default(small_yaml, tmp_path, capsys):
    code, out, _ = cli([str(small_yaml), "--out", str(tmp_path / "o")], capsys)
    assert code == 0
    plots = tmp_path / "o" / "plots"
    assert sorted(p.name for p in plots.iterdir()) == [
        "late.png", "summary.png", "timeline-same-gpu.png", "timeline-split-2-2.png"
    ]  # and no temp files left behind
    assert_png(plots / "summary.png")
    assert_png(plots / "late.png")
    assert_png(plots / "timeline-split-2-2.png")
    assert f"pictures in {plots}/" in out


def test_cli_plots_dir(same_gpu_yaml, tmp_path, capsys):
    code, _, _ = cli([str(same_gpu_yaml), "--out", str(tmp_path / "o"), "--plots", str(tmp_path / "pics")], capsys)
    assert code == 0
    assert_png(tmp_path / "pics" / "timeline-same-gpu.png")
    assert not (tmp_path / "o" / "plots").exists()


def test_cli_no_plots(small_yaml, tmp_path, capsys):
    code, out, _ = cli([str(small_yaml), "--out", str(tmp_path / "o"), "--no-plots"], capsys)
    assert code == 0
    assert not list(tmp_path.rglob("*.png")) and "pictures" not in out


def test_cli_window_and_replies(same_gpu_yaml, tmp_path, capsys):
    code, _, _ = cli([str(same_gpu_yaml), "--out", str(tmp_path / "o"), "--window", "1:2.5", "--replies", "4"], capsys)
    assert code == 0
    few = assert_png(tmp_path / "o" / "plots" / "timeline-same-gpu.png")
    code, _, _ = cli([str(same_gpu_yaml), "--out", str(tmp_path / "p"), "--window", "1:2.5"], capsys)
    many = assert_png(tmp_path / "p" / "plots" / "timeline-same-gpu.png")
    assert few.shape[0] < many.shape[0]  # fewer reply lanes, a shorter picture


def test_cli_follow(small_yaml, tmp_path, capsys):
    code, _, _ = cli([str(small_yaml), "--out", str(tmp_path / "o"), "--follow", "7"], capsys)
    assert code == 0
    assert_png(tmp_path / "o" / "plots" / "follow-7.png", min_h=500)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--window", "5:3"], "error: --window: got '5:3', expected START:END in seconds with 0 <= START < END"),
        (["--window", "soon"], "error: --window: got 'soon', expected START:END"),
        (["--window", "900:904"], "error: --window: got '900:904', but the run ends at"),
        (["--follow", "abc"], "error: --follow: got 'abc', expected a request id (a whole number >= 0)"),
        (["--follow", "100000"], "error: --follow: got 100000, expected the id of a measured request (0 to"),
        (["--replies", "0"], "error: --replies: got '0', expected a whole number from 1 to 200"),
        (["--plots", "x", "--no-plots"],
         "error: python -m disagg_simpy: argument --no-plots: not allowed with argument --plots"),
    ],
)
def test_cli_bad_plot_flags_exit_2(small_yaml, tmp_path, capsys, args, message):
    code, out, err = cli([str(small_yaml), "--out", str(tmp_path / "o"), *args], capsys)
    assert code == 2
    assert err.startswith(message) and err.count("\n") == 1
    assert not list(tmp_path.rglob("*.png"))
    if "--window" in args and args[1] != "900:904":
        assert not (tmp_path / "o").exists()  # syntax is checked before the run


def test_cli_plots_folder_that_is_a_file(small_yaml, tmp_path, capsys):
    (tmp_path / "f").write_text("")
    code, _, err = cli([str(small_yaml), "--out", str(tmp_path / "o"), "--plots", str(tmp_path / "f")], capsys)
    assert code == 2 and err.startswith(f"error: --plots: {tmp_path / 'f'} is a file, expected a folder")


def test_the_model_and_cli_help_never_import_matplotlib():
    code = (
        "import sys; from disagg_simpy import load_scenario, run; import disagg_simpy.cli as c; "
        "c.build_parser(); run(load_scenario(sys.argv[1]).with_overrides(**{'workload.measure_s': 1})); "
        "print('matplotlib' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code, str(DEFAULT)], capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": ""}, check=True)
    assert done.stdout.strip() == "False"


def test_capped_runs_and_one_word_replies_still_draw():
    """Replies the safety cap cut short, prompts read when the run stopped, one-word replies."""
    base = load_scenario(DEFAULT)
    cut_short = {"workload.measure_s": 3, "max_sim_s": 3}
    one_word = {"workload.measure_s": 3, "workload.reply_words": [1, 2]}
    for changes in (cut_short, one_word):
        small = run(base.with_overrides(**changes))
        window = (1.0, run_end_s(small) + 1)
        for name in names(small):
            _, bottom, sample = timeline_axes(small, name, window)
            assert n_paths(by_gid(bottom, "freezes")) == freezes_from_run(small, name, sample, window)
            for rid in sample["request_id"].iloc[[0, len(sample) // 2, -1]]:
                j = journey(small, name, int(rid))
                ax = draw_journey(Figure().add_subplot(), j, (-1.0, 100.0), small.scenario.slo)
                assert n_paths(by_gid(ax, "words")) == max(len(j["words"]) - 1, 0)


def test_an_empty_timeline_window_warns_naming_when_replies_were_written(tmp_path, capsys, quick_plots):
    path = small_traffic_scenario(tmp_path, ONE_GPU_THREE_WAYS[:1], warmup_s=2)
    assert main([str(path), "--out", str(tmp_path / "out"), "--window", "0:1", "--replies", "2"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("warning: --window 0:1: no measured reply is in progress") and err.count("\n") == 1
    assert "measured replies were written from 2." in err
