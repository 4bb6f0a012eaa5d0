"""The command line: outputs and their columns, flags, and one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest
from helpers import DEFAULT, ONE_GPU_THREE_WAYS, ROOT, scenario_text, small_traffic_scenario, write_scenario

from disagg_simpy import __version__
from disagg_simpy.cli import main

SHORT = ["--measure-s", "6", "--no-plots", "--seeds", "1"]  # one seed (the scenario declares 30)

REQUEST_COLUMNS = (
    "arrangement,request_id,arrived_at_s,n_prompt_tokens,n_reply_words,reading_gpu,read_started_at_s,"
    "first_word_at_s,writing_gpu,joined_at_s,finished_at_s,first_word_s,mean_gap_ms,max_gap_ms,n_freezes,on_time,"
    "handoff_wait_s,link_wait_s,queued_s,reading_s,shipping_s,joining_s,writing_s,frozen_s"
).split(",")
SUMMARY_COLUMNS = (
    "arrangement,n_requests,n_unfinished,on_time_pct,late_first_word_pct,late_mean_gap_pct,froze_pct,"
    "first_word_p50_s,first_word_p90_s,median_mean_gap_ms,longest_gap_ms,p99_gap_ms,reading_iterating_pct,"
    "writing_iterating_pct,replies_per_writing_iteration,prompt_tokens_per_reading_iteration,words_per_s,"
    "kv_peak_reading_pct,kv_peak_writing_pct,handoff_waited_pct,link_waited_pct,"
    "late_first_word_only_pct,late_mean_gap_only_pct,late_froze_only_pct,late_several_pct,n_freezes,"
    "freezes_by_long_prompt_pct"
).split(",")


def test_default_run_writes_every_output_with_its_columns(tmp_path, capsys):
    assert main([str(DEFAULT), "--out", str(tmp_path), *SHORT]) == 0
    table = capsys.readouterr().out
    for name in ("same-gpu", "chunked-512", "split-2-2", "split-1-3", "split-3-1"):
        assert name in table
    summary = pd.read_csv(tmp_path / "summary.csv")
    assert list(summary.columns) == SUMMARY_COLUMNS
    assert summary.arrangement.tolist() == ["same-gpu", "chunked-512", "split-2-2", "split-1-3", "split-3-1"]
    requests = pd.read_csv(tmp_path / "requests.csv")
    assert list(requests.columns) == REQUEST_COLUMNS
    assert len(requests) == 5 * summary.n_requests.iloc[0]
    iterations = pd.read_csv(tmp_path / "iterations.csv")
    assert list(iterations.columns) == [
        "arrangement", "gpu", "iteration", "started_at_s", "ended_at_s", "n_replies_written", "n_prompt_tokens_read",
        "kv_used_tokens",
    ]
    reads = pd.read_csv(tmp_path / "reads.csv")
    assert list(reads.columns) == ["arrangement", "gpu", "iteration", "request_id", "n_tokens"]
    freezes = pd.read_csv(tmp_path / "freezes.csv")
    assert list(freezes.columns) == [
        "arrangement", "seed", "gpu", "iteration", "gap_started_at_s", "gap_s", "cause", "n_replies_frozen",
        "blamed_request_ids", "blamed_prompt_tokens",
    ]
    assert set(freezes.cause) <= {"prompt_read", "kv_ship", "join_wait", "many_replies"}
    assert freezes.groupby("arrangement").n_replies_frozen.sum().to_dict() == summary.set_index("arrangement").n_freezes[
        lambda n: n > 0].to_dict()
    assert requests.groupby("arrangement").n_freezes.sum()[lambda n: n > 0].to_dict() == (
        freezes.groupby("arrangement").n_replies_frozen.sum().to_dict())
    # the why-late block under the table, not more columns in it
    assert "late_first_word_only_pct" not in table and "why late:" in table
    assert "freezes in same-gpu:" in table and "caused by prompts over 4,760 tokens" in table
    # every prompt token of a measured request is read exactly once
    tokens = reads.groupby(["arrangement", "request_id"]).n_tokens.sum()
    measured = requests.set_index(["arrangement", "request_id"]).n_prompt_tokens
    assert tokens.reindex(measured.index).tolist() == measured.tolist()
    info = json.loads((tmp_path / "run.json").read_text())
    assert info["seed"] == 1 and info["scenario"]["workload"]["measure_s"] == 6
    assert info["version"] == __version__
    assert info["command"][:3] == ["python", "-m", "disagg_simpy"] and "--measure-s" in info["command"]


def test_json_prints_the_summary_keys(tmp_path, capsys):
    assert main([str(DEFAULT), "--out", str(tmp_path), *SHORT, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [list(r) for r in rows] == [SUMMARY_COLUMNS] * 5


def test_seeds_give_one_summary_row_per_arrangement_and_seed(tmp_path, capsys):
    assert main([str(DEFAULT), "--out", str(tmp_path), *SHORT, "--seeds", "3", "--seed", "7"]) == 0
    out = capsys.readouterr().out
    assert "±" in out and "seeds 7..9" in out
    summary = pd.read_csv(tmp_path / "summary.csv")
    assert sorted(set(summary.seed)) == [7, 8, 9] and len(summary) == 15


def test_rate_flag_changes_the_traffic_and_save_trace_writes_it(tmp_path, capsys):
    trace = tmp_path / "trace.csv"
    args = [str(DEFAULT), "--out", str(tmp_path / "o"), *SHORT, "--rate", "5", "--save-trace", str(trace)]
    assert main(args) == 0
    saved = pd.read_csv(trace)
    assert list(saved.columns) == ["arrived_at_s", "n_prompt_tokens", "n_reply_words"]
    # the whole stream up to the cap (measured or not), at about 5 requests/s
    assert saved.arrived_at_s.iloc[-1] > 600
    assert 4.5 < len(saved) / saved.arrived_at_s.iloc[-1] < 5.5
    summary = pd.read_csv(tmp_path / "o" / "summary.csv")
    assert summary.n_requests.iloc[0] == (saved.arrived_at_s < 6).sum()


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--bogus"], "unrecognized arguments: --bogus"),
        (["--rate", "fast"], "--rate: got 'fast', expected a number"),
        (["--rate", "0"], "--rate: got '0', expected a number > 0"),
        (["--seeds", "0"], "--seeds: got '0'"),
        (["--seed", "-3"], "--seed: got '-3'"),
    ],
)
def test_bad_flags_are_one_line_errors(args, fragment, tmp_path, capsys):
    assert main([str(DEFAULT), "--out", str(tmp_path), *args]) == 2
    err = capsys.readouterr().err
    assert fragment in err and err.count("\n") == 1 and "Traceback" not in err
    assert not any(tmp_path.iterdir())


def test_version_and_a_real_subprocess_error():
    done = subprocess.run([sys.executable, "-m", "disagg_simpy", "--version"], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0 and done.stdout.startswith("disagg_simpy ")
    done = subprocess.run([sys.executable, "-m", "disagg_simpy", "missing.yaml"], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2
    assert done.stderr == "error: missing.yaml: no such file, expected a scenario YAML file\n"


def test_a_saved_trace_replays_the_run_exactly(tmp_path, capsys):
    """csv times are taken as written: a trace saved by --save-trace measures the same requests
    (its first arrival is not at 0, so counting from the first row would shift the window)."""
    first = tmp_path / "first"
    assert main([str(small_traffic_scenario(tmp_path)), "--out", str(first), "--no-plots",
                 "--save-trace", str(tmp_path / "t.csv")]) == 0
    assert pd.read_csv(tmp_path / "t.csv").arrived_at_s.iloc[0] > 0
    replay = tmp_path / "replay.yaml"
    replay.write_text(scenario_text("replay", {"trace": "t.csv", "measure_s": 3}, arrangements=ONE_GPU_THREE_WAYS,
                                    max_sim_s=20))
    assert main([str(replay), "--out", str(tmp_path / "again"), "--no-plots"]) == 0
    for name in ("summary.csv", "requests.csv"):
        assert (tmp_path / "again" / name).read_bytes() == (first / name).read_bytes(), name


def test_seeds_on_a_fixed_trace_warn_and_run_once(tmp_path, capsys):
    path = write_scenario(tmp_path, [(0.0, 100, 3), (0.5, 50, 2)])
    assert main([str(path), "--out", str(tmp_path / "out"), "--no-plots", "--seeds", "3"]) == 0
    out, err = capsys.readouterr()
    assert err.startswith("warning: 3 seeds:") and err.count("\n") == 1 and "same figures" in err
    assert "±" not in out and "seed 1;" in out
    assert "seed" not in pd.read_csv(tmp_path / "out" / "summary.csv").columns


OVERLOADED = """name: inf
seed: 1
max_sim_s: 3
prices: {{a100-80gb: 2}}
workload:
  rate_per_s: 400
  measure_s: 1
  prompt_mix:
    - {{share: 1, tokens: [100, 2000]}}
  reply_words: [10, 300]
{slo}cost:
  preset: a100-80gb/llama-3-8b/tp1/vidur-sarathi
arrangements:
  - {{name: one, kind: colocated, gpus: 1}}
  - {{name: three, kind: colocated, gpus: 3}}
"""


def _strict(text: str):
    def refuse(token):
        raise ValueError(f"not JSON: {token}")
    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("slo, infinite", [
    ("", "dollars_per_million_on_time"),  # nothing on time at a price
    ("slo: {preset: sarathi-serve}\n", "slo_gap_ms"),  # a reply never finished, judged on percentiles
])
@pytest.mark.parametrize("seeds", ["1", "2"])
def test_infinite_figures_reach_the_page_and_json_as_inf(tmp_path, capsys, slo, infinite, seeds):
    """F26: an infinite figure is written "inf" in --json and on the page (it crashed the page,
    and --json printed the bare token Infinity)."""
    from disagg_simpy.page import embedded_data

    path = tmp_path / "inf.yaml"
    path.write_text(OVERLOADED.format(slo=slo), encoding="utf-8")
    page = tmp_path / "page.html"
    argv = [str(path), "--out", str(tmp_path / "out"), "--no-plots", "--seeds", seeds]
    assert main([*argv, "--html", str(page)]) == 0
    data = embedded_data(page.read_text(encoding="utf-8"))
    one = data["arrangements"][0]
    assert (one["means"] if seeds == "2" else one["summary"])[infinite] == "inf"
    capsys.readouterr()
    assert main([*argv, "--json"]) == 0
    rows = _strict(capsys.readouterr().out)
    assert rows[0][infinite] == "inf"


def test_run_with_a_price_prints_its_cost_per_on_time_request(tmp_path, capsys):
    """G8 (review2): the console table shows summary.csv's `dollars_per_million_on_time` (docs/cost.md,
    docs/outputs.md); its console filter read goodput's cost columns and dropped it."""
    from helpers import A100_7B, SMALL_TRAFFIC, preset_scenario

    path = preset_scenario(tmp_path, "priced", SMALL_TRAFFIC, [{"name": "one", "kind": "colocated", "gpus": 1}],
                           A100_7B, max_sim_s=20)
    assert main([str(path), "--out", str(tmp_path / "out"), "--no-plots", "--price", "a100-80gb=2"]) == 0
    header = capsys.readouterr().out.splitlines()
    figure = pd.read_csv(tmp_path / "out" / "summary.csv")["dollars_per_million_on_time"].iloc[0]
    at = next(i for i, line in enumerate(header) if line.startswith("arrangement"))
    assert header[at - 1].split()[-1] == "dollars_per_" and header[at].split()[-1] == "million_on_time"
    assert header[at + 1].split()[-1] == f"{figure:.2f}"
