"""E7, attention cost (`per_attention_pair_ms`): hand-timed micro-scenarios in exact ns, the
cost formula on random runs, and bad input.

Costs unless a test says otherwise: an iteration is 10 ms + 1 ms per reply written + 0.01 ms per
prompt token read (10 us); a ship is 0.001 ms (1 us) per prompt token; an attention pair 1 ns.
"""

from __future__ import annotations

import pytest
from helpers import run_rows

MS = 1_000_000  # ns
COST = {"iteration_ms": 10, "per_reply_ms": 1, "per_prompt_token_ms": 0.01, "kv_ship_ms_per_token": 0.001,
        "per_attention_pair_ms": 0.000001}


def words_ns(result, arrangement, request_id) -> list[int]:
    w = result.words(arrangement, [request_id])
    return [round(t * 1e9) for t in w["at_s"]]


def durations_ns(result, arrangement) -> list[int]:
    it = result.iterations.query(f"arrangement == '{arrangement}'")
    return [round(x * 1e9) for x in (it["ended_at_s"] - it["started_at_s"]).round(9)]


def test_a_4000_token_prompt_read_whole_and_in_512_token_chunks(tmp_path):
    res = run_rows(tmp_path, [(0.0, 4000, 2)], [
        {"name": "whole", "kind": "colocated", "gpus": 1},
        {"name": "chunked", "kind": "colocated", "gpus": 1, "chunk_tokens": 512},
    ], cost=COST)
    # whole: 10 ms + 4,000 x 10 us + 4,000 x 4,001 / 2 = 8,002,000 pairs of 1 ns
    assert words_ns(res, "whole", 0) == [58_002_000, 58_002_000 + 11 * MS]
    # chunk k (k = 0..6) reads 512 tokens after 512k: 512 x 512k + 512 x 513 / 2 pairs
    # = 262,144k + 131,328; the last reads 416 after 3,584: 1,490,944 + 86,736 = 1,577,680 pairs
    chunks = [10 * MS + 5_120_000 + 262_144 * k + 131_328 for k in range(7)] + [10 * MS + 4_160_000 + 1_577_680]
    assert durations_ns(res, "chunked") == chunks + [11 * MS]
    # the same 8,002,000 pairs in all, spread over 8 iterations that each pay 10 ms
    assert sum(chunks) == 128_002_000 == 58_002_000 + 7 * 10 * MS
    assert words_ns(res, "chunked", 0) == [128_002_000, 139_002_000]


def test_each_prompt_an_iteration_reads_pays_for_its_own_earlier_tokens(tmp_path):
    # chunk 1: A's 300 and B's first 212 tokens: 300 x 301 / 2 + 212 x 213 / 2 = 45,150 + 22,578 pairs;
    # chunk 2 (writing A's word 2): B's last 188 after its 212: 188 x 212 + 188 x 189 / 2 = 39,856 + 17,766
    res = run_rows(tmp_path, [(0.0, 300, 2), (0.0, 400, 2)],
                   [{"name": "chunked", "kind": "colocated", "gpus": 1, "chunk_tokens": 512}], cost=COST)
    it0 = 10 * MS + 5_120_000 + 45_150 + 22_578
    it1 = 10 * MS + 1 * MS + 1_880_000 + 39_856 + 17_766
    assert words_ns(res, "chunked", 0) == [it0, it0 + it1]
    assert words_ns(res, "chunked", 1) == [it0 + it1, it0 + it1 + 11 * MS]


def test_attention_adds_to_rereading_before_the_one_rounding(tmp_path):
    # 0.5 ns a pair and 0.5 ns a re-read token, 1 ms iterations, nothing else: a 3-token prompt in
    # chunks of 2 pays 3 pairs (1.5 ns) then 1 x 2 + 1 = 3 pairs and 2 re-read tokens (2.5 ns):
    # 1,000,001.5 -> 1,000,002 and 1,000,002.5 -> 1,000,003 (halves up, once per iteration)
    cost = {"iteration_ms": 1, "per_reply_ms": 0, "per_prompt_token_ms": 0, "per_attention_pair_ms": 0.0000005,
            "per_reread_token_ms": 0.0000005}
    res = run_rows(tmp_path, [(0.0, 3, 1)], [{"name": "c", "kind": "colocated", "gpus": 1, "chunk_tokens": 2}],
                   cost=cost)
    assert durations_ns(res, "c") == [1_000_002, 1_000_003]


def test_a_split_pays_attention_where_prompts_are_read_with_that_sides_figure(tmp_path):
    split = {"name": "split", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 1,
             "reading_cost": {"per_attention_pair_ms": 0.000002}, "writing_cost": {"per_attention_pair_ms": 0.001},
             "local_prompt_max_tokens": 10}
    res = run_rows(tmp_path, [(0.0, 100, 3), (0.0, 10, 2)], [split], cost=COST)
    # request 1 (10 tokens) is read on the writing GPU (E6): 10 + 0.1 ms + 55 pairs x 1 us
    local = 10 * MS + 100_000 + 55_000
    assert words_ns(res, "split", 1) == [local, local + 11 * MS]
    # request 0 on the reading GPU: 10 + 1 ms + 5,050 pairs x 2 ns; ship 0.1 ms; words pay no pairs
    read = 10 * MS + 1 * MS + 10_100
    joined = read + 100_000
    # the writing GPU writes request 1's word 2 until local + 11 ms; request 0 joins the next iteration
    assert local < joined < local + 11 * MS
    assert words_ns(res, "split", 0) == [read, local + 22 * MS, local + 33 * MS]


@pytest.mark.parametrize("where", ["cost", "arrangement"])
def test_a_negative_attention_cost_is_refused_in_one_line(tmp_path, where):
    import contextlib
    import io

    from helpers import write_scenario

    from disagg_simpy.cli import main

    arrangement = {"name": "c", "kind": "colocated", "gpus": 1}
    cost = dict(COST)
    if where == "cost":
        cost["per_attention_pair_ms"] = -1
        expected = "cost.per_attention_pair_ms: got -1, expected a number of ms >= 0"
    else:
        arrangement["cost"] = {"per_attention_pair_ms": -1}
        expected = "arrangements[0].cost.per_attention_pair_ms: got -1, expected a number of ms >= 0"
    path = write_scenario(tmp_path, [(0.0, 10, 1)], [arrangement], cost=cost)
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main([str(path), "--out", str(tmp_path / "out"), "--no-plots"])
    assert code == 2 and err.getvalue().count("\n") == 1 and expected in err.getvalue(), err.getvalue()
    assert not (tmp_path / "out").exists()
