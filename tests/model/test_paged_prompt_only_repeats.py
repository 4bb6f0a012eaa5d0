"""E9 with E10: repeats of writing iterations (model/repeats.py's `Repeat`, `PagedKv.head_waits`) leave the
records of the one-by-one loop and of the reference model: a prompt routed to a GPU mid-repeat that
no start of the repeat could admit leaves it running (its memory held only grows), one that can be
read at the running iteration's end is taken ahead as of that end, and a run stopped before that
start forgets it (its first start and the peak KV memory it raised). Costs: 10 ms an iteration."""

from __future__ import annotations

from helpers import write_scenario
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_fast_forward import EVEN, same_as_one_by_one
from test_reference import compare

from disagg_simpy.model.paged_kv import PagedKv

E9_E10 = {"name": "e", "kind": "colocated", "gpus": 1, "mixed_iterations": False, "kv_policy": "paged",
          "kv_block_tokens": 4}


def counting(monkeypatch) -> list:
    """The repeat's cuts by a prompt, as (its time, whether the repeat ran on: `PagedKv.head_waits`)."""
    seen: list = []
    waits = PagedKv.head_waits
    monkeypatch.setattr(PagedKv, "head_waits",
                        lambda self: seen.append((self.gpu.repeat.env.now, waits(self))) or seen[-1][1])
    return seen


def test_a_prompt_no_start_of_the_repeat_can_admit_leaves_it_running(tmp_path, monkeypatch):
    """A (8 tokens, 20 words) is read at 0; from 10 ms A's words, each 10 ms, one repeat. B (28 tokens:
    7 blocks, 8 free needed) arrives at 35 ms, when A holds 3 of 10 blocks (24 tokens free): it waits for
    A's last word at 200 ms, the repeat not cut; then a prompt-only iteration reads it."""
    rows = [("0", 8, 20), ("0.035", 28, 3)]
    path = write_scenario(tmp_path, rows, [{**E9_E10, "kv_capacity_tokens": 40}], **EVEN)
    seen = counting(monkeypatch)
    fast, _ = same_as_one_by_one(path, monkeypatch)
    assert seen[0] == (35_000_000, True)
    assert fast["e", "requests", "read_started_at_ns"] == [0, 200_000_000]
    compare(path)


def test_a_prompt_arriving_at_an_iteration_end_is_admitted_before_that_starts_due_block(tmp_path, monkeypatch):
    """B (24 tokens: 6 blocks, 7 free needed) arrives at 50 ms, exactly at an iteration end of A's repeat:
    28 tokens are free before the start at 50 ms takes A's due block (its word 6, 13 tokens), 24 after.
    B is read from 50 ms (D5: the start comes after the arrival), prompt first, before that block."""
    rows = [("0", 8, 20), ("0.050", 24, 3)]
    path = write_scenario(tmp_path, rows, [{**E9_E10, "kv_capacity_tokens": 40}], **EVEN)
    seen = counting(monkeypatch)
    fast, _ = same_as_one_by_one(path, monkeypatch)
    assert seen[0] == (50_000_000, False)
    assert fast["e", "requests", "read_started_at_ns"] == [0, 50_000_000]
    compare(path)


def test_a_prompt_taken_ahead_that_never_starts_leaves_the_peak_kv_memory(tmp_path, monkeypatch):
    """B (40 tokens: 10 blocks, 11 free needed) arrives at 55 ms inside A's repeat, A holding 4 of 16
    blocks, and is taken ahead as of 60 ms (the peak would reach 56 tokens); the safety cap stops the run
    at 58 ms, before that start, so B holds nothing and the peak is A's 16 tokens (one by one B was never
    admitted); with the cap at 60 ms it started."""
    rows = [("0", 8, 20), ("0.055", 40, 3)]
    for cap, peak, started in ((0.058, 16, -1), (0.060, 56, 60_000_000)):
        path = write_scenario(tmp_path, rows, [{**E9_E10, "kv_capacity_tokens": 64}], max_sim_s=cap, **EVEN)
        fast, _ = same_as_one_by_one(path, monkeypatch)
        assert fast["e", "kv_peak_tokens"] == [peak]
        assert fast["e", "requests", "read_started_at_ns"] == [0, started]


def test_a_prompt_is_not_taken_ahead_past_another_arriving_by_its_start(tmp_path, monkeypatch):
    """B arrives at 55 ms inside A's repeat, C at 58 ms: both are read from 60 ms, as one by one."""
    rows = [("0", 8, 20), ("0.055", 8, 3), ("0.058", 8, 3)]
    path = write_scenario(tmp_path, rows, [{**E9_E10, "kv_capacity_tokens": 64}], **EVEN)
    fast, _ = same_as_one_by_one(path, monkeypatch)
    assert fast["e", "requests", "read_started_at_ns"] == [0, 60_000_000, 60_000_000]


@st.composite
def steady_paged_scenario(draw):
    """E9 and E10 on colocated GPUs with replies long enough to repeat, arrivals on a coarse grid (many at
    an iteration end), memory from tight (preemptions, prompts that wait) to ample, E7/E8 and stops drawn."""
    n = draw(st.integers(1, 8))
    ms = sorted(draw(st.lists(st.integers(0, 80), min_size=n, max_size=n)))
    prompts = draw(st.lists(st.sampled_from((4, 8, 16, 24, 40)), min_size=n, max_size=n))
    words = draw(st.lists(st.sampled_from((2, 5, 12, 30)), min_size=n, max_size=n))
    rows = [(f"{m / 1000:.3f}", p, w) for m, p, w in zip(ms, prompts, words)]
    block = draw(st.sampled_from((1, 2, 4, 8)))
    need = max(block * (-(-(p + w - 1) // block) + 1) for p, w in zip(prompts, words))
    a = {**E9_E10, "gpus": draw(st.integers(1, 2)), "kv_block_tokens": block,
         "kv_capacity_tokens": need + draw(st.sampled_from((0, 4, 16, 64, 400)))}
    if draw(st.booleans()):
        a["chunk_tokens"] = draw(st.sampled_from((8, 16)))
    if draw(st.booleans()):
        a.update(preemption="swap", swap_ms_per_token=draw(st.sampled_from((0.0, 0.01))))
    if draw(st.booleans()):
        a["max_batch_replies"] = draw(st.integers(1, 3))
    if draw(st.booleans()):
        a["max_batch_tokens"] = draw(st.sampled_from((6, 12, 40)))
    cost = {"iteration_ms": draw(st.sampled_from((1.0, 2.0, 5.0, 10.0))),
            "per_reply_ms": draw(st.sampled_from((0.0, 0.5, 1.0))),
            "per_prompt_token_ms": draw(st.sampled_from((0.0, 0.125))), "kv_ship_ms_per_token": 1.0}
    if draw(st.booleans()):
        cost["per_attention_pair_ms"] = draw(st.sampled_from((0.001, 0.25)))  # E7
    extra: dict = {}
    if draw(st.integers(0, 3)) == 0 and ms[-1] > ms[0]:
        extra["workload"] = {"measure_s": draw(st.integers(ms[0] + 1, ms[-1])) / 1000}
    if draw(st.integers(0, 2)) == 0:
        extra["max_sim_s"] = (ms[-1] + draw(st.integers(1, 150))) / 1000  # a cap mid-repeat (D6)
    return rows, [a], cost, extra


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=steady_paged_scenario())
def test_fast_forward_under_e9_and_e10_equals_one_by_one_and_the_reference(tmp_path, monkeypatch, case):
    rows, arrangements, cost, extra = case
    path = write_scenario(tmp_path, rows, arrangements, cost=cost, **extra)
    same_as_one_by_one(path, monkeypatch)
    compare(path, expect_cap=None)
