"""The plan's bound under E14 (sweep/plan_bounds.per_prompt_token): never more than what the
model's iterations really cost, on generated scenarios; a bound that forgets the free tokens (or
the least at P = F) is caught; and the bound now stands on E14 scenarios instead of aside."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from disagg_simpy import load_scenario, run
from disagg_simpy.sweep import plan_bounds
from disagg_simpy.sweep.plan_bounds import budgets, per_prompt_token

MIXES = (0.0, 0.5, 1.0)


def e14_scenario(tmp_path, cost: dict, arrangement: dict, tokens=(20, 300), rate=6.0, name="s.yaml"):
    import yaml

    spec = {"name": "e14", "seed": 1, "max_sim_s": 20, "cost": cost,
            "workload": {"rate_per_s": rate, "warmup_s": 0, "measure_s": 2, "reply_words": [1, 30],
                         "prompt_mix": [{"share": 1, "tokens": list(tokens)}]},
            "arrangements": [arrangement]}
    path = tmp_path / name
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return load_scenario(path)


def over_counts(scenario, token_fn=per_prompt_token) -> list:
    """Where the bound would count more than the run's work: per iteration that reads P > 0
    tokens and writes A words, its time against `token_fn(fixed) x P + lambda x (iteration_ms -
    1 ns) + per_reply_ms x A` (the writing share as `_fixed_per_word` counts it, D10's margin
    off) for each colocated mix (fixed = (1 - lambda) x iteration_ms); and per run,
    the reading iterations' time against the `read` budget's cost of every token they read."""
    res = run(scenario)
    bad = []
    for a in scenario.arrangements:
        rec = res.records[a.name]
        reading, writing = a.side_costs(scenario.cost)
        it = rec.iterations
        took = it["ended_at_ns"] - it["started_at_ns"]
        tokens, replies = it["n_prompt_tokens_read"], it["n_replies_written"]
        role = np.asarray(rec.gpu_roles)[it["gpu"]]
        cap = a.chunk_tokens if getattr(a, "local_prompt_max_tokens", None) is None else None
        for side, cost, on in (("reads", reading, role != "writes"), ("writes", writing, role == "writes")):
            rows = on & (tokens > 0)
            for lam in MIXES:
                least = (token_fn(cost, (1 - lam) * cost.iteration_ms, cap if side == "reads" else None) * tokens[rows]
                         + lam * max(cost.iteration_ms - 1e-6, 0.0) + cost.per_reply_ms * replies[rows]) * 1e6
                over = least > took[rows] + 1e-6
                bad += [(a.name, side, lam, int(tokens[rows][k]), int(took[rows][k])) for k in np.flatnonzero(over)[:3]]
        read = next(b for b in budgets(scenario, a) if b.kind == "read")
        readers = (tokens > 0) & ((role != "writes") | (getattr(a, "local_prompt_max_tokens", None) is not None))
        if read.per_token_ms * tokens[readers].sum() * 1e6 > took[readers].sum() + 1e-6:
            bad.append((a.name, "read budget"))
    return bad


@st.composite
def e14_cases(draw):
    cost = {"iteration_ms": draw(st.sampled_from([1.0, 4.5, 12.0])),
            "per_reply_ms": draw(st.sampled_from([0.0, 0.3])),
            "per_prompt_token_ms": draw(st.sampled_from([0.01, 0.05, 0.0731])),
            "prompt_iteration_ms": draw(st.sampled_from([0.0, 0.0003, 2.0, 9.5])),
            "free_prompt_tokens": draw(st.sampled_from([0, 1, 37, 100, 512, 2000])),
            "per_attention_pair_ms": draw(st.sampled_from([0.0, 1e-6]))}
    if draw(st.booleans()):
        arrangement = {"name": "a", "kind": "colocated", "gpus": draw(st.integers(1, 2)),
                       "chunk_tokens": draw(st.sampled_from([None, 64, 100, 256]))}
    else:
        arrangement = {"name": "a", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 1,
                       "chunk_tokens": draw(st.sampled_from([None, 64, 256])),
                       "reading_cost": {"free_prompt_tokens": draw(st.sampled_from([0, 50, 300]))}}
        if draw(st.booleans()):
            arrangement["local_prompt_max_tokens"] = 150
            arrangement["writing_cost"] = {"per_prompt_token_ms": 0.004, "prompt_iteration_ms": 0.5}
    arrangement = {k: v for k, v in arrangement.items() if v is not None}
    tokens = draw(st.sampled_from([(5, 60), (20, 300), (200, 1500)]))
    return cost, arrangement, tokens, draw(st.sampled_from([3.0, 12.0]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=e14_cases())
def test_the_bound_never_counts_more_than_the_iterations_took(tmp_path, case):
    cost, arrangement, tokens, rate = case
    scenario = e14_scenario(tmp_path, cost, arrangement, tokens, rate)
    assert budgets(scenario, scenario.arrangements[0]) is not None  # (E14 keys known: the bound stands)
    assert over_counts(scenario) == []


def test_the_least_per_token_by_hand():
    """10 ms iterations, 0.01 ms a token, prompt_iteration_ms 5, 100 free tokens: in chunks of 512
    the least is at P = 512 (15 + 4.12 ms over 512 tokens); in chunks of 80, at P = 80 (all free:
    15 ms over 80); uncapped, the limit 0.01; with 2,000 free uncapped, at P = 2,000 (15 / 2,000);
    without E14, 0.01 + (10 ms less D10's 1 ns) / 512."""
    from disagg_simpy.scenario.cost_fields import Cost

    c = Cost(iteration_ms=10, per_prompt_token_ms=0.01, prompt_iteration_ms=5, free_prompt_tokens=100)
    a = 15 - 1e-6
    assert per_prompt_token(c, 10, 512) == pytest.approx((a + 0.01 * 412) / 512, rel=1e-12)
    assert per_prompt_token(c, 10, 80) == pytest.approx(a / 80, rel=1e-12)
    assert per_prompt_token(c, 10, None) == pytest.approx(0.01, rel=1e-12)
    many = c.model_copy(update={"free_prompt_tokens": 2000})
    assert per_prompt_token(many, 10, None) == pytest.approx(a / 2000, rel=1e-12)
    plain = Cost(iteration_ms=10, per_prompt_token_ms=0.01)
    assert per_prompt_token(plain, 10, 512) == 0.01 + (10 - 1e-6) / 512


def blind(cost, fixed_ms, cap):
    """A planted over-count: E14's free tokens forgotten (every token pays per_prompt_token_ms)."""
    return cost.per_prompt_token_ms + ((fixed_ms + (cost.prompt_iteration_ms or 0.0)) / cap if cap else 0.0)


def cap_only(cost, fixed_ms, cap):
    """A planted over-count: the least taken at P = cap only, forgetting P = free_prompt_tokens."""
    a = fixed_ms + (cost.prompt_iteration_ms or 0.0) - 1e-6
    return (a + cost.per_prompt_token_ms * max(0, cap - cost.free_prompt_tokens)) / cap if cap else cost.per_prompt_token_ms


@pytest.mark.parametrize("planted", [blind, cap_only])
def test_a_planted_over_count_is_caught(tmp_path, planted, monkeypatch):
    """Short prompts (20-60 tokens) read in chunks of 512 with 100 free tokens: most reading
    iterations read under 100 tokens and pay only the fixed costs."""
    scenario = e14_scenario(tmp_path, {"iteration_ms": 1.0, "per_reply_ms": 0.0, "per_prompt_token_ms": 0.05, "prompt_iteration_ms": 0.5,
                                       "free_prompt_tokens": 100},
                            {"name": "a", "kind": "colocated", "gpus": 1, "chunk_tokens": 512}, (20, 60), 12.0)
    assert over_counts(scenario) == []
    assert over_counts(scenario, planted)
    monkeypatch.setattr(plan_bounds, "per_prompt_token", planted)  # the budgets themselves over-count too
    assert any(b[1] == "read budget" for b in over_counts(scenario, planted))


def test_a_plan_on_an_e14_scenario_leaves_arrangements_and_recommends_what_the_exhaustive_one_does(tmp_path, monkeypatch):
    """The explainer's traffic on 4 GPUs with E14 (4 ms a reading iteration, 256 free tokens),
    searched in test_plan_bounds' two orders, the likeliest first and the worst first (where a
    bound too low loses the best): the bound stands on every arrangement, the plan leaves some,
    and its top two rows, recommendation and every goodput searched to its end are the
    exhaustive search's; every arrangement left is truly below its figure."""
    from test_plan_bounds import left_in_both_orders, small

    scenario = small(tmp_path, 4, chunks=(512,), measure_s=3)
    scenario = scenario.model_copy(update={"cost": scenario.cost.model_copy(
        update={"prompt_iteration_ms": 4.0, "free_prompt_tokens": 256})})
    assert all(budgets(scenario, a) is not None for a in scenario.arrangements)
    assert left_in_both_orders(tmp_path, scenario, monkeypatch)["likeliest"] >= 3


def test_an_iteration_rounded_down_to_the_ns_is_not_over_counted(tmp_path):
    """Without E14 too, D10 may take half a ns off an iteration: 16-token chunks of 16-token
    prompts at 1.0000004 ms a reading iteration run 1,016,000 ns each, which the bound must not
    count as 1,016,000.4 (found by review with costs that are not whole ns)."""
    scenario = e14_scenario(tmp_path, {"iteration_ms": 1.0000004, "per_reply_ms": 0.0, "per_prompt_token_ms": 0.001},
                            {"name": "a", "kind": "colocated", "gpus": 1, "chunk_tokens": 16}, (16, 16), 12.0)
    assert over_counts(scenario) == []
