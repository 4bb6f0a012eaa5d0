"""Measuring as papers and benchmark clients do: `--rate-per-gpu` (offered rate = per-GPU rate x
the arrangement's GPUs), the SLO scale (`goodput --vary slo`, `sweep --slo-scale`) and
sweep.png's per-limit lines (`--limits`)."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml

from disagg_simpy.cli import main
from disagg_simpy.results.columns import names

WORKLOAD = {"rate_per_s": 3, "measure_s": 4, "prompt_mix": [{"share": 1, "tokens": [200, 2000]}], "reply_words": [5, 30]}
FOUR = [{"name": "same-4", "kind": "colocated", "gpus": 4}, {"name": "split-2-2", "kind": "disaggregated",
                                                              "reading_gpus": 2, "writing_gpus": 2}]


def write(folder, name, workload=None, arrangements=FOUR, slo=None):
    spec = {"name": name, "workload": workload or WORKLOAD, "arrangements": arrangements}
    if slo:
        spec["slo"] = slo
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def test_run_rate_per_gpu_is_rate_times_gpus(tmp_path, capsys):
    path = write(tmp_path, "four")
    assert main([str(path), "--rate-per-gpu", "2.5", "--out", str(tmp_path / "a"), "--no-plots"]) == 0
    assert main([str(path), "--rate", "10", "--out", str(tmp_path / "b"), "--no-plots"]) == 0
    assert (tmp_path / "a" / "summary.csv").read_bytes() == (tmp_path / "b" / "summary.csv").read_bytes()
    capsys.readouterr()
    mixed = write(tmp_path, "mixed", arrangements=[*FOUR, {"name": "same-2", "kind": "colocated", "gpus": 2}])
    assert main([str(mixed), "--rate-per-gpu", "2", "--out", str(tmp_path / "c"), "--no-plots"]) == 2
    assert "--rate-per-gpu: got 2 for arrangements of 2 and 4 GPUs, expected arrangements of one size" in capsys.readouterr().err
    assert main([str(path), "--rate-per-gpu", "2", "--rate", "3", "--out", str(tmp_path / "c"), "--no-plots"]) == 2
    assert "--rate-per-gpu: got 2 together with --rate 3, expected one of them" in capsys.readouterr().err


def test_sweep_rate_per_gpu_rows_equal_sweeps_at_rate_times_gpus(tmp_path, capsys):
    arrangements = [FOUR[0], {"name": "same-2", "kind": "colocated", "gpus": 2}]
    path = write(tmp_path, "sizes", arrangements=arrangements)
    common = ["--no-plots", "--workers", "1"]
    assert main(["sweep", str(path), "--rate-per-gpu", "1,2", "--out", str(tmp_path / "pg"), *common]) == 0
    per_gpu = pd.read_csv(tmp_path / "pg" / "sweep.csv")
    assert per_gpu[["rate_per_gpu", "arrangement", "rate_per_s"]].values.tolist() == [
        [1, "same-4", 4], [1, "same-2", 2], [2, "same-4", 8], [2, "same-2", 4]]
    assert main(["sweep", str(path), "--rate", "2,4,8", "--out", str(tmp_path / "r"), *common]) == 0
    by_rate = pd.read_csv(tmp_path / "r" / "sweep.csv").set_index(["rate_per_s", "arrangement"])
    for row in per_gpu.itertuples():
        same = by_rate.loc[(row.rate_per_s, row.arrangement)]
        assert same["on_time_pct"] == row.on_time_pct and same["first_word_p90_s"] == row.first_word_p90_s
    capsys.readouterr()


def test_goodput_rate_per_gpu_starts_each_search_at_rate_times_gpus(tmp_path, capsys):
    one = [{"name": "same-2", "kind": "colocated", "gpus": 2}]
    common = ["--no-plots", "--workers", "1", "--tolerance", "0.5"]
    assert main(["goodput", str(write(tmp_path, "pg", arrangements=one)), "--rate-per-gpu", "3", "--out", str(tmp_path / "a"),
                 *common]) == 0
    assert main(["goodput", str(write(tmp_path, "r", {**WORKLOAD, "rate_per_s": 6}, one)), "--out", str(tmp_path / "b"),
                 *common]) == 0
    a, b = (pd.read_csv(tmp_path / x / "goodput.csv") for x in "ab")
    assert a.equals(b)
    capsys.readouterr()


def one_word(folder, first_word_s, criterion="per_request"):
    """Prompts of 760 tokens, one-word replies, one GPU, 10 requests/s evenly spaced: every first
    word waits exactly 12 + 0.05 x 760 = 50 ms, so a first-word limit L is met at every SLO scale
    from 0.05 / L up, and at none below (no other limit is on)."""
    w = {"rate_per_s": 10, "n_requests": 20, "arrivals": "constant",
         "prompt_mix": [{"share": 1, "tokens": {"fixed": 760}}], "reply_words": {"fixed": 1}}
    return write(folder, "one-word", w, [{"name": "same", "kind": "colocated", "gpus": 1}],
                 {"first_word_s": first_word_s, "mean_gap_ms": None, "freeze_ms": None, "criterion": criterion})


@pytest.mark.parametrize(("first_word_s", "threshold", "criterion"),
                         [(0.1, 0.5, "per_request"), (0.02, 2.5, "per_request"), (0.1, 0.5, "percentiles")])
def test_vary_slo_finds_the_scale_placed_by_construction(tmp_path, capsys, first_word_s, threshold, criterion):
    path = one_word(tmp_path, first_word_s, criterion)
    assert main(["goodput", str(path), "--vary", "slo", "--target", "100", "--out", str(tmp_path / "g"), "--no-plots",
                 "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "the smallest SLO scale meeting " + ("100% on time (per request: first word within" if criterion == "per_request"
                                                else "P90 of each: first word within") in out
    table = pd.read_csv(tmp_path / "g" / "slo_scale.csv")
    assert tuple(table.columns) == names("slo_scale")  # the registry's columns, in its order
    row = table.iloc[0]
    assert row["failing_scale"] < threshold <= row["passing_scale"] <= row["failing_scale"] + 0.01
    assert row["passing_on_time_pct"] == 100 and row["failing_on_time_pct"] == 0


def test_slo_scale_rows_equal_single_runs_with_the_limits_scaled(tmp_path, capsys):
    path = write(tmp_path, "scaled", arrangements=FOUR, slo={"first_word_s": 0.5, "mean_gap_ms": 20, "freeze_ms": 30})
    assert main(["sweep", str(path), "--slo-scale", "0.5:1.5:0.5", "--out", str(tmp_path / "s"), "--workers", "1"]) == 0
    table = pd.read_csv(tmp_path / "s" / "sweep.csv")
    assert sorted(set(table["slo_scale"])) == [0.5, 1.0, 1.5]
    assert (tmp_path / "s" / "sweep.png").exists()
    for s in (0.5, 1.5):
        single = write(tmp_path, f"single-{s}", slo={"first_word_s": 0.5 * s, "mean_gap_ms": 20 * s, "freeze_ms": 30 * s})
        assert main([str(single), "--out", str(tmp_path / f"r{s}"), "--no-plots"]) == 0
        summary = pd.read_csv(tmp_path / f"r{s}" / "summary.csv")
        rows = table[table["slo_scale"] == s].reset_index(drop=True)
        for column in ("on_time_pct", "late_first_word_pct", "late_mean_gap_pct", "froze_pct", "n_freezes"):
            assert rows[column].tolist() == pytest.approx(summary[column].tolist()), column
    assert table.groupby("slo_scale")["on_time_pct"].mean().is_monotonic_increasing
    capsys.readouterr()


def test_sweep_picture_draws_each_limit_alone_and_per_gpu(tmp_path, monkeypatch, capsys):
    from disagg_simpy.plots import capacity

    drawn = {}

    def keep(fig, path):
        drawn["fig"] = fig
        return path

    monkeypatch.setattr(capacity.st, "save_figure", keep)
    path = write(tmp_path, "lines")
    assert main(["sweep", str(path), "--rate-per-gpu", "1,2", "--limits", "--out", str(tmp_path / "s"), "--workers", "1"]) == 0
    ax = drawn["fig"].axes[0]
    gids = {line.get_gid() for line in ax.lines}
    for name in ("same-4", "split-2-2"):
        assert {f"first_word_ok_pct:{name}", f"mean_gap_ok_pct:{name}"} <= gids
    assert ax.get_xlabel() == "offered rate per GPU (requests/s per GPU)"
    assert any(line.get_ydata()[0] == 90 for line in ax.lines if line.get_linestyle() == ":" and line.get_gid() is None)
    capsys.readouterr()


def test_goodput_interval_under_the_percentiles_criterion_holds_its_point(tmp_path, capsys):
    """With several seeds, the percentiles criterion's goodput gets an interval of the same test
    (each figure's interval against its limit), and the point lies in it."""
    path = one_word(tmp_path, 0.1, "percentiles")
    assert main(["goodput", str(path), "--seeds", "2", "--out", str(tmp_path / "g"), "--no-plots", "--workers", "1"]) == 0
    row = pd.read_csv(tmp_path / "g" / "goodput.csv").iloc[0]
    assert 0 < row["goodput_low_per_s"] <= row["goodput_per_s"] <= row["goodput_high_per_s"]
    capsys.readouterr()


def test_vary_slo_brackets_a_scale_far_below_0_1_by_its_documented_probes(tmp_path, capsys):
    """sweep/slo_scale.py: probe 1, then step down by 2, 4, 16, ... while it passes, then halve
    the bracket to 0.01. A first-word limit of 2.5 s is met from scale 0.02 up (one_word): probes
    1, 0.5, 0.125 pass, 0.0078125 fails; halving [0.0078125, 0.125] passes 0.06640625, 0.037109375,
    0.0224609375 and fails 0.01513671875: 8 probes, the bracket 0.0151-0.0225 around 0.02. A search
    that stopped at 0.1, or stepped by 2 alone, gives other figures."""
    path = one_word(tmp_path, 2.5)
    assert main(["goodput", str(path), "--vary", "slo", "--target", "100", "--out", str(tmp_path / "g"), "--no-plots",
                 "--workers", "1"]) == 0
    row = pd.read_csv(tmp_path / "g" / "slo_scale.csv").iloc[0]
    assert (row["passing_scale"], row["failing_scale"], row["n_probes"]) == (0.0224609375, 0.01513671875, 8)
    assert row["passing_on_time_pct"] == 100 and row["failing_on_time_pct"] == 0
    capsys.readouterr()
