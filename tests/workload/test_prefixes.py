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
