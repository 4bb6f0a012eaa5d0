"""The optional rules (E1-E8, E10) on random tiny scenarios: every invariant holds with them on
(memory never over capacity, one ship per link at a time, every reservation freed), and the
metamorphic checks: options set to their neutral values are the explainer's model, a `shared` link
never ships faster than independent ships, and more KV memory never lowers the on-time share on
average over 30 seeds."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from invariants import check_run, check_words_frame

from disagg_simpy import load_scenario, run
from disagg_simpy.scenario.options import reservation

HEADER = "arrived_at_s,n_prompt_tokens,n_reply_words"
LINKS = ("independent", "per_reading_gpu", "per_writing_gpu", "shared")


#: PROPERTY_EXAMPLES_SCALE=50 runs 50 times as many examples (a deeper hunt, outside the suite).
SCALE = int(os.environ.get("PROPERTY_EXAMPLES_SCALE", "1"))


def examples(n: int) -> settings:
    return settings(max_examples=n * SCALE, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def ms(us: int) -> float:
    return us / 1000


rows = st.lists(st.tuples(st.integers(0, 8), st.integers(1, 1500), st.integers(1, 12)), min_size=1, max_size=12).map(
    lambda rs: sorted(((t * 0.01, p, w) for t, p, w in rs), key=lambda r: r[0]))
E14 = {"prompt_iteration_ms": st.integers(0, 5_000).map(ms), "free_prompt_tokens": st.integers(0, 600)}
E15 = {"token_tile": st.sampled_from((1, 16, 64, 128)), "per_token_tile_ms": st.integers(0, 3_000).map(ms)}
E17 = {"per_expert_ms": st.integers(0, 500).map(ms)}


def tiled(c: dict) -> dict:
    """E15: per_token_tile_ms only beside its token_tile (reading R75); E17: per_expert_ms beside
    its experts and top-k (R95)."""
    if "per_expert_ms" in c:
        c = {**c, "experts": 16, "experts_per_token": 4}
    return c if "token_tile" in c or "per_token_tile_ms" not in c else {**c, "token_tile": 32}
side_cost = st.one_of(st.none(), st.fixed_dictionaries({}, optional={
    "iteration_ms": st.integers(1_000, 15_000).map(ms),
    "per_reply_ms": st.integers(0, 1_000).map(ms),
    "per_prompt_token_ms": st.integers(0, 50).map(ms),
    "per_reread_token_ms": st.integers(0, 20).map(ms),
    "per_context_token_ms": st.integers(0, 20).map(ms),
    "per_attention_pair_ms": st.integers(0, 3).map(lambda us: us / 1e6),
    **E14, **E15, **E17,
}).map(tiled))
chunk = st.one_of(st.none(), st.integers(1, 700))
costs = st.fixed_dictionaries({
    "iteration_ms": st.integers(1_000, 15_000).map(ms),
    "per_reply_ms": st.integers(0, 1_000).map(ms),
    "per_prompt_token_ms": st.integers(0, 50).map(ms),
    "kv_ship_ms_per_token": st.integers(1, 50).map(ms),
    "per_reread_token_ms": st.integers(0, 20).map(ms),
    "per_context_token_ms": st.integers(0, 20).map(ms),
    "per_attention_pair_ms": st.integers(0, 3).map(lambda us: us / 1e6),
}, optional={**E14, **E15, **E17}).map(tiled)


@st.composite
def arrangement(draw, trace_rows):
    """A colocated or split arrangement with random options; a capacity that fits every request."""
    if draw(st.booleans()):
        a = {"kind": "colocated", "gpus": draw(st.integers(1, 2))}
        if (c := draw(side_cost)) is not None:
            a["cost"] = c
        if draw(st.integers(0, 3)) == 0:  # E10
            a["mixed_iterations"] = False
    else:
        a = {"kind": "disaggregated", "reading_gpus": draw(st.integers(1, 2)), "writing_gpus": draw(st.integers(1, 2)),
             "kv_link": draw(st.sampled_from(LINKS))}
        for key in ("reading_cost", "writing_cost"):
            if (c := draw(side_cost)) is not None:
                a[key] = c
        if draw(st.booleans()):
            a["kv_ship_ms_per_token"] = ms(draw(st.integers(1, 50)))
        if draw(st.booleans()):
            a["local_prompt_max_tokens"] = draw(st.integers(1, 1500))
    if (c := draw(chunk)) is not None:
        a["chunk_tokens"] = c
    if draw(st.booleans()):
        class View:  # what `reservation` reads of an arrangement
            is_split = a["kind"] == "disaggregated"
            local_prompt_limit = a.get("local_prompt_max_tokens")
        need = int(reservation(View, [r[1] for r in trace_rows], [r[2] for r in trace_rows]).max())
        a["kv_capacity_tokens"] = need + draw(st.integers(0, 2500))
    if draw(st.integers(0, 3)) == 0:  # E8
        a["max_batch_replies"] = draw(st.integers(1, 4))
    if draw(st.integers(0, 3)) == 0:
        a["max_batch_tokens"] = draw(st.integers(2, 2000))
    return a


def write(folder: Path, trace_rows, spec: dict) -> Path:
    (folder / "t.csv").write_text(HEADER + "\n" + "".join(f"{t!r},{p},{w}\n" for t, p, w in trace_rows))
    path = folder / "s.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def run_spec(trace_rows, spec):
    with tempfile.TemporaryDirectory() as tmp:
        return run(load_scenario(write(Path(tmp), trace_rows, spec)))


@st.composite
def scenarios(draw):
    trace_rows = draw(rows)
    n = draw(st.integers(1, 3))
    arrangements = [{"name": f"a{i}", **draw(arrangement(trace_rows))} for i in range(n)]
    spec = {"name": "ext", "workload": {"trace": "t.csv"}, "cost": draw(costs), "arrangements": arrangements}
    if draw(st.booleans()):  # a cap that may cut the run short
        spec["max_sim_s"] = trace_rows[-1][0] + draw(st.sampled_from([0.02, 0.1, 0.5]))
    return trace_rows, spec


@examples(30)
@given(case=scenarios())
def test_random_scenarios_with_options_keep_every_invariant(case):
    result = run_spec(*case)
    check_run(result)
    for name in result.records:
        check_words_frame(result, name)


PAGE_COLUMNS = ["request_id", "reading_gpu", "read_started_at_s", "first_word_at_s", "writing_gpu", "joined_at_s",
                "finished_at_s", "max_gap_ms", "on_time"]


@examples(15)
@given(trace_rows=rows, arrangement_list=st.lists(st.sampled_from([
    {"kind": "colocated", "gpus": 2}, {"kind": "colocated", "gpus": 1, "chunk_tokens": 300},
    {"kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 2},
    {"kind": "disaggregated", "reading_gpus": 2, "writing_gpus": 1, "chunk_tokens": 200}]), min_size=1, max_size=3),
    cost=costs)
def test_neutral_options_are_the_pages_model(trace_rows, arrangement_list, cost):
    """Re-read and context costs of 0, each side's costs equal to the scenario's, independent
    ships stated, and a memory that holds every request at once: the explainer's model exactly."""
    cost = {**cost, "per_reread_token_ms": 0, "per_context_token_ms": 0}
    plain = [{"name": f"a{i}", **a} for i, a in enumerate(arrangement_list)]
    everything = sum(p + w for _, p, w in trace_rows)
    side = {k: cost[k] for k in ("iteration_ms", "per_reply_ms", "per_prompt_token_ms")}
    neutral = []
    for a in plain:
        a = {**a, "kv_capacity_tokens": everything}
        if a["kind"] == "colocated":
            a["cost"] = {**side, "per_reread_token_ms": 0}
        else:
            a.update(reading_cost=side, writing_cost={"per_context_token_ms": 0}, kv_link="independent",
                     kv_ship_ms_per_token=cost["kv_ship_ms_per_token"])
        neutral.append(a)
    spec = {"name": "plain", "workload": {"trace": "t.csv"}, "cost": cost}
    a, b = run_spec(trace_rows, {**spec, "arrangements": plain}), run_spec(trace_rows, {**spec, "arrangements": neutral})
    assert a.requests[PAGE_COLUMNS].equals(b.requests[PAGE_COLUMNS])
    cols = ["gpu", "iteration", "started_at_s", "ended_at_s", "n_replies_written", "n_prompt_tokens_read"]
    assert a.iterations[cols].equals(b.iterations[cols])
    for name in a.records:
        assert a.words(name).equals(b.words(name))
    wait = b.requests["handoff_wait_s"]
    assert (wait.isna() | (wait == 0)).all()  # empty on colocated GPUs and for one-word replies


@examples(15)
@given(trace_rows=rows, reading=st.integers(1, 2), writing=st.integers(1, 2), cost=costs)
def test_a_shared_link_never_ships_faster_than_independent_ships(trace_rows, reading, writing, cost):
    """Without a memory limit the reading side never sees the link, so word 1 comes at the same
    instant; every ship then takes at least as long (waiting included) on a shared link, and the
    per-GPU links lie in between."""
    base = {"kind": "disaggregated", "reading_gpus": reading, "writing_gpus": writing}
    spec = {"name": "links", "workload": {"trace": "t.csv"}, "cost": cost,
            "arrangements": [{**base, "name": link, "kv_link": link} for link in LINKS]}
    r = run_spec(trace_rows, spec).requests.set_index(["arrangement", "request_id"])
    ship = (r["joined_at_s"] - r["first_word_at_s"]).round(9)
    first = r["first_word_at_s"]
    for link in LINKS[1:]:
        assert first[link].equals(first["independent"])
        slower = ship[link].fillna(np.inf) >= ship["independent"].fillna(np.inf)
        assert slower[r.loc[link, "n_reply_words"] > 1].all()
    assert (ship["shared"].fillna(np.inf) >= ship["per_reading_gpu"].fillna(np.inf) - 1e-9).sum() >= 0
    waits = r["link_wait_s"]
    assert waits["independent"].isna().all() and (waits["shared"].dropna() >= 0).all()


def test_more_kv_memory_never_lowers_on_time_on_average_over_30_seeds(tmp_path):
    """A small synthetic load (2 s of traffic on 2 GPUs) at four capacities, from one that barely
    holds the largest request to no limit: the mean on-time share over 30 seeds never falls."""
    capacities = [1_600, 3_000, 6_000, None]
    arrangements = []
    for cap in capacities:
        extra = {} if cap is None else {"kv_capacity_tokens": cap}
        arrangements += [{"name": f"same-{cap}", "kind": "colocated", "gpus": 2, "chunk_tokens": 256, **extra},
                         {"name": f"split-{cap}", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 1, **extra}]
    spec = {"name": "capacity", "workload": {"rate_per_s": 12, "measure_s": 2,
                                             "prompt_mix": [{"share": 0.3, "tokens": [600, 1200]},
                                                            {"share": 0.7, "tokens": [50, 300]}],
                                             "reply_words": [20, 60]},
            "cost": {"iteration_ms": 10, "per_reply_ms": 0.5, "per_prompt_token_ms": 0.02, "kv_ship_ms_per_token": 0.01},
            "slo": {"first_word_s": 0.5, "mean_gap_ms": 20, "freeze_ms": 60},
            "arrangements": arrangements}
    path = tmp_path / "capacity.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    scenario = load_scenario(path)
    summaries = [run(scenario, seed=s).summary.set_index("arrangement")["on_time_pct"] for s in range(1, 31)]
    mean = sum(summaries) / len(summaries)
    print(mean.to_dict())
    for kind in ("same", "split"):
        series = [mean[f"{kind}-{cap}"] for cap in capacities]
        assert all(b >= a for a, b in zip(series, series[1:])), f"{kind}: on time by capacity {series}"
        assert series[0] < series[-1], f"{kind}: the smallest memory should cost something: {series}"


def test_realistic_scenario_keeps_every_invariant():
    """scenarios/realistic.yaml (every option on, sourced figures) over a short window."""
    from helpers import ROOT

    scenario = load_scenario(ROOT / "scenarios" / "realistic.yaml").with_overrides(**{"workload.measure_s": 5})
    result = run(scenario, seed=3)
    check_run(result)
    summary = result.summary.set_index("arrangement")
    assert summary[["kv_peak_reading_pct", "kv_peak_writing_pct"]].notna().all().all()
    assert summary.loc[summary.index.str.startswith("split"), "link_waited_pct"].notna().all()
