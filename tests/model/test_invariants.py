"""Invariants (tests/invariants.py) on every arrangement of several scenarios, and metamorphic
checks on the mean of 30 seeds of the default traffic."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from helpers import CLAIM_SEEDS, DEFAULT, ROOT, real_traces_missing, write_scenario
from invariants import check_run, check_words_frame, oracle_words

from disagg_simpy import load_scenario, run

SPLIT_1_3 = {"name": "split-1-3", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 3}
EVERY_KIND = [
    {"name": "same", "kind": "colocated", "gpus": 2},
    {"name": "chunked-64", "kind": "colocated", "gpus": 2, "chunk_tokens": 64},
    {"name": "split-1-1", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 1},
    {"name": "split-chunked", "kind": "disaggregated", "reading_gpus": 2, "writing_gpus": 1, "chunk_tokens": 100},
]


def default_with(**changes):
    return load_scenario(DEFAULT).with_overrides(**changes)


def _scenarios(tmp_path_factory):
    folder = tmp_path_factory.mktemp("invariants")
    crowd = [(0.0, 50 + 10 * i, 1 + i % 4) for i in range(40)] + [(0.05, 300, 3)] * 10 + [(0.5, 2000, 20)]
    yield "default-seed-3", run(load_scenario(DEFAULT), seed=3)
    yield "default-chunks-on-a-split", run(default_with(**{
        "workload.measure_s": 8,
        "arrangements": [{"name": "split-2-2-c256", "kind": "disaggregated", "reading_gpus": 2, "writing_gpus": 2,
                          "chunk_tokens": 256}, {"name": "chunked-100", "kind": "colocated", "gpus": 3, "chunk_tokens": 100}],
    }), seed=4)
    yield "one-word-replies", run(default_with(**{"workload.measure_s": 6, "workload.reply_words": [1, 3]}), seed=2)
    yield "crowd-at-one-instant", run(load_scenario(write_scenario(folder, crowd, EVERY_KIND, name="crowd")))
    yield "capped-split-1-3-at-2x", run(default_with(**{"workload.rate_per_s": 29, "max_sim_s": 60, "arrangements": [SPLIT_1_3]}))
    yield "capped-one-gpu-at-10x", run(default_with(**{
        "workload.rate_per_s": 145, "workload.measure_s": 5, "max_sim_s": 40,
        "arrangements": [{"name": "one", "kind": "colocated", "gpus": 1},
                         {"name": "one-chunked", "kind": "colocated", "gpus": 1, "chunk_tokens": 512}],
    }))
    yield "capped-mid-ship", run(load_scenario(write_scenario(
        folder, [(0.0, 100_000, 5), (0.0, 10, 3)], [{"name": "split", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 1}],
        name="midship", max_sim_s=5.5, workload={"trace": "midship.csv", "measure_s": 1})))
    if real_traces_missing() is None:
        yield "azure-code-trace", run(load_scenario(ROOT / "scenarios" / "azure-code.yaml").with_overrides(**{"workload.measure_s": 20}))


@pytest.fixture(scope="module")
def scenario_runs(tmp_path_factory):
    return dict(_scenarios(tmp_path_factory))


NAMES = ["default-seed-3", "default-chunks-on-a-split", "one-word-replies", "crowd-at-one-instant",
         "capped-split-1-3-at-2x", "capped-one-gpu-at-10x", "capped-mid-ship",
         pytest.param("azure-code-trace", marks=pytest.mark.real_traces)]


@pytest.mark.parametrize("name", NAMES)
def test_every_invariant_on_every_arrangement(scenario_runs, name):
    check_run(scenario_runs[name])


@pytest.mark.parametrize("name", NAMES)
def test_words_frame_matches_the_rule_built_words(scenario_runs, name):
    result = scenario_runs[name]
    for arrangement in result.records:
        check_words_frame(result, arrangement)


def test_the_capped_scenarios_are_capped_and_the_others_are_not(scenario_runs):
    capped = {name for name, result in scenario_runs.items() if result.capped}
    assert capped == {"capped-split-1-3-at-2x", "capped-one-gpu-at-10x", "capped-mid-ship"}


def test_a_reply_still_shipping_at_the_cap_has_word_1_only(scenario_runs):
    """(Found by these invariants and, independently, fixed on perf in b4a226a.)"""
    result = scenario_runs["capped-mid-ship"]
    rec = result.records["split"]
    assert rec.requests["join_iteration"][0] == -1 and rec.requests["writing_gpu"][0] == 1
    assert oracle_words(rec, 0) == [int(rec.requests["first_word_at_ns"][0])]
    assert result.words("split").query("request_id == 0").word.tolist() == [1]


def test_no_recorded_time_is_after_the_run_stopped(scenario_runs):
    result = scenario_runs["capped-mid-ship"]
    stop_s = result.records["split"].stopped_at_ns / 1e9
    times = result.requests.filter(like="_at_s")
    assert (times.fillna(0) <= stop_s).all().all()


# -- metamorphic checks over 30 seeds of the default traffic ---------------------------------


def _mean_over_seeds(scenario, column: str) -> pd.Series:
    frames = [run(scenario, seed=s).summary for s in CLAIM_SEEDS]
    return pd.concat(frames).groupby("arrangement", sort=False, observed=True)[column].mean()


def test_an_extra_reading_gpu_helps_where_reading_is_short():
    """split-2-3 (one more reading GPU than split-1-3, same writing) is on time more often."""
    arrangements = [SPLIT_1_3, {"name": "split-2-3", "kind": "disaggregated", "reading_gpus": 2, "writing_gpus": 3}]
    on_time = _mean_over_seeds(default_with(arrangements=arrangements), "on_time_pct")
    assert on_time["split-2-3"] > on_time["split-1-3"] + 20


def test_chunked_512_is_on_time_more_often_at_12_than_at_16_requests_per_s():
    chunked = [{"name": "chunked-512", "kind": "colocated", "gpus": 4, "chunk_tokens": 512}]
    at_12 = _mean_over_seeds(default_with(arrangements=chunked, **{"workload.rate_per_s": 12}), "on_time_pct")
    at_16 = _mean_over_seeds(default_with(arrangements=chunked, **{"workload.rate_per_s": 16}), "on_time_pct")
    assert at_12["chunked-512"] > at_16["chunked-512"] + 10


def test_smaller_chunks_make_the_longest_gap_shorter():
    arrangements = [{"name": f"chunked-{n}", "kind": "colocated", "gpus": 4, "chunk_tokens": n} for n in (256, 1024)]
    longest = _mean_over_seeds(default_with(arrangements=arrangements), "longest_gap_ms")
    assert longest["chunked-256"] < longest["chunked-1024"]
    assert np.isfinite(longest).all()


def test_an_iteration_cost_of_exactly_half_a_nanosecond_more_rounds_up():
    from disagg_simpy.model.engine import CostNs

    # 1.0000002 ms + 3 tokens x 0.0000001 ms = 1,000,000.2 + 0.3 = 1,000,000.5 ns -> 1,000,001 ns
    cost = CostNs.from_ms(1.0000002, 0.0, 0.0000001, 0.0)
    assert cost.iteration_ns(0, 3) == 1_000_001
