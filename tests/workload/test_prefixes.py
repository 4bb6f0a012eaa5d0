"""E13's synthetic traffic: drawn prefixes (share, Zipf popularity, block ids shared within a
group) and multi-turn sessions (a turn's prompt holds the earlier turns; open-loop think times)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from disagg_simpy import load_scenario
from disagg_simpy.errors import InputError
from disagg_simpy.workload.stream import make_requests

WORKLOAD = {"rate_per_s": 20, "measure_s": 60, "reply_words": [10, 40],
            "prompt_mix": [{"share": 0.5, "tokens": [3000, 4000]}, {"share": 0.5, "tokens": [2100, 2500]}]}


def stream(tmp_path, seed=1, **workload):
    path = tmp_path / "s.yaml"
    path.write_text(json.dumps({"name": "s", "seed": seed, "workload": {**WORKLOAD, **workload},
                                "prefix_cache_tokens": 10**6, "prefix_block_tokens": 256,
                                "arrangements": [{"name": "c", "kind": "colocated", "gpus": 1}]}))
    return make_requests(load_scenario(path))


def test_prefixes_are_shared_by_a_share_of_requests_most_by_the_first_groups(tmp_path):
    s = stream(tmp_path, prefixes={"share": 0.6, "groups": 5, "tokens": [1000, 2000], "zipf": 1.0})
    firsts = [tuple(s.blocks.of(i)[:3].tolist()) for i in range(len(s))]  # 3 x 256 < 1,000: within any prefix
    counts = {}
    for f in firsts:
        counts[f] = counts.get(f, 0) + 1
    shared = sorted((c for c in counts.values() if c > 1), reverse=True)
    assert len(shared) == 5  # the five groups; every other beginning is a request's own
    n = len(s)
    assert abs(sum(shared) / n - 0.6) < 4 * np.sqrt(0.24 / n)
    weights = 1 / np.arange(1, 6)
    want = weights[0] / weights.sum() * 0.6 * n  # group 0, Zipf exponent 1
    assert abs(shared[0] - want) < 4 * np.sqrt(want)


def test_a_groups_blocks_are_its_whole_blocks_only(tmp_path):
    """Two requests of one group share exactly floor(T / 256) leading blocks (T its prefix)."""
    s = stream(tmp_path, prefixes={"share": 1.0, "groups": 1, "tokens": [1000, 1000]})
    a, b = s.blocks.of(0), s.blocks.of(1)
    assert a[:3].tolist() == b[:3].tolist() and a[3] != b[3]  # 1,000 // 256 = 3 blocks; the 4th straddles


def test_the_same_seed_draws_the_same_prefixes_and_another_seed_others(tmp_path):
    kw = {"prefixes": {"share": 0.5, "groups": 50, "tokens": [300, 2000]}}
    one, again, other = stream(tmp_path, 1, **kw), stream(tmp_path, 1, **kw), stream(tmp_path, 2, **kw)
    assert one.blocks.ids.tolist() == again.blocks.ids.tolist()
    assert one.blocks.ids.tolist() != other.blocks.ids.tolist()


def test_a_turn_holds_the_earlier_turns_and_arrives_a_think_time_later(tmp_path):
    s = stream(tmp_path, rate_per_s=0.05, measure_s=200, sessions={"turns": [3, 3], "think_s": [5, 30]})
    at, prompt, reply = s.arrived_at_ns / 1e9, s.n_prompt_tokens, s.n_reply_words
    # sessions 20 s apart on average, turns 5-30 s apart: follow request 0's session by its blocks
    session = [0]
    for i in range(1, len(s)):
        parent = session[-1]
        keep = prompt[parent] // 256
        if len(session) < 3 and s.blocks.of(i)[:keep].tolist() == s.blocks.of(parent)[:keep].tolist():
            session.append(i)
    assert len(session) == 3
    for before, after in zip(session, session[1:]):
        assert 5 <= at[after] - at[before] <= 30
        new = prompt[after] - prompt[before] - reply[before]
        assert 2100 <= new <= 4000  # a prompt of the mix


def test_sessions_make_the_cap_checks_see_the_longest_turn(tmp_path):
    """A turn's prompt can reach turns x the largest new prompt + (turns - 1) x the largest reply:
    the E4f check refuses a KV capacity that the longest turn would not fit."""
    path = tmp_path / "s.yaml"
    path.write_text(json.dumps({"name": "s", "workload": {**WORKLOAD, "sessions": {"turns": [1, 3], "think_s": [1, 2]}},
                                "arrangements": [{"name": "c", "kind": "colocated", "gpus": 1,
                                                  "kv_capacity_tokens": 10_000}]}))
    with pytest.raises(InputError, match="reserving prompt 12,080 \\+ reply 40 = 12,120 tokens"):
        load_scenario(path)


def test_sessions_whose_prompts_hold_too_many_blocks_are_refused_before_any_is_built(tmp_path):
    """Issue 37 item 7: 200-turn sessions with a prefix cache on a 3 s window drew 567,099 turns
    holding 102,780,293 prompt blocks (each turn resends the earlier ones: the square of the
    turns); building their ids took 4.3 GB and 3 minutes, the model's copies past 6 GB. The
    count is known from the prompt lengths alone, so the refusal comes first (under a second)."""
    path = tmp_path / "s.yaml"
    path.write_text(json.dumps({"name": "s", "workload": {
        "rate_per_s": 5, "measure_s": 3, "prompt_mix": [{"share": 1, "tokens": [200, 1200]}], "reply_words": [100, 400],
        "sessions": {"turns": [200, 200], "think_s": [0, 1]}}, "prefix_cache_tokens": 5_000_000,
        "arrangements": [{"name": "c", "kind": "colocated", "gpus": 4}]}))
    with pytest.raises(InputError) as err:
        make_requests(load_scenario(path))
    assert str(err.value) == (
        f"{path}: workload.sessions: got 567,099 turns up to the cap at 603 s whose prompts (each resending the "
        "earlier turns) hold 102,780,293 prompt blocks of 512 tokens in all, above the limit of 20,000,000 (about 50 "
        "bytes each); expected fewer turns (sessions.turns up to 200), a lower rate, a lower max_sim_s or a larger "
        "prefix_block_tokens")


def test_the_block_limit_counts_each_cache_block_and_holds_at_its_edge(tmp_path, monkeypatch):
    """The same count as the ids built: at the limit a stream is drawn, one below it refused;
    a trace's 512-token hash ids count 512 / prefix_block_tokens cache blocks each."""
    s = stream(tmp_path, sessions={"turns": [2, 3], "think_s": [5, 30]})
    n = len(s.blocks.ids)
    monkeypatch.setattr("disagg_simpy.scenario.limits.MAX_PROMPT_BLOCKS", n)
    assert len(stream(tmp_path, sessions={"turns": [2, 3], "think_s": [5, 30]}).blocks.ids) == n
    monkeypatch.setattr("disagg_simpy.scenario.limits.MAX_PROMPT_BLOCKS", n - 1)
    with pytest.raises(InputError, match=f"hold {n:,} prompt blocks of 256 tokens in all, above the limit of {n - 1:,}"):
        stream(tmp_path, sessions={"turns": [2, 3], "think_s": [5, 30]})
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [0, 1]}\n')
    path = tmp_path / "m.yaml"
    path.write_text(json.dumps({"name": "m", "workload": {"trace": "t.jsonl", "format": "mooncake"},
                                "prefix_cache_tokens": 4096, "prefix_block_tokens": 64,
                                "arrangements": [{"name": "c", "kind": "colocated", "gpus": 1}]}))
    monkeypatch.setattr("disagg_simpy.scenario.limits.MAX_PROMPT_BLOCKS", 15)  # 2 ids x 8 = 16 cache blocks
    with pytest.raises(InputError, match="prefix_cache_tokens: got requests whose prompts hold 16 prompt blocks of 64"):
        make_requests(load_scenario(path))


def test_sessions_count_every_turn_in_the_requests_a_scenario_expects(tmp_path):
    """5,000 sessions/s of 1,000 turns drew 3 billion turns before any check (out of memory):
    the requests limit counts turns."""
    path = tmp_path / "s.yaml"
    path.write_text(json.dumps({"name": "s", "workload": {**WORKLOAD, "rate_per_s": 5000, "measure_s": 3,
                                                          "sessions": {"turns": [1000, 1000], "think_s": [0, 1]}},
                                "arrangements": [{"name": "c", "kind": "colocated", "gpus": 1}]}))
    with pytest.raises(InputError, match="expects, up to the cap at 603 s, 3,015,000,000 requests, above the limit of "
                                         "5,000,000 \\(every turn of each session counted\\)"):
        load_scenario(path)
