"""The simulator's records equal, to the nanosecond, those of a plain reference written from the
spec alone (tests/reference_model.py): on hypothesis-drawn tiny scenarios with many ties, every
option combination (E1-E10, each on or off), and a few hand-picked cases."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from helpers import write_scenario
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference_model import reference_records

from disagg_simpy import load_scenario
from disagg_simpy.api import run_arrangement
from disagg_simpy.results.metrics import LimitsNs, reply_gaps
from disagg_simpy.scenario.arrangements import SIDE_LIMIT_KEYS
from disagg_simpy.workload.prefixes import BlockIds
from disagg_simpy.workload.stream import make_requests

REQUEST_KEYS = ("reading_gpu", "read_started_at_ns", "first_word_at_ns", "writing_gpu", "joined_at_ns",
                "join_iteration", "finished_at_ns", "handoff_at_ns", "ship_started_at_ns")
WHEN = {"join_iteration": "joined_at_ns"}  # under a cap: the time a value is set by


def with_blocks(stream, blocks, unit):
    """The stream with each request's prompt block ids (E13), in blocks of `unit` tokens."""
    starts = np.concatenate(([0], np.cumsum([len(b) for b in blocks]))).astype(np.int64)
    ids = np.array([i for b in blocks for i in b], dtype=np.int64)
    return replace(stream, blocks=BlockIds(ids, starts, unit))


def compare(scenario_path, expect_cap=None, blocks=None):
    """Run every arrangement of the scenario in the simulator and in the reference; assert equal.
    `blocks`: each request's prompt block ids (E13), in blocks of the scenario's block size."""
    scenario = load_scenario(scenario_path)
    stream = make_requests(scenario)
    if blocks is not None:
        stream = with_blocks(stream, blocks, scenario.prefix_block_tokens)
    for arrangement in scenario.arrangements:
        rec = run_arrangement(scenario, arrangement, stream)
        assert expect_cap is None or rec.capped == expect_cap
        ref = reference_records(scenario, arrangement, stream)
        name = arrangement.name
        if ref["cached_tokens"] is not None:  # E13: what each read found cached
            done = np.flatnonzero(rec.requests["read_started_at_ns"] >= 0)
            assert rec.cached_tokens[done].tolist() == np.asarray(ref["cached_tokens"])[done].tolist(), \
                f"{name}: cached_tokens"
        measured = np.flatnonzero(stream.measured)
        everything = bool(stream.measured.all()) and not rec.capped
        stop = rec.stopped_at_ns
        want_all = {k: np.asarray(v, dtype=np.int64) for k, v in ref["requests"].items()}
        for key in REQUEST_KEYS:
            got, want = rec.requests[key][measured], want_all[key][measured]
            if rec.capped and key != "reading_gpu":  # the safety cap (D6): what comes after it never happened
                when = want_all[WHEN.get(key, key)][measured]
                if key == "join_iteration":  # set when the reply joins, or under E8 when it is seated
                    when = np.asarray(ref["seated_at_ns"], dtype=np.int64)[measured]
                if key == "writing_gpu":
                    when = np.where(want_all["handoff_at_ns"] >= 0, want_all["handoff_at_ns"],
                                    want_all["joined_at_ns"])[measured]
                want = np.where(when > stop, -1, want)
            bad = np.flatnonzero(got != want)
            assert not len(bad), (f"{name}: requests.{key} differs at request ids {measured[bad].tolist()}: "
                                  f"simulator {got[bad].tolist()}, reference {want[bad].tolist()}")
        # iterations: all of them when every request is measured; else those that ended by the stop
        sim_keep = np.ones(len(rec.iterations["gpu"]), bool) if everything else rec.iterations["ended_at_ns"] <= stop
        ref_ends = np.asarray(ref["iterations"]["ended_at_ns"], dtype=np.int64)
        ref_keep = np.ones(len(ref_ends), bool) if everything else ref_ends <= stop
        assert set(rec.iterations) == set(ref["iterations"]), f"{name}: iteration columns"
        for key, want in ref["iterations"].items():
            got = rec.iterations[key][sim_keep]
            want = np.asarray(want, dtype=np.int64)[ref_keep]
            assert got.tolist() == want.tolist(), f"{name}: iterations.{key}\nsimulator {got}\nreference {want}"
        if everything:
            for key, want in ref["reads"].items():
                assert np.asarray(rec.reads[key]).tolist() == want, f"{name}: reads.{key}"
            if ref["kv"] is not None:  # E4: the most each GPU held; all freed at the end
                assert rec.kv_peak_tokens.tolist() == ref["kv"]["peak"], f"{name}: KV peak per GPU"
                assert rec.kv_held_at_stop.tolist() == ref["kv"]["held_at_end"] == [0] * len(ref["kv"]["peak"])
        ids, word, at = rec.word_times(measured)
        for rid in measured:
            times = at[ids == rid][np.argsort(word[ids == rid])].tolist()
            want = ref["words"][int(rid)]
            if rec.capped:
                times, want = times, [t for t in want if t <= stop]
            assert times == want, f"{name}: word times of request {rid}"
        if "n_preemptions" in ref["requests"]:  # E9: preemptions and drops, request by request
            for key in ("n_preemptions", "dropped_at_ns") if not rec.capped else ("dropped_at_ns",):
                got, want = rec.requests[key][measured], np.asarray(ref["requests"][key], dtype=np.int64)[measured]
                if rec.capped:  # (what comes after the cap never happened)
                    want = np.where(want > stop, -1, want)
                assert got.tolist() == want.tolist(), f"{name}: requests.{key}"
        if "switches" in ref:  # E12: every move up to the stop
            want = {k: list(v) for k, v in ref["switches"].items()}
            keep = [t <= stop for t in want["requested_at_ns"]]
            for key in ("drained_at_ns", "serving_at_ns"):
                want[key] = [t if t <= stop else -1 for t in want[key]]
            want = {k: [x for x, ok in zip(v, keep) if ok] for k, v in want.items()}
            assert rec.switches == want, f"{name}: switches\nsimulator {rec.switches}\nreference {want}"
        if not rec.capped:
            check_verdicts(name, reply_gaps(rec, LimitsNs.from_slo(scenario.slo)), ref, stream, scenario.slo)


def check_verdicts(name, gaps, ref, stream, slo):
    """D7, D8, M7 from the reference's word times: first-word wait, gaps, freezes, on time (limits
    with 1 ns of slack, compared exactly)."""
    first_limit, gap_limit, freeze_limit = (round(x * 1e9) for x in (slo.first_word_s, slo.mean_gap_ms / 1e3,
                                                                     slo.freeze_ms / 1e3))
    dropped = ref["requests"].get("dropped_at_ns")
    for i, rid in enumerate(np.flatnonzero(stream.measured)):
        words = ref["words"][int(rid)]
        if dropped is not None and dropped[rid] >= 0:  # E9: a dropped request is late (R57)
            assert not gaps.on_time[i] and gaps.froze[i], f"{name}: request {rid} was dropped"
            continue
        wait = words[0] - int(stream.arrived_at_ns[rid])
        gaps_ns = np.diff(words)
        n_gaps = len(gaps_ns)
        late_gap = n_gaps and (words[-1] - words[0]) > (gap_limit + 1) * n_gaps
        freezes = int((gaps_ns > freeze_limit + 1).sum())
        on_time = wait <= first_limit + 1 and not late_gap and not freezes
        got = (int(gaps.first_word_ns[i]), int(gaps.max_gap_ns[i]), int(gaps.n_freezes[i]), bool(gaps.on_time[i]))
        want = (wait, int(gaps_ns.max()) if n_gaps else -1, freezes, bool(on_time))
        assert got == want, f"{name}: request {rid}: (first word, max gap, freezes, on time) {got} != {want}"
        if n_gaps:
            assert gaps.mean_gap_ns[i] == pytest.approx((words[-1] - words[0]) / n_gaps, rel=1e-12)


# -- hypothesis: tiny scenarios, coarse grids, many ties ---------------------------------------------

CHUNKS = (8, 16, 32)
COSTS = {  # whole ns per unit, mostly whole ms: times collide often
    "iteration_ms": (1.0, 2.0, 3.0, 12.0),
    "per_reply_ms": (0.0, 0.4, 1.0),
    "per_prompt_token_ms": (0.0, 0.05, 0.125, 0.25),
    "per_reread_token_ms": (0.0, 0.0, 0.125, 0.001),
    "per_context_token_ms": (0.0, 0.0, 0.002, 0.125),
    "per_attention_pair_ms": (0.0, 0.0, 0.001, 0.0000005),  # E7; the last: half-ns pairs, one rounding
    "prompt_iteration_ms": (0.0, 0.0, 1.0, 0.0000005),  # E14; the last: half a ns, one rounding
    "free_prompt_tokens": (0, 0, 4, 16, 40),  # E14: some under the drawn prompts, some over
    "per_token_tile_ms": (0.0, 0.5, 1.0, 0.0000005),  # E15 (with a token_tile drawn beside it); half a ns
    "per_expert_ms": (0.0, 0.25, 1.0, 0.0000005),  # E17 (with experts and experts_per_token beside it); half a ns
}
TOKEN_TILES = (1, 2, 4, 16)  # E15: a reply or a prompt token a tile, and tiles a few replies or tokens wide
EXPERTS = ((8, 2), (16, 4), (128, 8), (4, 4), (3, 1))  # E17: (experts, experts_per_token), saturating at 4, 4, 16, 1, 3 tokens
SHIPS = (0.0625, 0.125, 0.25, 0.01, 0.0000001)  # the last: 0 ns for prompts under 5 tokens


@st.composite
def side_cost(draw):
    keys = draw(st.lists(st.sampled_from(sorted(COSTS)), max_size=3, unique=True))
    c = {k: draw(st.sampled_from(COSTS[k])) for k in keys}
    if "per_token_tile_ms" in c:  # E15: its tile size beside it (R75)
        c["token_tile"] = draw(st.sampled_from(TOKEN_TILES))
    if "per_expert_ms" in c:  # E17: the model's experts and top-k beside it (R95)
        c["experts"], c["experts_per_token"] = draw(st.sampled_from(EXPERTS))
    return c or None


@st.composite
def arrangement(draw, i, tp=False):
    chunk = draw(st.none() | st.sampled_from(CHUNKS))
    if draw(st.booleans()):
        a = {"name": f"c{i}", "kind": "colocated", "gpus": draw(st.integers(1, 4))}
        if draw(st.booleans()):
            a["cost"] = draw(side_cost())
        if draw(st.integers(0, 2)) == 0:  # E10: prompt-only iterations
            a["mixed_iterations"] = False
    else:
        a = {"name": f"s{i}", "kind": "disaggregated", "reading_gpus": draw(st.integers(1, 4)),
             "writing_gpus": draw(st.integers(1, 4))}
        for key in ("reading_cost", "writing_cost"):
            if draw(st.booleans()):
                a[key] = draw(side_cost())
        if draw(st.booleans()):
            a["kv_ship_ms_per_token"] = draw(st.sampled_from(SHIPS + (0.0,)))
        a["kv_link"] = draw(st.sampled_from(("independent", "per_reading_gpu", "per_writing_gpu", "shared")))
        if a.get("kv_ship_ms_per_token") == 0.0:
            a["kv_link"] = "independent"
        if draw(st.booleans()):
            a["local_prompt_max_tokens"] = draw(st.sampled_from((8, 16, 24, 40)))
    a = {k: v for k, v in a.items() if v is not None}
    if chunk:
        a["chunk_tokens"] = chunk
    if draw(st.booleans()):
        a["kv_capacity_tokens"] = -draw(st.sampled_from((0, 0, 0, 4, 20, 80)))  # slack above the largest need, set below
    if "kv_capacity_tokens" in a and draw(st.booleans()):  # E9: paged, blocks small enough to preempt
        a.update(kv_policy="paged", kv_block_tokens=draw(st.sampled_from((1, 2, 4, 8, 16))))
        if draw(st.booleans()):
            a.update(preemption="swap", swap_ms_per_token=draw(st.sampled_from((0.0, 0.01, 0.0000003))))
        if draw(st.booleans()):
            a["max_preemptions"] = draw(st.sampled_from((0, 1, 2)))
    if draw(st.integers(0, 2)) == 0:  # E8: seats and budgets small enough to bind
        a["max_batch_replies"] = draw(st.sampled_from((1, 2, 3)))
    if draw(st.integers(0, 2)) == 0:
        a["max_batch_tokens"] = draw(st.sampled_from((2, 3, 8, 9, 16, 20, 40)))  # some equal to prompts
    if a["kind"] == "disaggregated" and draw(st.integers(0, 2)) == 0:
        a.update(draw(side_limits(a)))
    if tp:
        a.update(draw(tp_degrees(a)))
    return a


@st.composite
def side_limits(draw, a):
    """E8 per side on a split (R89-R93): some of the four keys, small enough to bind, beside the
    general ones already drawn in `a` (a general key no instance would keep is left out, R89)."""
    out = {}
    if draw(st.booleans()):
        out["reading_max_batch_requests"] = draw(st.sampled_from((1, 1, 2, 3)))
    if draw(st.booleans()):
        out["reading_max_batch_tokens"] = draw(st.sampled_from((1, 3, 8, 13, 16, 40)))
    if draw(st.booleans()):
        out["writing_max_batch_tokens"] = draw(st.sampled_from((2, 3, 9, 20)))
    if "max_batch_replies" not in a and draw(st.booleans()):
        out["writing_max_batch_replies"] = draw(st.sampled_from((1, 2, 3)))
    if "max_batch_tokens" in a and "reading_max_batch_tokens" in out and "writing_max_batch_tokens" in out:
        del out["writing_max_batch_tokens"]
    return out


@st.composite
def tp_degrees(draw, a):
    """TP instances: a degree dividing each side's GPUs (GPUs stay GPUs, instances = GPUs / TP),
    and on a split, maybe one side's own KV capacity (slack set like kv_capacity_tokens)."""
    out = {}
    sides = [("tp", a["gpus"])] if a["kind"] == "colocated" else [
        ("reading_tp", a["reading_gpus"]), ("writing_tp", a["writing_gpus"])]
    for key, gpus in sides:
        if draw(st.booleans()):
            out[key] = draw(st.sampled_from([d for d in range(1, gpus + 1) if gpus % d == 0]))
    if a["kind"] == "disaggregated" and "kv_capacity_tokens" in a:
        for key in ("reading_kv_capacity_tokens", "writing_kv_capacity_tokens"):
            if draw(st.booleans()):
                out[key] = -draw(st.sampled_from((0, 4, 20, 200)))
    return out


@st.composite
def tiny_scenario(draw, tp=False):
    n = draw(st.integers(1, 12))
    ms = sorted(draw(st.lists(st.integers(0, 40), min_size=n, max_size=n)))
    prompts = draw(st.lists(st.sampled_from((8, 8, 16, 24, 32, 48, 64, 4, 5, 13)), min_size=n, max_size=n))
    words = draw(st.lists(st.sampled_from((1, 1, 2, 3, 5, 9)), min_size=n, max_size=n))
    rows = [(f"{m / 1000:.3f}", p, w) for m, p, w in zip(ms, prompts, words)]
    arrangements = [draw(arrangement(i, tp)) for i in range(draw(st.integers(1, 2)))]
    for a in arrangements:
        block = a.get("kv_block_tokens")  # E9: the most a request holds, in blocks, plus one to admit it
        need = max(p + w if block is None else block * (-(-(p + w - 1) // block) + 1) for p, w in zip(prompts, words))
        for key in ("kv_capacity_tokens", "reading_kv_capacity_tokens", "writing_kv_capacity_tokens"):
            if key in a:
                a[key] = need - a[key]
    cost = {"kv_ship_ms_per_token": draw(st.sampled_from(SHIPS))}
    cost.update(draw(side_cost()) or {})
    workload = {}
    if draw(st.integers(0, 4)) == 0 and ms[-1] > ms[0]:  # a window: the last requests unmeasured
        workload["measure_s"] = draw(st.integers(ms[0] + 1, ms[-1])) / 1000
    slo = {"first_word_s": draw(st.sampled_from((2.0, 0.01, 0.02))), "mean_gap_ms": draw(st.sampled_from((50, 2, 3))),
           "freeze_ms": draw(st.sampled_from((250, 3, 4)))}  # limits that gaps on a ms grid hit exactly
    return rows, arrangements, cost, workload, slo


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=tiny_scenario())
def test_simulator_equals_reference(tmp_path, case):
    rows, arrangements, cost, workload, slo = case
    compare(write_scenario(tmp_path, rows, arrangements, cost=cost, workload=workload, slo=slo))


@st.composite
def paged_scenario(draw):
    """E9 on every arrangement, with memory tight enough that most runs preempt: replies up to 30
    words, blocks of 1-8 tokens, capacity at most 16 tokens above the largest request's need;
    every other option drawn as in `tiny_scenario`."""
    rows, arrangements, cost, workload, slo = draw(tiny_scenario())
    words = draw(st.lists(st.sampled_from((2, 5, 9, 17, 30)), min_size=len(rows), max_size=len(rows)))
    rows = [(t, p, w) for (t, p, _), w in zip(rows, words)]
    for a in arrangements:
        for key in ("reading_kv_capacity_tokens", "writing_kv_capacity_tokens"):
            a.pop(key, None)
        block = draw(st.sampled_from((1, 2, 4, 8)))
        a.update(kv_policy="paged", kv_block_tokens=block, kv_capacity_tokens=max(
            block * (-(-(p + w - 1) // block) + 1) for _, p, w in rows) + draw(st.sampled_from((0, 0, 1, 4, 16))))
        for key in ("preemption", "swap_ms_per_token", "max_preemptions"):
            a.pop(key, None)
        if draw(st.booleans()):
            a.update(preemption="swap", swap_ms_per_token=draw(st.sampled_from((0.0, 0.01, 0.0000003))))
        if draw(st.booleans()):
            a["max_preemptions"] = draw(st.sampled_from((0, 1, 2)))
    return rows, arrangements, cost, workload, slo


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=paged_scenario())
def test_simulator_equals_reference_with_paged_kv(tmp_path, case):
    """E9 (paged KV, preemption by recompute or swap, drops) with E1-E8 drawn on and off."""
    rows, arrangements, cost, workload, slo = case
    compare(write_scenario(tmp_path, rows, arrangements, cost=cost, workload=workload, slo=slo))


@st.composite
def paged_prompt_only_scenario(draw):
    """E9 and E10 together on colocated GPUs (R61-R67), memory as tight as in `paged_scenario`, every
    other option drawn: preemptions in writing iterations, re-reads in prompt-only ones."""
    rows, arrangements, cost, workload, slo = draw(paged_scenario())
    for a in arrangements:
        if a["kind"] == "disaggregated":
            for key in ("reading_gpus", "writing_gpus", "reading_cost", "writing_cost", "kv_ship_ms_per_token",
                        "kv_link", "local_prompt_max_tokens", *SIDE_LIMIT_KEYS):
                a.pop(key, None)
            a.update(kind="colocated", name=a["name"].replace("s", "c"), gpus=draw(st.integers(1, 2)))
        a["mixed_iterations"] = False
    return rows, arrangements, cost, workload, slo


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=paged_prompt_only_scenario())
def test_simulator_equals_reference_with_paged_kv_and_prompt_only_iterations(tmp_path, case):
    """E9 with E10 (and E1-E8 drawn on and off): blocks grown and replies preempted only in writing
    iterations, re-reads prompt first, swaps, drops, to the nanosecond."""
    rows, arrangements, cost, workload, slo = case
    compare(write_scenario(tmp_path, rows, arrangements, cost=cost, workload=workload, slo=slo))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=tiny_scenario(tp=True))
def test_simulator_equals_reference_with_tp_instances(tmp_path, case):
    """TP instances (tp, reading_tp, writing_tp, each side's KV capacity) to the nanosecond."""
    rows, arrangements, cost, workload, slo = case
    compare(write_scenario(tmp_path, rows, arrangements, cost=cost, workload=workload, slo=slo))


# -- hand-picked cases ---------------------------------------------------------------------------------

PAGED_UNMIXED = {"kind": "colocated", "gpus": 1, "kv_capacity_tokens": 32, "kv_policy": "paged", "kv_block_tokens": 4,
                 "mixed_iterations": False}
HAND_COST = {"iteration_ms": 10, "per_reply_ms": 1, "per_prompt_token_ms": 0.01}
PAGE_SPLIT = {"name": "split", "kind": "disaggregated", "reading_gpus": 2, "writing_gpus": 2}
HAND = {
    # same-instant arrivals onto idle GPUs: D2 spreads them; a prompt arriving as an iteration ends joins the next
    "ties": ([("0.000", 512, 3), ("0.000", 512, 3), ("0.000", 512, 1), ("0.012", 100, 2), ("0.037", 100, 2)],
             [{"name": "same", "kind": "colocated", "gpus": 2},
              {"name": "chunked", "kind": "colocated", "gpus": 2, "chunk_tokens": 256}, PAGE_SPLIT]),
    # E2 worked example: 2,000 tokens in chunks of 512 re-read 3,072 tokens
    "reread": ([("0", 2000, 2)], [{"name": "c", "kind": "colocated", "gpus": 1, "chunk_tokens": 512,
                                   "cost": {"per_reread_token_ms": 0.001}}]),
    # E4: memory for one request at a time; the handoff queue blocks behind its head; links queue
    "memory": ([("0", 100, 3), ("0", 100, 3), ("0", 50, 1), ("0.001", 20, 4)],
               [{"name": "c", "kind": "colocated", "gpus": 1, "kv_capacity_tokens": 110},
                {"name": "s", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 2,
                 "kv_capacity_tokens": 110, "kv_link": "shared"},
                {"name": "l", "kind": "disaggregated", "reading_gpus": 2, "writing_gpus": 1,
                 "kv_capacity_tokens": 200, "kv_link": "per_writing_gpu", "local_prompt_max_tokens": 50}]),
    # E5: ships that round to 0 ns queue behind a 10 ns one on a shared link, then all end in one step 2
    "zero-ns-ships": ([("0", 100, 3), ("0", 4, 3), ("0", 4, 2), ("0.0002", 4, 2), ("0.0002", 3, 2)],
                      [{"name": link, "kind": "disaggregated", "reading_gpus": 2, "writing_gpus": 2,
                        "kv_link": link, "kv_ship_ms_per_token": 0.0000001}
                       for link in ("shared", "per_writing_gpu")], {"cost": {"per_prompt_token_ms": 0.0}}),
    # E10: prompt-only iterations between a reply's words, with chunks, seats, a budget and memory;
    # same-instant arrivals make the next iteration prompt-only
    "prompt-only": ([("0", 64, 6), ("0.020", 48, 4), ("0.045", 32, 3), ("0.045", 8, 6), ("0.080", 24, 2)],
                    [{"name": "whole", "kind": "colocated", "gpus": 1, "mixed_iterations": False},
                     {"name": "chunked", "kind": "colocated", "gpus": 1, "mixed_iterations": False, "chunk_tokens": 40,
                      "cost": {"per_context_token_ms": 0.002}},
                     {"name": "limits", "kind": "colocated", "gpus": 2, "mixed_iterations": False,
                      "max_batch_replies": 1, "max_batch_tokens": 40, "kv_capacity_tokens": 140}]),
    # E9 with E10 (tests/model/test_paged_prompt_only.py): a recompute read again by a prompt-only
    # iteration; a swap right after a prompt-only iteration
    "paged-prompt-only-recompute": ([("0", 8, 10), ("0", 8, 8), ("0", 4, 6)], [dict(PAGED_UNMIXED, name="c")],
                                    {"cost": HAND_COST, "slo": {"freeze_ms": 20}}),
    "paged-prompt-only-swap": ([("0", 4, 8)] * 3 + [("0.05", 4, 2)],
                               [dict(PAGED_UNMIXED, name="c", preemption="swap", swap_ms_per_token=0.01)],
                               {"cost": HAND_COST, "slo": {"freeze_ms": 20}}),
    # E9 without E10 and E7's attention pairs in whole ns (the cost object's reading duration, and
    # repeats.Repeat's growing chunks under paging, synced at arrivals the router weighs): whole prompts
    # under a token budget, and chunks with seats on two GPUs, memory tight enough to preempt
    "paged-attention": ([("0", 8, 12), ("0", 16, 3), ("0", 24, 4), ("0.002", 24, 10), ("0.01", 8, 12), ("0.013", 12, 6),
                         ("0.02", 12, 12)],
                        [{"name": name, "kind": "colocated", "kv_capacity_tokens": 40, "kv_policy": "paged",
                          "kv_block_tokens": 4, "cost": {"per_attention_pair_ms": 0.001}, **more}
                         for name, more in (("whole", {"gpus": 1, "max_batch_tokens": 20}),
                                            ("chunked", {"gpus": 2, "chunk_tokens": 8, "max_batch_replies": 2}))],
                        {"cost": HAND_COST}),
    # the safety cap (D6) cuts replies mid-reply, mid-ship and in a link's queue
    "cap": ([("0", 400, 30)] * 4 + [("0.02", 100, 30)] * 3,
            [{"name": "c", "kind": "colocated", "gpus": 1, "chunk_tokens": 128},
             {"name": "s", "kind": "disaggregated", "reading_gpus": 2, "writing_gpus": 1, "kv_link": "shared",
              "kv_ship_ms_per_token": 0.1, "kv_capacity_tokens": 1000}], {"max_sim_s": 0.1}),
}


@pytest.mark.parametrize("case", sorted(HAND))
def test_hand_picked(tmp_path, case):
    rows, arrangements, *extra = HAND[case]
    extra = extra[0] if extra else {}
    compare(write_scenario(tmp_path, rows, arrangements, **extra), expect_cap="max_sim_s" in extra)


# -- E12: GPUs that change role -----------------------------------------------------------------------

@st.composite
def with_roles(draw, a):
    """A split of `a` whose roles change (E12): one TP degree and one KV capacity on both sides;
    a schedule of moves on a ms grid (some at the ns of an arrival or an iteration end), or the
    policy with thresholds the tiny loads cross."""
    a = dict(a, kind="disaggregated", name=a["name"].replace("c", "s"))
    for key in ("gpus", "tp", "cost", "reading_kv_capacity_tokens", "writing_kv_capacity_tokens", "mixed_iterations",
                "kv_policy", "kv_block_tokens", "preemption", "swap_ms_per_token", "max_preemptions",  # (E9: refused)
                *SIDE_LIMIT_KEYS):  # (per-side limits: refused with moves, R93)
        a.pop(key, None)
    a.setdefault("reading_gpus", draw(st.integers(1, 3)))
    a.setdefault("writing_gpus", draw(st.integers(1, 3)))
    if a.get("reading_tp", 1) != a.get("writing_tp", 1):
        a.pop("reading_tp", None), a.pop("writing_tp", None)
    tp = a.get("reading_tp", 1)
    total = a["reading_gpus"] + a["writing_gpus"]
    switch = draw(st.sampled_from((0.0, 0.001, 0.004, 0.0125)))
    if draw(st.booleans()):
        times = sorted(draw(st.lists(st.integers(1, 60), min_size=1, max_size=3, unique=True)))
        steps = [{"from_s": t / 1000, "reading_gpus": draw(st.sampled_from(range(tp, total - tp + 1, tp)))}
                 for t in times]
        a["roles"] = {"schedule": steps, "switch_s": switch}
    else:
        a["roles"] = {"policy": "queue", "switch_s": switch, "check_s": draw(st.sampled_from((0.001, 0.002, 0.005))),
                      "cooldown_s": draw(st.sampled_from((0.0, 0.003, 0.01))),
                      "wait_s": draw(st.sampled_from((0.001, 0.005))), "gap_ms": draw(st.sampled_from((2, 3, 14, 30)))}
    return a


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=tiny_scenario(tp=True), data=st.data())
def test_simulator_equals_reference_with_roles(tmp_path, case, data):
    """E12 (schedules and the policy, with every other option) to the nanosecond, moves included."""
    rows, arrangements, cost, workload, slo = case
    arrangements = [data.draw(with_roles(a)) for a in arrangements]
    compare(write_scenario(tmp_path, rows, arrangements, cost=cost, workload=workload, slo=slo))


# -- E13: prefix caches and routers --------------------------------------------------------------------

@st.composite
def prefix_case(draw):
    """A tiny scenario with prefix caching on (small blocks, caches of a few blocks, every router)
    and each request's block ids from a small tree of prefixes: block j's id names the request's
    first j + 1 branch choices, so prompts share blocks only along a shared beginning."""
    rows, arrangements, cost, workload, slo = draw(tiny_scenario())
    for a in arrangements:  # (E9 with a prefix cache is refused)
        for key in ("kv_policy", "kv_block_tokens", "preemption", "swap_ms_per_token", "max_preemptions"):
            a.pop(key, None)
    block = draw(st.sampled_from((4, 8, 16)))
    extra = {"prefix_block_tokens": block,
             "prefix_cache_tokens": block * draw(st.sampled_from((1, 2, 3, 6, 1000))),
             "router": draw(st.sampled_from(("least_loaded", "round_robin", "power_of_two", "prefix_aware")))}
    if extra["router"] == "prefix_aware" and draw(st.booleans()):
        extra["router_load_cap_tokens"] = draw(st.sampled_from((1, 16, 64)))
    if draw(st.booleans()):
        cost["per_cached_token_ms"] = draw(st.sampled_from((0.0, 0.01, 0.125, 0.0000005)))
    if extra["router"] != "prefix_aware" and draw(st.integers(0, 3)) == 0:  # a router alone (no cache)
        del extra["prefix_cache_tokens"]
    names: dict[tuple, int] = {}
    blocks = []
    for _, prompt, _ in rows:
        path = tuple(draw(st.lists(st.integers(0, 1), min_size=-(-prompt // block), max_size=-(-prompt // block))))
        blocks.append([names.setdefault(path[: j + 1], len(names)) for j in range(len(path))])
    return rows, arrangements, cost, workload, slo, extra, blocks


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=prefix_case())
def test_simulator_equals_reference_with_prefix_caches(tmp_path, case):
    """E13 with every other option drawn as above: hits, pins, evictions and routers to the ns
    (a quarter of the round_robin, power_of_two and least_loaded cases without a cache)."""
    rows, arrangements, cost, workload, slo, extra, blocks = case
    compare(write_scenario(tmp_path, rows, arrangements, cost=cost, workload=workload, slo=slo, **extra),
            blocks=blocks)


# -- hand cases for the two comparisons a planted bug once passed on some random draws (issue 37) ----

def test_hand_picked_roles_policy_moves_both_ways_as_the_reference_does(tmp_path):
    """E12c by hand against the reference: split-1-2 with the queue policy. A burst of prompts
    arriving while the one reading GPU reads waits `wait_s`: a writing GPU moves to reading
    (`reading_wait`); later twelve replies on the writing side make its next iteration last
    `gap_ms`: a reading GPU moves back (`writing_gap`). Every request's times to the ns."""
    from disagg_simpy.api import run_arrangement

    rows = [("0", 400, 2)] + [("0.005", 300, 2)] * 4 + [("0.200", 10, 40)] * 12 + [("0.3", 10, 2)]
    split = {"name": "s", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 2,
             "roles": {"policy": "queue", "switch_s": 0.002, "check_s": 0.005, "cooldown_s": 0.0,
                       "wait_s": 0.005, "gap_ms": 16.8}}
    path = write_scenario(tmp_path, rows, [split])
    compare(path)
    scenario = load_scenario(path)
    moves = run_arrangement(scenario, scenario.arrangements[0], make_requests(scenario)).switches
    # at the 10 ms check the prompts of 5 ms have waited exactly wait_s: writing GPU 1 (idle:
    # drained at once) reads from 12 ms; at 215 ms the twelve 40-word replies on GPU 2 make its
    # next iteration 12 + 0.4 x 12 = 16.8 ms, exactly gap_ms: reading GPU 0 (nothing queued)
    # writes from 217 ms. Both thresholds are met at equality (">= wait_s", ">= gap_ms").
    assert moves == {"gpu": [1, 0], "from_role": ["writes", "reads"], "to_role": ["reads", "writes"],
                     "why": ["reading_wait", "writing_gap"], "requested_at_ns": [10_000_000, 215_000_000],
                     "drained_at_ns": [10_000_000, 215_000_000], "serving_at_ns": [12_000_000, 217_000_000]}


def test_hand_picked_prefix_aware_with_equal_hits_goes_to_less_work_queued_then_d2(tmp_path):
    """E13f by hand against the reference: two GPUs both hold A's and B's blocks [1, 2] (read at
    0-18 ms, one each). At 100-106 ms P1 (100 tokens) and P3 (30) go to GPU 0, P2 (20) and P4 (10)
    to GPU 1, so at 107 ms GPU 0 has 30 tokens queued behind its read and GPU 1 has 10, while GPU
    0's latest assignment (105 ms) is older than GPU 1's (106 ms). C ([1, 2, 3]) finds 8 tokens
    cached on each: the tie goes to less work queued, GPU 1 (D2 alone would say GPU 0)."""
    rows = [("0", 8, 1), ("0", 8, 1), ("0.100", 100, 1), ("0.100", 20, 1), ("0.105", 30, 1), ("0.106", 10, 1),
            ("0.107", 12, 1)]
    blocks = [[1, 2], [1, 2], [10 + i for i in range(25)], [40 + i for i in range(5)], [50 + i for i in range(8)],
              [60, 61, 62], [1, 2, 3]]
    cost = {"iteration_ms": 10, "per_reply_ms": 0, "per_prompt_token_ms": 1, "per_cached_token_ms": 0.1}
    path = write_scenario(tmp_path, rows, [{"name": "two", "kind": "colocated", "gpus": 2}], cost=cost,
                          prefix_cache_tokens=1000, prefix_block_tokens=4, router="prefix_aware")
    compare(path, blocks=blocks)
    from disagg_simpy.api import run_arrangement

    scenario = load_scenario(path)
    rec = run_arrangement(scenario, scenario.arrangements[0], with_blocks(make_requests(scenario), blocks, 4))
    assert rec.requests["reading_gpu"].tolist() == [0, 1, 0, 1, 0, 1, 1]
    assert rec.cached_tokens[6] == 8


# -- E16: speculative decoding -----------------------------------------------------------------------

@st.composite
def speculative_scenario(draw):
    """E16 on, as `tiny_scenario` draws the rest, with replies long enough for several accepted words
    per iteration and every rule E16 goes with (not E9: refused), E3 with E10 more often. E8's token budgets
    (R84) hold one reply with its k drafts and one prompt token, some of them a few seats' tokens exactly."""
    rows, arrangements, cost, workload, slo = draw(tiny_scenario(tp=draw(st.booleans())))
    words = draw(st.lists(st.sampled_from((1, 2, 3, 5, 9, 17, 30)), min_size=len(rows), max_size=len(rows)))
    rows = [(t, p, w) for (t, p, _), w in zip(rows, words)]
    spec = {"tokens": draw(st.sampled_from((1, 2, 4))), "acceptance": draw(st.sampled_from((0.0, 0.5, 0.7, 0.95)))}
    per = 1 + spec["tokens"]
    for a in arrangements:
        for key in ("kv_policy", "kv_block_tokens", "preemption", "swap_ms_per_token", "max_preemptions"):
            a.pop(key, None)
        if draw(st.booleans()):  # E8 with E16 (R84): a writing budget of 1-3 replies with their drafts, and a few tokens
            key = "writing_max_batch_tokens" if "writing_max_batch_tokens" in a else "max_batch_tokens"
            a[key] = per * draw(st.integers(1, 3)) + draw(st.sampled_from((0, 1, 2, 7)))
        for key in ("max_batch_tokens", "writing_max_batch_tokens"):  # (at least k + 2: one reply, its drafts, a token)
            if key in a and a[key] < per + 1:
                a[key] = per + 1 + draw(st.sampled_from((0, 1, 2)))
        for key in ("kv_capacity_tokens", "reading_kv_capacity_tokens", "writing_kv_capacity_tokens"):
            if key in a:  # (slack above the largest need, as tiny_scenario's)
                a[key] = max(p + w for _, p, w in rows) + draw(st.sampled_from((0, 4, 20)))
    if any(a.get("mixed_iterations") is False for a in arrangements) and draw(st.booleans()):
        cost["per_context_token_ms"] = draw(st.sampled_from((0.002, 0.125)))  # E3 with E10 (R86), more often
    if draw(st.booleans()):
        spec["per_draft_token_ms"] = draw(st.sampled_from((0.0, 0.25, 0.0000005)))  # the last: half a ns
    return rows, arrangements, cost, workload, slo, spec, draw(st.integers(0, 3))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=speculative_scenario(), data=st.data())
def test_simulator_equals_reference_with_speculative_decoding(tmp_path, case, data):
    """E16 with E1-E8 (seats and token budgets), E10 (with E3), E12, E14, E15 and TP drawn on and off: each word's
    time, to the ns."""
    rows, arrangements, cost, workload, slo, spec, seed = case
    if data.draw(st.integers(0, 3)) == 0:  # E12: roles that change (its policy weighs E16's verification too)
        arrangements = [data.draw(with_roles(a)) for a in arrangements]
    compare(write_scenario(tmp_path, rows, arrangements, cost=cost, workload=workload, slo=slo, speculative=spec,
                           seed=seed))
