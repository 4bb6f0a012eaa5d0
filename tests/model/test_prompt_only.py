"""E10, prompt-only iterations (`mixed_iterations: false`): hand-timed micro-scenarios in exact
ns, the freezes they cause (freezes.csv, explain), and bad input.

Costs: an iteration is 10 ms + 1 ms per reply written + 0.01 ms per prompt token read (10 us).
"""

from __future__ import annotations

import contextlib
import io

import numpy as np
from helpers import freezes_by_reply, run_rows, scenario_text
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from invariants import check_run
from test_batch_limits import COST, MS, iterations, words_ns

from disagg_simpy.cli import main
from disagg_simpy.results.story import story_facts, story_text

UNMIXED = {"name": "e10", "kind": "colocated", "gpus": 1, "mixed_iterations": False}
MIXED = {"name": "mixed", "kind": "colocated", "gpus": 1}


def freeze_rows(res, name):
    f = res.freezes.query(f"arrangement == '{name}'")
    return [(int(g), int(i), round(s * 1e9), round(d * 1e9), str(c), int(n), str(b), str(t)) for g, i, s, d, c, n, b, t in
            f[["gpu", "iteration", "gap_started_at_s", "gap_s", "cause", "n_replies_frozen", "blamed_request_ids",
               "blamed_prompt_tokens"]].itertuples(index=False)]


def test_a_prompt_only_iteration_freezes_the_replies_in_progress(tmp_path):
    # A (100 tokens, 4 words) is read, then written alone; B (5,000 tokens) arrives at 15 ms and is
    # read by a prompt-only iteration (10 + 50 ms) that gives A no word: A's gap is 72 ms. Mixed,
    # B is read beside A's word 3 (10 + 1 + 50 ms): a 61 ms gap, under the 65 ms freeze limit.
    res = run_rows(tmp_path, [(0.0, 100, 4), (0.015, 5000, 2)], [UNMIXED, MIXED], cost=COST,
                   slo={"first_word_s": 1, "mean_gap_ms": 50, "freeze_ms": 65})
    assert iterations(res, "e10") == [(0, 11 * MS, 0, 100), (11 * MS, 22 * MS, 1, 0), (22 * MS, 82 * MS, 0, 5000),
                                      (82 * MS, 94 * MS, 2, 0), (94 * MS, 105 * MS, 1, 0)]
    assert words_ns(res, "e10", 0) == [11 * MS, 22 * MS, 94 * MS, 105 * MS]
    assert words_ns(res, "e10", 1) == [82 * MS, 94 * MS]
    assert words_ns(res, "mixed", 0) == [11 * MS, 22 * MS, 83 * MS, 95 * MS]
    r = res.requests.set_index(["arrangement", "request_id"])
    assert r.loc[("e10", 0), "max_gap_ms"] == 72.0 and r.loc[("e10", 0), "n_freezes"] == 1
    assert r.loc[("mixed", 0), "max_gap_ms"] == 61.0 and r.loc[("mixed", 0), "n_freezes"] == 0
    # the row of the gap A saw: ended by the writing iteration 3, caused by the prompt read in it
    assert freeze_rows(res, "e10") == [(0, 3, 22 * MS, 72 * MS, "prompt_read", 1, "1", "5000")]
    assert freeze_rows(res, "mixed") == []
    text = " ".join(story_text(story_facts(res, "e10", 0)).split())
    assert "frozen 0.072 s at 0.022 s while GPU 0 read request 1 (5,000 tokens)" in text, text
    # join_iteration: the iteration that writes word 2
    assert res.records["e10"].requests["join_iteration"].tolist() == [1, 3]


def test_chunks_of_a_prompt_read_prompt_first_are_one_gap_blaming_the_whole_prompt(tmp_path):
    # chunk_tokens 2,000: B is read in three prompt-only iterations in a row (2,000, 2,000, 1,000
    # tokens: 30, 30, 20 ms); A gets no word until B's word 1: one 92 ms gap, B blamed for 5,000
    res = run_rows(tmp_path, [(0.0, 100, 4), (0.015, 5000, 2)], [{**UNMIXED, "chunk_tokens": 2000}], cost=COST,
                   slo={"first_word_s": 1, "mean_gap_ms": 50, "freeze_ms": 65})
    assert iterations(res, "e10") == [(0, 11 * MS, 0, 100), (11 * MS, 22 * MS, 1, 0), (22 * MS, 52 * MS, 0, 2000),
                                      (52 * MS, 82 * MS, 0, 2000), (82 * MS, 102 * MS, 0, 1000),
                                      (102 * MS, 114 * MS, 2, 0), (114 * MS, 125 * MS, 1, 0)]
    assert words_ns(res, "e10", 0) == [11 * MS, 22 * MS, 114 * MS, 125 * MS]
    assert freeze_rows(res, "e10") == [(0, 5, 22 * MS, 92 * MS, "prompt_read", 1, "1", "5000")]


def test_replies_read_before_a_prompt_only_iteration_share_one_first_gap_row(tmp_path):
    # A and C are read together (11.5 ms); B (3,000 tokens) arrived meanwhile and is read first
    # (40 ms); A's and C's word 2 come at 64.5 ms: a 53 ms first gap each, one row freezing two
    # replies. B's own first gap (51.5 to 64.5 ms) is one writing iteration, under the limit.
    res = run_rows(tmp_path, [(0.0, 100, 3), (0.0, 50, 3), (0.005, 3000, 2)], [UNMIXED], cost=COST,
                   slo={"first_word_s": 1, "mean_gap_ms": 50, "freeze_ms": 30})
    assert iterations(res, "e10") == [(0, 11_500_000, 0, 150), (11_500_000, 51_500_000, 0, 3000),
                                      (51_500_000, 64_500_000, 3, 0), (64_500_000, 76_500_000, 2, 0)]
    assert words_ns(res, "e10", 0) == words_ns(res, "e10", 1) == [11_500_000, 64_500_000, 76_500_000]
    assert freeze_rows(res, "e10") == [(0, 2, 11_500_000, 53 * MS, "prompt_read", 2, "2", "3000")]
    assert res.summary.set_index("arrangement").loc["e10", "n_freezes"] == 2
    assert res.requests.set_index("request_id").loc[[0, 1, 2], "n_freezes"].tolist() == [1, 1, 0]


def test_mixed_iterations_on_a_split_is_one_line_and_exit_2(tmp_path):
    synthetic = {"rate_per_s": 5, "measure_s": 1, "prompt_mix": [{"share": 1, "tokens": [100, 800]}],
                 "reply_words": [5, 40]}
    cases = [
        ({"kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 1, "mixed_iterations": False},
         "arrangements[0].mixed_iterations: unknown key for a disaggregated arrangement (it belongs to a colocated "
         "arrangement)"),
        ({"kind": "colocated", "gpus": 1, "mixed_iterations": "no"}, "arrangements[0].mixed_iterations: got 'no'"),
    ]
    for arrangement, expected in cases:
        path = tmp_path / "s.yaml"
        path.write_text(scenario_text("bad", synthetic, arrangements=[{"name": "a", **arrangement}]))
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            code = main([str(path), "--out", str(tmp_path / "out"), "--no-plots"])
        assert code == 2 and err.getvalue().count("\n") == 1 and expected in err.getvalue(), err.getvalue()
        assert not (tmp_path / "out").exists()


# -- random runs: every invariant holds, every request finishes, each freeze is one gap ------------
@st.composite
def unmixed(draw):
    a = {"kind": "colocated", "gpus": draw(st.integers(1, 2)), "mixed_iterations": False}
    if draw(st.booleans()):
        a["chunk_tokens"] = draw(st.integers(1, 400))
    if draw(st.booleans()):
        a["max_batch_replies"] = draw(st.integers(1, 3))
    if draw(st.booleans()):
        a["max_batch_tokens"] = draw(st.integers(2, 700))
    if draw(st.booleans()):
        a["kv_capacity_tokens"] = 620 + draw(st.integers(0, 600))  # holds the largest request (600 + 8)
    return a


rows = st.lists(st.tuples(st.integers(0, 8), st.integers(1, 600), st.integers(1, 8)), min_size=1, max_size=10).map(
    lambda rs: sorted(((t * 0.005, p, w) for t, p, w in rs), key=lambda r: r[0]))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(trace_rows=rows, arrangement_list=st.lists(unmixed(), min_size=1, max_size=2))
def test_random_prompt_only_runs_keep_every_invariant_and_their_freezes_add_up(tmp_path, trace_rows, arrangement_list):
    arrangements = [{"name": f"a{i}", **a} for i, a in enumerate(arrangement_list)]
    res = run_rows(tmp_path, trace_rows, arrangements, cost=COST, slo={"freeze_ms": 15})
    check_run(res)  # no iteration both reads and writes, exact costs, words (tests/invariants.py)
    assert res.requests["finished_at_s"].notna().all()  # no livelock: arrivals stop, the run ends
    summary = res.summary.set_index("arrangement")
    for name in res.records:
        w = res.words(name)
        same = w.request_id.to_numpy()[1:] == w.request_id.to_numpy()[:-1]
        gaps = np.diff(w.at_s.to_numpy())
        n_gaps_over = int(((gaps > 0.015 + 1e-9) & same).sum())
        frozen = res.freezes.query(f"arrangement == '{name}'")["n_replies_frozen"].sum()
        assert frozen == summary.loc[name, "n_freezes"] == n_gaps_over
        # each reply's freezes are its gaps over the limit, in order, with their start and length
        per_reply = freezes_by_reply(res, name)
        at, rid = w.at_s.to_numpy(), w.request_id.to_numpy()
        over = np.flatnonzero((gaps > 0.015 + 1e-9) & same)
        assert per_reply["request_id"].tolist() == rid[over].tolist()
        assert np.allclose(per_reply["gap_started_at_s"], at[over], rtol=0, atol=1e-12)
        assert np.allclose(per_reply["gap_s"], gaps[over], rtol=0, atol=1e-9)


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
