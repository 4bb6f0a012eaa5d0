"""E9f's "has preempted nothing", by hand in exact ns: a start that preempts swaps no reply back in,
even when its victim frees room for the head of the swap queue; the next start does (and its time
is added to that one). The random E9 draws of tests/model/test_reference.py reach this in about 2%
(mixed) and 3% (E10) of their scenarios, so a swap-in planted at a preempting start could pass a
whole run of them; this scenario fails it every time, on both orders of the planner's E9 start (model/planner.py,
mixed and E10).

Costs: an iteration is 10 ms + 1 ms per reply written + 0.01 ms per prompt token read; a swap moves
0.01 ms a token. One GPU of 20 tokens in blocks of 1 token: a written reply takes a block at each
iteration (word w needs prompt + w - 1 tokens). Requests 0 (1-token prompt, 8 words) and 1 (8
tokens, 8 words) arrive at 0, 2 (2 tokens, 5 words) at 10 ms.

Mixed iterations (E9 alone): iteration 0 reads 0 and 1 (9 tokens, 10.09 ms), iteration 1 writes
them and reads 2 (its 3 blocks free: 12.02 ms), then 3 replies take 3 blocks an iteration, 13 ms.
Iteration 4 (48.11 ms) is short of 2 of its 3 blocks: 2, the most recent, is preempted and swaps
its 4 tokens out (0.04 ms). Iteration 5 holds 19 of 20: 2 needs its 4 blocks plus one, and waits.
Iteration 6 (72.15 ms): 0 takes the last free block; 1 is short and the most recent, so it is
preempted (13 tokens out, 0.13 ms), leaving 13 free, room for 2's 5: but this start preempted,
so 2 comes back only at iteration 7 (4 tokens in, 0.04 ms, with the block its word 4 needs).
1 comes back at iteration 8 (13 tokens in), when 0's last word has freed its blocks.
"""

from __future__ import annotations

from helpers import run_rows, write_scenario
from test_fast_forward import same_as_one_by_one
from test_paged_kv import iterations, words_ns
from test_reference import compare

US = 1_000
COST = {"iteration_ms": 10, "per_reply_ms": 1, "per_prompt_token_ms": 0.01}
PAGED = {"kind": "colocated", "gpus": 1, "kv_capacity_tokens": 20, "kv_policy": "paged", "kv_block_tokens": 1,
         "preemption": "swap", "swap_ms_per_token": 0.01}
ROWS = [("0", 1, 8), ("0", 8, 8), ("0.010", 2, 5)]
ARRANGEMENTS = [dict(PAGED, name="mixed"), dict(PAGED, name="unmixed", mixed_iterations=False)]

# (started, ended, replies written, prompt tokens read, KV tokens held), in us
MIXED = [(0, 10_090, 0, 9, 9), (10_090, 22_110, 2, 2, 13), (22_110, 35_110, 3, 0, 16), (35_110, 48_110, 3, 0, 19),
         (48_110, 60_150, 2, 0, 17),  # 2 preempted: 12 ms + its 4 tokens out
         (60_150, 72_150, 2, 0, 19),  # 1 free: 2 waits for 5
         (72_150, 83_280, 1, 0, 7),  # 1 preempted: 11 ms + 13 tokens out; 13 free, and 2 stays out
         (83_280, 95_320, 2, 0, 13),  # 2 back (5 blocks): 12 ms + 4 tokens in; 0's last word
         (95_320, 107_450, 2, 0, 20),  # 1 back (14 blocks): 12 ms + 13 tokens in; 2's last word
         (107_450, 118_450, 1, 0, 15)]
# E10: iteration 1 only reads 2 (10.02 ms), so the replies' words (and the two preemptions) come one
# iteration later; iteration 9 swaps 1 in alone, once 0 and 2 have left
UNMIXED = [(0, 10_090, 0, 9, 9), (10_090, 20_110, 0, 2, 11), (20_110, 33_110, 3, 0, 14), (33_110, 46_110, 3, 0, 17),
           (46_110, 59_110, 3, 0, 20), (59_110, 71_160, 2, 0, 17), (71_160, 83_160, 2, 0, 19),
           (83_160, 94_290, 1, 0, 7),  # 1 preempted, 13 tokens out; 2 (5 tokens, 6 needed) stays out
           (94_290, 106_340, 2, 0, 14),  # 2 back: 5 tokens in, 6 blocks with its word 5's
           (106_340, 117_470, 1, 0, 14), (117_470, 128_470, 1, 0, 15)]


def test_a_start_that_preempts_swaps_nothing_back_in(tmp_path):
    res = run_rows(tmp_path, ROWS, ARRANGEMENTS, cost=COST)
    for name, want in (("mixed", MIXED), ("unmixed", UNMIXED)):
        assert iterations(res, name) == [(a * US, b * US, n, t, kv) for a, b, n, t, kv in want], name
    assert words_ns(res, "mixed", 2) == [22_110 * US, 35_110 * US, 48_110 * US, 95_320 * US, 107_450 * US]
    assert words_ns(res, "mixed", 1) == [10_090 * US, 22_110 * US, 35_110 * US, 48_110 * US, 60_150 * US,
                                         72_150 * US, 107_450 * US, 118_450 * US]
    assert words_ns(res, "unmixed", 2) == [20_110 * US, 33_110 * US, 46_110 * US, 59_110 * US, 106_340 * US]
    for name, at in (("mixed", (48_110, 72_150)), ("unmixed", (59_110, 83_160))):
        log = res.records[name].preemptions
        assert log["request_id"].tolist() == [2, 1] and log["at_ns"].tolist() == [t * US for t in at], name
    assert res.requests["n_preemptions"].tolist() == [0, 1, 1] * 2
    assert not res.requests["dropped"].any()


def test_a_start_that_preempts_swaps_nothing_back_in_as_the_reference_does(tmp_path, monkeypatch):
    path = write_scenario(tmp_path, ROWS, ARRANGEMENTS, cost=COST)
    compare(path)
    same_as_one_by_one(path, monkeypatch)
