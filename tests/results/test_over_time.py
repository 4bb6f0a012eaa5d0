"""Results over time (`over_time.csv`, `over_time.png`): the offered rate and the on-time share
per window, per arrangement, for traffic that changes over time."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import yaml

from disagg_simpy import run
from disagg_simpy.cli import main
from disagg_simpy.results.columns import names
from disagg_simpy.scenario.loading import validate
from disagg_simpy.workload.periods import window_edges_ns, window_width_s

WORKLOAD = {"measure_s": 8, "prompt_mix": [{"share": 1, "tokens": [100, 300]}], "reply_words": [5, 20],
            "schedule": [{"until_s": 4, "rate_per_s": 3}, {"until_s": 8, "rate_per_s": 9,
                                                          "prompt_mix": [{"share": 1, "tokens": [2000, 4000]}]}]}
ARRANGEMENTS = [{"name": "same-gpu", "kind": "colocated", "gpus": 1},
                {"name": "split-1-1", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 1}]
SPEC = {"name": "tiny-day", "workload": WORKLOAD, "arrangements": ARRANGEMENTS, "max_sim_s": 60}


@pytest.fixture(scope="module")
def result():
    return run(validate(SPEC, "tiny-day.yaml"), seed=2)


@pytest.mark.parametrize(("span_s", "width_s"), [(8, 0.2), (30, 1), (600, 15), (3600, 120), (86400, 1800),
                                                 (1e7, 604800)])
def test_window_width_is_the_smallest_nice_one_giving_at_most_48_windows(span_s, width_s):
    assert window_width_s(span_s) == width_s


def test_window_edges_end_at_the_span():
    assert (window_edges_ns(1.0, width_s=0.3) / 1e8).tolist() == [0, 3, 6, 9, 10]


def test_over_time_counts_and_shares_match_the_requests_table(result):
    """Recounted from requests.csv (measured requests, their arrival and verdict) and the stream."""
    frame = result.over_time
    assert list(frame.columns) == list(names("over_time"))
    width = 0.2
    assert np.allclose(frame["window_end_s"] - frame["window_start_s"], width)
    assert len(frame) == 2 * 40
    arrived = result.stream.arrived_at_ns / 1e9
    requests = result.requests
    for name, rows in frame.groupby("arrangement", observed=True):
        mine = requests[requests["arrangement"] == name]
        k = np.floor(mine["arrived_at_s"].to_numpy() / width + 1e-9).astype(int)
        on_time = pd.Series(mine["on_time"].to_numpy()).groupby(k).mean().reindex(range(40)) * 100
        assert np.allclose(rows["on_time_pct"].to_numpy(), on_time.to_numpy(), equal_nan=True)
        assert rows["n_measured"].sum() == len(mine)
        counts = np.bincount(np.floor(arrived[arrived < 8] / width + 1e-9).astype(int), minlength=40)
        assert rows["n_arrived"].tolist() == counts.tolist()
        assert np.allclose(rows["offered_rate_per_s"], counts / width)


def test_over_time_rate_follows_the_schedule(result):
    """The second period's rate is three times the first's (counted over its windows)."""
    rows = result.over_time[result.over_time["arrangement"] == "same-gpu"]
    first, second = rows[rows["window_end_s"] <= 4], rows[rows["window_start_s"] >= 4]
    assert first["n_arrived"].sum() < second["n_arrived"].sum()


def test_run_writes_over_time_for_a_schedule_and_not_for_a_constant_rate(tmp_path, capsys):
    # one arrangement: over_time.csv and .png are per arrangement alike, and each arrangement
    # costs a timeline picture (about a second); the tests above hold both arrangements
    (tmp_path / "day.yaml").write_text(yaml.safe_dump({**SPEC, "arrangements": ARRANGEMENTS[:1]}, sort_keys=False))
    assert main([str(tmp_path / "day.yaml"), "--out", str(tmp_path / "out"), "--seeds", "2"]) == 0
    table = pd.read_csv(tmp_path / "out" / "over_time.csv")
    assert list(table.columns) == [*names("over_time"), "seed"] and sorted(table["seed"].unique()) == [1, 2]
    assert (tmp_path / "out" / "plots" / "over_time.png").stat().st_size > 10_000
    files = json.loads((tmp_path / "out" / "run.json").read_text())["files"]
    assert "over_time.csv" in files and "plots/over_time.png" in files
    constant = {**SPEC, "workload": {**{k: v for k, v in WORKLOAD.items() if k != "schedule"}, "rate_per_s": 3}}
    (tmp_path / "flat.yaml").write_text(yaml.safe_dump(constant, sort_keys=False))
    assert main([str(tmp_path / "flat.yaml"), "--out", str(tmp_path / "flat"), "--no-plots"]) == 0
    assert not (tmp_path / "flat" / "over_time.csv").exists()


def test_describe_prints_a_traces_rate_per_window(tmp_path, capsys):
    """A trace of 100 s: 10 arrivals in [0, 50) and 40 in [50, 100]; windows of 5 s (at most 24),
    counted from the first arrival; the last arrival, at exactly 100 s, ends the last window."""
    times = np.concatenate([np.linspace(0, 49, 10), np.linspace(50, 100, 40)])
    prompts = np.where(times < 50, 4000, 200)
    frame = pd.DataFrame({"arrived_at_s": times, "n_prompt_tokens": prompts, "n_reply_words": 30})
    frame.to_csv(tmp_path / "t.csv", index=False)
    assert main(["describe", str(tmp_path / "t.csv"), "--plot", str(tmp_path / "t.png")]) == 0
    out = capsys.readouterr().out
    table = out.split("rate over time (from the first arrival)\n")[1].splitlines()
    assert table[0].split() == ["window", "(s)", "requests", "req/s", "prompt", "p50", "reply", "p50"]
    rows = [line.split() for line in table[1:21]]
    assert [r[0] for r in rows[:2]] == ["0-5", "5-10"] and rows[-1][0] == "95-100"
    assert sum(int(r[1]) for r in rows) == 50
    assert sum(int(r[1]) for r in rows[:10]) == 10 and rows[0][3] == "4,000" and rows[-1][3] == "200" and rows[0][4] == "30"
    assert rows[-1][2] == f"{int(rows[-1][1]) / 5:.3f}"
    assert (tmp_path / "t.png").stat().st_size > 10_000
