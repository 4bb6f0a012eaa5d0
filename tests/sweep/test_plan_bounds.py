"""The plan's bounds (sweep/plan_bounds.py): never below a seed's true on-time share, and a plan
that skips arrangements by them recommends what searching every arrangement recommends."""

from __future__ import annotations

import math

import pandas as pd
import yaml
from helpers import DEFAULT

from disagg_simpy import load_scenario
from disagg_simpy.scenario.limits import one_arrangement_at_a_time
from disagg_simpy.sweep.grid import RATE, resolve
from disagg_simpy.sweep.plan import candidates, plan, recommendation, with_candidates
from disagg_simpy.sweep.plan_bounds import Bounds
from disagg_simpy.sweep.runner import LocalPool, Runner, Task, run_task
from disagg_simpy.sweep.store import Store


def small(tmp_path, n_gpus: int, **workload):
    raw = yaml.safe_load(DEFAULT.read_text())
    raw.pop("reference", None)
    raw.update(name="small", seeds=2, max_sim_s=60)
    raw["workload"].update(measure_s=5, **workload)
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    with one_arrangement_at_a_time():
        return with_candidates(load_scenario(path), candidates(n_gpus, chunks=()), "--gpus")


def test_the_bound_is_never_below_a_seeds_true_on_time_share(tmp_path):
    scenario = small(tmp_path, 4, prompt_mix=[{"share": 1, "tokens": [3000, 8000]}])  # reading-bound traffic
    bounds = Bounds(scenario, (1, 2), 90.0)
    decides = 0
    for rate in (5.0, 12.0, 30.0):
        with one_arrangement_at_a_time():
            at = resolve(scenario, {RATE: rate})
        for a in at.arrangements:
            most = bounds.share_at_most(a, rate)
            for seed, bound in zip((1, 2), most):
                share = run_task(Task(at, seed, only=a.name, verdicts_only=True))[0]["on_time_pct"] / 100
                assert share <= bound + 1e-12, (a.name, rate, seed, share, bound)
                decides += bound < 0.9  # it alone says the rate fails the target
    assert decides  # the bound bites somewhere (a bound of 100% everywhere would prove nothing)


def plans(tmp_path, scenario) -> tuple[pd.DataFrame, pd.DataFrame]:
    out = []
    for exhaustive in (True, False):
        runner = Runner(Store(tmp_path / f"store-{exhaustive}.sqlite", "test"), LocalPool(1), progress=False)
        with one_arrangement_at_a_time():
            out.append(plan(scenario, runner, (1, 2), 90.0, 0.5, exhaustive=exhaustive).set_index("arrangement"))
        runner.close()
    return out[0], out[1]


def test_a_plan_that_skips_by_the_bounds_recommends_what_the_exhaustive_one_does(tmp_path, monkeypatch):
    monkeypatch.setattr("disagg_simpy.sweep.plan.WAVE", 1)  # one at a time: every one after the first two is checked
    n_skipped = 0
    long_prompts = {"prompt_mix": [{"share": 1, "tokens": [3000, 8000]}]}
    for n_gpus, workload in ((4, long_prompts),):
        every, fast = plans(tmp_path, small(tmp_path, n_gpus, **workload))
        assert recommendation(fast.reset_index(), 90.0) == recommendation(every.reset_index(), 90.0)
        searched = fast[fast.goodput_below_per_s.isna()]
        skipped = fast[fast.goodput_below_per_s.notna()]
        pd.testing.assert_frame_equal(searched.drop(columns="rank"), every.loc[searched.index].drop(columns="rank"))
        assert list(fast.index[:2]) == list(every.index[:2])
        for name, row in skipped.iterrows():  # a skipped arrangement's true goodput is below its bound
            assert every.loc[name, "goodput_per_s"] < row.goodput_below_per_s
            assert math.isnan(row.goodput_per_s)
        n_skipped += len(skipped)
    assert n_skipped  # the bounds did skip some (else this test proves nothing)


def test_no_bound_without_both_limits_or_under_the_percentiles_criterion(tmp_path):
    """The bound is of the per-request on-time share from the first-word and mean-gap limits: with
    either limit off, or the percentiles criterion, a plan searches every arrangement."""
    scenario = small(tmp_path, 4, prompt_mix=[{"share": 1, "tokens": [3000, 8000]}])
    a = scenario.arrangements[0]
    assert Bounds(scenario, (1,), 90.0).share_at_most(a, 30.0) is not None
    for slo in ({"first_word_s": None}, {"mean_gap_ms": None}, {"criterion": "percentiles"}):
        changed = scenario.model_copy(update={"slo": scenario.slo.model_copy(update=slo)})
        assert Bounds(changed, (1,), 90.0).share_at_most(a, 30.0) is None, slo
