"""E16 (speculative decoding): hand-timed cases (alone, with E8's token budget, with E10 and E3), fast-forward equal to the
one-by-one loop and to the reference, the draws' law and their independence from the arrangement, and the
scenario key's refusals (docs/rules.md#e16)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import SPLIT_1_1, write_scenario
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_fast_forward import same_as_one_by_one, steady_scenario
from test_reference import compare, speculative_scenario

from disagg_simpy import load_scenario
from disagg_simpy.api import run, run_arrangement
from disagg_simpy.errors import InputError
from disagg_simpy.scenario.counts import seed_matters
from disagg_simpy.workload.speculative import uniforms, writing_iterations
from disagg_simpy.workload.stream import make_requests, make_streams

HAND = {"iteration_ms": 10, "per_reply_ms": 1, "per_prompt_token_ms": 0.01}
SPEC = {"tokens": 2, "acceptance": 0.7, "per_draft_token_ms": 0.5}


def test_hand_timed(tmp_path):
    """One GPU, one request: a 100-token prompt, a 6-word reply, seed 1, k = 2, a = 0.7.

    The request's draws u(key, w) for words 3..6 are 0.216, 0.680, 0.497, 0.880. Reading: 10 +
    100 x 0.01 = 11 ms (word 1). Each writing iteration: 10 + 1 (the reply) + 2 x 0.01 (its 2 draft
    tokens verified, each read) + 2 x 0.5 (drafted) = 12.02 ms. Iteration 1 writes word 2, then 3
    (0.216 < 0.7) and 4 (0.680 < 0.7): 1 + k = 3 words, the most; iteration 2 writes word 5, not 6
    (0.880 >= 0.7); iteration 3 writes word 6. Word times 11, 23.02 (x3), 35.04, 47.06 ms; gaps
    12.02, 0, 0, 12.02, 12.02 ms, mean (47.06 - 11) / 5 = 7.212 ms."""
    key = make_streams(1)["speculative"].integers(2**64, size=1, dtype=np.uint64)
    assert np.round(uniforms(np.repeat(key, 4), np.arange(3, 7)), 3).tolist() == [0.216, 0.68, 0.497, 0.88]
    path = write_scenario(tmp_path, [("0", 100, 6)], [{"name": "c", "kind": "colocated", "gpus": 1}],
                          cost=HAND, speculative=SPEC, seed=1)
    result = run(load_scenario(path))
    rec = result.records["c"]
    ms = 1_000_000
    assert rec.iterations["ended_at_ns"].tolist() == [11 * ms, 23_020_000, 35_040_000, 47_060_000]
    assert rec.iterations["n_replies_written"].tolist() == [0, 1, 1, 1]
    ids, word, at = rec.word_times(np.array([0]))
    assert word.tolist() == [1, 2, 3, 4, 5, 6]
    assert at.tolist() == [11 * ms, 23_020_000, 23_020_000, 23_020_000, 35_040_000, 47_060_000]
    gaps = result.gaps["c"]
    assert gaps.max_gap_ns.tolist() == [12_020_000] and gaps.n_freezes.tolist() == [0]
    assert gaps.mean_gap_ns.tolist() == [(47_060_000 - 11 * ms) / 5]
    assert dict(zip(gaps.gap_values_ns.tolist(), gaps.gap_counts.tolist())) == {0: 2, 12_020_000: 3}
    # the same reply without E16: 5 iterations of 11 ms
    off = run(load_scenario(write_scenario(tmp_path, [("0", 100, 6)], [{"name": "c", "kind": "colocated", "gpus": 1}],
                                           cost=HAND, seed=1)))
    assert off.records["c"].requests["finished_at_ns"].tolist() == [(11 + 5 * 11) * ms]


def test_hand_timed_with_a_token_budget(tmp_path):
    """E8 with E16 (R84): each written reply takes 1 + k tokens of `max_batch_tokens`. One GPU, 7 tokens, k = 2,
    acceptance 0 (the k tokens count whatever is accepted: one word an iteration here, easy to time), HAND's costs:
    a reply written costs 1 + 2 x 0.01 + 2 x 0.5 = 2.02 ms. Seats: 7 // 3 = 2; room for prompts beside 2 replies:
    7 - 6 = 1 token, beside 1 reply: 4.

    A, B, C (2-token prompts, 4 words) at 0, D (3 tokens, 3 words) at 15 ms. Iteration 0 reads A, B, C whole
    (6 <= 7): 10.06 ms. Iterations 1-3 write A and B (C waits for a seat): 14.04 ms each, ends 24.10, 38.14,
    52.18; D waits from iteration 2 (3 tokens > the room of 1: whole prompts wait, E8b). A and B leave at 52.18;
    iteration 4 seats C, and D fits the room of 4: 10 + 2.02 + 0.03 = 12.05 ms, to 64.23; iterations 5, 6 write C
    and D: 14.04 ms each, to 78.27 and 92.31, where both end. Counting one token a reply (the reading before
    R84), C would be seated at once and D read at 24.10."""
    rows = [("0", 2, 4), ("0", 2, 4), ("0", 2, 4), ("0.015", 3, 3)]
    path = write_scenario(tmp_path, rows, [{"name": "c", "kind": "colocated", "gpus": 1, "max_batch_tokens": 7}],
                          cost=HAND, speculative={**SPEC, "acceptance": 0.0}, seed=1)
    rec = run(load_scenario(path)).records["c"]
    us = 1_000
    assert rec.iterations["ended_at_ns"].tolist() == [t * 10 * us for t in (1006, 2410, 3814, 5218, 6423, 7827, 9231)]
    assert rec.iterations["n_replies_written"].tolist() == [0, 2, 2, 2, 1, 2, 2]
    assert rec.iterations["n_prompt_tokens_read"].tolist() == [6, 0, 0, 0, 3, 0, 0]
    assert rec.requests["finished_at_ns"].tolist() == [52_180 * us, 52_180 * us, 92_310 * us, 92_310 * us]
    compare(path)


def test_hand_timed_with_prompt_only_iterations_and_context(tmp_path):
    """E3 with E10 and E16 (R86): a reply's context counts the words written before each of its writing
    iterations, which a prompt-only iteration between them does not change. One GPU, `mixed_iterations: false`,
    HAND's costs and k = 2, 0.5 ms a draft token, `per_context_token_ms` 0.01; request 0 as in `test_hand_timed`
    (100 tokens, 6 words, seed 1: its drafts of words 3, 4 accepted, 6 rejected), request 1 (50 tokens, 1 word) at
    20 ms. Reading request 0: 11 ms. Writing iteration 1 (words 2-4; context 100 + 1): 12.02 + 1.01 = 13.03 ms, to
    24.03. Request 1 waits, so iteration 2 reads it only: 10 + 0.5 = 10.5 ms, to 34.53. Writing iteration 2 (word
    5; context 100 + 4, the three words of the first): 12.02 + 1.04 = 13.06 ms, to 47.59; the last (word 6;
    context 105): 13.07 ms, to 60.66."""
    path = write_scenario(tmp_path, [("0", 100, 6), ("0.020", 50, 1)],
                          [{"name": "c", "kind": "colocated", "gpus": 1, "mixed_iterations": False}],
                          cost={**HAND, "per_context_token_ms": 0.01}, speculative=SPEC, seed=1)
    rec = run(load_scenario(path)).records["c"]
    us = 1_000
    assert rec.iterations["ended_at_ns"].tolist() == [t * 10 * us for t in (1100, 2403, 3453, 4759, 6066)]
    assert rec.iterations["n_replies_written"].tolist() == [0, 1, 0, 1, 1]
    assert rec.iterations["n_prompt_tokens_read"].tolist() == [100, 0, 50, 0, 0]
    _, word, at = rec.word_times(np.array([0]))
    assert at.tolist() == [t * 10 * us for t in (1100, 2403, 2403, 2403, 4759, 6066)]
    compare(path)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=steady_scenario(options=True), spec=st.fixed_dictionaries(
    {"tokens": st.sampled_from((1, 3, 5)), "acceptance": st.sampled_from((0.3, 0.8, 0.99))}))
def test_fast_forward_equals_one_by_one_and_the_reference(tmp_path, monkeypatch, case, spec):
    """A speculative iteration writes a different number of words from the next, but its batch and
    cost are the next's (only where each reply's last word falls depends on the draws, known when
    it is seated): a repeat of them leaves the one-by-one loop's records and the reference's."""
    rows, arrangements, cost, extra = case
    for a in arrangements:  # E8's budgets as drawn, each at least one reply, its k drafts and a prompt token (R84)
        for key in ("max_batch_tokens", "writing_max_batch_tokens"):
            if key in a:
                a[key] = max(a[key], spec["tokens"] + 2)
    path = write_scenario(tmp_path, rows, arrangements, cost=cost, speculative=spec, **extra)
    same_as_one_by_one(path, monkeypatch)
    compare(path)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=speculative_scenario())
def test_fast_forward_with_the_options_equals_one_by_one(tmp_path, monkeypatch, case):
    rows, arrangements, cost, workload, slo, spec, seed = case
    path = write_scenario(tmp_path, rows, arrangements, cost=cost, workload=workload, slo=slo, speculative=spec,
                          seed=seed)
    same_as_one_by_one(path, monkeypatch)


@pytest.mark.parametrize(("tokens", "acceptance"), [(1, 0.5), (4, 0.7), (8, 0.9), (3, 0.0)])
def test_accepted_drafts_follow_the_truncated_geometric_law(tokens, acceptance):
    """The iterations of 4,000 replies of 200 words that begin by word 100 (whether one begins by
    then does not depend on its own draws, and none reaches the reply's end): P(A = j) = a^j (1 - a)
    for j < k, a^k for j = k, within 4 standard errors."""
    n, words = 4_000, 200
    keys = np.random.default_rng(7).integers(2**64, size=n, dtype=np.uint64)
    counts, ordinals = writing_iterations(keys, np.full(n, words), tokens, acceptance)
    per_reply = ordinals.reshape(n, words - 1)
    sizes = np.concatenate([np.bincount(row)[:row[98] + 1] for row in per_reply])  # (row[98]: word 100's iteration)
    accepted = sizes - 1
    law = np.array([acceptance**j * (1 - acceptance) for j in range(tokens)] + [acceptance**tokens])
    seen = np.bincount(accepted, minlength=tokens + 1) / len(accepted)
    se = np.sqrt(law * (1 - law) / len(accepted))
    assert np.all(np.abs(seen - law) <= 4 * se + 1e-12), (seen, law)
    assert counts.tolist() == (per_reply[:, -1] + 1).tolist()


def test_words_of_a_request_are_the_same_in_every_arrangement(tmp_path):
    """The draws are the request's (its key and word numbers), so each reply's words fall into
    iterations the same way on one GPU, four GPUs or a split: the same count of distinct word times."""
    path = write_scenario(tmp_path, [(f"{i / 100:.2f}", 40 + 8 * i, 12 + 5 * i) for i in range(10)],
                          [{"name": "one", "kind": "colocated", "gpus": 1},
                           {"name": "four", "kind": "colocated", "gpus": 4, "chunk_tokens": 16},
                           {"name": "split", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 2}],
                          cost=HAND, speculative={"tokens": 3, "acceptance": 0.6})
    scenario = load_scenario(path)
    stream = make_requests(scenario)
    pattern = {}
    for a in scenario.arrangements:
        rec = run_arrangement(scenario, a, stream)
        ids, word, at = rec.word_times(np.arange(10))
        pattern[a.name] = [len(np.unique(at[ids == i])) - 1 for i in range(10)]  # writing iterations per reply
    assert pattern["one"] == pattern["four"] == pattern["split"]
    assert pattern["one"] == writing_iterations(stream.draft_keys, stream.n_reply_words, 3, 0.6)[0].tolist()
    assert sum(pattern["one"]) < sum(n - 1 for n in stream.n_reply_words.tolist())  # some accepted


def test_seeds_change_the_draws_not_the_trace(tmp_path):
    """A trace with its own arrivals gives the same requests for every seed; under E16 the seed
    still draws their keys (so `seed_matters` is true and --seeds samples acceptance)."""
    path = write_scenario(tmp_path, [("0", 40, 30), ("0.01", 40, 30)], cost=HAND, speculative=SPEC)
    scenario = load_scenario(path)
    assert seed_matters(scenario) and not scenario.draws_requests
    a, b = (make_requests(scenario, seed) for seed in (1, 2))
    assert a.n_reply_words.tolist() == b.n_reply_words.tolist() and a.draft_keys.tolist() != b.draft_keys.tolist()


@pytest.mark.parametrize(("spec", "arrangement", "cost", "expected"), [
    ({"tokens": 0, "acceptance": 0.5}, {}, {}, "speculative.tokens"),
    ({"tokens": 2, "acceptance": 1.0}, {}, {}, "speculative.acceptance"),
    ({"tokens": 2, "acceptance": -0.1}, {}, {}, "speculative.acceptance"),
    ({"tokens": 2}, {}, {}, "speculative.acceptance"),
    ({"tokens": 2, "acceptance": 0.5, "per_draft_token_ms": -1}, {}, {}, "speculative.per_draft_token_ms"),
    ({"tokens": 2, "acceptance": 0.5}, {"max_batch_tokens": 3}, {}, "max_batch_tokens: got 3 with speculative "
     "tokens 2, expected at least 4"),
    ({"tokens": 4, "acceptance": 0.5}, {**SPLIT_1_1[0], "writing_max_batch_tokens": 5}, {},
     "writing_max_batch_tokens: got 5"),
    ({"tokens": 4, "acceptance": 0.5}, {**SPLIT_1_1[0], "max_batch_tokens": 5, "reading_max_batch_tokens": 64}, {},
     "max_batch_tokens: got 5"),  # (the writing side's budget)
    ({"tokens": 2, "acceptance": 0.5}, {"kv_capacity_tokens": 4096, "kv_policy": "paged"}, {"per_context_token_ms": 0.01},
     "kv_policy: got 'paged' with speculative (E16) and per_context_token_ms (E3)"),  # (R107)
])
def test_bad_values_are_refused_in_one_line(tmp_path, spec, arrangement, cost, expected):
    base = {} if arrangement.get("kind") else {"name": "c", "kind": "colocated", "gpus": 1}
    path = write_scenario(tmp_path, [("0", 40, 3)], [{**base, **arrangement}],
                          cost={**HAND, **cost}, speculative=spec)
    with pytest.raises(InputError) as err:
        load_scenario(path)
    message = str(err.value)
    assert "\n" not in message and expected in message, message


@pytest.mark.parametrize(("spec", "expected"), [
    ({"tokens": 2, "acceptanse": 0.5}, "speculative.acceptanse: unknown key (did you mean 'acceptance'?)"),
    ({"tokens": 2, "acceptance": 0.5, "zzz": 1},
     "speculative.zzz: unknown key, expected one of tokens, acceptance, per_draft_token_ms"),
])
def test_an_unknown_key_inside_speculative_says_what_the_block_takes(tmp_path, spec, expected):
    """G15 (review2): a typo inside `speculative:` names the keys it takes, as every other block does."""
    path = write_scenario(tmp_path, [("0", 40, 3)], cost=HAND, speculative=spec)
    with pytest.raises(InputError) as err:
        load_scenario(path)
    assert str(err.value).endswith(expected), str(err.value)
