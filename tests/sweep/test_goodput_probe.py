"""Staged probes (sweep/goodput_probe.py): a few seeds first, deeper below the target, so that a
rate far above capacity fails on them alone; the goodputs are those of probes that run every
seed."""

from __future__ import annotations

import pandas as pd
from test_plan_bounds import small

from disagg_simpy.scenario.limits import one_arrangement_at_a_time
from disagg_simpy.sweep import goodput_probe
from disagg_simpy.sweep.goodput import goodput
from disagg_simpy.sweep.runner import LocalPool, Runner
from disagg_simpy.sweep.store import Store

SEEDS = (1, 2, 3, 4, 5, 6)


def searched(tmp_path, scenario) -> tuple[pd.DataFrame, int]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    runner = Runner(Store(tmp_path / "store.sqlite", "test"), LocalPool(1), progress=False)
    with one_arrangement_at_a_time():
        table = goodput(scenario, runner, SEEDS[:4], 90.0, 1.0, names=["split-3-1-chunked-512"])
    runner.close()
    return table, runner.ran


def test_staged_probes_find_the_goodputs_and_intervals_of_probes_that_run_every_seed(tmp_path, monkeypatch):
    """The explainer's traffic on 4 GPUs (3 s measured, four seeds: one runs first, to 60% on
    time): every figure of goodput.csv equals that of probes running all four seeds at once,
    with fewer runs (the rates far above capacity fail on one seed)."""
    scenario = small(tmp_path, 4, chunks=(512,), measure_s=3)
    staged, n_staged = searched(tmp_path / "staged", scenario)
    monkeypatch.setattr(goodput_probe, "staged_target", lambda target, slo: None)
    monkeypatch.setattr("disagg_simpy.sweep.goodput.staged_target", lambda target, slo: None)
    whole, n_whole = searched(tmp_path / "whole", scenario)
    pd.testing.assert_frame_equal(staged, whole)
    assert n_staged < n_whole, (n_staged, n_whole)


def test_a_staged_probe_fails_on_its_first_seeds_only_when_their_shares_alone_fail_the_mean():
    """Six seeds, target 90: two run first and stop below 70%; two at 65% fail the mean whatever
    the other four (at most 100% each: 530 < 540); one at 65% and one at 100% (exact) leave it
    open, and the other four run, each until below (540 - 165) / 4 = 93.75%."""

    def drive(first_rows, rest_rows=None):
        gen = goodput_probe.staged_probe("a", 10.0, SEEDS, lambda p: goodput_probe.decide(p, 90.0), 90.0)
        asked = [next(gen)]
        try:
            asked.append(gen.send(first_rows))
            gen.send(rest_rows)
        except StopIteration as done:
            return asked, done.value
        raise AssertionError("the probe asked for more than two stages")

    def row(seed, share, stopped=True):
        if stopped:
            return {"seed": seed, "below_target": True, "on_time_at_most_pct": share}
        return {"seed": seed, "below_target": False, "on_time_pct": share}

    asked, probe = drive([row(1, 65.0), row(2, 65.0)])
    assert asked == [("a", 10.0, (1, 2), "probe", 70.0)]
    assert goodput_probe.decide(probe, 90.0) is False and [r["seed"] for r in probe.rows] == list(SEEDS)
    asked, probe = drive([row(1, 65.0), row(2, 100.0, stopped=False)], [row(s, 90.0) for s in SEEDS[2:]])
    assert asked[1] == ("a", 10.0, (3, 4, 5, 6), "probe", 93.75)
    assert goodput_probe.decide(probe, 90.0) is False
