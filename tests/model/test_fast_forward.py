"""Fast-forward (model/repeats.py): a GPU's unchanged iterations run as one timeout, and the run
leaves exactly the records of the one-by-one loop (`Gpu.fast_forward = False`), which also
equal the reference model's: arrivals and ship ends exactly at an iteration end of a repeat,
inside one and at its start (D5), a repeat ended by the ship under way to its writing GPU, the
router reading a chunk-reading repeat's queued tokens (D1), and runs stopped mid-repeat (the
last measured reply, the safety cap D6)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import write_scenario
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_reference import COSTS, SHIPS, TOKEN_TILES, compare, paged_scenario, tiny_scenario

from disagg_simpy import load_scenario
from disagg_simpy.api import run_arrangement
from disagg_simpy.model import repeats
from disagg_simpy.model.engine import Engine, GiveUp
from disagg_simpy.model.gpu import Gpu
from disagg_simpy.model.phases import take_over
from disagg_simpy.workload.stream import make_requests

EVEN = {"cost": {"iteration_ms": 10, "per_reply_ms": 0, "per_prompt_token_ms": 0, "kv_ship_ms_per_token": 1.25}}
ONE, TWO = ({"name": f"c{n}", "kind": "colocated", "gpus": n} for n in (1, 2))
CHUNKED = {"name": "chunked", "kind": "colocated", "gpus": 2, "chunk_tokens": 10}
SPLITS = [{"name": f"s{w}", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": w} for w in (1, 2)]


def all_records(path, fast: bool, monkeypatch) -> dict:
    """Every record of every arrangement, as plain lists, with fast-forward on or off."""
    monkeypatch.setattr(Gpu, "fast_forward", fast)
    scenario = load_scenario(path)
    stream = make_requests(scenario)
    out = {}
    for a in scenario.arrangements:
        rec = run_arrangement(scenario, a, stream)
        for table in ("requests", "iterations", "reads"):
            for key, values in getattr(rec, table).items():
                out[a.name, table, key] = np.asarray(values).tolist()
        for table in ("preemptions", "stretch_log"):  # E9
            for key, values in (getattr(rec, table) or {}).items():
                out[a.name, table, key] = np.asarray(values).tolist()
        for key in ("kv_peak_tokens", "kv_held_at_stop"):  # E4
            out[a.name, key] = None if getattr(rec, key) is None else getattr(rec, key).tolist()
        out[a.name, "stop"] = rec.stopped_at_ns
        out[a.name, "events"] = rec.n_events
    return out


def same_as_one_by_one(path, monkeypatch) -> tuple[dict, dict]:
    """Assert the records with fast-forward equal those without; both runs' records."""
    fast, slow = (all_records(path, flag, monkeypatch) for flag in (True, False))
    for key, want in slow.items():
        if key[-1] != "events":
            assert fast[key] == want, f"{key}: fast-forwarded {fast[key]}, one by one {want}"
    return fast, slow


# (arrival of the second request in ms, what it meets): the first request's reply of 20 words
# is written by iterations of 10 ms from 10 ms on, one repeat until something reaches the GPU
AT_ONE_GPU = {"0.050": "an iteration end", "0.055": "inside an iteration", "0.010": "the repeat's start",
              "0.200": "the repeat's last end", "0.199": "inside the repeat's last iteration"}


@pytest.mark.parametrize("at", sorted(AT_ONE_GPU))
def test_an_arrival_cuts_a_repeat_at_the_right_iteration(tmp_path, monkeypatch, at):
    rows = [("0", 8, 20), (at, 8, 3), ("0.3", 8, 2)]
    path = write_scenario(tmp_path, rows, [ONE, TWO], **EVEN)
    fast, slow = same_as_one_by_one(path, monkeypatch)
    compare(path)
    assert fast["c1", "events"] < 0.6 * slow["c1", "events"]  # (22 to 25 iterations, most in repeats)


@pytest.mark.parametrize("more", [[("0.060", 8, 3)], [("0.057", 8, 3)], [("0.061", 8, 3)], [("0.055", 8, 3)]])
def test_a_prompt_taken_ahead_waits_for_what_arrives_by_its_start(tmp_path, monkeypatch, more):
    """A prompt arriving at 55 ms, inside an iteration of a repeat, is read from 60 ms on: with
    another arriving at exactly 60 ms, before 60 ms or at 55 ms, both are read from 60 ms (D5);
    one at 61 ms waits. Taking the first one's iteration ahead must see them all."""
    rows = [("0", 8, 20), ("0.055", 8, 3), *more]
    path = write_scenario(tmp_path, rows, [ONE], **EVEN)
    fast, _ = same_as_one_by_one(path, monkeypatch)
    assert fast["c1", "requests", "read_started_at_ns"][1:] == [60_000_000, 60_000_000 if more[0][0] < "0.061"
                                                                 else 70_000_000]
    compare(path)


# options under which a repeat cut by a prompt takes its next iteration ahead (`Gpu.start_ahead`):
# (arrangement keys, cost keys) for E7, E8's two limits, E10 and all four
AHEAD_OPTIONS = {"E7": ({}, {"per_attention_pair_ms": 0.25}), "E8": ({"max_batch_replies": 2, "max_batch_tokens": 12}, {}),
                 "E10": ({"mixed_iterations": False}, {}),
                 "all": ({"max_batch_replies": 2, "max_batch_tokens": 12, "mixed_iterations": False},
                         {"per_attention_pair_ms": 0.25})}


@pytest.mark.parametrize("options", sorted(AHEAD_OPTIONS))
@pytest.mark.parametrize("more", [[("0.060", 8, 3)], [("0.061", 8, 3)], [("0.2", 8, 3)]])
def test_an_iteration_taken_ahead_under_the_options(tmp_path, monkeypatch, options, more):
    """As above with E7, E8 or E10 on: the prompt arriving at 55 ms inside a writing repeat is taken
    ahead as of 60 ms unless another arrives then (under E10 in an iteration that reads it and writes no word, after the repeat's
    writing iterations are counted), and the records are the one-by-one loop's and the reference's."""
    keys, cost = AHEAD_OPTIONS[options]
    rows = [("0", 8, 20), ("0.055", 8, 3), *more]
    path = write_scenario(tmp_path, rows, [{**ONE, **keys}], cost={**EVEN["cost"], **cost})
    ahead = []
    start_ahead = Gpu.start_ahead
    monkeypatch.setattr(Gpu, "start_ahead", lambda g, at, n: ahead.append(start_ahead(g, at, n)) or ahead[-1])
    same_as_one_by_one(path, monkeypatch)
    if more[0][0] != "0.060":  # (one arriving at 60 ms is read from 60 ms too: nothing is taken ahead then)
        assert ahead[0] is not None and ahead[0][2] > 0  # (it was taken ahead: fails if the options stop it)
    compare(path)


@pytest.mark.parametrize("at", ["0.010", "0.015", "0.020", "0.025", "0.030"])
def test_a_ship_end_cuts_a_writing_gpus_repeat(tmp_path, monkeypatch, at):
    """Ships of 10 ms (8 tokens): the second reply joins at an iteration end of the writing GPU's
    repeat, inside one, or at its start (the first reply joins at 20 ms)."""
    rows = [("0", 8, 20), (at, 8, 6), ("0.1", 8, 3)]
    path = write_scenario(tmp_path, rows, SPLITS, **EVEN)
    same_as_one_by_one(path, monkeypatch)
    compare(path)


@pytest.mark.parametrize("tokens, at", [(20, 45_000_000), (24, 50_000_000)])
def test_a_writing_gpus_repeat_ends_by_the_ship_under_way_to_it(tmp_path, monkeypatch, tokens, at):
    """The second prompt is read from 10 to 20 ms and ships from 20 ms, when the first reply
    starts its repeat on the writing GPU: the ship's end (45 ms: inside the third iteration;
    50 ms: at its end) is known, and the repeat ends with that iteration instead of being cut
    there (no second timeout: `take_over` is never called)."""
    taken_over = []
    monkeypatch.setattr(repeats, "take_over", lambda *a: taken_over.append(a) or take_over(*a))
    rows = [("0", 8, 20), ("0.005", tokens, 6)]
    path = write_scenario(tmp_path, rows, SPLITS[:1], **EVEN)
    fast, slow = same_as_one_by_one(path, monkeypatch)
    compare(path)
    assert fast["s1", "requests", "ship_started_at_ns"][1] == 20_000_000
    assert fast["s1", "requests", "joined_at_ns"][1] == at
    assert fast["s1", "events"] < slow["s1", "events"] and not taken_over


@pytest.mark.parametrize("at", ["0.040", "0.042", "0.045", "0.050", "0.095"])
def test_the_router_sees_a_chunk_reading_repeats_queued_tokens(tmp_path, monkeypatch, at):
    """Two GPUs read prompts of 105 and 100 tokens in chunks of 10, one from 0 ms, one from 5 ms;
    a prompt arriving at a chunk boundary of either (their starts then come after it, D5) or
    inside goes where the fewest tokens are queued (D1)."""
    rows = [("0", 105, 2), ("0.005", 100, 30), (at, 8, 2)]
    path = write_scenario(tmp_path, rows, [CHUNKED], **EVEN)
    same_as_one_by_one(path, monkeypatch)
    compare(path)


@pytest.mark.parametrize("at, reader", [("0.040", 1), ("0.045", 0)])
def test_the_router_counts_only_chunks_started_before_the_arrival(tmp_path, monkeypatch, at, reader):
    """Prompts of 115 and 110 tokens read in chunks of 10 from 0 ms (GPU 0) and 5 ms (GPU 1).
    At 40 ms each has started 4 chunks (GPU 0's start at 40 ms comes after the arrival, D5):
    75 against 70 tokens queued, GPU 1. At 45 ms GPU 0 has started 5, GPU 1 4: 65 against 70,
    GPU 0. Counting the start at the arrival's own instant would swap both answers."""
    rows = [("0", 115, 2), ("0.005", 110, 2), (at, 8, 2)]
    path = write_scenario(tmp_path, rows, [CHUNKED], **EVEN)
    fast, _ = same_as_one_by_one(path, monkeypatch)
    assert fast["chunked", "requests", "reading_gpu"] == [0, 1, reader]
    compare(path)


def test_a_run_stopped_mid_repeat_records_what_ended_by_the_stop(tmp_path, monkeypatch):
    """The last measured reply ends while another GPU is mid-repeat; the safety cap (D6) falls
    inside a repeat."""
    rows = [("0", 8, 5), ("0.001", 8, 50), ("0.002", 8, 40)]
    for extra in ({"workload": {"measure_s": 0.001}}, {"max_sim_s": 0.203}):
        path = write_scenario(tmp_path, rows, [ONE, TWO, *SPLITS], **EVEN, **extra)
        same_as_one_by_one(path, monkeypatch)
        compare(path, expect_cap="max_sim_s" in extra)


@pytest.mark.parametrize("stop", [{"workload": {"measure_s": 0.001}}, {"max_sim_s": 0.05}, {"max_sim_s": 0.051}])
def test_an_iteration_taken_ahead_starts_only_if_the_run_gets_there(tmp_path, monkeypatch, stop):
    """A prompt routed at 46.5 ms to GPU 1, in a repeat ending iterations at 41, 51, ... ms, is
    taken ahead as of 51 ms (nothing else can arrive by then); the run stops at 50 ms (request 0
    finishes, the last measured; or the cap), so its reading never started, or at 51 ms, when it
    did (D6: a cap at 51 ms runs that instant)."""
    rows = [("0", 8, 5), ("0.001", 8, 50), ("0.002", 8, 50), ("0.0465", 8, 2)]
    path = write_scenario(tmp_path, rows, [TWO], **EVEN, **stop)
    fast, _ = same_as_one_by_one(path, monkeypatch)
    assert fast["c2", "requests", "reading_gpu"] == [0, 1, 0, 1]
    assert fast["c2", "requests", "read_started_at_ns"][3] == (51_000_000 if stop.get("max_sim_s") == 0.051 else -1)


def test_a_steady_writing_gpu_schedules_far_fewer_events_than_iterations(tmp_path):
    """Fails if the fast-forward stops happening: replies of 400 words arriving one every 200 ms
    on one GPU; one by one that is at least one event per iteration."""
    rows = [(f"{i * 0.2:.1f}", 100, 400) for i in range(10)]
    rec = run_arrangement(*(lambda s: (s, s.arrangements[0], make_requests(s)))(
        load_scenario(write_scenario(tmp_path, rows, [ONE]))))
    n_iterations = len(rec.iterations["gpu"])
    assert n_iterations > 400
    assert rec.n_events < 0.15 * n_iterations, (rec.n_events, n_iterations)


# -- hypothesis: options off, replies long enough for repeats, arrivals on a coarse grid --------

GROWING = ("per_reread_token_ms", "per_context_token_ms", "per_attention_pair_ms")  # E2, E3, E7

@st.composite
def steady_scenario(draw, tiles: bool = False, options: bool = False):
    """`tiles`: E15 on (model/repeats.py: a repeat's iterations start the same tiles), and E2, E3
    or E7 maybe beside it (repeats of growing durations). `options`: E7, E8 and E10 (colocated)
    drawn, each maybe on: a repeat of constant durations takes a cut repeat's next iteration ahead
    under them (model/repeats.py's `Repeat.cut`, `Gpu.start_ahead`)."""
    n = draw(st.integers(1, 10))
    ms = sorted(draw(st.lists(st.integers(0, 60), min_size=n, max_size=n)))
    prompts = draw(st.lists(st.sampled_from((4, 8, 16, 24, 40, 64)), min_size=n, max_size=n))
    words = draw(st.lists(st.sampled_from((1, 2, 5, 12, 30)), min_size=n, max_size=n))
    rows = [(f"{m / 1000:.3f}", p, w) for m, p, w in zip(ms, prompts, words)]
    chunk = draw(st.none() | st.sampled_from((8, 16)))
    if draw(st.booleans()):
        a = {"name": "c", "kind": "colocated", "gpus": draw(st.integers(1, 3))}
    else:
        a = {"name": "s", "kind": "disaggregated", "reading_gpus": draw(st.integers(1, 2)),
             "writing_gpus": draw(st.integers(1, 2))}
        if draw(st.booleans()):
            a["local_prompt_max_tokens"] = draw(st.sampled_from((8, 16)))  # E6: chunk repeats on writing GPUs
    if chunk:
        a["chunk_tokens"] = chunk
    cost = {"iteration_ms": draw(st.sampled_from((1.0, 2.0, 3.0, 10.0))),
            "per_reply_ms": draw(st.sampled_from((0.0, 0.5, 1.0))),
            "per_prompt_token_ms": draw(st.sampled_from((0.0, 0.125, 0.25))),
            "kv_ship_ms_per_token": draw(st.sampled_from(SHIPS))}
    if tiles:
        cost.update(token_tile=draw(st.sampled_from(TOKEN_TILES)), per_token_tile_ms=draw(
            st.sampled_from(COSTS["per_token_tile_ms"][1:])))
        for key in draw(st.lists(st.sampled_from(GROWING), max_size=2, unique=True)):
            cost[key] = draw(st.sampled_from(COSTS[key][2:]))
    if options:
        if draw(st.booleans()):
            cost["per_attention_pair_ms"] = draw(st.sampled_from(COSTS["per_attention_pair_ms"][2:]))  # E7
        if draw(st.booleans()):
            a["max_batch_replies"] = draw(st.integers(1, 3))  # E8
        if draw(st.booleans()):
            a["max_batch_tokens"] = draw(st.sampled_from((6, 12, 40)))
        if a["kind"] == "colocated" and draw(st.booleans()):
            a["mixed_iterations"] = False  # E10
    extra = {}
    if draw(st.integers(0, 3)) == 0 and ms[-1] > ms[0]:
        extra["workload"] = {"measure_s": draw(st.integers(ms[0] + 1, ms[-1])) / 1000}
    if draw(st.integers(0, 3)) == 0:
        extra["max_sim_s"] = (ms[-1] + draw(st.integers(1, 150))) / 1000  # a cap mid-repeat (D6)
    return rows, [a], cost, extra


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=steady_scenario())
def test_fast_forward_equals_one_by_one_and_the_reference(tmp_path, monkeypatch, case):
    rows, arrangements, cost, extra = case
    path = write_scenario(tmp_path, rows, arrangements, cost=cost, **extra)
    same_as_one_by_one(path, monkeypatch)
    compare(path, expect_cap=None)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=steady_scenario(options=True))
def test_fast_forward_under_e7_e8_e10_equals_one_by_one_and_the_reference(tmp_path, monkeypatch, case):
    """Long replies and arrivals on a coarse grid, so that many repeats are cut by an arrival
    inside an iteration and take the next iteration ahead, with E7, E8 or E10 on."""
    rows, arrangements, cost, extra = case
    path = write_scenario(tmp_path, rows, arrangements, cost=cost, **extra)
    same_as_one_by_one(path, monkeypatch)
    compare(path, expect_cap=None)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=tiny_scenario())
def test_fast_forward_with_the_options_equals_one_by_one(tmp_path, monkeypatch, case):
    """The options (E1-E10 drawn as the reference tests draw them) with repeats: KV memory (E4,
    its log at each start, handoffs that reserve mid-repeat), links (E5), local prompts (E6),
    batch limits (E8), paged KV with memory to spare (E9: block boundaries inside repeats),
    prompt-only iterations (E10: repeats of writing iterations up to a reply's last); E2, E3 and
    E7 with growing durations; E14 and E15 (the same terms in each iteration of a repeat)."""
    rows, arrangements, cost, workload, slo = case
    longest = max(words for _, _, words in rows)
    for a in arrangements:  # replies three times as long, to repeat; KV capacities (E4) grown to match
        a.pop("cost", None), a.pop("reading_cost", None), a.pop("writing_cost", None)
        for key in ("kv_capacity_tokens", "reading_kv_capacity_tokens", "writing_kv_capacity_tokens"):
            if key in a:
                a[key] += 3 * longest + a.get("kv_block_tokens", 0)  # (E9: blocks of the longer replies)
    rows = [(at, prompt, words * 3) for at, prompt, words in rows]
    path = write_scenario(tmp_path, rows, arrangements, cost=cost, workload=workload, slo=slo)
    same_as_one_by_one(path, monkeypatch)
    compare(path)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=paged_scenario())
def test_fast_forward_with_paged_kv_that_preempts_equals_one_by_one(tmp_path, monkeypatch, case):
    """E9 with memory tight enough that most runs preempt (by recompute or swap) and drop: a
    repeat runs through block boundaries only while every due block is free, and the KV memory
    a handoff reads mid-repeat (E4e) counts the blocks taken by then."""
    rows, arrangements, cost, workload, slo = case
    path = write_scenario(tmp_path, rows, arrangements, cost=cost, workload=workload, slo=slo)
    same_as_one_by_one(path, monkeypatch)


@pytest.mark.parametrize("max_late", [1, 3])
def test_a_probe_that_gives_up_mid_repeat_records_as_one_by_one(tmp_path, monkeypatch, max_late):
    """A goodput probe stops once enough replies are certainly late (`GiveUp`): GPUs mid-repeat
    then record what ended by the stop, as one by one."""
    rows = [(f"{i * 0.007:.3f}", 16 + 8 * (i % 3), 12 + 5 * (i % 4)) for i in range(14)]
    scenario = load_scenario(write_scenario(tmp_path, rows, [TWO, CHUNKED, *SPLITS], **EVEN))
    stream = make_requests(scenario)
    for a in scenario.arrangements:
        got = {}
        for fast in (True, False):
            monkeypatch.setattr(Gpu, "fast_forward", fast)
            engine = Engine(scenario, a, stream, give_up=GiveUp(first_word_ns=30_000_000, mean_gap_ns=9_000_000,
                                                                 max_late=max_late))
            rec = engine.run()
            got[fast] = (engine.gave_up, rec.stopped_at_ns, {k: v.tolist() for k, v in rec.iterations.items()},
                         {k: v.tolist() for k, v in rec.requests.items()}, {k: v.tolist() for k, v in rec.reads.items()})
        assert got[True] == got[False], a.name
        assert got[True][0], a.name  # (it did give up)


def test_memory_a_preemption_frees_goes_to_the_handoff_at_the_next_end_of_any_gpu(tmp_path, monkeypatch):
    """E9 on a split with E4e: writing GPU 2's start at 105.5 ms drops a reply and frees its
    blocks; the three prompts waiting for a writing GPU take them at the next iteration end of
    ANY GPU (writing GPU 1's at 117.3 ms, inside its repeat), not at the end of that repeat."""
    rows = [("0.000", p, w) for p, w in ((8, 3), (24, 27), (32, 9), (8, 3), (8, 3), (32, 6), (8, 3), (24, 3),
                                         (8, 3), (8, 3), (8, 3))]
    split = {"name": "s", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 2, "kv_capacity_tokens": 67,
             "kv_policy": "paged", "kv_block_tokens": 1, "max_preemptions": 0}
    path = write_scenario(tmp_path, rows, [split], cost={"kv_ship_ms_per_token": 0.0625})
    fast, _ = same_as_one_by_one(path, monkeypatch)
    assert fast["s", "requests", "handoff_at_ns"][8:] == [117_300_000] * 3
    compare(path)


def test_a_ship_ending_at_an_iteration_end_defers_its_writing_gpus_start_behind_a_later_ship(tmp_path, monkeypatch):
    """Two ships under way to one writing GPU, the first ending exactly at its iteration end (40 ms):
    the GPU starts its next iteration in D5 step 3, so that reply joins it; the other ship (ending
    at 80 ms, the last of the GPU's heap `ships_due`) must not hide the first (one writing GPU: both
    go there). Ships of 1.25 ms a token: 8 tokens end at 20 ms, 16 at 40 ms, 40 at 80 ms."""
    rows = [("0", 8, 20), ("0.010", 16, 6), ("0.020", 40, 3)]
    path = write_scenario(tmp_path, rows, SPLITS[:1], **EVEN)
    fast, _ = same_as_one_by_one(path, monkeypatch)
    assert fast["s1", "requests", "ship_started_at_ns"] == [10_000_000, 20_000_000, 30_000_000]
    assert fast["s1", "requests", "joined_at_ns"][1] == 40_000_000
    assert fast["s1", "requests", "join_iteration"][1] == 2  # (the writing GPU's third iteration starts at 40 ms)
    compare(path)


def test_a_handoff_head_takes_a_writing_gpu_whose_free_memory_is_exactly_its_need(tmp_path, monkeypatch):
    """E9 on a split (E4e): the second prompt (32 tokens, blocks of 2) needs its 16 blocks plus one
    free, 34 tokens; at the reading GPU's end at 46 ms the writing GPU, mid-iteration, holds 6 of its 40
    (the first reply's blocks), so exactly 34 are free: the head is handed over then, not when more
    memory frees (the engine's look before the writing GPUs' due blocks, `Engine.iteration_ended`)."""
    rows = [("0.017", 4, 10), ("0.018", 32, 2), ("0.029", 32, 4), ("0.060", 4, 8)]
    split = {"name": "s", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 1, "kv_policy": "paged",
             "kv_block_tokens": 2, "kv_capacity_tokens": 40, "max_preemptions": 0}
    cost = {"iteration_ms": 10, "per_reply_ms": 0.5, "per_prompt_token_ms": 0.25, "kv_ship_ms_per_token": 1.25}
    path = write_scenario(tmp_path, rows, [split], cost=cost)
    fast, _ = same_as_one_by_one(path, monkeypatch)
    assert fast["s", "requests", "first_word_at_ns"][1] == fast["s", "requests", "handoff_at_ns"][1] == 46_000_000
    assert fast["s", "iterations", "kv_used_tokens"][4] == 6  # (the writing GPU's start at 43.5 ms: 6 tokens held)
    compare(path)


def test_a_paged_gpu_whose_token_budget_its_replies_fill_reads_no_prompt(tmp_path, monkeypatch):
    """E9 with E8 and chunks: two replies fill `max_batch_tokens: 2`, so the prompt arriving at 25 ms
    gets no chunk (and is not admitted) until a reply leaves: no read of 0 tokens, no early start."""
    rows = [("0", 4, 10), ("0", 4, 10), ("0.025", 8, 3)]
    a = {"name": "p", "kind": "colocated", "gpus": 1, "chunk_tokens": 4, "max_batch_tokens": 2,
         "kv_policy": "paged", "kv_block_tokens": 4, "kv_capacity_tokens": 400}
    path = write_scenario(tmp_path, rows, [a], **EVEN)
    fast, _ = same_as_one_by_one(path, monkeypatch)
    assert 0 not in fast["p", "reads", "n_tokens"]
    compare(path)


def test_a_run_stops_when_its_last_measured_request_is_dropped(tmp_path, monkeypatch):
    """E9 (max_preemptions 0) on a GPU that mixes reads and writes, 60 ms measured: a measured
    request dropped at a start (115 ms) counts as done (`Engine.requests_dropped`), so the run stops
    when the last other measured one ends (126 ms), not when later, unmeasured work ends."""
    rows = [("0.034", 4, 8), ("0.034", 4, 2), ("0.042", 12, 2), ("0.048", 24, 10)]
    a = {"name": "p", "kind": "colocated", "gpus": 1, "kv_policy": "paged", "kv_block_tokens": 2,
         "kv_capacity_tokens": 38, "max_preemptions": 0, "preemption": "swap", "swap_ms_per_token": 0.01}
    cost = {"iteration_ms": 10, "per_reply_ms": 1, "per_prompt_token_ms": 0, "kv_ship_ms_per_token": 0.0625}
    path = write_scenario(tmp_path, rows, [a], cost=cost, workload={"measure_s": 0.06})
    fast, _ = same_as_one_by_one(path, monkeypatch)
    dropped = [t for t in fast["p", "requests", "dropped_at_ns"] if t >= 0]
    assert dropped == [115_000_000] and fast["p", "stop"] == 126_000_000
    compare(path)
