"""E9 with E10: paged KV with preemption on a GPU whose iterations read prompts or write words,
never both (readings R61-R67): hand-timed micro-scenarios in exact ns (a recompute whose re-read
is a prompt-only iteration, a swap right after a prompt-only iteration), and random runs keeping
the invariants (KV never over capacity, no iteration both reads and writes, every request
finishes or is dropped, the run ends, no iteration over its E8 limits, freezes add up).

Costs: an iteration is 10 ms + 1 ms per reply written + 0.01 ms per prompt token read (10 us).
One GPU of 32 tokens in blocks of 4 (8 blocks).
"""

from __future__ import annotations

import numpy as np
from helpers import run_rows
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_paged_kv import COST, MS, US, draw_paging, iterations, words_ns
from test_prompt_only import freeze_rows

PAGED = {"kind": "colocated", "gpus": 1, "kv_capacity_tokens": 32, "kv_policy": "paged", "kv_block_tokens": 4}
E10 = dict(PAGED, name="e10", mixed_iterations=False)
SLO = {"first_word_s": 1, "mean_gap_ms": 50, "freeze_ms": 20}
# words 1-5 of the first three requests: iteration 0 reads their prompts, then 13 ms iterations
# writing three replies (words 2-5)


def test_a_recompute_is_read_again_by_a_prompt_only_iteration_that_freezes_the_reply_in_progress(tmp_path):
    """A (8 prompt tokens, 10 words), B (8, 8) and D (4, 6) arrive at 0. Iteration 0 reads all
    three, prompt only (20 tokens, 10.2 ms): 2 + 2 + 1 blocks, each admitted with one more free.
    Word 2 needs a third block for A and B, a second for D: 8 of 8 held. Word 6 needs a fourth for
    A and B and a third for D: at iteration 5 none is free, so A preempts D (the most recently
    joined, 5 words, 2 blocks freed) and A and B take them. D's re-read (4 + 5 = 9 tokens: 3
    blocks, 4 free needed) waits until B's last word (iteration 7) frees 4 blocks; iteration 8
    is then prompt only (R61): it reads D's 9 tokens (10.09 ms) and gives D its word 6, its last,
    and A gets no word from it: A's gap is 10.09 + 11 ms. Mixed (E9 alone) the re-read shares
    iteration 8 with A's word 9 (11.09 ms)."""
    rows = [(0.0, 8, 10), (0.0, 8, 8), (0.0, 4, 6)]
    res = run_rows(tmp_path, rows, [E10, dict(PAGED, name="mixed")], cost=COST, slo=SLO)
    first = [(0, 10_200 * US, 0, 20, 20)] + [(10_200 * US + k * 13 * MS, 23_200 * US + k * 13 * MS, 3, 0, 32)
                                             for k in range(4)]
    then = [(62_200 * US + k * 12 * MS, 74_200 * US + k * 12 * MS, 2, 0, 32) for k in range(3)]  # A and B: 4 blocks each
    assert iterations(res, "e10") == first + then + [
        (98_200 * US, 108_290 * US, 0, 9, 28),  # D read again (3 blocks) beside A's 4; B has left
        (108_290 * US, 119_290 * US, 1, 0, 16),  # A's word 9 (D has left)
        (119_290 * US, 130_290 * US, 1, 0, 20)]  # A's word 10 needs 17 tokens: a fifth block
    assert iterations(res, "mixed") == first + then + [(98_200 * US, 109_290 * US, 1, 9, 28),
                                                       (109_290 * US, 120_290 * US, 1, 0, 20)]
    five = [10_200 * US + k * 13 * MS for k in range(5)]
    eight = five + [74_200 * US, 86_200 * US, 98_200 * US]
    assert words_ns(res, "e10", 0) == eight + [119_290 * US, 130_290 * US]
    assert words_ns(res, "e10", 1) == eight
    assert words_ns(res, "e10", 2) == five + [108_290 * US]  # its re-read's word, by a prompt-only iteration
    assert words_ns(res, "mixed", 0) == eight + [109_290 * US, 120_290 * US]
    assert words_ns(res, "mixed", 2) == five + [109_290 * US]
    r = res.requests.query("arrangement == 'e10'").set_index("request_id")
    assert r["n_preemptions"].tolist() == [0, 0, 1] and not r["dropped"].any()
    assert res.reads.query("arrangement == 'e10' and request_id == 2")["n_tokens"].tolist() == [4, 9]
    # D's gap across its preemption is `preempted` (it ends with the prompt-only iteration that
    # read D again, R66); A's gap across that iteration is `prompt_read`, blaming D's 9 tokens
    assert freeze_rows(res, "e10") == [(0, 8, 62_200 * US, 46_090 * US, "preempted", 1, "nan", "nan"),
                                       (0, 9, 98_200 * US, 21_090 * US, "prompt_read", 1, "2", "9")]


def test_a_swap_right_after_a_prompt_only_iteration_starts_its_gap_at_the_last_word(tmp_path):
    """A, B, C (4 prompt tokens, 8 words each) arrive at 0, E (4, 2) at 50 ms; swap at 0.01 ms a
    token. Iteration 0 reads A-C (1 block each); word 2 needs a second block each: 6 of 8 held.
    At iteration 5 (62.12 ms) E waits and its block plus one are free: a prompt-only iteration
    (10.04 ms) reads it, though A-C's word 6 (9 tokens) is due a third block (R61). Iteration 6
    writes: A takes the last free block; B's preempts E (the most recent, seated at this very
    iteration, 1 block); C's finds none, and C, now the most recent, is preempted itself (R63).
    Their 3 blocks move out (12 tokens, 0.12 ms added to iteration 6). C's last word came before
    the prompt-only iteration, so its gap runs from 62.12 ms (R66). C and E come back (12 tokens
    in, C with a third block) when A's and B's last words free memory, iteration 9."""
    rows = [(0.0, 4, 8)] * 3 + [(0.05, 4, 2)]
    res = run_rows(tmp_path, rows, [dict(E10, preemption="swap", swap_ms_per_token=0.01)], cost=COST, slo=SLO)
    assert iterations(res, "e10") == [(0, 10_120 * US, 0, 12, 12)] + [
        (10_120 * US + k * 13 * MS, 23_120 * US + k * 13 * MS, 3, 0, 24) for k in range(4)] + [
        (62_120 * US, 72_160 * US, 0, 4, 28),  # E, prompt only
        (72_160 * US, 84_280 * US, 2, 0, 24),  # A, B: 12 ms + 12 tokens out
        (84_280 * US, 96_280 * US, 2, 0, 24),  # C's 2 blocks plus one are not free: no swap-in
        (96_280 * US, 108_280 * US, 2, 0, 24),  # A's and B's word 8, their last
        (108_280 * US, 120_400 * US, 2, 0, 20),  # C (3 blocks) and E (2) back: 12 ms + 12 tokens in
        (120_400 * US, 131_400 * US, 1, 0, 12), (131_400 * US, 142_400 * US, 1, 0, 12)]
    five = [10_120 * US + k * 13 * MS for k in range(5)]
    assert words_ns(res, "e10", 0) == words_ns(res, "e10", 1) == five + [84_280 * US, 96_280 * US, 108_280 * US]
    assert words_ns(res, "e10", 2) == five + [120_400 * US, 131_400 * US, 142_400 * US]
    assert words_ns(res, "e10", 3) == [72_160 * US, 120_400 * US]
    log = res.records["e10"].preemptions
    assert log["request_id"].tolist() == [3, 2] and log["at_ns"].tolist() == [72_160 * US] * 2
    assert len(res.reads.query("request_id == 2")) == 1  # never read again
    assert freeze_rows(res, "e10") == [(0, 6, 62_120 * US, 22_160 * US, "prompt_read", 2, "3", "4"),
                                       (0, 9, 62_120 * US, 58_280 * US, "preempted", 1, "nan", "nan"),
                                       (0, 9, 72_160 * US, 48_240 * US, "preempted", 1, "nan", "nan")]


# -- random runs: every invariant holds; each request finishes or is dropped; freezes add up ----------
rows = st.lists(st.tuples(st.integers(0, 8), st.integers(1, 40), st.integers(1, 30)), min_size=1, max_size=10).map(
    lambda rs: sorted(((t * 0.005, p, w) for t, p, w in rs), key=lambda r: r[0]))


@st.composite
def paged_unmixed(draw, requests):
    a = draw_paging(draw, requests, {"kind": "colocated", "gpus": draw(st.integers(1, 2)), "mixed_iterations": False})
    if draw(st.integers(0, 2)) == 0:
        a["max_batch_tokens"] = draw(st.integers(2, 60))
    return a


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(data=st.data(), trace_rows=rows)
def test_random_paged_prompt_only_runs_keep_every_invariant(tmp_path, data, trace_rows):
    arrangements = [{"name": f"a{i}", **data.draw(paged_unmixed(trace_rows))} for i in range(2)]
    res = run_rows(tmp_path, trace_rows, arrangements, cost=COST, slo={"freeze_ms": 15})
    r = res.requests
    assert (r["finished_at_s"].notna() ^ r["dropped"]).all()  # no livelock: arrivals stop, each ends one way
    summary = res.summary.set_index("arrangement")
    for a in arrangements:
        rec = res.records[a["name"]]
        used = rec.iterations["kv_used_tokens"]
        assert (used <= a["kv_capacity_tokens"]).all() and (used % a["kv_block_tokens"] == 0).all()
        assert (rec.kv_peak_tokens <= a["kv_capacity_tokens"]).all() and not rec.kv_held_at_stop.any()
        written, read = rec.iterations["n_replies_written"], rec.iterations["n_prompt_tokens_read"]
        assert not ((written > 0) & (read > 0)).any()  # E10: never both
        seats = [a[k] for k in ("max_batch_replies", "max_batch_tokens") if k in a]  # E8: no iteration over its limits
        assert not seats or (written <= min(seats)).all()
        assert "max_batch_tokens" not in a or (written + read <= a["max_batch_tokens"]).all()
        assert "chunk_tokens" not in a or (read <= a["chunk_tokens"]).all()
        mine = r[r["arrangement"] == a["name"]]
        assert int(mine["n_preemptions"].sum()) == len(rec.preemptions["at_ns"])
        assert (mine["n_preemptions"][mine["dropped"]] == a.get("max_preemptions", 8) + 1).all()
        w = res.words(a["name"])
        done = mine[mine["finished_at_s"].notna()]
        counts = w.groupby("request_id").size()
        assert (counts.loc[done["request_id"]].to_numpy() == done["n_reply_words"].to_numpy()).all()
        w = w[w["request_id"].isin(done["request_id"])]
        same = w.request_id.to_numpy()[1:] == w.request_id.to_numpy()[:-1]
        assert (np.diff(w["at_s"].to_numpy())[same] > 0).all()
        n_gaps_over = int(((np.diff(w.at_s.to_numpy()) > 0.015 + 1e-9) & same).sum())
        frozen = res.freezes.query(f"arrangement == '{a['name']}'")["n_replies_frozen"].sum()
        assert frozen == summary.loc[a["name"], "n_freezes"] == n_gaps_over == done["n_freezes"].sum()
