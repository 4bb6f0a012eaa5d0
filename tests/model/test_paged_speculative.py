"""E16 (speculative decoding) with E9 (paged KV), readings R103-R107 (docs/rules.md): the simulator
against the reference (tests/reference_paged.py with the base reference's E16) on generated
scenarios, to the ns: iterations (times, replies written, tokens read, KV held), reads, every
request's times, GPUs, preemptions and drops, and the word times (a preempted reply's stretches each
restart its plan, R104-R105) and their verdicts."""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from helpers import assert_scenario_refused, scenario_text, write_scenario
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference_model import reference_records
from test_reference import compare, paged_scenario

from disagg_simpy import load_scenario
from disagg_simpy.api import run_arrangement
from disagg_simpy.cli import main as cli_main
from disagg_simpy.errors import InputError
from disagg_simpy.results.metrics import LimitsNs, reply_gaps
from disagg_simpy.workload.speculative import uniforms
from disagg_simpy.workload.stream import make_requests


@st.composite
def paged_speculative_scenario(draw):
    """`paged_scenario` (E9 with tight memory, recompute or swap, drops; E1-E8 drawn) with E16 on: room for the
    largest request's blocks with its k draft tokens (R106), E8's budgets of a reply and its drafts (R84), and
    no E3 (refused with both, R107); E10 on colocated arrangements sometimes."""
    rows, arrangements, cost, workload, slo = draw(paged_scenario())
    spec = {"tokens": draw(st.sampled_from((1, 2, 4))), "acceptance": draw(st.sampled_from((0.0, 0.5, 0.7, 0.95)))}
    k = spec["tokens"]
    cost.pop("per_context_token_ms", None)
    for a in arrangements:
        for key in ("cost", "reading_cost", "writing_cost"):
            if key in a:
                a[key] = {c: v for c, v in a[key].items() if c != "per_context_token_ms"}
        block = a["kv_block_tokens"]
        a["kv_capacity_tokens"] = max(block * (-(-(p + w - 1 + k) // block) + 1) for _, p, w in rows) + draw(
            st.sampled_from((0, 0, 1, 4, 16)))
        for key in ("max_batch_tokens", "writing_max_batch_tokens"):
            if key in a and a[key] < k + 2:
                a[key] = k + 2 + draw(st.sampled_from((0, 1, 2)))
        if a["kind"] == "colocated" and draw(st.integers(0, 3)) == 0:
            a["mixed_iterations"] = False
    if draw(st.booleans()):
        spec["per_draft_token_ms"] = draw(st.sampled_from((0.0, 0.25)))
    return rows, arrangements, cost, workload, slo, spec, draw(st.integers(0, 3))


def pooled_from_words(rec, gaps):
    """The pooled gaps of the finished measured replies from their word times (`word_times`): what
    `reply_gaps` counts from the stretches (a word sharing an iteration with the one before: a gap of 0)."""
    done = gaps.rows[gaps.finished]
    if rec.preemptions is not None:
        done = done[rec.requests["dropped_at_ns"][done] < 0]
    ids, word, at = rec.word_times(done)
    pooled = {}
    for rid in done.tolist():
        mine = ids == rid
        for d in np.diff(at[mine][np.argsort(word[mine])]).tolist():
            pooled[d] = pooled.get(d, 0) + 1
    return pooled


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=paged_speculative_scenario())
def test_simulator_equals_reference_with_paged_kv_and_speculative_decoding(tmp_path, case):
    rows, arrangements, cost, workload, slo, spec, seed = case
    path = write_scenario(tmp_path, rows, arrangements, cost=cost, workload=workload, slo=slo, speculative=spec,
                          seed=seed)
    compare(path)  # (word times and their verdicts too)
    scenario = load_scenario(path)
    stream = make_requests(scenario)
    for a in scenario.arrangements:  # the pooled gaps (the page's and the summary's gap curve) follow the words
        rec = run_arrangement(scenario, a, stream)
        gaps = reply_gaps(rec, LimitsNs.from_slo(scenario.slo))
        if not rec.capped:
            got = dict(zip(gaps.gap_values_ns.tolist(), gaps.gap_counts.tolist()))
            assert got == pooled_from_words(rec, gaps), a.name


HAND = {"iteration_ms": 10, "per_reply_ms": 1, "per_prompt_token_ms": 0.01}
SPEC = {"tokens": 2, "acceptance": 0.7, "per_draft_token_ms": 0.5}
MS = 1_000_000


def test_hand_timed_a_preemption_mid_speculation(tmp_path):
    """One GPU of 24 tokens in blocks of 4 (6 blocks), recompute; A and B: 8-token prompts, 8 and 6
    words, at 0; seed 1, k = 2, a = 0.7. Draws u(key, w) for words 3..8: A 0.216, 0.680, 0.497, 0.880,
    0.538, 0.409; B 0.900, 0.390, 0.956, 0.865.

    - it 0 (0 ms): reads both prompts (2 blocks each, plus one free: admitted), 10 + 16 x 0.01 = 10.16 ms.
    - it 1 (10.16): A and B, each word 2 first: prompt + 2 - 1 + k = 11 tokens, 3 blocks: each takes one
      (R103), 6 held (24 tokens). 10 + 2 x (1 + 2 x 0.01 + 2 x 0.5) = 14.04 ms, to 24.20. A writes words 2,
      3, 4 (two accepted, the most); B word 2 (its word 3's 0.900 is a rejection).
    - it 2 (24.20): A's word 5 first: 8 + 5 - 1 + 2 = 14 tokens, 4 blocks; none free: B, the most recent,
      is preempted (recompute, 2 words: its 3 blocks freed), A takes one. B's own plan had words 3 and 4
      in one iteration (0.390 < 0.7): it is preempted mid-speculation. The iteration admits nothing
      (E9d): 12.02 ms, to 36.22; A word 5 (0.880: a rejection).
    - it 3 (36.22): A's word 6, 15 tokens, 4 blocks (held); B's re-read (8 + 2 = 10 tokens, 3 blocks plus
      one) does not fit the 2 free. A words 6, 7, 8 (0.538, 0.409): its last; 12.02 ms, to 48.24; 4 freed.
    - it 4 (48.24): B's re-read, 10 + 10 x 0.01 = 10.1 ms, to 58.34: its word 3 (R50, R105).
    - its 5-7: B's plan restarts at word 4 (R105): word 4 begins an iteration (13 tokens: a 4th block),
      then word 5 (0.956) and word 6 (0.865) each their own: 70.36, 82.38, 94.40 ms.
    B's words fall in 5 writing iterations and a re-read, where unbroken they fall in 4 (2 | 3 4 | 5 | 6)."""
    path = write_scenario(tmp_path, [("0", 8, 8), ("0", 8, 6)],
                          [{"name": "c", "kind": "colocated", "gpus": 1, "kv_policy": "paged", "kv_block_tokens": 4,
                            "kv_capacity_tokens": 24}], cost=HAND, speculative=SPEC, seed=1)
    scenario = load_scenario(path)
    stream = make_requests(scenario)
    keys = stream.draft_keys
    assert np.round(uniforms(np.repeat(keys[:1], 6), np.arange(3, 9)), 3).tolist() == [
        0.216, 0.68, 0.497, 0.88, 0.538, 0.409]
    assert np.round(uniforms(np.repeat(keys[1:2], 4), np.arange(3, 7)), 3).tolist() == [0.9, 0.39, 0.956, 0.865]
    rec = run_arrangement(scenario, scenario.arrangements[0], stream)
    ends = [10_160_000, 24_200_000, 36_220_000, 48_240_000, 58_340_000, 70_360_000, 82_380_000, 94_400_000]
    assert rec.iterations["ended_at_ns"].tolist() == ends
    assert rec.iterations["n_replies_written"].tolist() == [0, 2, 1, 1, 0, 1, 1, 1]
    assert rec.iterations["n_prompt_tokens_read"].tolist() == [16, 0, 0, 0, 10, 0, 0, 0]
    assert rec.iterations["kv_used_tokens"].tolist() == [16, 24, 16, 16, 12, 16, 16, 16]
    assert rec.requests["finished_at_ns"].tolist() == [48_240_000, 94_400_000]
    assert rec.requests["n_preemptions"].tolist() == [0, 1]
    assert rec.preemptions["at_ns"].tolist() == [24_200_000]
    ref = reference_records(scenario, scenario.arrangements[0], stream)  # the reference's words, by the same rules
    assert ref["words"][0] == [10_160_000] + [24_200_000] * 3 + [36_220_000] + [48_240_000] * 3
    assert ref["words"][1] == [10_160_000, 24_200_000, 58_340_000, 70_360_000, 82_380_000, 94_400_000]
    assert ref["iterations"]["ended_at_ns"] == ends
    ids, word, at = rec.word_times(np.arange(2))  # B's plan restarted at its word 4 after the re-read (R105)
    assert [(int(i), int(w), int(t)) for i, w, t in zip(ids, word, at)] == [
        (0, w, t) for w, t in enumerate(ref["words"][0], 1)] + [(1, w, t) for w, t in enumerate(ref["words"][1], 1)]
    assert rec.stretches.n.tolist() == [3, 1, 3]  # A: 3 iterations; B: 1 before it was preempted, 3 after its re-read
    gaps = reply_gaps(rec, LimitsNs.from_slo(scenario.slo))  # A's 2 words that share an iteration twice: 4 gaps of 0
    assert dict(zip(gaps.gap_values_ns.tolist(), gaps.gap_counts.tolist())) == {
        0: 4, 12_020_000: 5, 14_040_000: 2, 34_140_000: 1}  # (A 14.04 0 0 12.02 12.02 0 0; B 14.04 34.14 12.02 x 3)
    assert gaps.max_gap_ns.tolist() == [14_040_000, 34_140_000]


def test_e9h_counts_the_draft_tokens(tmp_path, capsys):
    """R106: a written reply's blocks hold its k draft tokens, so E9h's check counts them: prompts up to
    800 tokens, replies up to 40 words, blocks of 16. Without E16, 800 + 40 - 1 = 839 tokens, 53 blocks
    plus one (864 tokens, tests/model/test_paged_kv.py); with k = 16, 855 tokens, 54 blocks plus one (880);
    with k = 9, 848 tokens, 53 blocks plus one (864: it runs)."""
    synthetic = {"rate_per_s": 5, "measure_s": 1, "prompt_mix": [{"share": 1, "tokens": [100, 800]}],
                 "reply_words": [5, 40]}
    arrangement = [{"name": "a", "kind": "colocated", "gpus": 1, "kv_policy": "paged", "kv_capacity_tokens": 864}]
    spec = yaml.safe_load(scenario_text("bad", synthetic, arrangements=arrangement,
                                        speculative={"tokens": 16, "acceptance": 0.7}))
    assert_scenario_refused(tmp_path, capsys, spec, "arrangements[0].kv_capacity_tokens: got 864, but the workload "
                            "can draw a request reserving prompt 800 + reply 40 + 16 draft tokens: 880 tokens in KV blocks")
    (tmp_path / "t").mkdir()
    trace = write_scenario(tmp_path / "t", [("0", 800, 40)], arrangement, speculative={"tokens": 16, "acceptance": 0.7})
    with pytest.raises(InputError) as err:  # a trace's row (the workload stage's check)
        make_requests(load_scenario(trace))
    assert "\n" not in str(err.value) and ("arrangements[0].kv_capacity_tokens: got 864, but row 1 of micro.csv reserves "
                                           "prompt 800 + reply 40 + 16 draft tokens: 880 tokens") in str(err.value)
    spec["speculative"]["tokens"] = 9
    (tmp_path / "ok.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    assert cli_main([str(tmp_path / "ok.yaml"), "--out", str(tmp_path / "ok"), "--no-plots"]) == 0
