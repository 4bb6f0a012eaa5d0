"""E9's admission at its edge (a prompt not begun is taken only if its blocks plus one are free),
by hand, against the reference model to the ns: the simulator's fused take (model/kv_take.py
`paged_take`) tests it as `R <= PagedKv.top - kv_used`, which hypothesis rarely lands on exactly."""

from __future__ import annotations

import pytest
from helpers import write_scenario
from test_reference import compare

PAGED = {"kind": "colocated", "gpus": 1, "kv_policy": "paged", "kv_block_tokens": 4}
COST = {"iteration_ms": 10, "per_reply_ms": 1, "per_prompt_token_ms": 0.01}


@pytest.mark.parametrize("capacity", [32, 35])  # (35: not a whole number of blocks)
@pytest.mark.parametrize("second", [20, 21])  # 20 tokens: 5 blocks + 1 = the 6 free after the first's 2; 21: one block more
def test_a_prompt_is_admitted_exactly_when_its_blocks_plus_one_are_free(tmp_path, capacity, second):
    rows = [("0", 8, 6), ("0", second, 2), ("0.001", 4, 3)]
    arrangements = [dict(PAGED, name="whole", kv_capacity_tokens=capacity),
                    dict(PAGED, name="chunked", kv_capacity_tokens=capacity, chunk_tokens=16),
                    dict(PAGED, name="budget", kv_capacity_tokens=capacity, max_batch_tokens=64),
                    dict(PAGED, name="swap", kv_capacity_tokens=capacity, preemption="swap", swap_ms_per_token=0.01)]
    compare(write_scenario(tmp_path, rows, arrangements, cost=COST))
