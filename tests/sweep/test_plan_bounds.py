"""The plan's bounds (sweep/plan_bounds.py): never below a seed's true on-time share, and a plan
that skips arrangements by them recommends what searching every arrangement recommends."""

from __future__ import annotations

import math
from pathlib import Path

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


def small(tmp_path, n_gpus: int, chunks=(), **workload):
    raw = yaml.safe_load(DEFAULT.read_text())
    raw.pop("reference", None)
    raw.update(name="small", seeds=2, max_sim_s=60)
    raw["workload"].update({"measure_s": 5, **workload})
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    with one_arrangement_at_a_time():
        return with_candidates(load_scenario(path), candidates(n_gpus, chunks=chunks), "--gpus")


def true_share(at, name: str, seed: int) -> float:
    return run_task(Task(at, seed, only=name, verdicts_only=True))[0]["on_time_pct"] / 100


def test_the_bound_is_never_below_a_seeds_true_on_time_share(tmp_path):
    """Reading-bound and writing-bound traffic, whole and chunked reading (the chunk's fixed
    cost), long replies (the mean gap's share of the fixed cost)."""
    decides = 0
    for workload in ({"prompt_mix": [{"share": 1, "tokens": [3000, 8000]}]},
                     {"prompt_mix": [{"share": 1, "tokens": [50, 400]}], "reply_words": [200, 400]}):
        scenario = small(tmp_path, 4, chunks=(256,), **workload)
        bounds = Bounds(scenario, (1, 2), 90.0)
        for rate in (5.0, 30.0):
            with one_arrangement_at_a_time():
                at = resolve(scenario, {RATE: rate})
            for a in at.arrangements:
                most = bounds.share_at_most(a, rate)
                for seed, bound in zip((1, 2), most):
                    share = true_share(at, a.name, seed)
                    assert share <= bound + 1e-12, (a.name, rate, seed, share, bound)
                    decides += bound < 0.9  # it alone says the rate fails the target
    assert decides  # the bound bites somewhere (a bound of 100% everywhere would prove nothing)


def test_every_rate_from_where_the_bound_fails_does_fail(tmp_path):
    """`fails_from(R)`: at R and above, the mean on-time share over the seeds is below the target.
    R is the lowest of a grid where it says so; checked by runs at R and 2 R."""
    scenario = small(tmp_path, 4, chunks=(256,), measure_s=3)
    bounds = Bounds(scenario, (1, 2), 90.0)
    checked = 0
    for a in scenario.arrangements:
        grid = [r for r in (2.0 * 1.25 ** k for k in range(20)) if bounds.fails_from(a, r)]
        if not grid:
            continue
        for rate in (grid[0], 2 * grid[0]):
            with one_arrangement_at_a_time():
                at = resolve(scenario, {RATE: rate})
            mean = sum(true_share(at, a.name, seed) for seed in (1, 2)) / 2
            assert mean < 0.9, (a.name, rate, mean)
            checked += 1
    assert checked >= 6  # most arrangements have such a rate (else this proves little)


def searched(tmp_path, scenario, exhaustive: bool, seeds=(1, 2), store: Path | None = None) -> pd.DataFrame:
    """`scenario` planned in this process; its runs kept in `store` (default: a new one)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    runner = Runner(Store(store or tmp_path / f"store-{exhaustive}.sqlite", "test"), LocalPool(1), progress=False)
    with one_arrangement_at_a_time():
        table = plan(scenario, runner, seeds, 90.0, 1.0, exhaustive=exhaustive).set_index("arrangement")
    runner.close()
    return table


def left_in_both_orders(tmp_path, scenario, monkeypatch) -> dict[str, int]:
    """`scenario` planned likeliest first and worst first, one arrangement at a time, each
    checked against the exhaustive plan (see the test below); how many each order left. The two
    orders share one store (not the exhaustive search's, which runs all its own): a run the
    worst-first search asks for again is read back, not rerun. A stored run is the run (its key
    is everything it depends on, tests/sweep/test_sweep.py); each order's choices of what to run
    and what to leave are its own."""
    monkeypatch.setattr("disagg_simpy.sweep.plan.WAVE", 1)
    monkeypatch.setattr("disagg_simpy.sweep.plan.LATER_WAVE", 1)
    every = searched(tmp_path / "every", scenario, exhaustive=True)
    shared = tmp_path / "orders-store.sqlite"
    worst_first = {n: -i for i, n in enumerate(reversed(every.index))}  # (capacity_proxy: higher goes first)
    n_left = {}
    for order in ("likeliest", "worst"):
        if order == "worst":
            monkeypatch.setattr("disagg_simpy.sweep.plan.capacity_proxy", lambda _, a: worst_first[a.name])
        fast = searched(tmp_path / order, scenario, exhaustive=False, store=shared)
        assert recommendation(fast.reset_index(), 90.0) == recommendation(every.reset_index(), 90.0)
        pd.testing.assert_frame_equal(fast.iloc[:2], every.iloc[:2])
        done = fast[fast.goodput_below_per_s.isna()]
        assert (done.goodput_per_s == every.loc[done.index, "goodput_per_s"]).all()
        left = fast[fast.goodput_below_per_s.notna()]
        for name, row in left.iterrows():  # an arrangement left has its true goodput below its figure
            assert every.loc[name, "goodput_per_s"] < row.goodput_below_per_s, name
            assert math.isnan(row.goodput_per_s)
        n_left[order] = len(left)
    return n_left


def test_a_plan_that_leaves_arrangements_recommends_what_the_exhaustive_one_does(tmp_path, monkeypatch):
    """The explainer's traffic on 4 GPUs (3 s measured), searched one arrangement at a time in
    two orders: the likeliest first (as plans do) and the worst first (the order only saves work,
    it must never change the answer). Likeliest first, the bound and the runner-up leave the
    arrangements after the top two; worst first, the top two come last, each against a
    runner-up just below its own goodput, so a plan that leaves too much (a bound too low, a
    runner-up too high, even by a third) loses the best or the runner-up: the top two rows, the
    recommendation and every goodput searched to its end must equal the exhaustive search's,
    and every arrangement left must have its true goodput below its figure."""
    scenario = small(tmp_path, 4, chunks=(512,), measure_s=3)
    n_left = left_in_both_orders(tmp_path, scenario, monkeypatch)
    assert n_left["likeliest"] >= 3  # the plan did leave some (else this proves nothing)


def test_no_bound_without_both_limits_or_under_the_percentiles_criterion(tmp_path):
    """The bound is of the per-request on-time share from the first-word and mean-gap limits: with
    either limit off, or the percentiles criterion, a plan searches every arrangement."""
    scenario = small(tmp_path, 4, prompt_mix=[{"share": 1, "tokens": [3000, 8000]}])
    a = scenario.arrangements[0]
    assert Bounds(scenario, (1,), 90.0).share_at_most(a, 30.0) is not None
    for slo in ({"first_word_s": None}, {"mean_gap_ms": None}, {"criterion": "percentiles"}):
        changed = scenario.model_copy(update={"slo": scenario.slo.model_copy(update=slo)})
        assert Bounds(changed, (1,), 90.0).share_at_most(a, 30.0) is None, slo
