"""Capacity: seeds, paired differences, sweeps, goodput, the store, Dask.

Scenarios here are tiny (a few seconds of traffic, two or three seeds) so the file runs in a few
seconds; the one Dask test starts a two-process LocalCluster."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import yaml
from helpers import DEFAULT, ROOT, SMALL_TRAFFIC, scenario_text, write_scenario

from disagg_simpy import load_scenario, run
from disagg_simpy.cli import main
from disagg_simpy.results.paired import paired_difference, verdict_line, with_paired_difference
from disagg_simpy.sweep.goodput import goodput
from disagg_simpy.sweep.grid import make_grid, resolve
from disagg_simpy.sweep.runner import LocalPool, Runner, Task, run_task
from disagg_simpy.sweep.store import Store
from disagg_simpy.sweep.table import sweep
from disagg_simpy.workload.stream import make_requests

TINY = {"workload.measure_s": 3, "max_sim_s": 40}  # the default traffic, 3 s measured


def tiny_default(tmp_path, seeds=2, **more):
    """The default scenario cut to 3 s of measured traffic, as a file (for the CLI)."""
    raw = yaml.safe_load(DEFAULT.read_text())
    raw["workload"]["measure_s"] = 3
    raw["max_sim_s"] = 40
    raw["seeds"] = seeds
    raw.update(more)
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def runner(tmp_path, workers=1):
    return Runner(Store(tmp_path / "store.sqlite", "test"), LocalPool(workers), progress=False)


# -- seeds and paired differences --------------------------------------------------------------


def test_the_scenario_declares_its_seeds_and_the_flag_overrides_them(tmp_path, capsys):
    path = tiny_default(tmp_path, seeds=3)
    assert main([str(path), "--out", str(tmp_path / "a"), "--no-plots"]) == 0
    out = capsys.readouterr().out
    summary = pd.read_csv(tmp_path / "a" / "summary.csv")
    assert sorted(summary.seed.unique()) == [1, 2, 3] and "seeds 1..3" in out
    assert "on_time_vs_best_pct" in summary.columns and "paired over 3 seeds)" in out
    assert json.loads((tmp_path / "a" / "run.json").read_text())["seeds"] == [1, 2, 3]
    assert main([str(path), "--out", str(tmp_path / "b"), "--no-plots", "--seeds", "1"]) == 0
    assert "seed" not in pd.read_csv(tmp_path / "b" / "summary.csv").columns


def test_default_scenario_declares_30_seeds():
    assert load_scenario(DEFAULT).seeds == 30


def test_paired_differences_equal_a_hand_computation():
    table = pd.DataFrame({
        "arrangement": ["a", "b", "c"] * 3,
        "seed": [1, 1, 1, 2, 2, 2, 3, 3, 3],
        "on_time_pct": [90.0, 80.0, 10.0, 100.0, 91.0, 20.0, 95.0, 84.0, 30.0],
    })
    out = with_paired_difference(table)
    assert list(out.columns) == ["arrangement", "seed", "on_time_pct", "on_time_vs_best_pct"]
    # best = a (mean 95); b - a per seed: -10, -9, -11 -> mean -10, sd 1, t(2) = 4.3027
    assert out.loc[out.arrangement == "b", "on_time_vs_best_pct"].tolist() == [-10.0, -9.0, -11.0]
    assert out.loc[out.arrangement == "a", "on_time_vs_best_pct"].tolist() == [0.0, 0.0, 0.0]
    d = paired_difference(table, "a", "b")
    # three seeds: the bootstrap's percentiles lie within the Student-t interval, so the hull is t's
    half = 4.3027 / math.sqrt(3)
    assert (d.mean, d.n) == (10.0, 3) and (d.low, d.high) == pytest.approx((10 - half, 10 + half), rel=1e-6)
    # unpaired, b's own interval (84.0 +/- 13.7) would overlap a's (95.0 +/- 12.4)
    assert verdict_line(table) == "a beats b by 10.0 points on time (95% interval 7.5 to 12.5, paired over 3 seeds)"
    close = table.assign(on_time_pct=[90.0, 80.0, 10.0, 80.0, 95.0, 20.0, 95.0, 80.0, 30.0])
    assert "too close to call" in verdict_line(close)


# -- grids and sweeps ----------------------------------------------------------------------------


def test_at_every_rate_a_seed_gives_the_same_requests_time_compressed():
    scenario = load_scenario(DEFAULT).with_overrides(**TINY)
    slow = make_requests(scenario.with_overrides(**{"workload.rate_per_s": 7.25}), 3)
    fast = make_requests(scenario.with_overrides(**{"workload.rate_per_s": 14.5}), 3)
    n = min(len(slow), len(fast))
    assert n > 40
    assert np.array_equal(slow.n_prompt_tokens[:n], fast.n_prompt_tokens[:n])
    assert np.array_equal(slow.n_reply_words[:n], fast.n_reply_words[:n])
    assert np.abs(slow.arrived_at_ns[:n] - 2 * fast.arrived_at_ns[:n]).max() <= 2  # ns rounding only


def test_a_sweeps_rows_equal_single_runs_at_the_same_points_and_seeds(tmp_path):
    scenario = load_scenario(DEFAULT).with_overrides(**TINY)
    grid = make_grid(scenario, "16", ["arrangements.chunked-512.chunk_tokens=256,1024"])
    r = runner(tmp_path)
    table = sweep(scenario, grid, (1, 2), r)
    r.close()
    assert len(table) == 2 * 2 * 5
    assert list(table.columns[:4]) == ["rate_per_s", "arrangements.chunked-512.chunk_tokens", "seed", "arrangement"]
    for (rate, chunk, seed), rows in table.groupby(["rate_per_s", "arrangements.chunked-512.chunk_tokens", "seed"]):
        single = run(resolve(scenario, {"rate_per_s": rate, "arrangements.chunked-512.chunk_tokens": chunk}), seed)
        expected = single.summary.reset_index(drop=True)
        got = rows[expected.columns].reset_index(drop=True)
        pd.testing.assert_frame_equal(got, expected, check_dtype=False, check_categorical=False)


@pytest.mark.parametrize(("args", "fragment"), [
    (["--rate", "4:24"], "--rate: got '4:24', expected START:STOP:STEP"),
    (["--rate", "4:2:1"], "--rate: got '4:2:1', expected START <= STOP"),
    (["--rate", "fast"], "--rate: got 'fast', expected a rate in requests/s"),
    (["--set", "cost.iteration_ms"], "--set: got 'cost.iteration_ms', expected KEY=V1,V2,..."),
    (["--set", "cost.iteraton_ms=10,12"], "--set: got the unknown key 'cost.iteraton_ms' (did you mean cost.iteration_ms"),
    (["--set", "arrangements.nope.gpus=2"], "--set: got the unknown key 'arrangements.nope.gpus'"),
    (["--set", "cost.iteration_ms=10,-1"], "--set cost.iteration_ms=-1: got -1, expected a number of ms"),
    (["--set", "workload.reply_words=[1,2"], "--set workload.reply_words: got the value '[1,2', expected a YAML value"),
    (["--set", "speculative=null,{tokens: 4, acceptance: 0.7}"],  # G17 (review2): null is not "an empty value"
     "--set speculative: got null in 'null,{tokens: 4, acceptance: 0.7}', expected values that are not null"),
    (["--set", "cost.iteration_ms=10,,12"], "--set cost.iteration_ms: got an empty value in '10,,12'"),
    (["--target", "0"], "--target: got '0', expected an on-time share in percent, above 0 and at most 100"),
    (["--target", "100.5"], "--target: got '100.5', expected an on-time share"),
])
def test_bad_grids_and_targets_are_one_line_errors(tmp_path, capsys, args, fragment):
    path = tiny_default(tmp_path)
    assert main(["sweep", str(path), "--out", str(tmp_path / "o"), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and fragment in err, err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(("text", "rates"), [
    ("0.1:0.3:0.1", (0.1, 0.2, 0.3)),  # (0.3 - 0.1) / 0.1 is 1.9999999999999998 in floats
    ("0.1:0.7:0.1", (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7)),
    ("1.1:1.4:0.1", (1.1, 1.2, 1.3, 1.4)),
    ("4:24:5", (4.0, 9.0, 14.0, 19.0, 24.0)),
    ("4:23:5", (4.0, 9.0, 14.0, 19.0)),  # STOP not reached by a whole step: not included
])
def test_a_rate_range_includes_stop_when_decimal_steps_reach_it(text, rates):
    assert make_grid(load_scenario(DEFAULT), text, []).rates == rates


@pytest.mark.parametrize("target", ["0", "-5", "101", "nan"])
def test_goodput_refuses_a_target_outside_0_100(tmp_path, capsys, target):
    assert main(["goodput", str(tiny_default(tmp_path)), "--target", target]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--target: got" in err and "above 0 and at most 100" in err


def test_the_sweep_command_writes_its_table_and_resumes_from_the_store(tmp_path, capsys):
    path = tiny_default(tmp_path)
    out = tmp_path / "o"
    argv = ["sweep", str(path), "--rate", "8,14", "--out", str(out), "--workers", "1"]
    assert main([*argv, "--no-plots"]) == 0
    first = capsys.readouterr()
    assert "4 runs, stored in" in first.err
    table = pd.read_parquet(out / "sweep.parquet")
    assert table.equals(pd.read_csv(out / "sweep.csv"))
    assert list(table.columns[:3]) == ["rate_per_s", "seed", "arrangement"] and len(table) == 2 * 2 * 5
    info = json.loads((out / "run.json").read_text())
    assert info["seeds"] == [1, 2] and info["grid"] == {"rate_per_s": [8.0, 14.0]}
    # the same command again runs nothing; the picture is drawn this time
    assert main(argv) == 0
    again = capsys.readouterr()
    assert "4 of 4 runs were already in" in again.err and "0 ran now" in again.err
    assert (out / "sweep.png").stat().st_size > 0
    assert pd.read_parquet(out / "sweep.parquet").equals(table)
    # a changed scenario (another iteration cost) reuses nothing
    path.write_text(path.read_text().replace("iteration_ms: 12", "iteration_ms: 11"))
    assert main([*argv, "--no-plots"]) == 0
    assert "4 runs, stored in" in capsys.readouterr().err
    assert not pd.read_parquet(out / "sweep.parquet").equals(table)


def test_json_prints_the_sweep_rows(tmp_path, capsys):
    assert main(["sweep", str(tiny_default(tmp_path, seeds=1)), "--rate", "9", "--out", str(tmp_path / "o"),
                 "--no-plots", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 5 and list(rows[0])[:4] == ["rate_per_s", "seed", "arrangement", "n_requests"]


# -- goodput -------------------------------------------------------------------------------------


def evenly_spaced(tmp_path, n=20):
    """Requests one second apart (scaled by rate_per_s to 1/rate apart), each a 1,760-token prompt
    (12 + 0.05 x 1,760 = 100 ms of reading) with a one-word reply; the first word must come
    within 100 ms. One GPU keeps up exactly while requests come at least 100 ms apart: goodput
    10/s; two GPUs take turns: 20/s. Above it every request but the first waits, so it is late."""
    return load_scenario(write_scenario(
        tmp_path, [(float(t), 1760, 1) for t in range(n)],
        arrangements=[{"name": "one", "kind": "colocated", "gpus": 1}, {"name": "two", "kind": "colocated", "gpus": 2}],
        workload={"duration_s": float(n), "rate_per_s": 7.0},
        slo={"first_word_s": 0.1},
    ))


def test_bisection_finds_a_threshold_placed_by_construction(tmp_path):
    scenario = evenly_spaced(tmp_path)
    r = runner(tmp_path)
    table = goodput(scenario, r, (1,), target=90.0, tolerance=0.05).set_index("arrangement")
    r.close()
    for name, capacity, gpus in (("one", 10.0, 1), ("two", 20.0, 2)):
        row = table.loc[name]
        assert row.passing_rate_per_s <= capacity < row.failing_rate_per_s
        assert row.failing_rate_per_s - row.passing_rate_per_s <= 0.05
        assert row.goodput_per_s == row.passing_rate_per_s
        assert row.passing_on_time_pct == 100.0
        assert row.failing_on_time_pct == 100.0 * gpus / 20  # the first request on each GPU, from a full run
        assert row.binding_limit == "first_word"
    assert table.loc["two", "goodput_per_gpu_per_s"] == table.loc["two", "goodput_per_s"] / 2


def test_a_probe_stopped_early_is_below_target_and_a_full_run_agrees():
    scenario = load_scenario(DEFAULT).with_overrides(**{**TINY, "workload.rate_per_s": 30})
    stopped = run_task(Task(scenario, 1, only="split-1-3", give_up_below_pct=90.0))[0]
    full = run_task(Task(scenario, 1, only="split-1-3"))[0]
    assert stopped["below_target"] and math.isnan(stopped.get("on_time_pct", math.nan))
    assert full["on_time_pct"] <= stopped["on_time_at_most_pct"] < 90.0
    assert not full["below_target"]
    # a probe that meets the target runs to its end, with the figures of a plain run
    easy = scenario.with_overrides(**{"workload.rate_per_s": 4})
    kept = run_task(Task(easy, 1, only="split-2-2", give_up_below_pct=90.0))[0]
    plain = run(easy, 1).summary.set_index("arrangement").loc["split-2-2"]
    assert not kept["below_target"] and kept["on_time_pct"] == plain["on_time_pct"] >= 90.0


def test_the_goodput_command_writes_its_table(tmp_path, capsys):
    scenario = evenly_spaced(tmp_path)
    out = tmp_path / "o"
    assert main(["goodput", scenario.source, "--out", str(out), "--tolerance", "0.5", "--workers", "1"]) == 0
    printed = capsys.readouterr()
    assert "fixes every request" not in printed.err  # one seed declared: nothing to say
    table = pd.read_csv(out / "goodput.csv")
    assert list(table.columns[:14]) == [
        "arrangement", "n_gpus", "target_pct", "seeds", "measure_s", "goodput_per_s", "goodput_per_gpu_per_s",
        "goodput_low_per_s", "goodput_high_per_s", "passing_rate_per_s", "failing_rate_per_s", "passing_on_time_pct",
        "failing_on_time_pct", "binding_limit"]
    assert (out / "goodput.png").stat().st_size > 0
    assert f"{table.goodput_per_s[0]:.2f}" in printed.out


# -- Dask ------------------------------------------------------------------------------------------


def test_a_dask_cluster_gives_the_local_table_exactly(tmp_path, capsys, monkeypatch):
    distributed = pytest.importorskip("dask.distributed", reason="dask[distributed] is not installed (extra 'dask')")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the workers import this checkout
    path = tiny_default(tmp_path)
    argv = ["sweep", str(path), "--rate", "9,15", "--no-plots", "--json"]
    assert main([*argv, "--out", str(tmp_path / "local"), "--workers", "1"]) == 0
    local = capsys.readouterr().out
    import dask

    # workers forked from a fresh fork server: a plain fork copies this process mid-run, and a worker
    # once hung for good on a logging lock that the cluster's IO thread held at the fork (pytest's log
    # handler); spawned workers re-import pandas and this package (5 s and more each)
    with dask.config.set({"distributed.worker.multiprocessing-method": "forkserver"}), \
            distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        assert main([*argv, "--out", str(tmp_path / "dask"), "--dask", cluster.scheduler_address]) == 0
    remote = capsys.readouterr()
    assert "4 runs, stored in" in remote.err
    assert remote.out == local


def test_ctrl_c_keeps_the_finished_runs_and_the_next_command_resumes(tmp_path):
    import os
    import signal
    import sqlite3
    import subprocess
    import sys
    import time

    path = tiny_default(tmp_path, seeds=4)
    out = tmp_path / "o"
    # 21 rates x 4 seeds (about 3 s of both cores on an idle machine, against a signal handled within
    # 0.25 s of the first stored run): the sweep is still running when the first stored run is seen
    # (with 6 rates an idle machine once finished the whole sweep before the signal arrived)
    argv = [sys.executable, "-m", "disagg_simpy", "sweep", str(path), "--rate", "10:15:0.25", "--out", str(out),
            "--no-plots", "--workers", "2"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # SIGINT as on a terminal: a pytest started in the background (`cmd &`) ignores SIGINT and
    # its children would inherit that (as in tests/files/test_all_or_nothing.py)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:  # until some runs are stored
            if (out / "store.sqlite").exists():
                try:
                    if sqlite3.connect(out / "store.sqlite").execute("SELECT count(*) FROM runs").fetchone()[0]:
                        break
                except sqlite3.OperationalError:
                    pass
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130 and stderr == "interrupted: earlier results were left as they were\n"
    assert not (out / "sweep.csv").exists()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 0
    skipped = int(done.stderr.split(" of 84 runs were already in")[0].rsplit("\n", 1)[-1])
    assert 1 <= skipped < 84


def test_late_warm_up_replies_never_stop_a_probe_early(tmp_path):
    """Four warm-up requests arrive together at 0 s and are read in one 812 ms iteration
    (12 + 0.05 x 16,000 ms), past the 0.5 s first-word limit; the ten measured ones (from 2 s,
    100 tokens, 3 words) are all on time. A probe that gives up below 90% must count only
    measured replies (D6), so its verdict is the full run's."""
    rows = [(0.0, 4000, 1)] * 4 + [(2.0 + 0.1 * k, 100, 3) for k in range(10)]
    scenario = load_scenario(write_scenario(tmp_path, rows, workload={"warmup_s": 1.5, "measure_s": 3.5},
                                            slo={"first_word_s": 0.5}))
    full = run_task(Task(scenario, 1))[0]
    probe = run_task(Task(scenario, 1, give_up_below_pct=90.0))[0]
    assert full["n_requests"] == 10 and full["on_time_pct"] == 100.0
    assert not probe["below_target"] and probe["on_time_pct"] == full["on_time_pct"]


@pytest.mark.parametrize("command", [
    ["sweep", "--rate", "9"],
    ["goodput", "--tolerance", "2"],
    ["plan", "--gpus", "1", "--chunks", "none", "--tolerance", "2"],
])
def test_the_batch_commands_measure_the_window_measure_s_sets(tmp_path, capsys, command):
    """Ten light requests (17 ms reads) then ten heavy ones (100 ms), 1/rate apart, first word
    within 0.1 s: `--measure-s 1` must give the table of a file that says measure_s: 1 (at 7/s
    only light requests are measured), not that of the file's own window (every request)."""
    rows = [(float(t), 100 if t < 10 else 1760, 1) for t in range(20)]
    workload = {"duration_s": 20.0, "rate_per_s": 7.0}
    whole = write_scenario(tmp_path, rows, name="whole", workload=workload, slo={"first_word_s": 0.1})
    cut = write_scenario(tmp_path, rows, name="cut", workload={**workload, "measure_s": 1.0}, slo={"first_word_s": 0.1})
    name, *flags = command
    table = f"{name}.csv"

    def output(path, *more) -> str:
        out = tmp_path / f"{path.stem}{len(more)}"
        assert main([name, str(path), *flags, "--out", str(out), "--no-plots", "--workers", "1", *more]) == 0
        return (out / table).read_text()

    flagged = output(whole, "--measure-s", "1")
    assert flagged == output(cut)
    assert flagged != output(whole)
    capsys.readouterr()


@pytest.mark.parametrize("value", ["0", "nan", "-1", "0:2:0.5"])
def test_a_bad_slo_scale_is_refused_as_a_scale_not_a_rate(tmp_path, capsys, value):
    """Issue 37 item 13: `--slo-scale 0` (or nan) said 'expected a rate in requests/s > 0'."""
    path = write_scenario(tmp_path, [(0.0, 100, 3)])
    assert main(["sweep", str(path), "--rate", "1", "--slo-scale", value, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--slo-scale: got '{value.split(':')[0]}', expected " in err, err
    assert "> 0 (every SLO limit that is on multiplied by it; 1: as the scenario states them)" in err
    assert "requests/s" not in err


@pytest.mark.parametrize("written, beside", [
    (None, {}),  # no slo block: the explainer's limits
    ({"first_word_s": 5}, {"first_word_s": 5}),  # the explainer's rule with one limit changed
    ({"preset": "vllm-bench", "first_word_s": 5, "e2e_s": 30}, {"first_word_s": 5, "e2e_s": 30}),
    ({"preset": "sarathi-serve"}, {}),
])
@pytest.mark.parametrize("name", ["distserve", "mlperf-llama2-70b-server"])
def test_set_slo_preset_gives_the_named_rule_as_the_file_writing_it(tmp_path, written, beside, name):
    """F22: `--set slo.preset=NAME` kept every old limit under the new name; it means what
    writing `preset: NAME` in the file's slo block means (keys written beside it stay)."""
    from disagg_simpy.sweep.grid import apply_sets

    path = tmp_path / "s.yaml"
    path.write_text(scenario_text("s", SMALL_TRAFFIC, slo=written))
    got = apply_sets(load_scenario(path), [f"slo.preset={name}"]).slo
    path.write_text(scenario_text("s", SMALL_TRAFFIC, slo={"preset": name, **beside}))
    assert got == load_scenario(path).slo


KINDS_PRESET = "h100-80gb/llama-3.1-8b/tp1/vllm-0.24"


@pytest.mark.parametrize("arrangement, key, kind", [
    ({"name": "a", "kind": "colocated", "gpus": 1}, "gpu", "h200"),
    ({"name": "a", "kind": "colocated", "gpus": 1, "gpu": "h200"}, "gpu", "b200"),
    ({"name": "a", "kind": "colocated", "gpus": 1, "kv_capacity_tokens": 50000}, "gpu", "h200"),  # written: kept
    ({"name": "a", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 2, "kv_path": "inter_node"},
     "reading_gpu", "b200"),
])
def test_set_gpu_kind_fills_that_kinds_kv_capacity_as_the_file_does(tmp_path, arrangement, key, kind):
    """F23: `--set arrangements.NAME.gpu=KIND` swapped the preset but kept the old GPU's KV
    capacity (480,399 tokens of the H100 for an H200's 940,134)."""
    from disagg_simpy.sweep.grid import apply_sets

    path = tmp_path / "s.yaml"
    path.write_text(scenario_text("s", SMALL_TRAFFIC, cost={"preset": KINDS_PRESET}, arrangements=[arrangement]))
    got = apply_sets(load_scenario(path), [f"arrangements.a.{key}={kind}"]).arrangements[0]
    path.write_text(scenario_text("s", SMALL_TRAFFIC, cost={"preset": KINDS_PRESET},
                                  arrangements=[{**arrangement, key: kind}]))
    want = load_scenario(path).arrangements[0]
    assert got == want
    assert (want.kv_capacity_tokens or want.reading_kv_capacity_tokens) != 480399


def test_sweep_over_slo_keys_keeps_each_points_rule_columns(tmp_path, capsys):
    """F14: sweep.csv took the rule columns of the base scenario, so `--set slo.e2e_s=...`
    dropped late_e2e_pct; points judged by two criteria are refused (the table shows one)."""
    path = tmp_path / "s.yaml"
    path.write_text(scenario_text("s", SMALL_TRAFFIC, max_sim_s=20))
    out = tmp_path / "out"
    assert main(["sweep", str(path), "--rate", "6", "--set", "slo.e2e_s=0.05,50", "--out", str(out), "--no-plots",
                 "--workers", "1"]) == 0
    table = pd.read_csv(out / "sweep.csv")
    late = table.groupby("slo.e2e_s")["late_e2e_pct"].mean()
    assert late[50] == 0 and late[0.05] > 0
    assert "slo.e2e_s as each row sets it" in capsys.readouterr().out
    argv = ["sweep", str(path), "--rate", "6", "--set", "slo.preset=distserve,sarathi-serve", "--out", str(tmp_path / "o2")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--set slo.preset: got points judged by per_request and percentiles" in err
    assert not (tmp_path / "o2").exists()
