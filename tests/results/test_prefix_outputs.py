"""E13's outputs: `cached_tokens` per request, the summary's prefix columns (absent with caching
off), the timeline's cached reads, and `--set KEY=VALUE` for the commands that run one setting."""

from __future__ import annotations

import json

import numpy as np
import pytest
from matplotlib.figure import Figure

from disagg_simpy import load_scenario, run
from disagg_simpy.errors import InputError
from disagg_simpy.plots import draw_reply_lanes, sample_replies
from disagg_simpy.plots.data import frames_of
from disagg_simpy.results.columns import PREFIX_COLUMNS, SUMMARY_COLUMNS
from disagg_simpy.scenario.schema import DROP
from disagg_simpy.sweep.grid import apply_sets

#: 40 requests, 1 s apart: every other one resends the first 1,536 tokens of request 0's prompt
ROWS = [{"timestamp": 1000 * i, "input_length": 1600 + 10 * i, "output_length": 5,
         "hash_ids": ([0, 1, 2] if i % 2 == 0 else [100 + 4 * i, 101 + 4 * i, 102 + 4 * i]) + [1000 + i]}
        for i in range(40)]


@pytest.fixture(scope="module")
def scenario_path(tmp_path_factory):
    folder = tmp_path_factory.mktemp("prefix")
    (folder / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    path = folder / "s.yaml"
    path.write_text(json.dumps({"name": "p", "workload": {"trace": "t.jsonl", "format": "mooncake", "measure_s": 40},
                                "prefix_cache_tokens": 100_000, "cost": {"per_cached_token_ms": 0.01},
                                "arrangements": [{"name": "same", "kind": "colocated", "gpus": 2},
                                                 {"name": "split", "kind": "disaggregated", "reading_gpus": 1,
                                                  "writing_gpus": 1}]}))
    return path


def test_requests_and_summary_report_what_was_cached(scenario_path):
    res = run(load_scenario(scenario_path))
    assert list(res.summary.columns) == [*SUMMARY_COLUMNS, *PREFIX_COLUMNS]
    for name in ("same", "split"):
        r = res.requests[res.requests.arrangement == name]
        s = res.summary.set_index("arrangement").loc[name]
        assert int(r["cached_tokens"].sum()) == s["cached_tokens"] > 0
        assert s["prefix_hit_pct"] == pytest.approx(100 * r["cached_tokens"].sum() / r["n_prompt_tokens"].sum())
        assert s["reading_saved_s"] == pytest.approx(s["cached_tokens"] * (0.05 - 0.01) / 1e3)
    # one reading instance on the split: request 0 reads all; every other even one finds 1,536 tokens
    r = res.requests[res.requests.arrangement == "split"]
    assert r["cached_tokens"].tolist() == [1536 if i % 2 == 0 and i else 0 for i in range(40)]
    assert res.summary.set_index("arrangement").loc["split", "prefix_hit_pct_by_instance"].startswith("0:")


def test_with_caching_off_no_prefix_column_appears(scenario_path):
    res = run(load_scenario(scenario_path).with_overrides(prefix_cache_tokens=DROP, **{"cost.per_cached_token_ms": DROP}))
    assert list(res.summary.columns) == list(SUMMARY_COLUMNS)
    assert "cached_tokens" not in res.requests.columns


def test_the_timeline_marks_each_sampled_read_that_found_a_prefix(scenario_path):
    res = run(load_scenario(scenario_path))
    requests, _, _ = frames_of(res, "split")
    window = (0.0, 40.0)
    sample = sample_replies(requests, window, 40)
    ax = Figure().subplots()
    draw_reply_lanes(ax, sample, res.words("split", sample["request_id"]), res.scenario.slo, window)
    found = [c for c in ax.collections if c.get_gid() == "cached-reads"]
    assert len(found) == 1 and len(found[0].get_segments()) == int((sample["cached_tokens"] > 0).sum()) > 0
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert sum("cached" in t for t in labels) == int((sample["cached_tokens"] > 0).sum())


def test_set_key_value_sets_one_value_and_refuses_more(scenario_path):
    s = load_scenario(scenario_path)
    assert apply_sets(s, ["router=prefix_aware", "prefix_block_tokens=256"]).router == "prefix_aware"
    with pytest.raises(InputError, match="got 2 values, expected one"):
        apply_sets(s, ["router=round_robin,power_of_two"])
    with pytest.raises(InputError, match="unknown key 'routr'"):
        apply_sets(s, ["routr=round_robin"])
    assert np.isclose(apply_sets(s, []).cost.per_cached_token_ms, 0.01)


def test_explain_says_how_much_of_a_prompt_was_cached(scenario_path):
    from disagg_simpy.results.story import story_facts, story_text

    res = run(load_scenario(scenario_path))
    told = " ".join(story_text(story_facts(res, "split", 2)).split())  # (wrapped at 100 characters)
    assert "read in 0.032 s (its first 1,536 tokens were cached, not read)" in told
    assert "cached" not in story_text(story_facts(res, "split", 1))


def test_plan_bounds_stand_aside_when_prompts_are_cached_or_sessions_resend_them():
    """plan prunes arrangements by a bound that counts every prompt token as read (and the mix's
    prompt lengths): with a cache a prompt reads less, with sessions more, so no bound is used."""
    from helpers import DEFAULT

    from disagg_simpy.sweep.plan_bounds import budgets

    s = load_scenario(DEFAULT)
    assert budgets(s, s.arrangements[0]) is not None
    cached = s.with_overrides(prefix_cache_tokens=500_000)
    assert budgets(cached, cached.arrangements[0]) is None
    sessions = s.with_overrides(**{"workload.sessions": {"turns": [2, 3], "think_s": [5, 30]}})
    assert budgets(sessions, sessions.arrangements[0]) is None


@pytest.mark.parametrize("free, saved_ms", [
    # request 2 reads 84 tokens after its 1,536 cached: had it read them, 16 would have been free;
    # requests 4 .. 38 read 104 .. 444 tokens, beyond the 100 free ones: all 1,536 pay
    (100, 0.05 * (1520 + 18 * 1536) - 0.01 * 19 * 1536),
    # every prompt is at most 1,980 tokens: cached or read, each would have been free
    (2000, -0.01 * 19 * 1536),
    # 1,700 free: prompt n = 1,600 + 10 i pays for its last n - 1,700 tokens, all cached (i >= 12)
    (1700, 0.05 * sum(10 * i - 100 for i in range(12, 40, 2)) - 0.01 * 19 * 1536),
])
def test_reading_saved_counts_only_the_cached_tokens_beyond_the_free_ones(scenario_path, free, saved_ms):
    """E13 with E14 (R72), hand-computed: one prompt per reading iteration on the split (1 s apart);
    every even request from 2 on finds request 0's 1,536 tokens cached and reads the rest."""
    res = run(load_scenario(scenario_path).with_overrides(**{"cost.free_prompt_tokens": free}))
    s = res.summary.set_index("arrangement").loc["split"]
    assert s["cached_tokens"] == 19 * 1536
    assert s["reading_saved_s"] == pytest.approx(saved_ms / 1e3, rel=1e-12)
    rec = res.records["split"]  # (each reading iteration read one prompt: the case is the one computed)
    assert (rec.iterations["n_prompt_tokens_read"][rec.iterations["gpu"] == 0] ==
            rec.requests["n_prompt_tokens"] - rec.cached_tokens).all()


def test_reading_saved_shares_an_iteration_among_its_prompts_by_their_cached_tokens():
    """Two prompts begin in one iteration (row 5) that reads P = 60 tokens with 100 free: of their
    512 + 256 cached tokens, 40 would have been free, 728 paid; the measured one (512) takes 2/3 of
    the saving. A third prompt (row 9, P = 300) saves all of its 1,024; it is not measured."""
    from disagg_simpy.results.breakdown import saved_ms

    tokens_read = np.zeros(10, np.int64)
    tokens_read[5], tokens_read[9] = 60, 300
    got = saved_ms(np.array([5, 5, 9]), np.array([512, 256, 1024]), np.array([True, False, False]), tokens_read,
                   100, 0.05, 0.01)
    assert got == pytest.approx(0.05 * 728 * 512 / 768 - 0.01 * 512, rel=1e-12)
    assert saved_ms(np.array([5]), np.array([512]), np.array([True]), tokens_read, 0, 0.05, 0.01) == \
        pytest.approx(512 * 0.04, rel=1e-12)  # (no free tokens: R44's figure)
