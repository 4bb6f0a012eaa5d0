"""95% intervals over seeds (results/intervals.py): coverage by simulation on a cheap skewed
scenario, the interval holds its mean, determinism; goodput's interval holds its point."""

from __future__ import annotations

import math

import numpy as np
import pytest

from disagg_simpy import Scenario
from disagg_simpy.results.intervals import Interval, interval
from disagg_simpy.sweep.runner import Task, run_task

#: One GPU, short replies, a tight first-word limit: on-time shares skewed to the left (about
#: -0.8), a run takes a few milliseconds.
CHEAP = {
    "name": "coverage",
    "workload": {"rate_per_s": 1.8, "measure_s": 8,
                 "prompt_mix": [{"share": 0.3, "tokens": [3000, 8000]}, {"share": 0.7, "tokens": [200, 1200]}],
                 "reply_words": [10, 40]},
    "max_sim_s": 38,
    "slo": {"first_word_s": 1.0},
    "arrangements": [{"name": "same", "kind": "colocated", "gpus": 1}],
}
#: `PYTHONPATH=. python benchmarks/coverage.py --seeds 4000` (seeds 100001..104000)
LARGE_SAMPLE_ON_TIME_PCT = 86.1642  # standard error 0.197


def shares(seeds) -> np.ndarray:
    scenario = Scenario.model_validate(CHEAP)
    return np.array([run_task(Task(scenario, s, verdicts_only=True))[0]["on_time_pct"] for s in seeds])


def test_the_95pct_intervals_hold_the_large_sample_share_over_disjoint_seed_sets():
    """40 disjoint sets of 8 seeds (1..320): at least 90% of their intervals hold the mean of
    4,000 other seeds. (Planted: intervals half as wide held it 28 times.)"""
    v = shares(range(1, 321))
    held = [interval(v[i:i + 8]).holds(LARGE_SAMPLE_ON_TIME_PCT) for i in range(0, 320, 8)]
    assert sum(held) >= 36, f"{sum(held)} of 40 intervals hold {LARGE_SAMPLE_ON_TIME_PCT}"


def test_an_interval_holds_its_mean_is_lopsided_toward_a_tail_and_repeats_exactly():
    rng = np.random.default_rng(3)
    for _ in range(200):
        n = int(rng.integers(2, 40))
        v = np.clip(100 - rng.exponential(rng.uniform(0.1, 30), n), 0, 100)
        i = interval(v)
        assert i.low <= i.mean <= i.high and i == interval(v) and i.n == n
    skewed = interval([100.0] * 18 + [40.0, 60.0])  # two bad seeds: the low side reaches further
    assert skewed.mean - skewed.low > skewed.high - skewed.mean
    assert interval([100.0] * 5) == Interval(100.0, 100.0, 100.0, 5)  # the known limit: no spread, no width
    one = interval([42.0, math.nan])
    assert one.mean == 42.0 and math.isnan(one.low) and one.text() == "42.0"


def test_interval_text_is_plus_minus_when_even_and_both_sides_when_lopsided():
    assert Interval(93.1, 91.9, 94.3, 5).text() == "93.1±1.2"
    assert Interval(93.1, 91.8, 94.2, 5).text() == "93.1±1.3"  # within a quarter: ± the longer side
    assert Interval(93.1, 90.2, 94.5, 5).text() == "93.1 (90.2 to 94.5)"
    # issue 37 item 19: '10.0-10.0+27.0' read as arithmetic; the interval itself cannot be misread
    assert Interval(10.0, 0.0, 37.0, 5).text() == "10.0 (0.0 to 37.0)"


def test_a_paired_difference_of_shares_is_cut_to_100_points_either_way():
    """Issue 37 item 19: three seeds far apart gave -93.0 (-148.8 to -37.1) points."""
    import pandas as pd

    from disagg_simpy.results.paired import paired_difference, with_paired_difference
    from disagg_simpy.results.report import format_table

    rows = [{"arrangement": a, "seed": s, "on_time_pct": v} for s, (x, y) in enumerate([(100, 0), (100, 0), (90, 69)])
            for a, v in (("a", x), ("b", y))]
    summary = pd.DataFrame(rows)
    d = paired_difference(summary, "b", "a")
    assert d.mean == pytest.approx(-73.6667, abs=1e-3) and d.low == -100.0 < d.mean < d.high
    assert interval([-100, -100, -21]).low < -100  # (unbounded, the t interval reaches past -100)
    assert "-73.7 (-100.0 to" in format_table(with_paired_difference(summary), wide=True)


@pytest.fixture(scope="module")
def three_seed_goodput(tmp_path_factory):
    from helpers import DEFAULT

    from disagg_simpy import load_scenario
    from disagg_simpy.sweep.goodput import goodput
    from disagg_simpy.sweep.runner import LocalPool, Runner
    from disagg_simpy.sweep.store import Store

    scenario = load_scenario(DEFAULT).with_overrides(**{"workload.measure_s": 3, "max_sim_s": 40})
    runner = Runner(Store(tmp_path_factory.mktemp("g") / "store.sqlite", "test"), LocalPool(1), progress=False)
    table = goodput(scenario, runner, (1, 2, 3), target=90.0, tolerance=1.0, names=["chunked-512"])
    runner.close()
    return table


def test_goodput_lies_in_its_own_interval(three_seed_goodput):
    """The point and the interval are one statistic (the mean curve's crossing; the crossings of
    its interval), so low <= goodput <= high; the low end passes with room, the high end barely."""
    for row in three_seed_goodput.itertuples():
        assert row.goodput_low_per_s <= row.goodput_per_s <= row.goodput_high_per_s, row
        assert row.goodput_high_per_s > row.goodput_low_per_s
        assert row.passing_on_time_low_pct <= row.passing_on_time_pct <= row.passing_on_time_high_pct


def test_an_infinite_seed_figure_has_no_spread_and_no_numpy_warning():
    """F19: $/M is inf for a seed with nothing on time; the mean is inf, its interval empty, and
    numpy's 'invalid value encountered in subtract' is not printed into the report."""
    import warnings

    from disagg_simpy.results.intervals import bounds_of

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        i = interval([100.0, math.inf, 250.0], bounds_of("dollars_per_million"))
    assert i.mean == math.inf and math.isnan(i.low) and math.isnan(i.high) and i.n == 3


@pytest.mark.parametrize("column", ["dollars_per_million", "dollars_per_hour", "power_kw", "on_time_per_gpu_hour"])
def test_a_cost_interval_stays_at_or_above_zero(column):
    """F19: skewed seeds' costs gave '2246.73 (-2333 to 6826)' dollars per million."""
    from disagg_simpy.results.intervals import bounds_of

    i = interval([100.0, 9000.0, 50.0], bounds_of(column))
    assert i.low == 0.0 and i.high > i.mean
