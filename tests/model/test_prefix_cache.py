"""E13 (prefix caching) by hand, in exact ns: a hit, a partial hit, evictions (least recently
used, a prompt's tail before its head), a pinned block; and on one instance with an unbounded
cache, the hit tokens of a Mooncake trace equal a direct count from its hash_ids."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from helpers import SPLIT_1_1, write_scenario

from disagg_simpy import load_scenario
from disagg_simpy.api import run_arrangement
from disagg_simpy.model.engine import Engine
from disagg_simpy.workload.catalog import CATALOG, ENV_FOLDER
from disagg_simpy.workload.prefixes import BlockIds
from disagg_simpy.workload.stream import make_requests

MS = 1_000_000
#: 10 ms an iteration, 1 ms a prompt token read, 0.1 ms a cached token; blocks of 4 tokens
COST = {"iteration_ms": 10, "per_reply_ms": 0, "per_prompt_token_ms": 1, "per_cached_token_ms": 0.1}


def records(tmp_path, rows, blocks, cache_tokens, arrangements=None, block=4, cost=COST, top=None, **extra):
    """Run a tiny trace with prefix caching on, each request's block ids given; the records.
    `top`: more scenario keys (router, ...); `extra`: keys of the one colocated GPU."""
    path = write_scenario(tmp_path, rows, arrangements or [{"name": "one", "kind": "colocated", "gpus": 1, **extra}],
                          cost=cost, prefix_cache_tokens=cache_tokens, prefix_block_tokens=block, **(top or {}))
    scenario = load_scenario(path)
    starts = np.concatenate(([0], np.cumsum([len(b) for b in blocks]))).astype(np.int64)
    stream = replace(make_requests(scenario), blocks=BlockIds(np.array(sum(blocks, []), dtype=np.int64), starts, block))
    return run_arrangement(scenario, scenario.arrangements[0], stream)


def test_hit_and_partial_hit(tmp_path):
    """A reads 8 tokens whole (18 ms); B, the same 8 tokens, finds its first block cached (its
    last block is always read: 4 cached, 4 read, 10 + 4 + 0.4 = 14.4 ms); C, 13 tokens of which
    the first two blocks are A's, finds 8 cached and reads 5 (10 + 5 + 0.8 = 15.8 ms)."""
    rec = records(tmp_path, [("0", 8, 1), ("0.1", 8, 1), ("0.2", 13, 1)], [[1, 2], [1, 2], [1, 2, 3, 4]], 1000)
    r = rec.requests
    assert rec.cached_tokens.tolist() == [0, 4, 8]
    assert r["first_word_at_ns"].tolist() == [18 * MS, 114_400_000, 215_800_000]
    assert rec.iterations["n_prompt_tokens_read"].tolist() == [8, 4, 5]


def test_a_split_ships_the_whole_kv(tmp_path):
    """On a split the hit shortens the read, not the ship: 8 tokens ship (0.01 ms each)."""
    rec = records(tmp_path, [("0", 8, 2), ("0.1", 8, 2)], [[1, 2], [1, 2]], 1000, arrangements=SPLIT_1_1)
    r = rec.requests
    assert rec.cached_tokens.tolist() == [0, 4]
    assert r["first_word_at_ns"][1] == 114_400_000
    assert r["joined_at_ns"][1] - r["ship_started_at_ns"][1] == 80_000


@pytest.mark.parametrize(("cache_blocks", "cached", "e_word_ms"), [(2, 0, 218.0), (3, 4, 214.4)])
def test_eviction(tmp_path, cache_blocks, cached, e_word_ms):
    """A caches [1, 2], D then [5, 6]. With room for 2 blocks both of A's leave (least recently
    used first): E ([1, 2]) misses. With room for 3 only A's tail (block 2) leaves, since a read's
    tail is less recent than its head: E finds block 1."""
    rec = records(tmp_path, [("0", 8, 1), ("0.1", 8, 1), ("0.2", 8, 1)], [[1, 2], [5, 6], [1, 2]], 4 * cache_blocks)
    assert rec.cached_tokens.tolist() == [0, 0, cached]
    assert rec.requests["first_word_at_ns"][2] == round(e_word_ms * MS)


@pytest.mark.parametrize("chunk", [6])
def test_a_pinned_block_is_not_evicted(tmp_path, chunk):
    """Room for 3 blocks; chunks of 6. A caches [1, 2] (ends at 28 ms), B [5] (64 ms): least
    recent first, 2, 1, 5. At 100 ms Y ([7], 4 tokens) and X (12 tokens, [1, 2, 9]: 8 cached,
    pinned) start one iteration (4 + 2 tokens read, 8 cached: 16.8 ms). Y's end inserts 7: 2
    and 1 are pinned by X's read, so 5 leaves, and Z ([5, 11], arrived at 110 ms) finds nothing
    when it starts beside X's last chunk at 116.8 ms (2 + 4 tokens: 16 ms); X's first word at
    132.8 ms, Z's after its last 4 tokens at 146.8 ms. Unpinned, block 2 would have left and Z
    would have found block 5."""
    rows = [("0", 8, 1), ("0.05", 4, 1), ("0.1", 4, 1), ("0.1", 12, 1), ("0.11", 8, 1)]
    blocks = [[1, 2], [5], [7], [1, 2, 9], [5, 11]]
    rec = records(tmp_path, rows, blocks, 12, chunk_tokens=chunk)
    assert rec.cached_tokens.tolist() == [0, 0, 0, 8, 0]
    assert rec.requests["first_word_at_ns"].tolist() == [28 * MS, 64 * MS, 116_800_000, 132_800_000, 146_800_000]


@pytest.mark.real_traces
def test_unbounded_cache_hits_equal_a_direct_count_of_hash_ids(tmp_path):
    """The Mooncake sample's first 300 rows, one every 20 s (each read ends before the next
    arrives), on one instance with a cache larger than the trace: request k's hit is 512 x
    the number of leading blocks of its first (n - 1) // 512 that an earlier request's full
    blocks (its first n // 512) hold, counted here straight from the file."""
    source = Path(os.environ[ENV_FOLDER]) / CATALOG["mooncake-conv"].file
    rows = [json.loads(line) for line in source.read_text().splitlines()[:300]]
    trace = tmp_path / "seq.jsonl"
    trace.write_text("".join(json.dumps({**r, "timestamp": 20_000 * i}) + "\n" for i, r in enumerate(rows)))
    seen: set[int] = set()
    want = []
    for r in rows:
        k = 0
        for h in r["hash_ids"][: (r["input_length"] - 1) // 512]:
            if h not in seen:
                break
            k += 1
        want.append(512 * k)
        seen.update(r["hash_ids"][: r["input_length"] // 512])
    path = tmp_path / "seq.yaml"
    path.write_text(json.dumps({"name": "seq", "workload": {"trace": "seq.jsonl", "format": "mooncake",
                                                            "measure_s": 6000},
                                "prefix_cache_tokens": 10**12, "arrangements": [
                                    {"name": "one", "kind": "colocated", "gpus": 1}]}))
    scenario = load_scenario(path)
    rec = run_arrangement(scenario, scenario.arrangements[0], make_requests(scenario))
    assert rec.n_unfinished == 0 and len(rec.cached_tokens) == 300
    assert sum(want) > 100_000  # the trace shares prefixes: the count is not trivially 0
    assert rec.cached_tokens.tolist() == want


TWO = [{"name": "two", "kind": "colocated", "gpus": 2}]


@pytest.mark.parametrize(("router", "cap", "c_on", "c_cached"),
                         [("least_loaded", None, 1, 0), ("prefix_aware", None, 0, 8), ("prefix_aware", 10, 1, 0)])
def test_prefix_aware_goes_where_the_prefix_is_within_the_load_cap(tmp_path, router, cap, c_on, c_cached):
    """A ([1, 2]) is read on GPU 0. At 100 ms, B1 (40 tokens) goes to GPU 1 (never assigned),
    B2 (60) to GPU 0 (D2), then C (12 tokens, [1, 2, 3]): least_loaded sends it to GPU 1 (40
    queued < 60); prefix_aware to GPU 0, which holds 8 of its tokens, unless the cap (10 tokens
    above the least queued, 40) leaves GPU 0 out."""
    top = {"router": router} | ({"router_load_cap_tokens": cap} if cap else {})
    rows = [("0", 8, 1), ("0.1", 40, 1), ("0.1", 60, 1), ("0.1", 12, 1)]
    rec = records(tmp_path, rows, [[1, 2], [5] * 10, [6] * 15, [1, 2, 3]], 1000, arrangements=TWO, top=top)
    assert rec.requests["reading_gpu"].tolist() == [0, 1, 0, c_on]
    assert rec.cached_tokens[3] == c_cached


def test_round_robin_ignores_load(tmp_path):
    """Four prompts at one instant: least_loaded sends the two short ones after a long one to the
    GPU with less queued (0, 1, 0, 0); round_robin takes turns (0, 1, 0, 1)."""
    rows = [("0", 100, 1), ("0", 1000, 1), ("0", 10, 1), ("0", 10, 1)]
    blocks = [[i] * (-(-p // 4)) for i, (_, p, _) in enumerate(rows)]
    for router, want in (("least_loaded", [0, 1, 0, 0]), ("round_robin", [0, 1, 0, 1])):
        rec = records(tmp_path, rows, blocks, 1000, arrangements=TWO, top={"router": router})
        assert rec.requests["reading_gpu"].tolist() == want, router


def test_power_of_two_on_two_instances_is_least_loaded(tmp_path):
    """With two instances the only pair is both: power_of_two chooses as least_loaded does."""
    rng = np.random.default_rng(3)
    rows = [(f"{t:.3f}", int(p), 2) for t, p in zip(np.sort(rng.uniform(0, 2, 40)), rng.integers(4, 400, 40))]
    blocks = [[i] * (-(-p // 4)) for i, (_, p, _) in enumerate(rows)]
    got = {router: records(tmp_path, rows, blocks, 1000, arrangements=TWO, top={"router": router}).requests[
        "reading_gpu"].tolist() for router in ("least_loaded", "power_of_two")}
    assert got["least_loaded"] == got["power_of_two"]


def test_requests_hold_their_ids_as_numpy_until_their_read_ends(tmp_path):
    """Issue 37 item 7: a session's turn resends the earlier turns, so its block ids grow
    quadratically in turns. The engine builds no Python ids up front: a request holds a numpy
    view of the workload's ids (8 bytes an id) from its arrival, sub-blocks expanded with numpy,
    and drops them once its read ends (model/prefix_cache.py's `CacheBlockIds`)."""
    path = write_scenario(tmp_path, [("0", 9, 3), ("0.001", 9, 3), ("0.002", 400, 2)],
                          [{"name": "one", "kind": "colocated", "gpus": 1}], cost=COST,
                          prefix_cache_tokens=64, prefix_block_tokens=2, max_sim_s=0.2)
    scenario = load_scenario(path)
    starts = np.array([0, 3, 6, 106], np.int64)  # blocks of 4 tokens: 2 sub-blocks of 2 each
    ids = np.array([7, 8, 9, 7, 8, 5, *range(100, 200)], np.int64)
    stream = replace(make_requests(scenario), blocks=BlockIds(ids, starts, 4))
    engine = Engine(scenario, scenario.arrangements[0], stream)
    first = engine.blocks.of(1)  # type: ignore[union-attr]
    assert isinstance(first, np.ndarray) and first.tolist() == [14, 15, 16, 17, 10, 11]
    engine.run()
    read = [r for r in engine.arrived if r.first_word_at_ns >= 0]
    waiting = [r for r in engine.arrived if r.first_word_at_ns < 0]
    assert [r.request_id for r in read] == [0]  # (the cap stops the run during B's and C's 419 ms read)
    assert all(len(r.blocks) == 0 for r in read)
    assert [(type(r.blocks), len(r.blocks)) for r in waiting] == [(np.ndarray, 6), (np.ndarray, 200)]
