"""What a new user is told (issue 24): commands that do not exist, keys and traces misspelt,
a trace in another format, an empty table or window, help text, progress and JSON output."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from helpers import COLOCATED_1, DEFAULT, ROOT, SPLIT_1_1, write_scenario

from disagg_simpy.cli import main

SHORT = ["--measure-s", "3", "--no-plots"]


def _error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: "), err
    return err


def test_run_is_no_command_and_says_how_a_scenario_runs(capsys):
    assert main(["run", str(DEFAULT)]) == 2
    err = _error(capsys)
    assert "there is no command 'run'" in err and "python -m disagg_simpy SCENARIO" in err


def test_a_misspelt_map_y_key_names_y_and_suggests_the_long_prompt_share(tmp_path, capsys):
    assert main(["map", str(DEFAULT), "--gpus", "4", "--y", "workload.long_share=0.1,0.2", "--out", str(tmp_path)]) == 2
    err = _error(capsys)
    assert err.startswith("error: --y: got the unknown key 'workload.long_share' (did you mean long_prompt_share")
    assert "--set" not in err


def test_a_jsonl_trace_without_format_suggests_mooncake(tmp_path, capsys):
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 10, "output_length": 5}\n')
    assert main(["describe", str(trace)]) == 2
    assert "it looks like a mooncake trace: give its format (describe --format mooncake" in _error(capsys)
    azure = tmp_path / "a.csv"
    azure.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,10,5\n")
    assert main(["describe", str(azure)]) == 2
    assert "it looks like an azure trace" in _error(capsys)
    assert main(["describe", str(azure), "--format", "azure"]) == 0  # the hint's advice works


def test_a_misspelt_public_trace_gets_a_did_you_mean(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["describe", "azure-cod"]) == 2
    assert "did you mean 'azure-code'?" in _error(capsys)


def test_a_run_with_no_measured_request_says_why_its_table_is_empty(tmp_path, capsys):
    assert main([str(DEFAULT), "--rate", "0.001", "--seeds", "1", "--out", str(tmp_path / "o"), *SHORT]) == 0
    err = capsys.readouterr().err
    assert "warning: no request arrived in the measured window [0, 3) s, so every figure is empty" in err
    assert "expects 0.003 requests" in err


def test_a_window_empty_for_some_arrangements_names_them(micro):
    """One request: the same GPU has written its 3 words by 0.2 s; the split ships its KV cache
    for a second (1,000 tokens at 1 ms), so it is still in progress at 0.5-0.6 s."""
    from disagg_simpy.plots import empty_window_note

    result = micro([(0.0, 1000, 3)], [*COLOCATED_1, *SPLIT_1_1], cost={"kv_ship_ms_per_token": 1.0})
    assert empty_window_note(result, (0.5, 0.6)) == (
        "no measured reply of same is in progress from 0.5 to 0.6 s, so its timeline shows none")
    assert empty_window_note(result, (0.0, 0.1)) is None


def test_a_timeline_subtitle_never_says_only_0():
    from disagg_simpy.plots.timeline import _sample_text

    sample = pd.DataFrame({"on_time": [True] * 4})
    text = _sample_text(sample, sample, (0.0, 1.0), 4, 0.5)
    assert "holds no late reply" in text and "only 0" not in text
    text = _sample_text(pd.DataFrame({"on_time": [False] * 4}), sample, (0.0, 1.0), 4, 0.5)
    assert "holds no reply on time" in text and "only 0" not in text


@pytest.mark.parametrize("command", ["sweep", "goodput", "plan", "map"])
def test_batch_help_has_no_doubled_percent(command, capsys):
    assert main([command, "--help"]) == 0
    out = capsys.readouterr().out
    assert "%%" not in out


def test_the_progress_bar_counts_runs_and_says_so(tmp_path, capsys):
    from disagg_simpy import load_scenario
    from disagg_simpy.sweep.grid import Grid
    from disagg_simpy.sweep.runner import LocalPool, Runner
    from disagg_simpy.sweep.store import Store
    from disagg_simpy.sweep.table import sweep

    scenario = load_scenario(DEFAULT).with_overrides(**{"workload.measure_s": 1, "max_sim_s": 20})
    runner = Runner(Store(tmp_path / "s.sqlite", "test"), LocalPool(1), progress=True)
    sweep(scenario, Grid(rates=(1.0,), sets=()), (1, 2), runner)
    runner.close()
    err = capsys.readouterr().err
    assert "runs (points x seeds)" in err and "0/2 " in err and "points:" not in err


def test_a_runner_counts_a_run_it_reuses_once_and_not_as_found_in_the_store(tmp_path):
    from disagg_simpy import load_scenario
    from disagg_simpy.sweep.runner import LocalPool, Runner, Task
    from disagg_simpy.sweep.store import Store

    scenario = load_scenario(write_scenario(tmp_path, [(0.0, 10, 2)]))
    tasks = [Task(scenario, 1), Task(scenario, 2)]
    runner = Runner(Store(tmp_path / "s.sqlite", "test"), LocalPool(1), progress=False)
    runner.run(tasks)
    runner.run(tasks)  # reused within the same command: not "already in the store"
    assert (runner.skipped, runner.ran) == (0, 2)
    runner.close()
    again = Runner(Store(tmp_path / "s.sqlite", "test"), LocalPool(1), progress=False)
    again.run(tasks)
    again.run(tasks)
    assert (again.skipped, again.ran) == (2, 0)
    again.close()


def test_json_with_several_seeds_gives_the_tables_means_and_each_seeds_rows(tmp_path, capsys):
    assert main([str(DEFAULT), "--seeds", "2", "--json", "--out", str(tmp_path / "o"), *SHORT]) == 0
    rows = json.loads(capsys.readouterr().out)
    summary = pd.read_csv(tmp_path / "o" / "summary.csv")
    means = summary.groupby("arrangement", sort=False)["on_time_pct"].mean()
    assert [r["arrangement"] for r in rows] == list(means.index)
    for r in rows:
        assert r["seeds"] == 2 and r["on_time_pct"] == pytest.approx(means[r["arrangement"]])
        low, high = r["interval"]["on_time_pct"]
        assert low <= r["on_time_pct"] <= high
        assert [s["seed"] for s in r["per_seed"]] == [1, 2]


def test_the_readmes_html_example_leaves_no_untracked_file():
    assert "/report.html" in (ROOT / ".gitignore").read_text().split("\n")


@pytest.mark.parametrize("name", ["", "zzz"])
def test_presets_show_of_no_preset_ends_with_what_was_expected(capsys, name):
    """Issue 37 item 18: `presets show ''` ended with a dangling '; '."""
    assert main(["presets", "show", name]) == 2
    err = _error(capsys)
    assert f"presets show: got {name!r}, no such preset; " in err and "; (" not in err
    from disagg_simpy.costs.presets import EXAMPLE

    assert err.rstrip().endswith(f"expected a preset name like {EXAMPLE} (python -m disagg_simpy presets lists them)"), err


@pytest.mark.parametrize(("n", "told"), [(1, "after 1 preemption (more"), (2, "after 2 preemptions (more")])
def test_a_dropped_reply_counts_its_preemptions_in_words(n, told):
    """Issue 37 item 18: 'dropped after 1 preemptions'."""
    from disagg_simpy.results.story import _verdict

    assert told in _verdict({"on_time": False, "finished": False, "dropped": True, "n_preemptions": n, "limits": {}})
