"""Hand-timed micro-scenarios: word times computed by hand from M1-M7 and D1-D10.

Costs (defaults): an iteration is 12 ms + 0.4 ms per reply written + 0.05 ms per prompt token
read; a ship is 0.01 ms per prompt token. A trace's times are taken as written.
"""

from __future__ import annotations

import pandas as pd
import pytest
from helpers import COLOCATED_1, SPLIT_1_1

MS = 1e-3


def words_of(result, arrangement, request_id):
    w = result.words(arrangement)
    return w.loc[w.request_id == request_id, "at_s"].tolist()


def req(result, arrangement, request_id):
    r = result.requests
    return r[(r.arrangement == arrangement) & (r.request_id == request_id)].iloc[0]


def test_one_request_alone_on_each_kind(micro):
    res = micro(
        [(0.0, 1000, 4)],
        [
            {"name": "same", "kind": "colocated", "gpus": 1},
            {"name": "chunked", "kind": "colocated", "gpus": 1, "chunk_tokens": 400},
            {"name": "split", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 1},
        ],
    )
    read = (12 + 0.05 * 1000) * MS  # one iteration reads the whole prompt: word 1
    write = (12 + 0.4) * MS  # each later iteration writes one word for one reply
    assert words_of(res, "same", 0) == pytest.approx([read + k * write for k in range(4)], abs=1e-12)
    # chunks of 400, 400, 200 tokens: only the fixed cost of the extra iterations is charged (M5)
    chunked = (12 + 20) * MS * 2 + (12 + 10) * MS
    assert words_of(res, "chunked", 0) == pytest.approx([chunked + k * write for k in range(4)], abs=1e-12)
    ship = 0.01 * 1000 * MS  # the reply joins the writing GPU after its KV cache ships (M4)
    assert words_of(res, "split", 0) == pytest.approx(
        [read] + [read + ship + k * write for k in (1, 2, 3)], abs=1e-12
    )
    r = req(res, "split", 0)
    assert (r.reading_gpu, r.writing_gpu) == (0, 1)
    assert r.joined_at_s == pytest.approx(read + ship, abs=1e-12)
    assert r.max_gap_ms == pytest.approx((ship + write) / MS)
    assert r.on_time


def test_two_arrivals_at_one_instant_share_the_iteration_an_idle_gpu_starts(micro):
    res = micro([(0.0, 300, 2), (0.0, 500, 3)], COLOCATED_1)
    read = (12 + 0.05 * 800) * MS  # both prompts are waiting when the idle GPU starts (D5)
    assert words_of(res, "same", 0) == pytest.approx([read, read + 12.8 * MS], abs=1e-12)
    assert words_of(res, "same", 1) == pytest.approx([read, read + 12.8 * MS, read + 12.8 * MS + 12.4 * MS], abs=1e-12)


def test_two_arrivals_at_one_instant_go_to_different_gpus(micro):
    # the first goes to GPU 0 (never assigned, lowest number); GPU 0 has not started yet when
    # the second is routed, so its 300 queued tokens count (D1, D5) and GPU 1 gets it
    res = micro([(0.0, 300, 2), (0.0, 500, 2)], [{"name": "two", "kind": "colocated", "gpus": 2}])
    assert res.requests.reading_gpu.tolist() == [0, 1]
    assert res.requests.first_word_at_s.tolist() == pytest.approx([27 * MS, 37 * MS], abs=1e-12)


def test_an_arrival_at_the_instant_an_iteration_ends_joins_the_next_one(micro):
    # A's prompt is read by 22 ms; B arrives at exactly 22 ms and is read in the iteration that
    # starts then, beside A's word 2 (D5: arrivals are routed before idle GPUs start)
    res = micro([(0.0, 200, 3), (0.022, 100, 2)], COLOCATED_1)
    t1 = 22 * MS
    t2 = t1 + (12 + 0.4 + 0.05 * 100) * MS
    t3 = t2 + (12 + 0.8) * MS
    assert words_of(res, "same", 0) == pytest.approx([t1, t2, t3], abs=1e-12)
    assert words_of(res, "same", 1) == pytest.approx([t2, t3], abs=1e-12)


def test_a_reply_that_joins_while_its_writing_gpu_is_busy_waits_for_the_next_start(micro):
    res = micro([(0.0, 100, 3), (0.010, 200, 2)], SPLIT_1_1)
    # A: read 0-17 ms, ship 1 ms, joins at 18 ms, words at 30.4 and 42.8 ms
    assert words_of(res, "split", 0) == pytest.approx([17 * MS, 30.4 * MS, 42.8 * MS], abs=1e-12)
    # B waits for the reading GPU (busy until 17 ms), read 17-39 ms, ship 2 ms, joins at 41 ms
    # while the writing GPU is mid-iteration (30.4-42.8 ms); its word 2 ends the next one
    b = req(res, "split", 1)
    assert (b.read_started_at_s, b.first_word_at_s, b.joined_at_s) == pytest.approx((17 * MS, 39 * MS, 41 * MS), abs=1e-12)
    assert words_of(res, "split", 1) == pytest.approx([39 * MS, (42.8 + 12.4) * MS], abs=1e-12)
    assert b.max_gap_ms == pytest.approx(42.8 + 12.4 - 39)


def test_a_ship_that_ends_as_an_iteration_ends_joins_the_next_iteration(micro):
    # Both prompts are read in one iteration: 12 + 0.05 * 1440 = 84 ms. A (100 tokens) ships
    # 1 ms, joins at 85 ms, gets word 2 at 97.4 ms. B (1340 tokens) ships 13.4 ms and lands at
    # 97.4 ms exactly: the writing GPU's next iteration (starting then) writes both (D5).
    res = micro([(0.0, 100, 3), (0.0, 1340, 2)], SPLIT_1_1)
    assert words_of(res, "split", 0) == pytest.approx([84 * MS, 97.4 * MS, 110.2 * MS], abs=1e-12)
    assert words_of(res, "split", 1) == pytest.approx([84 * MS, 110.2 * MS], abs=1e-12)
    assert req(res, "split", 1).joined_at_s == pytest.approx(97.4 * MS, abs=1e-12)


def test_a_one_word_reply_has_no_ship_no_writing_gpu_and_no_gaps(micro):
    res = micro([(0.0, 400, 1)], SPLIT_1_1)
    r = req(res, "split", 0)
    assert r.first_word_at_s == pytest.approx(32 * MS, abs=1e-12)
    assert r.finished_at_s == r.first_word_at_s
    assert pd.isna(r.writing_gpu) and pd.isna(r.joined_at_s)
    assert pd.isna(r.mean_gap_ms) and pd.isna(r.max_gap_ms)
    assert r.on_time
    assert res.iterations.query("gpu == 1").empty  # the writing GPU never worked
    assert words_of(res, "split", 0) == pytest.approx([32 * MS])


def test_a_chunked_prompt_spans_three_iterations_next_to_a_short_one(micro):
    # chunks of 512 read in arrival order, finishing one prompt before the next (D4):
    # A (1200 tokens): 512, 512, then 176 beside B's 100 in the same iteration
    res = micro(
        [(0.0, 1200, 3), (0.0, 100, 2)],
        [{"name": "chunked", "kind": "colocated", "gpus": 1, "chunk_tokens": 512}],
    )
    reads = res.reads[["iteration", "request_id", "n_tokens"]].values.tolist()
    assert reads == [[0, 0, 512], [1, 0, 512], [2, 0, 176], [2, 1, 100]]
    t0 = (12 + 0.05 * 512) * MS
    t2 = 2 * t0 + (12 + 0.05 * 276) * MS
    t3 = t2 + 12.8 * MS  # two replies written
    t4 = t3 + 12.4 * MS
    assert words_of(res, "chunked", 0) == pytest.approx([t2, t3, t4], abs=1e-12)
    assert words_of(res, "chunked", 1) == pytest.approx([t2, t3], abs=1e-12)
    assert res.iterations.n_prompt_tokens_read.tolist() == [512, 512, 276, 0, 0]

