"""E15, token tiles (`token_tile`, `per_token_tile_ms`): hand-timed micro-scenarios in exact ns,
repeats (as one by one), the plan bound standing aside, and bad input.

Costs unless a test says otherwise: an iteration is 10 ms + 1 ms per reply written + 0.01 ms per
prompt token read (10 us), and 2 ms for each started tile of 128 rows (prompt tokens read +
replies written); a ship is 0.001 ms (1 us) per prompt token.
"""

from __future__ import annotations

import pytest
from helpers import run_rows, scenario_text, write_scenario
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_attention_cost import durations_ns, words_ns
from test_fast_forward import same_as_one_by_one, steady_scenario
from test_reading_repeats import reading_scenario
from test_reference import compare

from disagg_simpy import load_scenario
from disagg_simpy.cli import main
from disagg_simpy.sweep.plan_bounds import budgets

MS = 1_000_000  # ns
COST = {"iteration_ms": 10, "per_reply_ms": 1, "per_prompt_token_ms": 0.01, "kv_ship_ms_per_token": 0.001,
        "token_tile": 128, "per_token_tile_ms": 2}
COLOCATED = [{"name": "one", "kind": "colocated", "gpus": 1}]


def test_a_4000_token_prompt_read_whole_and_in_512_token_chunks(tmp_path):
    res = run_rows(tmp_path, [(0.0, 4000, 2)], [
        {"name": "whole", "kind": "colocated", "gpus": 1},
        {"name": "chunked", "kind": "colocated", "gpus": 1, "chunk_tokens": 512},
    ], cost=COST)
    # whole: 10 + 40 ms + 32 tiles (4,000 / 128 = 31.25, started: 32) x 2 ms = 114 ms; word 2 writes one
    # reply: one tile, 10 + 1 + 2 = 13 ms
    assert words_ns(res, "whole", 0) == [114 * MS, 127 * MS]
    # 7 chunks of 512 (4 tiles): 10 + 5.12 + 8 ms; the last, 416 tokens, starts 4 tiles too: 10 + 4.16 + 8 ms
    assert durations_ns(res, "chunked") == [23_120_000] * 7 + [22_160_000, 13 * MS]
    assert words_ns(res, "chunked", 0) == [184 * MS, 197 * MS]


def test_a_reply_written_is_a_row_of_the_tile_beside_the_prompt_tokens(tmp_path):
    # A (100 tokens) is read alone: one tile, 10 + 1 (100 x 10 us) + 2 = 13 ms. B (128 tokens) arrives during it and is
    # read beside A's word 2: 128 + 1 = 129 rows, two tiles: 10 + 1 + 1.28 + 4 = 16.28 ms. Then A's word 3
    # and B's word 2: 2 rows, one tile: 10 + 2 + 2 = 14 ms
    res = run_rows(tmp_path, [(0.0, 100, 3), (0.005, 128, 2)], COLOCATED, cost=COST)
    assert durations_ns(res, "one") == [13 * MS, 16_280_000, 14 * MS]
    assert words_ns(res, "one", 1) == [29_280_000, 43_280_000]


def test_e15_adds_to_the_other_terms_before_the_one_rounding(tmp_path):
    # 1 ms iterations, 0.5 ns a prompt token, 0.5 ns a tile of one row: a 1-token prompt pays 0.5 + 0.5 = 1 ns
    # (1,000,001; rounding each half up apart would give 1,000,002); a 2-token prompt 1 + 1 = 2 ns
    cost = {"iteration_ms": 1, "per_reply_ms": 0, "per_prompt_token_ms": 0.0000005, "token_tile": 1,
            "per_token_tile_ms": 0.0000005}
    res = run_rows(tmp_path, [(0.0, 1, 1), (0.01, 2, 1)], COLOCATED, cost=cost)
    assert durations_ns(res, "one") == [1_000_001, 1_000_002]


def test_a_split_pays_tiles_with_each_sides_figures(tmp_path):
    split = {"name": "split", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 1,
             "reading_cost": {"token_tile": 64}, "writing_cost": {"per_token_tile_ms": 0}}
    res = run_rows(tmp_path, [(0.0, 100, 2)], [split], cost=COST)
    # read: 10 + 1 ms + 2 tiles of 64 x 2 ms = 15 ms, a 0.1 ms ship, then word 2 at no tile cost: 10 + 1 ms
    assert words_ns(res, "split", 0) == [15 * MS, 26_100_000]


@pytest.mark.parametrize("growing", [{}, {"per_context_token_ms": 0.002, "per_attention_pair_ms": 0.000001}])
def test_repeats_run_and_the_records_are_the_one_by_one_loops(tmp_path, monkeypatch, growing):
    """Chunks of 100 tokens beside up to 3 replies: each iteration starts 1 or 2 tiles of 128, the
    same in each iteration of a repeat (model/repeats.py); with E3 and E7 too (growing durations)."""
    rows = [(0.0, 300, 40), (0.0, 200, 30), (0.05, 90, 25)]
    arrangements = [{"name": "one", "kind": "colocated", "gpus": 1, "chunk_tokens": 100}]
    path = write_scenario(tmp_path, rows, arrangements, cost={**COST, **growing})
    fast, slow = same_as_one_by_one(path, monkeypatch)
    assert fast["one", "events"] < 0.6 * slow["one", "events"]  # (it repeats)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=st.one_of(steady_scenario(tiles=True), reading_scenario(tiles=True)))
def test_repeats_under_tiles_equal_one_by_one_and_the_reference(tmp_path, monkeypatch, case):
    """E15 on every GPU, all other options off (constant durations), with E2, E3 or E7 (growing
    ones), or with E10's reading repeats (and E8, E14): records with repeats equal those one by one."""
    rows, arrangements, cost, extra = case
    path = write_scenario(tmp_path, rows, arrangements, cost=cost, **extra)
    same_as_one_by_one(path, monkeypatch)
    compare(path)


def test_the_plan_bound_stands_aside(tmp_path):
    (tmp_path / "t.csv").write_text("arrived_at_s,n_prompt_tokens,n_reply_words\n0.0,10,2\n")
    path = tmp_path / "s.yaml"
    path.write_text(scenario_text(cost=COST))
    s = load_scenario(path)
    assert budgets(s, s.arrangements[0]) is None
    off = load_scenario(path).with_overrides(**{"cost.per_token_tile_ms": 0})
    assert budgets(off, off.arrangements[0]) is None  # (any E15 key set: the bound does not know it)


@pytest.mark.parametrize("cost, needle", [
    ({**COST, "token_tile": 0}, "token_tile: got 0, expected a whole number of tokens a tile from 1"),
    ({**COST, "token_tile": -64}, "token_tile: got -64, expected a whole number of tokens a tile from 1"),
    ({**COST, "token_tile": 1.5}, "token_tile: got 1.5, expected a whole number of tokens a tile from 1"),
    ({**COST, "per_token_tile_ms": -2}, "per_token_tile_ms: got -2, expected a number of ms >= 0"),
    ({k: v for k, v in COST.items() if k != "token_tile"},
     "per_token_tile_ms: got 2.0 without token_tile, expected token_tile"),
])
def test_bad_e15_values_are_one_line_exit_2(tmp_path, capsys, cost, needle):
    path = tmp_path / "s.yaml"
    path.write_text(scenario_text(cost=cost))
    assert main([str(path), "--out", str(tmp_path / "out"), "--no-plots"]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_a_side_block_with_a_tile_cost_and_no_tile_is_one_line_exit_2(tmp_path, capsys):
    split = [{"name": "split", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 1,
              "writing_cost": {"per_token_tile_ms": 1}}]
    path = tmp_path / "s.yaml"
    path.write_text(scenario_text(arrangements=split))
    assert main([str(path), "--out", str(tmp_path / "out"), "--no-plots"]) == 2
    err = capsys.readouterr().err.strip()
    assert "arrangements[0].writing_cost.per_token_tile_ms: got 1.0 without token_tile" in err and "\n" not in err


def test_tiles_are_paid_on_the_options_path_too(tmp_path):
    # with E7 (1 ns a pair) the iteration is costed by the options' path: a 100-token prompt pays 10 + 1 ms,
    # 5,050 pairs (5.05 us) and one tile (2 ms): 13.00505 ms; word 2, one reply: 10 + 1 + 2 = 13 ms
    res = run_rows(tmp_path, [(0.0, 100, 2)], COLOCATED, cost={**COST, "per_attention_pair_ms": 0.000001})
    assert durations_ns(res, "one") == [13_005_050, 13 * MS]
