"""E14, unsaturated reading (`prompt_iteration_ms`, `free_prompt_tokens`): hand-timed
micro-scenarios in exact ns, and bad input.

Costs unless a test says otherwise: an iteration is 10 ms + 1 ms per reply written + 0.01 ms per
prompt token read (10 us); an iteration reading prompt tokens pays 5 ms once more and nothing per
token for its first 100; a ship is 0.001 ms (1 us) per prompt token.
"""

from __future__ import annotations

import pytest
from helpers import run_rows
from test_attention_cost import durations_ns, words_ns

from disagg_simpy.cli import main

MS = 1_000_000  # ns
COST = {"iteration_ms": 10, "per_reply_ms": 1, "per_prompt_token_ms": 0.01, "kv_ship_ms_per_token": 0.001,
        "prompt_iteration_ms": 5, "free_prompt_tokens": 100}


def test_a_4000_token_prompt_read_whole_and_in_512_token_chunks(tmp_path):
    res = run_rows(tmp_path, [(0.0, 4000, 2)], [
        {"name": "whole", "kind": "colocated", "gpus": 1},
        {"name": "chunked", "kind": "colocated", "gpus": 1, "chunk_tokens": 512},
    ], cost=COST)
    # whole: 10 + 5 ms + (4,000 - 100) x 10 us = 54 ms; word 2 writes only: 10 + 1 ms, no 5 ms
    assert words_ns(res, "whole", 0) == [54 * MS, 65 * MS]
    # each of the 8 chunks pays the 5 ms and has its own 100 free tokens: 7 x (15 + 4.12 ms) + (15 + 3.16 ms)
    chunks = [19_120_000] * 7 + [18_160_000]
    assert durations_ns(res, "chunked") == chunks + [11 * MS]
    assert words_ns(res, "chunked", 0) == [152 * MS, 163 * MS]


def test_prompts_under_the_free_tokens_cost_the_same_and_replies_do_not_use_them_up(tmp_path):
    # two prompts of 30 and 60 tokens arrive together: one iteration reads both, 90 <= 100 tokens:
    # 10 + 5 ms; then both write word 2 in one iteration (10 + 2 ms). A third prompt of 150 tokens
    # at 20 ms is read beside their word 3: 10 + 2 + 5 ms + 50 x 10 us (the replies use up none of the 100)
    res = run_rows(tmp_path, [(0.0, 30, 4), (0.0, 60, 4), (0.02, 150, 2)],
                   [{"name": "one", "kind": "colocated", "gpus": 1}], cost=COST)
    assert durations_ns(res, "one")[:3] == [15 * MS, 12 * MS, 17_500_000]
    assert words_ns(res, "one", 2)[0] == 15 * MS + 12 * MS + 17_500_000


def test_e14_adds_to_the_other_terms_before_the_one_rounding(tmp_path):
    # 1 ms iterations, 0.5 ns a token beyond the first, 0.5 ns once for reading: a 2-token prompt
    # pays 0.5 + 0.5 = 1 ns (1,000,001; rounding each half up apart would give 1,000,002); a
    # 3-token prompt 0.5 + 1 = 1.5 ns -> 1,000,002 (halves up, once)
    cost = {"iteration_ms": 1, "per_reply_ms": 0, "per_prompt_token_ms": 0.0000005, "prompt_iteration_ms": 0.0000005,
            "free_prompt_tokens": 1}
    res = run_rows(tmp_path, [(0.0, 2, 1), (0.01, 3, 1)], [{"name": "c", "kind": "colocated", "gpus": 1}], cost=cost)
    assert durations_ns(res, "c") == [1_000_001, 1_000_002]


def test_a_split_pays_e14_where_prompts_are_read_with_that_sides_figures(tmp_path):
    split = {"name": "split", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 1,
             "reading_cost": {"prompt_iteration_ms": 2, "free_prompt_tokens": 40},
             "writing_cost": {"prompt_iteration_ms": 0, "free_prompt_tokens": 0}, "local_prompt_max_tokens": 10}
    res = run_rows(tmp_path, [(0.0, 100, 2), (0.0, 10, 2)], [split], cost=COST)
    # request 1 (10 tokens) read on the writing GPU (E6) with that side's figures: 10 + 0.1 ms
    assert words_ns(res, "split", 1) == [10_100_000, 21_100_000]
    # request 0 on the reading GPU: 10 + 2 ms + (100 - 40) x 10 us = 12.6 ms, then a 0.1 ms ship
    assert words_ns(res, "split", 0)[0] == 12_600_000


@pytest.mark.parametrize("key, value, needle", [
    ("free_prompt_tokens", -1, "free_prompt_tokens: got -1, expected a whole number of tokens from 0"),
    ("free_prompt_tokens", 1.5, "free_prompt_tokens: got 1.5, expected a whole number of tokens from 0"),
    ("prompt_iteration_ms", -2, "prompt_iteration_ms: got -2, expected a number of ms >= 0"),
])
def test_bad_e14_values_are_one_line_exit_2(tmp_path, capsys, key, value, needle):
    from helpers import scenario_text

    path = tmp_path / "s.yaml"
    path.write_text(scenario_text(cost={**COST, key: value}))
    assert main([str(path), "--out", str(tmp_path / "out"), "--no-plots"]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()
