"""E9 with E8 seats and swaps: a swapped-in reply that waits in E8's seat queue and is seated a
block before its first due block (model/kv_blocks.py's `pending`). The suite's random E9 draws
reach that path about twice in 600 runs and never a repeat that runs through it, nor a preemption
of a reply still pending; these two scenarios, found by a search for exactly those paths, do:
each is checked against the reference model to the ns and fast-forward against one by one.
"""

from __future__ import annotations

import pytest
from helpers import write_scenario
from test_fast_forward import same_as_one_by_one
from test_reference import compare

PAGED = {"name": "c", "kind": "colocated", "gpus": 1, "kv_policy": "paged", "kv_block_tokens": 1,
         "preemption": "swap"}
CASES = {
    # prompt-only iterations (E10), one seat: seated pending, a repeat counting and taking a pending
    # reply's due block (BlockSchedule.run_free, .grow), and the one-by-one start popping one (.due)
    "one seat, E10": ([("0.000", 8, 17), ("0.009", 5, 17), ("0.013", 5, 9), ("0.016", 13, 9), ("0.020", 5, 17)],
                      {**PAGED, "kv_capacity_tokens": 33, "swap_ms_per_token": 0.0, "max_batch_replies": 1,
                       "mixed_iterations": False},
                      {"iteration_ms": 2.0, "per_reply_ms": 0.4, "kv_ship_ms_per_token": 0.01}),
    # a split, three seats: a reply preempted while still pending (BlockSchedule.leave)
    "three seats, split": ([("0.000", 8, 17), ("0.006", 13, 9), ("0.016", 8, 9), ("0.018", 8, 9), ("0.020", 4, 17),
                            ("0.023", 4, 9), ("0.024", 16, 17), ("0.025", 8, 9), ("0.027", 16, 30)],
                           {**{k: v for k, v in PAGED.items() if k != "gpus"}, "kind": "disaggregated",
                            "reading_gpus": 1, "writing_gpus": 1, "kv_capacity_tokens": 50,
                            "swap_ms_per_token": 0.01, "max_batch_replies": 3},
                           {"iteration_ms": 1.0, "per_reply_ms": 0.4, "kv_ship_ms_per_token": 0.01}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_swapped_in_reply_seated_from_the_queue_a_block_early(tmp_path, monkeypatch, case):
    rows, arrangement, cost = CASES[case]
    path = write_scenario(tmp_path, rows, [arrangement], cost=cost)
    compare(path)
    same_as_one_by_one(path, monkeypatch)
