"""E9, paged KV with preemption (`kv_policy: paged`): hand-timed micro-scenarios in exact ns (a
preemption and its recompute, a swap, a drop), the freeze cause `preempted`, random runs keeping
the invariants (KV never over capacity, every measured request finishes or is dropped, the run
ends), and bad input.

Costs: an iteration is 10 ms + 1 ms per reply written + 0.01 ms per prompt token read (10 us).
Two requests of 8 prompt tokens arrive at 0 on one GPU of 24 tokens in blocks of 4 (6 blocks):
A has 6 words, B 8. Both are read in iteration 0 (2 blocks each, 3 free needed for each); their
word 2 needs 9 tokens, a third block each (6 of 6 held); word 6 needs 13 tokens: at iteration 5
A takes a fourth block, and none is free, so B, the most recently joined, is preempted with 5
words.
"""

from __future__ import annotations

import contextlib
import io

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from helpers import run_rows, scenario_text
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from disagg_simpy.cli import main
from disagg_simpy.plots.timeline import draw_reply_lanes, save_timeline
from disagg_simpy.results.story import story_facts, story_text

MS = 1_000_000  # ns
US = 1_000
COST = {"iteration_ms": 10, "per_reply_ms": 1, "per_prompt_token_ms": 0.01, "kv_ship_ms_per_token": 0.001}
PAGED = {"name": "c", "kind": "colocated", "gpus": 1, "kv_capacity_tokens": 24, "kv_policy": "paged",
         "kv_block_tokens": 4}
ROWS = [(0.0, 8, 6), (0.0, 8, 8)]
# words 1-5 of both: iteration 0 reads 16 tokens (10.16 ms), then 12 ms iterations writing two replies
BOTH = [10_160 * US + k * 12 * MS for k in range(5)]


def words_ns(result, arrangement, request_id) -> list[int]:
    w = result.words(arrangement, [request_id])
    return [round(t * 1e9) for t in w.sort_values("word")["at_s"]]


def iterations(result, arrangement) -> list[tuple[int, int, int, int, int]]:
    """(started ns, ended ns, replies written, prompt tokens read, KV tokens held) of each iteration."""
    it = result.iterations.query(f"arrangement == '{arrangement}'")
    cols = ["started_at_s", "ended_at_s", "n_replies_written", "n_prompt_tokens_read", "kv_used_tokens"]
    return [(round(a * 1e9), round(b * 1e9), int(c), int(d), int(e)) for a, b, c, d, e in
            it[cols].itertuples(index=False)]


def test_a_preempted_reply_is_read_again_and_its_read_gives_its_next_word(tmp_path):
    res = run_rows(tmp_path, ROWS, [PAGED], cost=COST, slo={"first_word_s": 1, "mean_gap_ms": 50, "freeze_ms": 20})
    it = iterations(res, "c")
    assert it[0] == (0, 10_160 * US, 0, 16, 16)
    assert it[1] == (10_160 * US, 22_160 * US, 2, 0, 24)  # a third block each: all 6 held
    # iteration 5: A takes B's freed block (B preempted, 3 blocks freed, 1 taken): one reply, 11 ms
    assert it[5] == (58_160 * US, 69_160 * US, 1, 0, 16)
    # iteration 6: A has left (its 4 blocks freed); B's 13 tokens (8 + 5 words) are read again: 4 blocks
    # held, 5 free were needed; the read (10.13 ms) gives B its word 6
    assert it[6] == (69_160 * US, 79_290 * US, 0, 13, 16)
    assert it[7:] == [(79_290 * US, 90_290 * US, 1, 0, 16), (90_290 * US, 101_290 * US, 1, 0, 16)]
    assert words_ns(res, "c", 0) == BOTH + [69_160 * US]
    assert words_ns(res, "c", 1) == BOTH + [79_290 * US, 90_290 * US, 101_290 * US]
    r = res.requests.set_index("request_id")
    assert r["n_preemptions"].tolist() == [0, 1] and not r["dropped"].any()
    assert r.loc[1, "first_word_at_s"] * 1e9 == 10_160 * US  # the re-read's word is not a first word
    assert res.reads.query("request_id == 1")["n_tokens"].tolist() == [8, 13]
    s = res.summary.set_index("arrangement")
    assert s.loc["c", "n_preemptions"] == 1 and s.loc["c", "n_dropped"] == 0 and s.loc["c", "n_unfinished"] == 0
    # B's gap of 21.13 ms over the 20 ms freeze limit spans its preemption: cause `preempted`
    freezes = res.freezes.query("arrangement == 'c'")
    assert freezes["cause"].astype(str).tolist() == ["preempted"] and freezes["blamed_request_ids"].isna().all()
    assert freezes["gap_s"].round(9).tolist() == [0.02113]
    text = " ".join(story_text(story_facts(res, "c", 1)).split())
    assert "preempted" in text, text
    # the timeline marks the preemption on B's lane (the page's player too, page/data.py)
    fig, ax = plt.subplots()
    log = res.records["c"].preemptions
    preempted = pd.DataFrame({"request_id": log["request_id"], "at_s": log["at_ns"] / 1e9})
    draw_reply_lanes(ax, res.requests, res.words("c"), res.scenario.slo, (0.0, 0.2), "GPU", preempted)
    marks = next(c for c in ax.collections if c.get_gid() == "preemptions").get_offsets()
    assert np.asarray(marks).tolist() == [[0.05816, 0.0]]  # B's lane is the lower of two
    plt.close(fig)
    assert save_timeline(res, "c", tmp_path / "t.png", (0.0, 0.2), 2).exists()


def test_a_swapped_reply_moves_its_kv_out_and_back_in(tmp_path):
    # B's 3 blocks (12 tokens) move out at 0.01 ms a token, added to iteration 5; they move back
    # in iteration 6 (with the fourth block its word 6 needs), 0.12 ms again
    swap = dict(PAGED, preemption="swap", swap_ms_per_token=0.01)
    res = run_rows(tmp_path, ROWS, [swap], cost=COST, slo={"first_word_s": 1, "mean_gap_ms": 50, "freeze_ms": 20})
    it = iterations(res, "c")
    assert it[5] == (58_160 * US, 69_280 * US, 1, 0, 16)
    assert it[6:] == [(69_280 * US, 80_400 * US, 1, 0, 16), (80_400 * US, 91_400 * US, 1, 0, 16),
                      (91_400 * US, 102_400 * US, 1, 0, 16)]
    assert words_ns(res, "c", 0) == BOTH + [69_280 * US]
    assert words_ns(res, "c", 1) == BOTH + [80_400 * US, 91_400 * US, 102_400 * US]
    assert res.requests["n_preemptions"].tolist() == [0, 1]
    assert len(res.reads.query("request_id == 1")) == 1  # never read again
    freezes = res.freezes  # B's 22.24 ms across its preemption, to its first word back
    assert freezes["cause"].astype(str).tolist() == ["preempted"] and freezes["gap_s"].round(9).tolist() == [0.02224]
    assert freezes["iteration"].tolist() == [6] and res.requests["n_freezes"].tolist() == [0, 1]


def test_a_request_preempted_past_max_preemptions_is_dropped_and_late(tmp_path):
    res = run_rows(tmp_path, ROWS, [dict(PAGED, max_preemptions=0)], cost=COST)
    assert words_ns(res, "c", 1) == BOTH  # its words so far keep their times
    r = res.requests.set_index("request_id")
    assert r["dropped"].tolist() == [False, True] and r["on_time"].tolist() == [True, False]
    assert np.isnan(r.loc[1, "finished_at_s"])
    s = res.summary.set_index("arrangement").loc["c"]
    assert (s["n_dropped"], s["n_unfinished"], s["n_preemptions"], s["on_time_pct"]) == (1, 0, 1, 50.0)
    assert iterations(res, "c")[-1][1] == 69_160 * US  # the run ends with A's last word


def test_paged_columns_are_absent_without_e9(tmp_path):
    res = run_rows(tmp_path, ROWS, [{"name": "c", "kind": "colocated", "gpus": 1, "kv_capacity_tokens": 100}],
                   cost=COST)
    assert "n_preemptions" not in res.requests and "n_dropped" not in res.summary


# -- random runs: KV never over capacity, every measured request finishes or is dropped ----------
rows = st.lists(st.tuples(st.integers(0, 8), st.integers(1, 60), st.integers(1, 30)), min_size=1, max_size=10).map(
    lambda rs: sorted(((t * 0.005, p, w) for t, p, w in rs), key=lambda r: r[0]))


@st.composite
def paged(draw, requests):
    if draw(st.booleans()):
        a = {"kind": "colocated", "gpus": draw(st.integers(1, 2))}
    else:
        a = {"kind": "disaggregated", "reading_gpus": draw(st.integers(1, 2)), "writing_gpus": draw(st.integers(1, 2))}
        if draw(st.booleans()):
            a["local_prompt_max_tokens"] = draw(st.integers(1, 40))
    return draw_paging(draw, requests, a)


def draw_paging(draw, requests, a: dict) -> dict:
    """E9's keys on arrangement `a` (a capacity that fits the largest request), with E4's chunk and E8's seats drawn too."""
    block = draw(st.sampled_from((1, 2, 4, 16)))
    need = max(block * (-(-(p + w - 1) // block) + 1) for _, p, w in requests)
    a.update(kv_policy="paged", kv_block_tokens=block, kv_capacity_tokens=need + draw(st.sampled_from((0, 3, 20))))
    if draw(st.booleans()):
        a.update(preemption="swap", swap_ms_per_token=draw(st.sampled_from((0.0, 0.01))))
    if draw(st.booleans()):
        a["max_preemptions"] = draw(st.integers(0, 3))
    if draw(st.booleans()):
        a["chunk_tokens"] = draw(st.integers(1, 40))
    if draw(st.integers(0, 2)) == 0:
        a["max_batch_replies"] = draw(st.integers(1, 3))
    return a


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(data=st.data(), trace_rows=rows)
def test_random_paged_runs_keep_memory_within_capacity_and_every_request_ends(tmp_path, data, trace_rows):
    arrangements = [{"name": f"a{i}", **data.draw(paged(trace_rows))} for i in range(2)]
    res = run_rows(tmp_path, trace_rows, arrangements, cost=COST, slo={"freeze_ms": 15})
    r = res.requests
    summary = res.summary.set_index("arrangement")
    assert (r["finished_at_s"].notna() ^ r["dropped"]).all()  # no livelock: each finished or dropped, not both
    for a in arrangements:
        rec = res.records[a["name"]]
        assert (rec.iterations["kv_used_tokens"] <= a["kv_capacity_tokens"]).all()
        assert (rec.kv_peak_tokens <= a["kv_capacity_tokens"]).all() and not rec.kv_held_at_stop.any()
        assert (rec.iterations["kv_used_tokens"] % a["kv_block_tokens"] == 0).all()
        mine = r[r["arrangement"] == a["name"]]
        assert int(mine["n_preemptions"].sum()) == len(rec.preemptions["at_ns"])
        assert (mine["n_preemptions"][mine["dropped"]] == a.get("max_preemptions", 8) + 1).all()
        w = res.words(a["name"])
        counts = w.groupby("request_id").size()
        done = mine[mine["finished_at_s"].notna()]
        assert (counts.loc[done["request_id"]].to_numpy() == done["n_reply_words"].to_numpy()).all()
        assert (np.diff(w["at_s"].to_numpy())[np.diff(w["request_id"].to_numpy()) == 0] > 0).all()
        # freezes (`preempted` among them) add up, and match the word times of the finished replies
        w = w[w["request_id"].isin(done["request_id"])]
        same = w.request_id.to_numpy()[1:] == w.request_id.to_numpy()[:-1]
        n_gaps_over = int(((np.diff(w.at_s.to_numpy()) > 0.015 + 1e-9) & same).sum())
        frozen = res.freezes.query(f"arrangement == '{a['name']}'")["n_replies_frozen"].sum()
        assert frozen == summary.loc[a["name"], "n_freezes"] == n_gaps_over == done["n_freezes"].sum()


# -- bad input: one line, exit 2, nothing written ----------------------------------------------------
SYNTHETIC = {"rate_per_s": 5, "measure_s": 1, "prompt_mix": [{"share": 1, "tokens": [100, 800]}],
             "reply_words": [5, 40]}


def test_bad_paged_settings_get_one_line_and_exit_2(tmp_path):
    paged_kv = {"kv_policy": "paged", "kv_capacity_tokens": 2000}
    cases = [
        ({**paged_kv, "kv_block_tokens": 0}, "arrangements[0].kv_block_tokens: got 0, expected a whole number"),
        ({**paged_kv, "swap_ms_per_token": 0.1},
         "arrangements[0].swap_ms_per_token: got 0.1 with preemption: recompute, expected it only with preemption: swap"),
        ({**paged_kv, "preemption": "swap"}, "arrangements[0].swap_ms_per_token: missing with preemption: swap"),
        ({"kv_policy": "paged"}, "arrangements[0].kv_policy: got 'paged' without kv_capacity_tokens"),
        ({"kv_block_tokens": 8, "kv_capacity_tokens": 2000},
         "arrangements[0].kv_block_tokens: got 8 without kv_policy: paged"),
        ({**paged_kv, "kv_capacity_tokens": 848},  # 800 + 40 - 1 tokens: 53 blocks of 16, plus one
         "arrangements[0].kv_capacity_tokens: got 848, but the workload can draw a request reserving prompt 800 + "
         "reply 40: 864 tokens in KV blocks"),
        ({**paged_kv, "max_preemptions": -1}, "arrangements[0].max_preemptions: got -1, expected a whole number"),
    ]
    split = {"kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 1, **paged_kv,
             "roles": {"schedule": [{"from_s": 0.5, "reading_gpus": 1}]}}
    cases.append((split, "arrangements[0].kv_policy: got 'paged' with roles that change (E12), expected static roles: "
                         "no rule fixes where a preempted reply goes when its GPU changes side (docs/rules.md#e9i)"))
    for extra, expected in cases:
        path = tmp_path / "s.yaml"
        path.write_text(scenario_text("bad", SYNTHETIC, arrangements=[{"name": "a", "kind": "colocated", "gpus": 1,
                                                                        **extra} if "kind" not in extra else
                                                                       {"name": "a", **extra}]))
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            code = main([str(path), "--out", str(tmp_path / "out"), "--no-plots"])
        assert code == 2 and err.getvalue().count("\n") == 1 and expected in err.getvalue(), err.getvalue()
        assert not (tmp_path / "out").exists()
    path.write_text(scenario_text("bad", SYNTHETIC, arrangements=[{"name": "a", "kind": "colocated", "gpus": 1,
                                                                    **paged_kv}], prefix_cache_tokens=4096))
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        assert main([str(path), "--out", str(tmp_path / "out"), "--no-plots"]) == 2
    assert err.getvalue().count("\n") == 1 and ("arrangements[0].kv_policy: got 'paged' with prefix_cache_tokens (E13), "
                                                "expected one or the other: no rule fixes what a recompute's re-read "
                                                "finds in a prefix cache (docs/rules.md#e9i)" in err.getvalue()), err.getvalue()
    path.write_text(scenario_text("ok", SYNTHETIC, arrangements=[{"name": "a", "kind": "colocated", "gpus": 1,
                                                                   **paged_kv, "kv_capacity_tokens": 864}]))
    with contextlib.redirect_stdout(io.StringIO()):
        assert main([str(path), "--out", str(tmp_path / "ok"), "--no-plots"]) == 0
