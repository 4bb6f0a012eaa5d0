"""Issue 37 (part A): answers that were wrong or missing, and refusals that left or ignored
things: each one line, exit 2, nothing written; or the right answer."""

from __future__ import annotations

import pytest
import yaml
from helpers import DEFAULT, ROOT, SMALL_TRAFFIC

from disagg_simpy.cli import main

DAY = ROOT / "scenarios" / "day.yaml"
LLAMA = ROOT / "scenarios" / "llama3-8b-a100.yaml"


def _refused(argv, capsys) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err, err
    return err


def test_percentiles_criterion_run_prints_its_figures(tmp_path, capsys):
    """Item 1: a run under `criterion: percentiles` printed its files, then KeyError."""
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump({
        "name": "p", "workload": dict(SMALL_TRAFFIC), "max_sim_s": 20,
        "slo": {"first_word_s": 0.5, "mean_gap_ms": 60, "freeze_ms": None, "criterion": "percentiles", "percentile": 90},
        "arrangements": [{"name": "same", "kind": "colocated", "gpus": 1}]}))
    assert main([str(path), "--out", str(tmp_path / "out"), "--no-plots", "--seeds", "2"]) == 0
    out = capsys.readouterr().out
    top, bottom = out.splitlines()[1:3]
    assert "slo_first_" in top and "word_s" in bottom and "met" in bottom, out


@pytest.mark.parametrize("tp", ["2", "3", "2,3"])
def test_plan_tp_without_a_preset_for_any_degree_is_one_line(tmp_path, capsys, tp):
    """Item 3: `searching TP ` then ValueError."""
    err = _refused(["plan", str(LLAMA), "--gpus", "4", "--tp", tp, "--out", str(tmp_path / "o")], capsys)
    assert f"--tp: got {tp}" in err and "degrees with a preset: 1" in err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("command", [["goodput"], ["goodput", "--vary", "slo"], ["plan", "--gpus", "4"]])
def test_goodput_and_plan_on_a_schedule_are_refused_before_anything_is_written(tmp_path, capsys, command):
    """Item 9: refused, but store.sqlite was left behind; the refusal names plan --over-time."""
    out = tmp_path / "o"
    err = _refused([command[0], str(DAY), *command[1:], "--out", str(out)], capsys)
    assert "workload.schedule" in err and "--over-time" in err
    assert not out.exists()


def test_a_refusal_during_the_work_removes_the_store_it_created(tmp_path, capsys):
    """Item 9, any refusal: one found after the store is opened (goodput on a trace without a
    rate) leaves no store and no folder."""
    trace = tmp_path / "t.csv"
    trace.write_text("arrived_at_s,n_prompt_tokens,n_reply_words\n0.1,100,5\n0.5,200,5\n")
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump({"name": "t", "workload": {"trace": "t.csv", "measure_s": 1},
                                    "arrangements": [{"name": "same", "kind": "colocated", "gpus": 1}]}))
    out = tmp_path / "o"
    err = _refused(["goodput", str(path), "--out", str(out)], capsys)
    assert "rate_per_s" in err
    assert not out.exists()
    out.mkdir()
    (out / "mine.txt").write_text("kept")
    _refused(["goodput", str(path), "--out", str(out)], capsys)
    assert sorted(p.name for p in out.iterdir()) == ["mine.txt"]


def test_plan_switch_s_without_over_time_is_refused(tmp_path, capsys):
    """Item 10: --switch-s without --over-time ran and ignored it."""
    err = _refused(["plan", str(DEFAULT), "--gpus", "4", "--switch-s", "5", "--out", str(tmp_path / "o")], capsys)
    assert "--switch-s: got 5 without --over-time" in err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("key", ["arrangements.split-2-2.reading_tp=2", "arrangements.same-gpu.max_batch_tokens=4096",
                                 "arrangements.split-2-2.reading_cost.iteration_ms=20",
                                 "cost.preset=a100-80gb/llama-3-8b/tp1/vidur-sarathi"])
def test_set_takes_every_key_of_the_schema(tmp_path, key):
    """Item 11: keys the file does not write were refused as unknown."""
    from disagg_simpy import load_scenario
    from disagg_simpy.sweep.grid import apply_sets

    scenario = apply_sets(load_scenario(DEFAULT), [key])
    name, _, value = key.partition("=")
    if name.startswith("arrangements."):
        _, arrangement, *path = name.split(".")
        a = next(a for a in scenario.arrangements if a.name == arrangement)
        got = a
        for p in path:
            got = getattr(got, p)
    else:
        got = scenario.cost.preset
    assert got == yaml.safe_load(value)


def test_set_of_every_schema_key_is_known():
    """Item 11: every key of the schema, set or not, is known to --set (none refused as unknown)."""
    from disagg_simpy import load_scenario
    from disagg_simpy.sweep.grid import check_key, model_keys

    scenario = load_scenario(DEFAULT)
    for key in model_keys(scenario):
        if key not in ("name", "seed", "seeds"):
            check_key(scenario, key)
    for a in scenario.arrangements:
        for key in model_keys(type(a)):
            check_key(scenario, f"arrangements.{a.name}.{key}")


def test_sweep_set_of_an_unwritten_arrangement_key_runs(tmp_path, capsys):
    """Item 11 end to end: a sweep over a key the file does not write."""
    assert main(["sweep", str(DEFAULT), "--rate", "2", "--set", "arrangements.split-2-2.max_batch_tokens=4096",
                 "--measure-s", "3", "--seeds", "1", "--no-plots", "--out", str(tmp_path / "o")]) == 0
    assert "arrangements.split-2-2.max_batch_tokens" in capsys.readouterr().out


FIT_ROWS = ["replies,prompt_tokens,context_tokens,ms", "4,0,2000,14", "8,0,6000,16.5", "16,0,12000,21", "0,512,0,38",
            "0,2048,0,115", "2,256,900,27"]


@pytest.mark.parametrize("huge", ["1e12", "1e308"])
def test_fit_with_one_huge_row_is_refused_naming_it(tmp_path, capsys, huge):
    """Item 4: every coefficient 0 and every error -100%, exit 0 (1e308: an overflow warning too)."""
    table = tmp_path / "t.csv"
    table.write_text("\n".join([*FIT_ROWS, f"0,1024,0,{huge}"]) + "\n")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        err = _refused(["fit", str(table), "--out", str(tmp_path / "o")], capsys)
    assert "row 8: column ms: got 1e+" in err and "row 2's 14" in err
    assert not (tmp_path / "o").exists()
    table.write_text("\n".join([*FIT_ROWS, "0,1024,0,64"]) + "\n")  # the same row in ms: a fit
    assert main(["fit", str(table), "--out", str(tmp_path / "o")]) == 0
    assert "iteration_ms: 12." in capsys.readouterr().out


PAGED = {"name": "p5", "workload": {"rate_per_s": 3, "measure_s": 30, "prompt_mix": [{"share": 1, "tokens": [2000, 6000]}],
                                    "reply_words": [200, 600]},
         "arrangements": [{"name": "paged", "kind": "colocated", "gpus": 1, "kv_capacity_tokens": 20000,
                           "kv_policy": "paged", "max_preemptions": 0},
                          {"name": "whole", "kind": "colocated", "gpus": 1}]}


def test_a_paged_run_that_drops_requests_says_how_many(tmp_path, capsys):
    """Item 5: 35 of 95 dropped, said only in summary.csv's n_dropped."""
    import pandas as pd

    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(PAGED))
    assert main([str(path), "--out", str(tmp_path / "o"), "--no-plots"]) == 0
    out, err = capsys.readouterr()
    dropped = int(pd.read_csv(tmp_path / "o" / "summary.csv").set_index("arrangement").n_dropped["paged"])
    assert dropped > 0
    assert f"dropped past max_preemptions (E9, not on time): paged {dropped}" in out.splitlines()[0]
    assert "whole" not in out.splitlines()[0]
    assert f"warning: paged (seed 1): {dropped} measured requests dropped, preempted past max_preemptions (0; E9)" in err
    assert "whole (seed" not in err


def test_goodput_with_n_requests_stretches_max_sim_s_at_lower_rates(tmp_path, capsys):
    """Item 12: goodput with n_requests refused an explicit max_sim_s once a probe's rate was low
    enough that the last request arrived after it; the cap now stretches with the arrivals."""
    import pandas as pd

    from disagg_simpy import load_scenario
    from disagg_simpy.sweep.grid import RATE, resolve

    path = tmp_path / "n.yaml"
    path.write_text(yaml.safe_dump({
        "name": "n", "max_sim_s": 40,
        "workload": {"rate_per_s": 4, "n_requests": 50, "prompt_mix": [{"share": 1, "tokens": [3000, 8000]}],
                     "reply_words": [100, 400]},
        "arrangements": [{"name": "same", "kind": "colocated", "gpus": 1}]}))
    scenario = load_scenario(path)
    assert resolve(scenario, {RATE: 1.0}).max_sim_s == 160
    assert resolve(scenario, {RATE: 8.0}).max_sim_s == 40  # at or above the scenario's rate: as written
    assert main(["goodput", str(path), "--out", str(tmp_path / "o"), "--seeds", "2", "--no-plots"]) == 0
    row = pd.read_csv(tmp_path / "o" / "goodput.csv").iloc[0]
    assert row.failing_rate_per_s < 1.0  # probed where the 50th arrival comes after 40 s (about 1.25/s and below)


def test_plan_refusing_an_option_it_cannot_carry_writes_nothing(tmp_path, capsys):
    """Item 2 at the command line: one line naming the key, exit 2, before any run; the remedy
    the line gives (a same-GPU arrangement saying how that engine runs) works."""
    split = {"name": "split", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 1,
             "reading_kv_capacity_tokens": 100_000, "writing_kv_capacity_tokens": 300_000}
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump({"name": "m", "workload": dict(SMALL_TRAFFIC), "max_sim_s": 20,
                                    "arrangements": [split]}))
    out = tmp_path / "o"
    err = _refused(["plan", str(path), "--gpus", "2", "--out", str(out)], capsys)
    assert "arrangements.split.reading_kv_capacity_tokens: got 100000" in err and "same-gpu" in err
    assert "add a colocated arrangement to the scenario" in err
    assert not out.exists()
    path.write_text(yaml.safe_dump({"name": "m", "workload": dict(SMALL_TRAFFIC), "max_sim_s": 20, "arrangements": [
        split, {"name": "same", "kind": "colocated", "gpus": 2}]}))
    assert main(["plan", str(path), "--gpus", "2", "--chunks", "none", "--seeds", "1",
                 "--no-plots", "--out", str(tmp_path / "ok")]) == 0
