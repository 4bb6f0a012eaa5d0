"""E8, batch limits (`max_batch_replies`, `max_batch_tokens`): hand-timed micro-scenarios in
exact ns, the freeze cause `batch_full`, random runs keeping every invariant, and bad input.

Costs: an iteration is 10 ms + 1 ms per reply written + 0.01 ms per prompt token read (10 us);
a ship is 0.001 ms (1 us) per prompt token.
"""

from __future__ import annotations

import contextlib
import io

import numpy as np
from helpers import run_rows, scenario_text
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from invariants import check_run

from disagg_simpy.cli import main
from disagg_simpy.results.story import story_facts, story_text

MS = 1_000_000  # ns
COST = {"iteration_ms": 10, "per_reply_ms": 1, "per_prompt_token_ms": 0.01, "kv_ship_ms_per_token": 0.001}


def words_ns(result, arrangement, request_id) -> list[int]:
    w = result.words(arrangement, [request_id])
    return [round(t * 1e9) for t in w["at_s"]]


def iterations(result, arrangement) -> list[tuple[int, int, int, int]]:
    """(started ns, ended ns, replies written, prompt tokens read) of each iteration."""
    it = result.iterations.query(f"arrangement == '{arrangement}'")
    return [(round(a * 1e9), round(b * 1e9), int(c), int(d)) for a, b, c, d in
            it[["started_at_s", "ended_at_s", "n_replies_written", "n_prompt_tokens_read"]].itertuples(index=False)]


def test_a_budget_splits_a_prompt_across_three_iterations(tmp_path):
    # chunks of at most min(512, 300 - replies): A (100) and 200 of B; 299 of B beside A's word 2;
    # B's last 201 beside A's word 3
    res = run_rows(tmp_path, [(0.0, 100, 4), (0.0, 700, 2)],
                   [{"name": "c", "kind": "colocated", "gpus": 1, "chunk_tokens": 512, "max_batch_tokens": 300}],
                   cost=COST)
    assert iterations(res, "c") == [
        (0, 13 * MS, 0, 300),
        (13 * MS, 26_990_000, 1, 299),
        (26_990_000, 40 * MS, 1, 201),
        (40 * MS, 52 * MS, 2, 0),
    ]
    assert res.reads.query("arrangement == 'c' and request_id == 1")["n_tokens"].tolist() == [200, 299, 201]
    assert words_ns(res, "c", 0) == [13 * MS, 26_990_000, 40 * MS, 52 * MS]
    assert words_ns(res, "c", 1) == [40 * MS, 52 * MS]


def test_a_reply_waits_for_a_batch_seat_and_its_freeze_is_batch_full(tmp_path):
    # one seat: A (3 words) is written first, B (2 words) gets its seat when A has left
    res = run_rows(tmp_path, [(0.0, 100, 3), (0.0, 100, 2)],
                   [{"name": "c", "kind": "colocated", "gpus": 1, "max_batch_replies": 1}], cost=COST,
                   slo={"first_word_s": 1, "mean_gap_ms": 50, "freeze_ms": 25})
    assert iterations(res, "c") == [(0, 12 * MS, 0, 200), (12 * MS, 23 * MS, 1, 0), (23 * MS, 34 * MS, 1, 0),
                                    (34 * MS, 45 * MS, 1, 0)]
    assert words_ns(res, "c", 0) == [12 * MS, 23 * MS, 34 * MS]
    assert words_ns(res, "c", 1) == [12 * MS, 45 * MS]  # a 33 ms gap: two iterations without a seat
    r = res.requests.set_index("request_id")
    assert r.loc[1, "joined_at_s"] * 1e9 == 12 * MS and r.loc[1, "max_gap_ms"] == 33.0
    freezes = res.freezes.query("arrangement == 'c'")  # the row of B's own first gap, blaming nothing
    assert freezes[["gpu", "iteration", "n_replies_frozen"]].values.tolist() == [[0, 3, 1]]
    assert freezes["cause"].astype(str).tolist() == ["batch_full"]
    assert freezes["gap_s"].round(9).tolist() == [0.033] and freezes["blamed_request_ids"].isna().all()
    text = " ".join(story_text(story_facts(res, "c", 1)).split())
    assert "frozen 0.033 s at 0.012 s, waiting for a seat in GPU 0's full batch" in text, text


def test_a_reading_gpu_reading_whole_prompts_caps_a_batch_of_prompts(tmp_path):
    # budget 1,000: 600 is read alone (the next 600 does not fit; 300 may not overtake it), then 600 + 300
    res = run_rows(tmp_path, [(0.0, 600, 1), (0.0, 600, 1), (0.0, 300, 1)],
                   [{"name": "s", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 1,
                     "max_batch_tokens": 1000}], cost=COST)
    assert iterations(res, "s") == [(0, 16 * MS, 0, 600), (16 * MS, 35 * MS, 0, 900)]


def test_a_prompt_larger_than_the_budget_is_read_in_pieces_of_the_room(tmp_path):
    # reading whole prompts with a budget of 1,000: B (2,500 tokens) can never fit whole, so it is
    # read in pieces of what A's word leaves (999, 999), then its last 502 fit whole
    res = run_rows(tmp_path, [(0.0, 100, 5), (0.001, 2500, 2)],
                   [{"name": "c", "kind": "colocated", "gpus": 1, "max_batch_tokens": 1000}], cost=COST)
    assert iterations(res, "c") == [
        (0, 11 * MS, 0, 100),
        (11 * MS, 31_990_000, 1, 999),
        (31_990_000, 52_980_000, 1, 999),
        (52_980_000, 69 * MS, 1, 502),
        (69 * MS, 81 * MS, 2, 0),
    ]
    assert words_ns(res, "c", 1) == [69 * MS, 81 * MS]


def test_a_whole_prompt_waits_for_room_behind_the_replies(tmp_path):
    # budget 102: A and B (50 each) are read together; C (101) arrives at 1 ms and waits while
    # two replies leave it a room of 100, and is read whole once B has left (room 101)
    res = run_rows(tmp_path, [(0.0, 50, 3), (0.0, 50, 2), (0.001, 101, 2)],
                   [{"name": "c", "kind": "colocated", "gpus": 1, "max_batch_tokens": 102}], cost=COST)
    # it0 reads A, B (10 + 1 ms); it1 writes both (12 ms), C needs 101 > room 100; it2 writes A
    # only (B left): room 101 fits C: 10 + 1 + 1.01 ms
    assert iterations(res, "c") == [(0, 11 * MS, 0, 100), (11 * MS, 23 * MS, 2, 0), (23 * MS, 35_010_000, 1, 101),
                                    (35_010_000, 46_010_000, 1, 0)]



def test_a_prompt_of_exactly_the_budget_waits_for_room_and_is_not_read_in_pieces(tmp_path):
    # budget 100: B (100 tokens, arriving at 1 ms) fits the whole budget, so while A's word leaves
    # a room of 99 it waits (read whole later), not in pieces of the room as a larger prompt is
    res = run_rows(tmp_path, [(0.0, 50, 3), (0.001, 100, 2)],
                   [{"name": "c", "kind": "colocated", "gpus": 1, "max_batch_tokens": 100}], cost=COST)
    assert iterations(res, "c") == [(0, 10_500_000, 0, 50), (10_500_000, 21_500_000, 1, 0),
                                    (21_500_000, 32_500_000, 1, 0), (32_500_000, 43_500_000, 0, 100),
                                    (43_500_000, 54_500_000, 1, 0)]

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


def test_each_side_of_a_split_keeps_its_own_limits(tmp_path):
    """E8 per side (R89-R91) by hand: split-1-1, three 100-token prompts of 2 words at 0 s, with
    `reading_max_batch_requests: 2` and `writing_max_batch_replies: 1` (the general
    `max_batch_tokens: 1000` still caps the reading side; the writing side's own 150 overrides it).
    The reading GPU reads A and B (10 + 2 ms), then C alone (10 + 1 ms: 11 ms to 23 ms); without the
    cap all three in one 13 ms iteration. Ships take 0.1 ms: A and B join at 12.1 ms, C at 23.1 ms.
    One seat: A is written 12.1-23.1 ms (10 + 1 ms), B waits for it (its first gap 22 ms, two
    iterations), C, which joined after B, 34.1-45.1 ms."""
    split = {"name": "s", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 1, "max_batch_tokens": 1000,
             "reading_max_batch_requests": 2, "writing_max_batch_replies": 1, "writing_max_batch_tokens": 150}
    res = run_rows(tmp_path, [(0.0, 100, 2)] * 3, [split], cost=COST)
    reading = [row for row in iterations(res, "s")[:2]]
    assert reading == [(0, 12 * MS, 0, 200), (12 * MS, 23 * MS, 0, 100)]
    assert [words_ns(res, "s", i) for i in range(3)] == [[12 * MS, 23_100_000], [12 * MS, 34_100_000],
                                                         [23 * MS, 45_100_000]]
    writing = res.iterations.query("arrangement == 's' and gpu == 1")["n_replies_written"].tolist()
    assert writing == [1, 1, 1]


# -- random runs: every invariant (budgets included) holds, every request finishes ---------------
rows = st.lists(st.tuples(st.integers(0, 8), st.integers(1, 600), st.integers(1, 8)), min_size=1, max_size=10).map(
    lambda rs: sorted(((t * 0.005, p, w) for t, p, w in rs), key=lambda r: r[0]))


@st.composite
def limited(draw):
    if draw(st.booleans()):
        a = {"kind": "colocated", "gpus": draw(st.integers(1, 2))}
    else:
        a = {"kind": "disaggregated", "reading_gpus": draw(st.integers(1, 2)), "writing_gpus": draw(st.integers(1, 2))}
        if draw(st.booleans()):
            a["local_prompt_max_tokens"] = draw(st.integers(1, 300))
    if draw(st.booleans()):
        a["chunk_tokens"] = draw(st.integers(1, 400))
    if draw(st.booleans()):
        a["max_batch_replies"] = draw(st.integers(1, 4))
    a["max_batch_tokens"] = draw(st.integers(2, 700))
    if a["kind"] == "disaggregated":  # E8 per side (R89, R90): each side's own, over the general keys
        if draw(st.booleans()):
            a["reading_max_batch_requests"] = draw(st.integers(1, 3))
        if draw(st.booleans()):
            a["reading_max_batch_tokens"] = draw(st.integers(1, 700))
        elif draw(st.booleans()):
            a["writing_max_batch_tokens"] = draw(st.integers(2, 700))
        if "max_batch_replies" not in a and draw(st.booleans()):
            a["writing_max_batch_replies"] = draw(st.integers(1, 4))
    return a


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(trace_rows=rows, arrangement_list=st.lists(limited(), min_size=1, max_size=2))
def test_random_batch_limits_keep_every_invariant_and_every_request_finishes(tmp_path, trace_rows, arrangement_list):
    arrangements = [{"name": f"a{i}", **a} for i, a in enumerate(arrangement_list)]
    res = run_rows(tmp_path, trace_rows, arrangements, cost=COST, slo={"freeze_ms": 15})
    check_run(res)  # budgets, seats, exact costs, words (tests/invariants.py)
    assert res.requests["finished_at_s"].notna().all()  # no livelock: arrivals stop, the run ends
    summary = res.summary.set_index("arrangement")
    for name in res.records:  # freezes (batch_full among them) add up, and match the word times
        w = res.words(name)
        same = w.request_id.to_numpy()[1:] == w.request_id.to_numpy()[:-1]
        n_gaps_over = int(((np.diff(w.at_s.to_numpy()) > 0.015 + 1e-9) & same).sum())
        frozen = res.freezes.query(f"arrangement == '{name}'")["n_replies_frozen"].sum()
        assert frozen == summary.loc[name, "n_freezes"] == n_gaps_over


# -- bad input: one line, exit 2, nothing written ----------------------------------------------------
SYNTHETIC = {"rate_per_s": 5, "measure_s": 1, "prompt_mix": [{"share": 1, "tokens": [100, 800]}],
             "reply_words": [5, 40]}


def test_bad_batch_limits_get_one_line_and_exit_2(tmp_path):
    cases = [
        ({"kind": "colocated", "gpus": 1, "max_batch_replies": 0}, "arrangements[0].max_batch_replies: got 0"),
        ({"kind": "colocated", "gpus": 1, "max_batch_tokens": 1},
         "arrangements[0].max_batch_tokens: got 1, expected at least 2 (one reply written and one prompt token read)"),
        ({"kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 1, "max_batch_tokens": 1},
         "arrangements[0].max_batch_tokens: got 1, expected at least 2"),
        ({"kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 1, "max_batch_replies": "many"},
         "arrangements[0].max_batch_replies: got 'many'"),
        # E8 per side (R89, R91, R93): a general key no instance keeps, a side's own on GPUs that move
        ({"kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 1, "max_batch_replies": 8,
          "writing_max_batch_replies": 16}, "arrangements[0].writing_max_batch_replies: got 16 with max_batch_replies 8, "
                                            "expected one of them"),
        ({"kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 1, "max_batch_tokens": 8192,
          "reading_max_batch_tokens": 8192, "writing_max_batch_tokens": 65536},
         "arrangements[0].max_batch_tokens: got 8192 with reading_max_batch_tokens and writing_max_batch_tokens"),
        ({"kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 1, "writing_max_batch_tokens": 1},
         "arrangements[0].writing_max_batch_tokens: got 1, expected at least 2"),
        ({"kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 1, "reading_max_batch_requests": 0},
         "arrangements[0].reading_max_batch_requests: got 0"),
        ({"kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 1, "reading_max_batch_requests": 128,
          "roles": {"policy": "queue"}}, "arrangements[0].reading_max_batch_requests: got 128 with roles that change"),
        ({"kind": "colocated", "gpus": 1, "reading_max_batch_tokens": 8192},
         "arrangements[0].reading_max_batch_tokens: unknown key for a colocated arrangement"),
    ]
    for arrangement, expected in cases:
        path = tmp_path / "s.yaml"
        path.write_text(scenario_text("bad", SYNTHETIC, arrangements=[{"name": "a", **arrangement}]))
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            code = main([str(path), "--out", str(tmp_path / "out"), "--no-plots"])
        assert code == 2 and err.getvalue().count("\n") == 1 and expected in err.getvalue(), err.getvalue()
        assert not (tmp_path / "out").exists()
