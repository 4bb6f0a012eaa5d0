"""Unit rules: costs, ships, routing and its ties (D1-D3), and what every run must satisfy."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from helpers import DEFAULT

from disagg_simpy import load_scenario, run
from disagg_simpy.model.engine import CostNs
from disagg_simpy.model.router import Side

MS = 1e-3


class FakeGpu:
    def __init__(self, number, queued=0, replies=0, shipping=0):
        self.number = number
        self.queue = SimpleNamespace(queued_tokens=queued)
        self.batch = SimpleNamespace(n_replies=replies)
        self.n_shipping = shipping
        self.n_local = 0


def test_iteration_cost_is_m1_in_whole_nanoseconds():
    cost = CostNs.from_ms(12, 0.4, 0.05, 0.01)
    assert cost.denominator == 1
    assert cost.iteration_ns(0, 0) == 12_000_000
    assert cost.iteration_ns(3, 0) == 13_200_000
    assert cost.iteration_ns(2, 1000) == 62_800_000
    assert isinstance(cost.iteration_ns(7, 333), int)


def test_the_cost_chosen_once_per_run_is_m1_on_every_branch():
    """`CostNs.iteration_fn` (what a GPU with every option off pays each iteration) equals
    `iteration_ns`: whole ns; sums of fractional ns landing on half a ns (D10, halves up:
    1.0000002 ms + 3 x 0.0000001 ms is 1,000,001 ns); E14's free tokens without its fixed cost, and
    with; E15's tiles. (Review of the lean all-off path: a rounding down, or free tokens alone
    priced as M1, passed the suite's generated scenarios.)"""
    assert CostNs.from_ms(1.0000002, 0.0, 0.0000001, 0.0).iteration_fn()(0, 3) == 1_000_001
    costs = [CostNs.from_ms(12, 0.4, 0.05, 0.01), CostNs.from_ms(1.0000002, 0.0000005, 0.0000001, 0.0),
             CostNs.from_ms(1.0000005, 0.0000005, 0.0000005, 0.0625),
             CostNs.from_ms(10, 1, 0.25, 0, free_prompt_tokens=16), CostNs.from_ms(10, 1, 0.25, 0, prompt_iteration_ms=3),
             CostNs.from_ms(10, 1, 0.25, 0, per_token_tile_ms=2, token_tile=16)]
    for cost in costs:
        chosen = cost.iteration_fn()
        for n_replies in (0, 1, 3, 16, 17):
            for n_tokens in (0, 1, 3, 15, 16, 17, 4000, 8192):
                assert chosen(n_replies, n_tokens) == cost.iteration_ns(n_replies, n_tokens), (cost, n_replies, n_tokens)


def test_ship_time_is_m4_rounded_to_the_nanosecond():
    cost = CostNs.from_ms(12, 0.4, 0.05, 0.01)
    assert cost.ship_ns(5000) == 50_000_000
    assert CostNs.from_ms(1, 0, 0, 0.0000003).ship_ns(5) == 2  # 1.5 ns rounds half up
    assert CostNs.from_ms(1, 0, 0, 0.0000003).ship_ns(3) == 1  # 0.9 ns


def test_ties_go_to_the_gpu_whose_last_assignment_is_oldest():
    gpus = [FakeGpu(i) for i in range(3)]
    side = Side(gpus)
    # never-assigned first, lowest number first; then the oldest assignment
    assert [side.least_queued().number for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]


def test_least_queued_wins_over_the_tie_rule():
    gpus = [FakeGpu(0, queued=500), FakeGpu(1, queued=100), FakeGpu(2, queued=100)]
    side = Side(gpus)
    assert side.least_queued().number == 1
    gpus[1].queue.queued_tokens += 300
    assert side.least_queued().number == 2


def test_writing_gpu_counts_replies_in_progress_and_shipping():
    gpus = [FakeGpu(2, replies=3), FakeGpu(3, replies=1, shipping=2), FakeGpu(4, replies=2, shipping=0)]
    side = Side(gpus)
    assert side.fewest_replies().number == 4  # 2 < 3 (1 in progress + 2 shipping) and 3
    gpus[2].n_shipping += 1
    assert side.fewest_replies().number == 2  # all hold 3; GPU 2 was never assigned


def test_prompts_spread_over_idle_gpus_not_piled_on_gpu_0(micro):
    rows = [(t, 200, 2) for t in (0.0, 1.0, 2.0, 3.0, 4.0)]
    res = micro(rows, [{"name": "two", "kind": "colocated", "gpus": 2}])
    assert res.requests.reading_gpu.tolist() == [0, 1, 0, 1, 0]


def test_work_queued_leaves_out_the_iteration_in_progress(micro):
    # A (5000 tokens) is being read on GPU 0 when B and C arrive; GPU 0's queue counts 0 (D1).
    # B goes to GPU 1 (never assigned); C finds both queues empty and GPU 0's assignment oldest.
    res = micro([(0.0, 5000, 2), (0.001, 100, 2), (0.002, 100, 2)], [{"name": "two", "kind": "colocated", "gpus": 2}])
    assert res.requests.reading_gpu.tolist() == [0, 1, 0]
    # C waits for A's 262 ms iteration: it is read in GPU 0's next one
    c = res.requests.iloc[2]
    assert c.read_started_at_s == pytest.approx(262 * MS, abs=1e-12)


def test_unread_rest_of_a_partly_read_prompt_counts_as_queued(micro):
    # chunks of 512: while A's first chunk is read, GPU 0 still has 2000 - 512 = 1488 tokens
    # queued (D1). C compares GPU 0 (1488) with GPU 1 (B's 100 being read: 0) and goes to GPU 1;
    # had the partly read prompt not counted, the tie rule would have sent C to GPU 0.
    res = micro(
        [(0.0, 2000, 2), (0.001, 100, 2), (0.002, 100, 2)],
        [{"name": "chunked", "kind": "colocated", "gpus": 2, "chunk_tokens": 512}],
    )
    assert res.requests.reading_gpu.tolist() == [0, 1, 1]


def test_prompts_finishing_together_choose_writing_gpus_in_arrival_order(micro):
    # three prompts read in one iteration; each reply counts against its GPU while it ships (D3)
    res = micro(
        [(0.0, 300, 5), (0.0, 200, 5), (0.0, 100, 5)],
        [{"name": "split", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 2}],
    )
    assert res.requests.writing_gpu.tolist() == [1, 2, 1]


@pytest.fixture(scope="module")
def default_seed_3():
    return run(load_scenario(DEFAULT), seed=3)


def test_every_reply_gets_exactly_its_words_at_increasing_times(default_seed_3):
    res = default_seed_3
    for name in res.records:
        req = res.requests[res.requests.arrangement == name].set_index("request_id")
        assert req.finished_at_s.notna().all()
        words = res.words(name)
        counts = words.groupby("request_id").size()
        assert counts.reindex(req.index).tolist() == req.n_reply_words.tolist()
        same_request = words.request_id.to_numpy()[1:] == words.request_id.to_numpy()[:-1]
        steps = np.diff(words.at_s.to_numpy())[same_request]
        assert (steps > 0).all()
        last = words.groupby("request_id").at_s.last()
        assert np.allclose(last.reindex(req.index), req.finished_at_s, atol=1e-12)


def test_gpus_never_run_two_iterations_at_once(default_seed_3):
    it = default_seed_3.iterations
    for (_, _), block in it.groupby(["arrangement", "gpu"], observed=True):
        assert (block.started_at_s.to_numpy()[1:] >= block.ended_at_s.to_numpy()[:-1]).all()
        assert (block.ended_at_s > block.started_at_s).all()


def test_chunked_iterations_never_read_more_than_chunk_tokens(default_seed_3):
    it = default_seed_3.iterations
    chunked = it[it.arrangement == "chunked-512"]
    assert chunked.n_prompt_tokens_read.max() == 512
    reads = default_seed_3.reads
    per_iteration = reads[reads.arrangement == "chunked-512"].groupby(["gpu", "iteration"]).n_tokens.sum()
    assert per_iteration.max() <= 512


def test_split_roles_reading_gpus_never_write_and_writing_gpus_never_read(default_seed_3):
    it = default_seed_3.iterations
    for name, n_reading in (("split-2-2", 2), ("split-1-3", 1), ("split-3-1", 3)):
        block = it[it.arrangement == name]
        readers = block[block.gpu < n_reading]
        writers = block[block.gpu >= n_reading]
        assert (readers.n_replies_written == 0).all()
        assert (writers.n_prompt_tokens_read == 0).all()
        req = default_seed_3.requests
        req = req[req.arrangement == name]
        assert (req.reading_gpu < n_reading).all()
        assert (req.writing_gpu.dropna() >= n_reading).all()


def test_every_arrangement_sees_exactly_the_same_requests(default_seed_3):
    req = default_seed_3.requests
    cols = ["request_id", "arrived_at_s", "n_prompt_tokens", "n_reply_words"]
    blocks = [b[cols].reset_index(drop=True) for _, b in req.groupby("arrangement", observed=True)]
    for b in blocks[1:]:
        assert b.equals(blocks[0])


def test_a_gpu_joining_a_side_is_never_assigned_there():
    """E12 (D2): a GPU that joins a side comes before every GPU assigned there, among those never assigned by
    number; one that leaves is no candidate (model/router.py's `Side.order`)."""
    gpus = [FakeGpu(i) for i in range(4)]
    side = Side(gpus)
    assert [side.least_queued().number for _ in range(2)] == [0, 1]  # 2 and 3 never assigned
    side.leave(gpus[0])
    assert [g.number for g in side.gpus] == [1, 2, 3]
    side.join(gpus[0])
    assert [g.number for g in side.gpus] == [0, 1, 2, 3]
    assert [side.least_queued().number for _ in range(5)] == [0, 2, 3, 1, 0]
    side.leave(gpus[2])
    assert [side.fewest_replies().number for _ in range(4)] == [3, 1, 0, 3]
