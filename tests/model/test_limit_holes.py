"""Hand-timed cases for batch limits where a realistic bug once passed the whole suite (issue 37's
test holes), in exact ns. Costs as tests/model/test_batch_limits.py: an iteration is 10 ms + 1 ms
per reply written + 0.01 ms per prompt token read; a ship 0.001 ms per prompt token."""

from __future__ import annotations

from helpers import run_rows
from test_batch_limits import COST, iterations, words_ns


def test_a_split_writing_gpu_seats_max_batch_tokens_replies_when_max_batch_replies_is_larger(tmp_path):
    """E8a: seats are min(max_batch_replies, max_batch_tokens). Four one-token prompts, 3 words
    each, on split-1-1 with max_batch_replies 8 and max_batch_tokens 2: the writing GPU writes 2
    replies an iteration (the two that joined first), never 3 or 4."""
    rows = [(0.0, 1, 3)] * 4
    res = run_rows(tmp_path, rows, [{"name": "s", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 1,
                                     "max_batch_replies": 8, "max_batch_tokens": 2}], cost=COST)
    it = res.iterations.query("arrangement == 's' and gpu == 1")
    assert it["n_replies_written"].max() == 2 and (it["n_replies_written"] > 0).all()
    assert it["n_replies_written"].sum() == 4 * 2  # words 2 and 3 of each reply
    # the reading GPU reads 2 prompts an iteration (budget 2): 10.02 ms each; ships 1 us each
    assert iterations(res, "s")[:2] == [(0, 10_020_000, 0, 2), (10_020_000, 20_040_000, 0, 2)]
    # A and B (word 1 at 10.02 ms, shipped by 10.021 ms) are written by 12 ms iterations;
    # C and D wait for their seats until A and B have left
    assert words_ns(res, "s", 0) == [10_020_000, 22_021_000, 34_021_000]
    assert words_ns(res, "s", 2)[1:] == [46_021_000, 58_021_000]


def test_unmixed_iterations_with_a_kv_limit_read_a_prompt_of_exactly_the_budget_at_once(tmp_path):
    """R46 with E4: a prompt-only iteration's budget is the whole max_batch_tokens, replies in
    progress or not. B (100 tokens = the budget) arrives while A writes: the next iteration reads
    it whole (prompts first), not after A's words (as a budget less A's seat would)."""
    res = run_rows(tmp_path, [(0.0, 50, 3), (0.001, 100, 2)],
                   [{"name": "u", "kind": "colocated", "gpus": 1, "mixed_iterations": False,
                     "kv_capacity_tokens": 1000, "max_batch_tokens": 100}], cost=COST)
    assert iterations(res, "u") == [(0, 10_500_000, 0, 50), (10_500_000, 21_500_000, 0, 100),
                                    (21_500_000, 33_500_000, 2, 0), (33_500_000, 44_500_000, 1, 0)]
    assert words_ns(res, "u", 1) == [21_500_000, 33_500_000]
