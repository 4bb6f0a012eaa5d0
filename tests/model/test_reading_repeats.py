"""E10 (prompt-only iterations) with chunks: repeats of reading iterations (chunks of the head
prompt, E2 and E7 growing their durations, E14) leave the records of the one-by-one loop and of
the reference model: arrivals before, at and after an iteration's start, E8's budget at, above and
below the chunk, the router reading queued tokens mid-repeat (D1), and runs stopped inside a
repeat (the last measured reply, the safety cap D6)."""

from __future__ import annotations

from helpers import write_scenario
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_fast_forward import same_as_one_by_one
from test_reference import COSTS, TOKEN_TILES, compare


@st.composite
def reading_scenario(draw, tiles: bool = False):
    """`tiles`: E15 on beside whatever else is drawn (model/repeats.py)."""
    n = draw(st.integers(2, 12))
    ms = sorted(draw(st.lists(st.integers(0, 50), min_size=n, max_size=n)))
    prompts = draw(st.lists(st.sampled_from((3, 5, 8, 13, 16, 21, 29, 40, 64)), min_size=n, max_size=n))
    words = draw(st.lists(st.sampled_from((1, 2, 3, 6)), min_size=n, max_size=n))
    rows = [(f"{m / 1000:.3f}", p, w) for m, p, w in zip(ms, prompts, words)]
    a = {"name": "c", "kind": "colocated", "gpus": draw(st.integers(1, 2)), "mixed_iterations": False,
         "chunk_tokens": draw(st.sampled_from((4, 8)))}
    if draw(st.integers(0, 2)) == 0:  # E8: a budget at or above the chunk keeps the repeats; below it none
        a["max_batch_tokens"] = draw(st.sampled_from((3, 8, 9, 40)))
    if draw(st.integers(0, 2)) == 0:
        a["max_batch_replies"] = draw(st.sampled_from((1, 2)))
    cost = {"iteration_ms": draw(st.sampled_from((1.0, 2.0))), "per_reply_ms": draw(st.sampled_from((0.0, 1.0))),
            "per_prompt_token_ms": draw(st.sampled_from((0.0, 0.125, 0.25))), "kv_ship_ms_per_token": 0.0625}
    for key in ("per_reread_token_ms", "per_attention_pair_ms", "per_context_token_ms", "prompt_iteration_ms",
                "free_prompt_tokens"):  # E2, E7, E3, E14
        if draw(st.booleans()):
            cost[key] = draw(st.sampled_from(COSTS[key]))
    if tiles:
        cost.update(token_tile=draw(st.sampled_from(TOKEN_TILES)),
                    per_token_tile_ms=draw(st.sampled_from(COSTS["per_token_tile_ms"][1:])))
    extra = {}
    if draw(st.integers(0, 3)) == 0 and ms[-1] > ms[0]:
        extra["workload"] = {"measure_s": draw(st.integers(ms[0] + 1, ms[-1])) / 1000}
    if draw(st.integers(0, 3)) == 0:
        extra["max_sim_s"] = (ms[-1] + draw(st.integers(1, 60))) / 1000  # a cap mid-repeat (D6)
    return rows, [a], cost, extra


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=reading_scenario())
def test_prompt_only_reading_repeats_equal_one_by_one_and_the_reference(tmp_path, monkeypatch, case):
    rows, arrangements, cost, extra = case
    path = write_scenario(tmp_path, rows, arrangements, cost=cost, **extra)
    same_as_one_by_one(path, monkeypatch)
    compare(path)
