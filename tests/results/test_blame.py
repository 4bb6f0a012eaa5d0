"""Why late: freeze blame on hand-built scenarios whose cause is known by construction,
the binding-limit shares, and the time breakdown, exact to the nanosecond.

Default costs: an iteration is 12 ms + 0.4 ms per reply written + 0.05 ms per prompt token read;
a ship 0.01 ms per prompt token. First rows arrive at 0, so trace times are the model's times.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from helpers import NS_PER_S, ROOT, SPLIT_1_1, freezes_by_reply, golden_trace_csv, run_rows, scenario_text

from disagg_simpy import load_scenario, run
from disagg_simpy.results.blame import FREEZE_COLUMNS
from disagg_simpy.results.breakdown import LATE_COLUMNS, TIME_PARTS, time_breakdown_ns

MS_NS = 1_000_000


def freezes_of(result, arrangement):
    return freezes_by_reply(result, arrangement)


def test_one_long_prompt_freezes_each_of_three_replies_once_and_is_blamed(tmp_path):
    # three short prompts read together at 0 (27 ms), then three replies in progress (13.2 ms an
    # iteration); a 6,000-token prompt arrives at 0.1 s: its reading iteration takes
    # 12 + 3 x 0.4 + 6000 x 0.05 = 313.2 ms, one freeze for each reply, nothing else long
    res = run_rows(tmp_path, [(0.0, 100, 40), (0.0, 100, 40), (0.0, 100, 40), (0.1, 6000, 5)])
    assert list(res.freezes.columns) == list(FREEZE_COLUMNS)
    assert len(res.freezes) == 1 and res.freezes.n_replies_frozen.tolist() == [3]  # one iteration froze three replies
    f = freezes_of(res, "same")
    assert f.request_id.tolist() == [0, 1, 2]
    assert (f.cause == "prompt_read").all() and (f.writing_gpu == 0).all() and (f.seed == 1).all()
    assert f.blamed_request_ids.astype(str).tolist() == ["3"] * 3
    assert f.blamed_prompt_tokens.astype(str).tolist() == ["6000"] * 3
    assert (f.gap_s == 313_200_000 / NS_PER_S).all()
    # the gap starts at the word before it: the end of an iteration of the GPU
    ends = res.iterations.ended_at_s
    assert (f.gap_started_at_s.isin(ends)).all() and f.gap_started_at_s.nunique() == 1
    r = res.requests.set_index("request_id")
    assert r.n_freezes.tolist() == [1, 1, 1, 0]
    s = res.summary.iloc[0]
    assert s.n_freezes == 3 and s.freezes_by_long_prompt_pct == 100.0  # 6,000 > 4,760 tokens
    assert res.long_prompt_tokens == {"same": 4760}  # 12 + 0.05 x 4,760 = 250 ms: not over; 4,761 is


def test_prompts_read_in_a_freezing_iteration_are_blamed_most_tokens_first(tmp_path):
    # a reply in progress; prompts of 3,000, 4,000 and 4,000 tokens arrive at one instant and are
    # read whole in one iteration of 12 + 0.4 + 550 ms: blamed by tokens, ties by id
    res = run_rows(tmp_path, [(0.0, 100, 60), (0.1, 3000, 2), (0.1, 4000, 2), (0.1, 4000, 2)])
    f = freezes_of(res, "same")
    assert f.request_id.tolist() == [0]
    assert f.blamed_request_ids.astype(str).tolist() == ["2;3;1"]
    assert f.blamed_prompt_tokens.astype(str).tolist() == ["4000;4000;3000"]
    assert f.gap_s.iloc[0] == 562_400_000 / NS_PER_S
    # no prompt over 4,760 tokens: the freeze is the pile, not one long prompt
    assert res.summary.freezes_by_long_prompt_pct.iloc[0] == 0.0


def test_a_split_reply_whose_only_long_gap_is_the_ship_blames_the_ship(tmp_path):
    # 5,000 tokens ship in 500 ms (0.1 ms a token); the idle writing GPU takes the reply at once
    res = run_rows(tmp_path, [(0.0, 5000, 10)], SPLIT_1_1, cost={"kv_ship_ms_per_token": 0.1})
    f = freezes_of(res, "split")
    assert len(f) == 1 and f.cause.iloc[0] == "kv_ship"
    assert f.blamed_request_ids.astype(str).iloc[0] == "0" and f.blamed_prompt_tokens.astype(str).iloc[0] == "5000"
    assert f.gap_s.iloc[0] == (500 + 12.4) * MS_NS / NS_PER_S
    assert f.writing_gpu.iloc[0] == 1
    rec, gaps = res.records["split"], res.gaps["split"]
    parts = time_breakdown_ns(rec, gaps, res.limits)
    expected = {"queued": 0, "reading": 262 * MS_NS, "shipping": 500 * MS_NS, "joining": 0,
                "writing": 9 * 12_400_000, "frozen": 12_400_000}
    assert {k: int(v[0]) for k, v in parts.items()} == expected


def test_a_split_reply_that_waits_for_a_busy_writing_gpu_blames_the_join(tmp_path):
    # 20 ms iterations, freezes over 30 ms. A: read by 25 ms, lands at 26 ms, written every
    # 20.4 ms from 26 ms. B (1 token) arrives at 30 ms: word 1 at 50.05 ms, lands at 50.06 ms
    # inside A's iteration 46.4-66.8 ms, joins the next one, word 2 at 87.6 ms: a 37.55 ms gap
    # that is nearly all waiting to join
    res = run_rows(tmp_path, [(0.0, 100, 8), (0.03, 1, 3)], SPLIT_1_1,
                   cost={"iteration_ms": 20}, slo={"freeze_ms": 30})
    f = freezes_of(res, "split")
    assert f.request_id.tolist() == [1] and f.cause.tolist() == ["join_wait"]
    assert f.blamed_request_ids.isna().all() and f.blamed_prompt_tokens.isna().all()
    assert f.gap_started_at_s.iloc[0] == 50_050_000 / NS_PER_S
    assert f.gap_s.iloc[0] == (87_600_000 - 50_050_000) / NS_PER_S
    r = res.requests.set_index("request_id").loc[1]
    assert r.shipping_s == 10_000 / NS_PER_S and r.joining_s == (66_800_000 - 50_060_000) / NS_PER_S


def test_an_iteration_long_from_its_replies_alone_blames_nobody(tmp_path):
    # 300 ms per reply: every writing iteration of the one reply is a freeze, reading nothing
    res = run_rows(tmp_path, [(0.0, 10, 3)], cost={"per_reply_ms": 300})
    f = freezes_of(res, "same")
    assert f.cause.tolist() == ["many_replies"] * 2 and f.blamed_request_ids.isna().all()
    assert (f.gap_s == 0.312).all()


#: the default traffic through arrangements with the optional rules E1-E6 on, with a
#: tighter freeze limit so that every cause occurs
EXTENSIONS = {
    "cost": {"per_reread_token_ms": 0.0005, "per_context_token_ms": 0.00005},
    "slo": {"freeze_ms": 45},
    "arrangements": [
        {"name": "chunked-kv", "kind": "colocated", "gpus": 4, "chunk_tokens": 512, "kv_capacity_tokens": 200_000},
        {"name": "split-link", "kind": "disaggregated", "reading_gpus": 2, "writing_gpus": 2, "kv_link": "shared",
         "kv_capacity_tokens": 150_000, "writing_cost": {"iteration_ms": 10}},
        {"name": "split-local", "kind": "disaggregated", "reading_gpus": 2, "writing_gpus": 2,
         "local_prompt_max_tokens": 600},
    ],
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Short default runs (two seeds), the golden trace (chunked splits, one-word replies, same
    instants), an overloaded run the safety cap cuts short, and the extensions' options on."""
    short = load_scenario(ROOT / "scenarios" / "default.yaml").with_overrides(**{"workload.measure_s": 6})
    folder = tmp_path_factory.mktemp("golden")
    (folder / "trace.csv").write_text(golden_trace_csv())
    from test_golden import TRACE_SCENARIO

    (folder / "golden.yaml").write_text(scenario_text("golden-trace", **TRACE_SCENARIO))
    capped = short.with_overrides(**{"max_sim_s": 8.0, "workload.rate_per_s": 30})
    spec = short.model_dump(mode="json", exclude_none=True)
    spec.pop("max_sim_s", None)
    for key, value in EXTENSIONS.items():
        spec[key] = {**spec[key], **value} if isinstance(value, dict) else value
    (folder / "extensions.json").write_text(json.dumps(spec))
    extensions = run(load_scenario(folder / "extensions.json"))
    return [run(short, seed=1), run(short, seed=2), run(load_scenario(folder / "golden.yaml")), extensions, run(capped)]


def test_the_time_parts_add_up_to_arrival_to_last_word_exactly(runs):
    n_checked = 0
    for res in runs:
        for name, rec in res.records.items():
            gaps = res.gaps[name]
            parts = time_breakdown_ns(rec, gaps, res.limits)
            total = sum(parts[p] for p in TIME_PARTS)
            r = {k: v[gaps.rows] for k, v in rec.requests.items()}
            done = gaps.finished
            assert (total[done] == r["finished_at_ns"][done] - r["arrived_at_ns"][done]).all(), name
            assert all((parts[p][done] >= 0).all() for p in parts)
            assert (parts["frozen"][done] <= parts["writing"][done]).all()
            one = done & (r["n_reply_words"] == 1)
            assert all((parts[p][one] == 0).all() for p in ("shipping", "joining", "writing", "frozen"))
            if rec.kind == "colocated":
                assert (parts["shipping"][done] == 0).all() and (parts["joining"][done] == 0).all()
            assert (parts["frozen"][~done] == -1).all() and (parts["writing"][~done] == -1).all()
            n_checked += int(done.sum())
            # the frame holds the same numbers in seconds
            frame = res.requests[res.requests.arrangement == name]
            for p in (*TIME_PARTS, "frozen"):
                expect = np.where(parts[p] >= 0, parts[p] / NS_PER_S, np.nan)
                np.testing.assert_array_equal(frame[f"{p}_s"].to_numpy(), expect)
    assert n_checked > 3000
    assert any(res.capped for res in runs)
    causes = set(runs[3].freezes.cause.astype(str))
    assert causes == {"prompt_read", "kv_ship", "join_wait", "many_replies"}, causes


def test_freezes_and_frozen_time_match_the_word_times(runs):
    """Every gap over the limit in the words (built independently) is one freezes row, and
    frozen_s is the time in those gaps from the first writing iteration's start on."""
    for res in runs[:4]:
        limit = res.scenario.slo.freeze_ms / 1000
        for name in res.records:
            w = res.words(name)
            rid, at = w.request_id.to_numpy(), w.at_s.to_numpy()
            same = rid[1:] == rid[:-1]
            gap = (at[1:] - at[:-1])[same]
            over = gap > limit + 1e-9
            f = freezes_of(res, name)
            done = res.requests[(res.requests.arrangement == name) & res.requests.finished_at_s.notna()]
            keep = np.isin(rid[1:][same][over], done.request_id)
            assert f.request_id.tolist() == rid[1:][same][over][keep].tolist()
            np.testing.assert_allclose(f.gap_started_at_s, at[:-1][same][over][keep], rtol=0, atol=1e-12)
            np.testing.assert_allclose(f.gap_s, gap[over][keep], rtol=0, atol=1e-9)
            assert len(f) == int(done.n_freezes.sum()) == int(res.summary.set_index("arrangement").n_freezes[name])
            # frozen_s: each freeze's time after the start of the reply's first writing iteration
            wrote_at = (done.finished_at_s - done.writing_s).set_axis(done.request_id)
            starts = at[:-1][same][over][keep]
            ends = at[1:][same][over][keep]
            inside = ends - np.maximum(starts, wrote_at.loc[f.request_id].to_numpy())
            expect = pd.Series(inside).groupby(f.request_id.to_numpy()).sum()
            got = done.set_index("request_id").frozen_s
            expect = expect.reindex(got.index, fill_value=0.0)
            np.testing.assert_allclose(got.to_numpy(), expect.to_numpy(), rtol=0, atol=1e-8)
            assert (got > 0).sum() == len(f.request_id.unique())


def test_freezes_csv_has_one_row_per_freezing_iteration_with_the_replies_it_froze(runs):
    """A row on an iteration is that iteration of iterations.csv (its start and length), once; a
    row of a split reply's first gap is that reply's alone; the replies frozen add up to n_freezes."""
    for res in runs[:4]:
        f, it = res.freezes, res.iterations
        for name in res.records:
            mine = f[f.arrangement == name]
            on_it = mine[mine.cause.isin(["prompt_read", "many_replies"])]
            assert not on_it.duplicated(["gpu", "iteration"]).any()
            its = it[it.arrangement == name].set_index(["gpu", "iteration"])
            hit = its.loc[list(zip(on_it.gpu, on_it.iteration))]
            np.testing.assert_array_equal(hit.started_at_s.to_numpy(), on_it.gap_started_at_s.to_numpy())
            np.testing.assert_allclose(hit.ended_at_s.to_numpy() - hit.started_at_s.to_numpy(), on_it.gap_s, atol=1e-9)
            np.testing.assert_array_equal(hit.n_prompt_tokens_read.to_numpy() > 0, (on_it.cause == "prompt_read").to_numpy())
            assert (mine.loc[mine.cause.isin(["kv_ship", "join_wait"]), "n_replies_frozen"] == 1).all()
            assert (mine.n_replies_frozen >= 1).all()
            n = int(res.summary.set_index("arrangement").n_freezes[name])
            assert mine.n_replies_frozen.sum() == n == len(freezes_of(res, name))
    busy = runs[0].freezes
    assert busy.n_replies_frozen.max() > 1 and len(busy) < busy.n_replies_frozen.sum()


def test_the_limit_shares_add_up_to_the_late_share(runs):
    for res in runs:
        s = res.summary.set_index("arrangement")
        for name in res.records:
            g = res.gaps[name]
            n = len(g.rows)
            counts = [s.loc[name, c] * n / 100 for c in LATE_COLUMNS]
            assert all(abs(c - round(c)) < 1e-9 for c in counts)
            assert sum(round(c) for c in counts) == int((~g.on_time).sum())
            assert sum(s.loc[name, c] for c in LATE_COLUMNS) == pytest.approx(100 - s.loc[name, "on_time_pct"], abs=1e-9)
            flags = g.late_first_word.astype(int) + g.late_mean_gap.astype(int) + g.froze.astype(int)
            assert round(counts[0]) == int(((flags == 1) & g.late_first_word).sum())
            assert round(counts[3]) == int((flags > 1).sum())


def test_long_prompt_share_and_top_prompts_follow_from_freezes_csv(runs):
    from disagg_simpy.results.blame import top_prompts

    for res in runs[:4]:
        prompts = res.stream.n_prompt_tokens
        s = res.summary.set_index("arrangement")
        for name, rec in res.records.items():
            n_long = res.long_prompt_tokens[name]
            f = freezes_of(res, name)
            ids = f.blamed_request_ids.astype(object)
            lists = [[int(x) for x in v.split(";")] if isinstance(v, str) else [] for v in ids]
            n_over = sum(1 for ids_ in lists if ids_ and max(prompts[ids_]) > n_long)
            share = s.loc[name, "freezes_by_long_prompt_pct"]
            assert (100.0 * n_over / len(f) == share) if len(f) else np.isnan(share)
            firsts = pd.Series([x[0] for x in lists if x], dtype=np.int64).value_counts()
            expect = sorted(firsts.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
            got = top_prompts(res.blame[name], rec.requests["n_prompt_tokens"])
            assert [(i, k) for i, _, k in got] == [(int(i), int(k)) for i, k in expect]
            assert all(t == prompts[i] for i, t, _ in got)


def test_the_why_late_block_for_one_seed_and_for_several(runs):
    from disagg_simpy.results.why_late import why_late_text

    one = why_late_text(runs[:1])
    assert "freezes in same-gpu:" in one and "blamed most: request" in one and "mean of seeds" not in one
    lines = one.splitlines()
    row = next(line for line in lines if line.startswith("same-gpu "))
    s = runs[0].summary.set_index("arrangement").loc["same-gpu"]
    assert row.split()[1:] == [f"{v:.1f}" for v in (100 - s.on_time_pct, *(s[c] for c in LATE_COLUMNS))]
    assert max(map(len, lines)) <= 120
    two = why_late_text(runs[:2])
    assert "(mean of seeds)" in two and "per seed" in two and "blamed most" not in two
