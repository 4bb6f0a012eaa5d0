"""Arrangements that cannot keep up finish in bounded time and memory, shown without timing:
simulated time never passes the cap (max_sim_s), iterations and requests stay under bounds
computed from the scenario, unfinished requests count as not on time, the CLI exits 0 with a
one-line warning per capped arrangement and records the cap in run.json."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from helpers import DEFAULT, write_scenario
from invariants import check_run

from disagg_simpy import load_scenario, run
from disagg_simpy.cli import main
from disagg_simpy.scenario.limits import MAX_REQUESTS, iteration_bound

SPLIT_1_3 = {"name": "split-1-3", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 3}
ONE_GPU = {"name": "one-gpu", "kind": "colocated", "gpus": 1}


def overload(**changes):
    return load_scenario(DEFAULT).with_overrides(**changes)


def assert_bounded(result) -> None:
    """Time, iterations, requests and SimPy events stay under bounds fixed by the scenario."""
    stream = result.stream
    cap_s = stream.cap_ns / 1e9
    assert len(stream) <= MAX_REQUESTS
    assert stream.arrived_at_ns.max() <= stream.cap_ns
    for arrangement in result.scenario.arrangements:
        rec = result.records[arrangement.name]
        assert rec.stopped_at_ns <= rec.cap_ns == stream.cap_ns
        it = rec.iterations
        if len(it["ended_at_ns"]):
            assert it["ended_at_ns"].max() <= stream.cap_ns
        n_iterations = len(it["ended_at_ns"])
        assert n_iterations <= iteration_bound(arrangement.n_gpus, cap_s, result.scenario.cost.iteration_ms)
        n_requests = len(rec.requests["request_id"])
        assert n_requests <= len(stream)
        assert rec.n_events <= 4 * n_iterations + 10 * n_requests + 4 * arrangement.n_gpus + 16


@pytest.fixture(scope="module")
def split_1_3_at_2x():
    """split-1-3 at twice the default rate, with the default cap and with a cap of 60 s."""
    return (
        run(overload(**{"workload.rate_per_s": 29, "arrangements": [SPLIT_1_3]})),
        run(overload(**{"workload.rate_per_s": 29, "max_sim_s": 60, "arrangements": [SPLIT_1_3]})),
    )


def test_split_1_3_at_twice_the_rate_falls_behind_but_finishes_before_the_default_cap(split_1_3_at_2x):
    result, _ = split_1_3_at_2x
    assert_bounded(result)
    row = result.summary.iloc[0]
    assert not result.capped and row.n_unfinished == 0
    assert row.on_time_pct < 5 and row.first_word_p50_s > 30  # one reading GPU queues the prompts
    assert result.records["split-1-3"].stopped_at_ns < result.stream.cap_ns


def test_split_1_3_at_twice_the_rate_with_a_short_cap_stops_at_it(split_1_3_at_2x):
    _, result = split_1_3_at_2x
    assert_bounded(result)
    rec = result.records["split-1-3"]
    assert result.capped == ["split-1-3"] and rec.stopped_at_ns == rec.cap_ns == 60 * 10**9
    row = result.summary.iloc[0]
    assert row.n_unfinished == rec.n_unfinished > 0
    requests = result.requests
    unfinished = requests.finished_at_s.isna()
    assert unfinished.sum() == row.n_unfinished and not requests.on_time[unfinished].any()
    assert row.on_time_pct <= 100 * (1 - row.n_unfinished / row.n_requests)
    check_run(result)


def test_one_gpu_at_ten_times_the_rate_is_cut_off_by_the_default_cap():
    result = run(overload(**{"workload.rate_per_s": 145, "arrangements": [ONE_GPU]}))
    assert_bounded(result)
    rec = result.records["one-gpu"]
    assert result.stream.cap_ns == 630 * 10**9 and rec.stopped_at_ns == rec.cap_ns
    # whole prompts: each iteration reads everything that queued during the previous one, so
    # a GPU this far behind runs a handful of ever longer iterations, not a growing number
    assert len(rec.iterations["ended_at_ns"]) < 20
    row = result.summary.iloc[0]
    assert row.n_unfinished == row.n_requests and row.on_time_pct == 0
    check_run(result)


def test_a_trillion_token_prompt_and_a_trillion_word_reply_end_at_the_cap(tmp_path):
    rows = [(0.0, 10**12, 5), (0.5, 100, 10**12), (1.0, 100, 5)]
    result = run(load_scenario(write_scenario(
        tmp_path, rows, [ONE_GPU, SPLIT_1_3], name="huge", max_sim_s=100, workload={"trace": "huge.csv", "measure_s": 2})))
    assert_bounded(result)
    assert result.capped == ["one-gpu", "split-1-3"]
    for name in ("one-gpu", "split-1-3"):
        rec = result.records[name]
        assert rec.stopped_at_ns == 100 * 10**9 and rec.n_unfinished >= 1
    check_run(result)


def test_the_cli_exits_0_warns_once_per_capped_arrangement_and_records_the_cap(tmp_path, capsys):
    path = tmp_path / "over.yaml"
    spec = load_scenario(DEFAULT).model_dump(mode="json", exclude_none=True)
    spec["workload"].update(rate_per_s=29, measure_s=10)
    spec.update(max_sim_s=30, arrangements=[SPLIT_1_3, {"name": "split-2-2", "kind": "disaggregated",
                                                        "reading_gpus": 2, "writing_gpus": 2}])
    path.write_text(json.dumps(spec))  # JSON is YAML
    out = tmp_path / "out"
    assert main([str(path), "--out", str(out), "--seeds", "2", "--no-plots"]) == 0
    captured = capsys.readouterr()
    warnings = captured.err.splitlines()
    summary = pd.read_csv(out / "summary.csv")
    capped = summary[summary.n_unfinished > 0]
    assert (capped.arrangement == "split-1-3").sum() == 2  # both seeds
    assert sorted(warnings) == sorted(
        f"warning: {a} (seed {s}): the safety cap max_sim_s=30 s ended the run with {n} measured "
        "replies unfinished; they count as not on time"
        for a, s, n in zip(capped.arrangement, capped.seed, capped.n_unfinished)
    )
    info = json.loads((out / "run.json").read_text())
    assert info["max_sim_s"] == 30
    recorded = {(s, a, n) for s, by_name in info["capped"].items() for a, n in by_name.items()}
    assert recorded == {(str(s), a, int(n)) for a, s, n in zip(capped.arrangement, capped.seed, capped.n_unfinished)}
    requests = pd.read_csv(out / "requests.csv")
    late = requests[requests.finished_at_s.isna()]
    assert len(late) == capped.n_unfinished.sum() and not late.on_time.any()


def test_a_run_with_no_measured_request_is_not_an_error(tmp_path, capsys):
    path = tmp_path / "quiet.yaml"
    spec = load_scenario(DEFAULT).model_dump(mode="json", exclude_none=True)
    spec["workload"].update(rate_per_s=0.001, measure_s=1)
    spec.update(max_sim_s=10)
    path.write_text(json.dumps(spec))
    # 2 seeds, not the scenario's 30: still several seeds (the warning is said once, the means
    # and intervals are of empty seeds), at a fifteenth of the tables' cost
    assert main([str(path), "--out", str(tmp_path / "out"), "--no-plots", "--seeds", "2"]) == 0
    captured = capsys.readouterr()
    assert "0 measured requests" in captured.out  # and stderr says why, in one line
    assert captured.err.startswith("warning: no request arrived in the measured window [0, 1) s") and captured.err.count("\n") == 1
    summary = pd.read_csv(tmp_path / "out" / "summary.csv")
    assert (summary.n_requests == 0).all() and summary.on_time_pct.isna().all()


@pytest.mark.parametrize("cv", [0.01, 100.0])
def test_lengths_traces_with_extreme_burstiness_stay_bounded(tmp_path, cv):
    lengths = tmp_path / "l.csv"
    lengths.write_text("num_prefill_tokens,num_decode_tokens\n100,5\n2000,50\n")
    path = tmp_path / "l.yaml"
    path.write_text(json.dumps({
        "name": "l", "workload": {"trace": "l.csv", "format": "lengths", "rate_per_s": 20, "measure_s": 5,
                                  "burstiness_cv": cv},
        "max_sim_s": 30, "arrangements": [ONE_GPU, SPLIT_1_3]}))
    result = run(load_scenario(path))
    assert_bounded(result)
    assert np.all(np.diff(result.stream.arrived_at_ns) >= 0)
    check_run(result)


@pytest.mark.parametrize("case", ["nothing-measured", "trillion-token-prompt"])
def test_pictures_of_runs_that_barely_ran_are_drawn_with_the_default_window(tmp_path, capsys, case):
    """No iteration at all, or one that ends long before the default window: exit 0, pictures."""
    if case == "nothing-measured":
        spec = load_scenario(DEFAULT).model_dump(mode="json", exclude_none=True)
        spec["workload"].update(rate_per_s=0.001, measure_s=1)
        spec.update(max_sim_s=10, arrangements=[ONE_GPU, SPLIT_1_3], seeds=2)  # (several seeds, not 30: tables cost)
        path = tmp_path / "s.yaml"
        path.write_text(json.dumps(spec))
    else:
        path = write_scenario(tmp_path, [(0.0, 100, 5), (0.5, 10**12, 5), (1.0, 100, 5)], [ONE_GPU], name="t",
                              max_sim_s=50, workload={"trace": "t.csv", "measure_s": 2})
    assert main([str(path), "--out", str(tmp_path / "out")]) == 0, capsys.readouterr().err
    assert {"summary.png", "late.png"} <= {p.name for p in (tmp_path / "out" / "plots").iterdir()}
