"""Traces in scenarios: windows, spread ties, scaling, clips, run.json (the bundled scenarios of the
public traces: workload/test_public_traces.py)."""

from __future__ import annotations

import hashlib
import json
import re

import pytest
import yaml
from helpers import ROOT

from disagg_simpy import InputError, load_scenario, run
from disagg_simpy.cli import main
from disagg_simpy.workload.stream import make_requests

SAME = [{"name": "same", "kind": "colocated", "gpus": 1}]
TIES = [(0.0, 100, 3), (0.0, 100, 3), (0.0, 100, 3), (3.0, 100, 3), (3.0, 100, 3), (6.0, 100, 3)]


def scenario_file(folder, workload: dict, rows=TIES, name="t"):
    trace = folder / "trace.csv"
    trace.write_text("arrived_at_s,n_prompt_tokens,n_reply_words\n" + "".join(f"{t},{p},{w}\n" for t, p, w in rows))
    path = folder / f"{name}.yaml"
    spec = {"name": name, "workload": {"trace": "trace.csv", **workload}, "arrangements": SAME}
    path.write_text(yaml.safe_dump(spec))
    return path


def arrivals_s(path) -> list[float]:
    return (make_requests(load_scenario(path)).arrived_at_ns / 1e9).tolist()


def test_spread_ties_then_time_scale(tmp_path):
    # the k-th of m requests sharing t moves to t + k (t_next - t) / m; the last group stays;
    # then time_scale 2 replays twice as fast
    path = scenario_file(tmp_path, {"spread_ties": True, "time_scale": 2.0})
    assert arrivals_s(path) == pytest.approx([0.0, 0.5, 1.0, 1.5, 2.25, 3.0])


def test_window_counts_times_from_its_start(tmp_path):
    path = scenario_file(tmp_path, {"start_s": 3, "duration_s": 3})
    assert arrivals_s(path) == [0.0, 0.0]


def test_rate_per_s_scales_rows_over_the_window_length(tmp_path):
    # the window [0, 6) s holds 5 rows (the row at 6 s is outside); at 0.5 requests/s they
    # must span 10 s, so times stretch by 10 / 6
    path = scenario_file(tmp_path, {"rate_per_s": 0.5, "duration_s": 6, "start_s": 0})
    assert arrivals_s(path) == pytest.approx([0, 0, 0, 5, 5])


def test_clips_are_applied_and_reported(tmp_path):
    rows = [(0.0, 5000, 900), (1.0, 100, 10)]
    path = scenario_file(tmp_path, {"reply_words_max": 500, "prompt_tokens_max": 4096}, rows=rows)
    stream = make_requests(load_scenario(path))
    assert stream.n_prompt_tokens.tolist() == [4096, 100]
    assert stream.n_reply_words.tolist() == [500, 10]
    assert stream.info["n_prompt_tokens_clipped"] == 1 and stream.info["n_reply_words_clipped"] == 1


def test_measure_s_on_a_trace_measures_early_rows_and_keeps_the_rest_arriving(tmp_path):
    path = scenario_file(tmp_path, {"measure_s": 3})
    res = run(load_scenario(path))
    assert res.requests.request_id.tolist() == [0, 1, 2]
    assert len(res.records["same"].requests["request_id"]) >= 3


@pytest.mark.parametrize(
    "workload, fragment",
    [
        ({"time_scale": 2, "rate_per_s": 3}, "rate_per_s: got 3 together with time_scale 2, expected at most one"),
        ({"format": "lengths", "measure_s": 10}, "rate_per_s: missing, expected a number > 0: a 'lengths' trace"),
        ({"burstiness_cv": 2}, "burstiness_cv: got 2, expected none: it applies to 'lengths' traces only"),
        ({"format": "parquet"}, "workload.format: got 'parquet', expected one of csv, azure, mooncake, lengths"),
        ({"start_s": 100}, "window: got no arrivals"),
    ],
)
def test_bad_trace_settings_are_one_line_errors(tmp_path, workload, fragment):
    with pytest.raises(InputError) as err:
        make_requests(load_scenario(scenario_file(tmp_path, workload)))
    message = str(err.value)
    assert fragment in message and "\n" not in message


def test_run_json_names_the_exact_traffic(tmp_path, capsys):
    path = scenario_file(tmp_path, {"spread_ties": True, "time_scale": 2.0, "reply_words_max": 2})
    assert main([str(path), "--out", str(tmp_path / "out"), "--no-plots"]) == 0
    info = json.loads((tmp_path / "out" / "run.json").read_text())["workload"]
    assert info["sha256"] == hashlib.sha256((tmp_path / "trace.csv").read_bytes()).hexdigest()
    assert info["format"] == "csv" and info["spread_ties"] and info["time_scale"] == 2.0
    assert info["n_reply_words_clipped"] == 6


def test_rate_flag_on_a_trace_replaces_its_time_scale(tmp_path, capsys):
    path = scenario_file(tmp_path, {"time_scale": 2.0, "duration_s": 6, "start_s": 0})
    assert main([str(path), "--out", str(tmp_path / "out"), "--rate", "0.5", "--no-plots"]) == 0
    info = json.loads((tmp_path / "out" / "run.json").read_text())
    # 5 rows in the 6 s window at 0.5 requests/s: a replay speed of 0.6, not the file's 2.0
    assert info["workload"]["rate_per_s"] == 0.5 and info["workload"]["time_scale"] == pytest.approx(0.6)
    assert "time_scale" not in info["scenario"]["workload"] or info["scenario"]["workload"]["time_scale"] is None


def test_describe_prints_statistics_and_plots(tmp_path, capsys):
    png = tmp_path / "pics" / "azure.png"
    sample = ROOT / "tests" / "data" / "sample_azure.csv"
    assert main(["describe", str(sample), "--format", "azure", "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"requests\s+6\b", out) and "prompt tokens" in out and "reply words" in out
    from matplotlib.image import imread

    pixels = imread(png)
    assert pixels.shape[0] > 300 and pixels.shape[1] > 300 and pixels.std() > 0.01


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["describe", "missing.csv"], "missing.csv: path: got no such file"),
        (["describe", str(ROOT / "tests" / "data" / "sample.csv"), "--format", "parquet"], "invalid choice: 'parquet'"),
        (["describe", str(ROOT / "tests" / "data" / "sample_azure.csv")], "expected columns arrived_at_s"),
    ],
)
def test_describe_bad_input_is_one_line(args, fragment, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert fragment in err and err.count("\n") == 1
