"""E17, experts touched (`per_expert_ms`, `experts`, `experts_per_token`): hand-timed
micro-scenarios in exact ns, repeats (as one by one, and as the reference), the plan bound
standing aside, and bad input (docs/rules.md#e17).

Costs unless a test says otherwise: an iteration is 10 ms + 1 ms per reply written + 0.01 ms per
prompt token read (10 us), and 0.5 ms for each of the 8 experts its tokens touch, each token
routed to 2 (so 1 token touches 2, 4 tokens or more all 8); a ship is 0.001 ms (1 us) a token.
"""

from __future__ import annotations

import pytest
import yaml
from helpers import assert_scenario_refused, run_rows, scenario_text, write_scenario
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_attention_cost import durations_ns, words_ns
from test_fast_forward import same_as_one_by_one, steady_scenario
from test_reading_repeats import reading_scenario
from test_reference import COSTS, EXPERTS, compare

from disagg_simpy import load_scenario
from disagg_simpy.api import run
from disagg_simpy.model.costs import CostNs
from disagg_simpy.sweep.plan_bounds import budgets

MS = 1_000_000  # ns
COST = {"iteration_ms": 10, "per_reply_ms": 1, "per_prompt_token_ms": 0.01, "kv_ship_ms_per_token": 0.001,
        "per_expert_ms": 0.5, "experts": 8, "experts_per_token": 2}
COLOCATED = [{"name": "one", "kind": "colocated", "gpus": 1}]


def test_a_writing_batch_pays_for_the_experts_its_replies_touch_up_to_all_of_them(tmp_path):
    # Five 1-token prompts arrive together and are read in one iteration: 5 tokens touch min(8, 10) = 8
    # experts: 10 + 0.05 + 4 = 14.05 ms. Their replies (2-6 words) are then written 5, 4, 3, 2, 1 at a
    # time: 10 + 5 + 8 x 0.5 = 19 ms; 10 + 4 + 8 x 0.5 = 18 ms (4 replies: all 8 experts); 10 + 3 + 6 x 0.5
    # = 16 ms; 10 + 2 + 4 x 0.5 = 14 ms; 10 + 1 + 2 x 0.5 = 12 ms
    res = run_rows(tmp_path, [(0.0, 1, w) for w in (2, 3, 4, 5, 6)], COLOCATED, cost=COST)
    assert durations_ns(res, "one") == [14_050_000, 19 * MS, 18 * MS, 16 * MS, 14 * MS, 12 * MS]
    assert words_ns(res, "one", 4) == [14_050_000, 33_050_000, 51_050_000, 67_050_000, 81_050_000, 93_050_000]


def test_a_prompt_read_whole_and_in_chunks_pays_all_experts_each_iteration(tmp_path):
    # whole: 10 + 1 (100 tokens) + 8 x 0.5 = 15 ms; word 2 (one reply, 2 experts): 10 + 1 + 1 = 12 ms.
    # chunks of 1 token: each touches 2 experts, 10 + 0.01 + 1 = 11.01 ms, four of them; then word 2: 12 ms
    res = run_rows(tmp_path, [(0.0, 100, 2)], [
        {"name": "whole", "kind": "colocated", "gpus": 1},
    ], cost=COST)
    assert words_ns(res, "whole", 0) == [15 * MS, 27 * MS]
    res = run_rows(tmp_path, [(0.0, 4, 2)], [{"name": "chunked", "kind": "colocated", "gpus": 1, "chunk_tokens": 1}],
                   cost=COST)
    assert durations_ns(res, "chunked") == [11_010_000] * 4 + [12 * MS]


def test_e17_adds_to_the_other_terms_before_the_one_rounding(tmp_path):
    # 1 ms iterations, 0.5 ns a prompt token, 0.5 ns an expert, one expert a token: a 1-token prompt pays
    # 0.5 + 0.5 = 1 ns (1,000,001; rounding each half up apart would give 1,000,002); a 2-token prompt 1 + 1 ns
    cost = {"iteration_ms": 1, "per_reply_ms": 0, "per_prompt_token_ms": 0.0000005, "per_expert_ms": 0.0000005,
            "experts": 8, "experts_per_token": 1}
    res = run_rows(tmp_path, [(0.0, 1, 1), (0.01, 2, 1)], COLOCATED, cost=cost)
    assert durations_ns(res, "one") == [1_000_001, 1_000_002]


def test_a_split_pays_experts_with_each_sides_figures(tmp_path):
    split = {"name": "split", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 1,
             "writing_cost": {"per_expert_ms": 0}}
    res = run_rows(tmp_path, [(0.0, 100, 2)], [split], cost=COST)
    # read: 10 + 1 + 8 x 0.5 = 15 ms, a 0.1 ms ship, then word 2 at no expert cost: 10 + 1 ms
    assert words_ns(res, "split", 0) == [15 * MS, 26_100_000]
    split["writing_cost"] = {"per_expert_ms": 2, "experts": 64, "experts_per_token": 8}
    res = run_rows(tmp_path, [(0.0, 100, 2)], [split], cost=COST)
    # word 2 on the writing side's own figures: one reply touches 8 of its 64 experts, 16 ms: 10 + 1 + 16
    assert words_ns(res, "split", 0) == [15 * MS, 42_100_000]


def test_the_draft_tokens_a_reply_verifies_touch_experts_too(tmp_path):
    # E16 with k = 2: a writing iteration of one reply runs 1 + 2 tokens through the expert layers, min(8,
    # 2 x 3) = 6 experts: 10 + 1 + 2 x 0.01 (verified, read) + 2 x 0.5 (drafted) + 6 x 0.5 = 15.02 ms
    path = write_scenario(tmp_path, [("0", 100, 6)], COLOCATED, cost=COST, seed=1,
                          speculative={"tokens": 2, "acceptance": 0.7, "per_draft_token_ms": 0.5})
    res = run(load_scenario(path))
    assert durations_ns(res, "one") == [15 * MS, 15_020_000, 15_020_000, 15_020_000]
    compare(path)


def test_the_cost_object_counts_experts_as_the_rule_says():
    c = CostNs.from_ms(10, 1, 0.01, 0, per_expert_ms=0.5, experts=8, experts_per_token=2)
    assert [c.iteration_ns(r, 0) for r in (0, 1, 2, 3, 4, 5)] == [10 * MS, 12 * MS, 14 * MS, 16 * MS, 18 * MS, 19 * MS]
    assert c.iteration_ns(1, 3) == 10 * MS + MS + 30_000 + 4 * MS  # 4 tokens: all 8 experts
    off = CostNs.from_ms(10, 1, 0.01, 0, per_expert_ms=0.0, experts=8, experts_per_token=2)
    assert off.iteration_fn()(3, 0) == 13 * MS  # off: the fused M1


@pytest.mark.parametrize("growing", [{}, {"per_context_token_ms": 0.002, "per_attention_pair_ms": 0.000001}])
def test_repeats_run_and_the_records_are_the_one_by_one_loops(tmp_path, monkeypatch, growing):
    """Chunks of 100 tokens beside up to 3 replies, replies alone after: each iteration touches the
    same experts as the one before it in a repeat (model/repeats.py); with E3 and E7 too (growing
    durations)."""
    rows = [(0.0, 300, 40), (0.0, 200, 30), (0.05, 90, 25)]
    arrangements = [{"name": "one", "kind": "colocated", "gpus": 1, "chunk_tokens": 100}]
    path = write_scenario(tmp_path, rows, arrangements, cost={**COST, "experts": 64, **growing})
    fast, slow = same_as_one_by_one(path, monkeypatch)
    assert fast["one", "events"] < 0.6 * slow["one", "events"]  # (it repeats)


@st.composite
def with_experts(draw, base):
    """A repeats scenario of `base` with E17 on (and E15's tiles kept or dropped)."""
    rows, arrangements, cost, extra = draw(base)
    if draw(st.booleans()):
        cost.pop("token_tile", None)
        cost.pop("per_token_tile_ms", None)
    cost["per_expert_ms"] = draw(st.sampled_from(COSTS["per_expert_ms"][1:]))
    cost["experts"], cost["experts_per_token"] = draw(st.sampled_from(EXPERTS))
    return rows, arrangements, cost, extra


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=st.one_of(with_experts(steady_scenario(tiles=True)), with_experts(reading_scenario(tiles=True))))
def test_repeats_under_experts_equal_one_by_one_and_the_reference(tmp_path, monkeypatch, case):
    """E17 on every GPU, with E15 or without, E2, E3 or E7 (growing durations), or with E10's
    reading repeats (and E8, E14): records with repeats equal those one by one and the reference's."""
    rows, arrangements, cost, extra = case
    path = write_scenario(tmp_path, rows, arrangements, cost=cost, **extra)
    same_as_one_by_one(path, monkeypatch)
    compare(path)


def test_the_plan_bound_stands_aside(tmp_path):
    (tmp_path / "t.csv").write_text("arrived_at_s,n_prompt_tokens,n_reply_words\n0.0,10,2\n")
    path = tmp_path / "s.yaml"
    path.write_text(scenario_text(cost=COST))
    s = load_scenario(path)
    assert budgets(s, s.arrangements[0]) is None  # (any E17 key set: the bound does not know it)


@pytest.mark.parametrize("cost, needle", [
    ({**COST, "experts": 0}, "experts: got 0, expected a whole number of experts (of a MoE layer) from 1"),
    ({**COST, "experts": 2.5}, "experts: got 2.5, expected a whole number of experts (of a MoE layer) from 1"),
    ({**COST, "experts_per_token": -1}, "experts_per_token: got -1, expected a whole number of experts a token"),
    ({**COST, "per_expert_ms": -0.5}, "per_expert_ms: got -0.5, expected a number of ms >= 0"),
    ({**COST, "experts_per_token": 9}, "experts_per_token: got 9 with experts: 8, expected at most experts"),
    ({k: v for k, v in COST.items() if k != "experts"},
     "per_expert_ms: got 0.5 without experts, expected experts (the model's experts) and experts_per_token"),
    ({k: v for k, v in COST.items() if k not in ("experts", "experts_per_token")},
     "per_expert_ms: got 0.5 without experts and experts_per_token, expected"),
])
def test_bad_e17_values_are_one_line_exit_2(tmp_path, capsys, cost, needle):
    assert_scenario_refused(tmp_path, capsys, yaml.safe_load(scenario_text(cost=cost)), needle)


def test_a_side_block_with_an_expert_cost_and_no_counts_is_one_line_exit_2(tmp_path, capsys):
    split = [{"name": "split", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 1,
              "writing_cost": {"per_expert_ms": 1}}]
    assert_scenario_refused(tmp_path, capsys, yaml.safe_load(scenario_text(arrangements=split)),
                            "arrangements[0].writing_cost.per_expert_ms: got 1.0 without experts and experts_per_token")


def test_experts_are_paid_on_the_options_path_too(tmp_path):
    # with E7 (1 ns a pair) the iteration is costed by the options' path: a 100-token prompt pays 10 + 1 ms,
    # 5,050 pairs (5.05 us) and 8 experts (4 ms): 15.00505 ms; word 2, one reply: 10 + 1 + 1 = 12 ms
    res = run_rows(tmp_path, [(0.0, 100, 2)], COLOCATED, cost={**COST, "per_attention_pair_ms": 0.000001})
    assert durations_ns(res, "one") == [15_005_050, 12 * MS]
