"""`plan` carries the whole arrangement: a candidate is the scenario's arrangement with its kind,
split, chunks and TP changed, never rebuilt from defaults; what a candidate cannot carry is
refused in one line naming it. Every per-arrangement key of the schema is tried (a new key
fails `test_every_schema_key_has_a_case` until it gets a case here)."""

from __future__ import annotations

import pytest
import yaml
from helpers import SMALL_TRAFFIC

from disagg_simpy import load_scenario
from disagg_simpy.errors import InputError
from disagg_simpy.scenario.arrangements import KINDS
from disagg_simpy.sweep.plan import PLANNED_KEYS, candidates, with_candidates

#: per kind, for each key a candidate may carry, the keys (with values) an arrangement writes
#: to set it validly
CASES = {
    "colocated": {
        "cost": {"cost": {"iteration_ms": 20.0}},
        "kv_capacity_tokens": {"kv_capacity_tokens": 200_000},
        "max_batch_replies": {"max_batch_replies": 16},
        "max_batch_tokens": {"max_batch_tokens": 4096},
        "roles": {"roles": "static"},
        "mixed_iterations": {"mixed_iterations": False},
        "gpu": {"gpu": "h100-80gb"},
        "kv_policy": {"kv_policy": "paged", "kv_capacity_tokens": 200_000},
        "kv_block_tokens": {"kv_policy": "paged", "kv_capacity_tokens": 200_000, "kv_block_tokens": 32},
        "preemption": {"kv_policy": "paged", "kv_capacity_tokens": 200_000, "preemption": "swap",
                       "swap_ms_per_token": 0.001},
        "swap_ms_per_token": {"kv_policy": "paged", "kv_capacity_tokens": 200_000, "preemption": "swap",
                              "swap_ms_per_token": 0.002},
        "max_preemptions": {"kv_policy": "paged", "kv_capacity_tokens": 200_000, "max_preemptions": 0},
    },
    "disaggregated": {
        "reading_cost": {"reading_cost": {"iteration_ms": 20.0}},
        "writing_cost": {"writing_cost": {"per_reply_ms": 0.5}},
        "kv_ship_ms_per_token": {"kv_ship_ms_per_token": 0.02},
        "kv_capacity_tokens": {"kv_capacity_tokens": 200_000},
        "kv_link": {"kv_link": "shared"},
        "local_prompt_max_tokens": {"local_prompt_max_tokens": 100},
        "max_batch_replies": {"max_batch_replies": 16},
        "max_batch_tokens": {"max_batch_tokens": 4096},
        "reading_kv_capacity_tokens": {"reading_kv_capacity_tokens": 100_000, "writing_kv_capacity_tokens": 300_000},
        "writing_kv_capacity_tokens": {"kv_capacity_tokens": 100_000, "writing_kv_capacity_tokens": 300_000},
        "kv_path": {"kv_path": "inter_node"},
        "reading_gpu": {"reading_gpu": "h100-80gb"},
        "writing_gpu": {"writing_gpu": "h200"},
        "roles": {"roles": {"policy": "queue"}},
        "kv_policy": {"kv_policy": "paged", "kv_capacity_tokens": 200_000},
        "kv_block_tokens": {"kv_policy": "paged", "kv_capacity_tokens": 200_000, "kv_block_tokens": 32},
        "preemption": {"kv_policy": "paged", "kv_capacity_tokens": 200_000, "preemption": "swap",
                       "swap_ms_per_token": 0.001},
        "swap_ms_per_token": {"kv_policy": "paged", "kv_capacity_tokens": 200_000, "preemption": "swap",
                              "swap_ms_per_token": 0.002},
        "max_preemptions": {"kv_policy": "paged", "kv_capacity_tokens": 200_000, "max_preemptions": 0},
    },
}
#: keys a candidate cannot carry, and a word its refusal says
REFUSED = {("disaggregated", "roles"): "static arrangements"}
#: keys of one kind only: a candidate of the other kind refuses them, when the scenario has no
#: arrangement of that kind to take its own settings from (a colocated `cost` or `gpu` maps to both
#: sides; a split's sides map back only when the same)
OTHER_KIND_REFUSED = {"reading_kv_capacity_tokens", "writing_kv_capacity_tokens", "writing_cost", "reading_cost",
                      "reading_gpu", "writing_gpu"}
#: keys that mean nothing on the other kind (a colocated GPU ships no KV; a split's reading GPUs never
#: write, so nothing mixes): the other kind's candidates go without them, its own keep them (review F7:
#: a split-only scenario writing kv_path could not be planned, and the refusal's remedy did not work)
NO_MEANING = {"mixed_iterations", "kv_link", "local_prompt_max_tokens", "kv_path", "kv_ship_ms_per_token"}
#: a key that needs a preset in the scenario's cost
PRESET = {"kv_path": {"preset": "a100-80gb/llama-3-8b/tp1/vidur-sarathi"}}
SAME = {"name": "same", "kind": "colocated", "gpus": 2}
SPLIT = {"name": "split", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 1}


def _schema_keys(kind: str) -> set[str]:
    return {f.alias or k for k, f in KINDS[kind].model_fields.items()}


def _scenario(tmp_path, arrangements, cost=None):
    spec = {"name": "carry", "workload": dict(SMALL_TRAFFIC), "max_sim_s": 20, "arrangements": arrangements}
    if cost:
        spec["cost"] = cost
    path = tmp_path / "carry.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return load_scenario(path)


def _field(a, key: str):
    name = next(k for k, f in type(a).model_fields.items() if (f.alias or k) == key)
    return getattr(a, name)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_schema_key_has_a_case(kind):
    assert _schema_keys(kind) - set(PLANNED_KEYS) == set(CASES[kind]), (
        "a new per-arrangement key: say here what plan does with it (carry, or refuse in one line)")


def _case_ids():
    return [(kind, key) for kind in sorted(CASES) for key in CASES[kind]]


@pytest.mark.parametrize(("kind", "key"), _case_ids(), ids=[f"{k}.{key}" for k, key in _case_ids()])
def test_every_candidate_of_the_kind_carries_the_key(tmp_path, kind, key):
    own = CASES[kind][key]
    base = SAME if kind == "colocated" else SPLIT
    other = SPLIT if kind == "colocated" else SAME
    scenario = _scenario(tmp_path, [{**base, **own}, other], cost=PRESET.get(key))
    written = next(a for a in scenario.arrangements if a.kind == kind)
    if (kind, key) in REFUSED:
        with pytest.raises(InputError) as err:
            with_candidates(scenario, candidates(4, (512,)), "--gpus")
        text = str(err.value)
        assert "\n" not in text and f"arrangements.{base['name']}.{key}" in text and REFUSED[kind, key] in text
        return
    planned = with_candidates(scenario, candidates(4, (512,)), "--gpus")
    mine = [a for a in planned.arrangements if a.kind == kind]
    assert len(mine) > 1
    for a in mine:
        for k in own:
            assert _field(a, k) == _field(written, k), f"{a.name}: {k} is {_field(a, k)}, the scenario's is {_field(written, k)}"
    for a in planned.arrangements:  # the other kind keeps its own (none of this key)
        if a.kind != kind and key in _schema_keys(a.kind) and key not in ("roles",):
            assert _field(a, key) == _field(next(s for s in scenario.arrangements if s.kind == a.kind), key)


@pytest.mark.parametrize(("kind", "key"), _case_ids(), ids=[f"{k}.{key}" for k, key in _case_ids()])
def test_a_scenario_of_one_kind_lends_its_keys_to_the_other_or_refuses_them(tmp_path, kind, key):
    own = CASES[kind][key]
    base = SAME if kind == "colocated" else SPLIT
    scenario = _scenario(tmp_path, [{**base, **own}], cost=PRESET.get(key))
    written = scenario.arrangements[0]
    refused = (kind, key) in REFUSED or (set(own) & OTHER_KIND_REFUSED and key not in ("cost", "gpu"))
    if kind == "colocated" and key == "roles":  # `roles: static` is the default: nothing to carry
        refused = False
    if refused:
        with pytest.raises(InputError) as err:
            with_candidates(scenario, candidates(4, (512,)), "--gpus")
        text = str(err.value)
        assert "\n" not in text and f"arrangements.{base['name']}." in text, text
        assert any(f".{k}:" in text for k in own), text
        return
    planned = with_candidates(scenario, candidates(4, (512,)), "--gpus")
    assert {a.kind for a in planned.arrangements} == set(KINDS)
    for a in planned.arrangements:
        for k in own:
            if k in NO_MEANING and a.kind != kind:
                assert k not in _schema_keys(a.kind)  # (nothing to carry it to)
            elif k == "cost" and a.is_split:  # the same GPU's costs are both sides' on a split
                assert a.reading_cost == a.writing_cost == written.cost
            elif k == "gpu" and a.is_split:  # and its GPU kind
                assert a.reading_gpu == a.writing_gpu == written.gpu
            elif k != "roles":
                assert _field(a, k) == _field(written, k), f"{a.name}: {k}"


def test_a_key_written_differently_by_two_arrangements_of_a_kind_is_refused(tmp_path):
    scenario = _scenario(tmp_path, [{**SAME, "max_batch_tokens": 4096}, {**SAME, "name": "same-b"}, SPLIT])
    with pytest.raises(InputError) as err:
        with_candidates(scenario, candidates(4, (512,)), "--gpus")
    text = str(err.value)
    assert "\n" not in text and "arrangements.same-b.max_batch_tokens: got none, but same writes 4096" in text


def test_a_tp_candidate_refuses_a_per_instance_key(tmp_path):
    scenario = _scenario(tmp_path, [{**SAME, "kv_capacity_tokens": 200_000}, SPLIT],
                         cost={"preset": "a100-80gb/opt-13b/tp1/distserve"})
    both = candidates(4, (), tps=(1, 2), tp_cost=lambda t: {"preset": f"a100-80gb/opt-13b/tp{t}"})
    with pytest.raises(InputError) as err:
        with_candidates(scenario, both, "--gpus")
    text = str(err.value)
    assert "\n" not in text and "arrangements.same.kv_capacity_tokens" in text and "same-gpu-tp2" in text
    with_candidates(scenario, candidates(4, ()), "--gpus")  # TP 1: carried


def test_the_plan_command_runs_the_carried_engine(tmp_path, capsys):
    """End to end: plan's candidates run with the scenario's max_batch_replies (a limit of one
    reply per iteration changes the on-time shares the plan prints)."""
    from disagg_simpy.cli import main

    def plan(arrangements):
        path = tmp_path / "carry.yaml"
        path.write_text(yaml.safe_dump({"name": "carry", "workload": dict(SMALL_TRAFFIC), "max_sim_s": 20,
                                        "arrangements": arrangements}, sort_keys=False))
        out = tmp_path / f"out{len(list(tmp_path.iterdir()))}"
        assert main(["plan", str(path), "--gpus", "2", "--chunks", "none", "--seeds", "1", "--no-plots", "--out",
                     str(out), "--workers", "1"]) == 0
        import pandas as pd

        return pd.read_csv(out / "plan.csv").set_index("arrangement").goodput_per_s.sort_index()
    capsys.readouterr()
    plain = plan([SAME, SPLIT])
    limited = plan([{**SAME, "max_batch_replies": 1}, {**SPLIT, "max_batch_replies": 1}])
    assert list(limited.index) == list(plain.index) == ["same-gpu", "split-1-1"]
    assert (limited < plain / 2).all(), (plain, limited)  # one reply an iteration: far less goodput
