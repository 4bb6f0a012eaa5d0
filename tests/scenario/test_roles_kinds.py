"""roles: on a split whose two sides are on different GPU kinds is refused, whichever way each
side gets its kind: a kind key, its own cost preset, or the scenario's preset it inherits (review
F33: a side on its own preset beside the scenario's preset of another kind was accepted, and a GPU
that changed side ran at the other kind's speed)."""

from __future__ import annotations

import pytest
from helpers import SMALL_TRAFFIC, assert_scenario_refused

A100 = "a100-80gb/llama-2-70b/tp4/vllm-splitwise"
H100 = "h100-80gb/llama-2-70b/tp4/vllm-splitwise"
SPLIT = {"name": "mixed", "kind": "disaggregated", "reading_gpus": 8, "writing_gpus": 8, "reading_tp": 4,
         "writing_tp": 4, "kv_path": "inter_node", "roles": {"policy": "queue", "switch_s": 10}}


@pytest.mark.parametrize(("sides", "reading", "writing"), [
    ({"writing_cost": {"preset": H100}}, "a100-80gb", "h100-80gb"),  # the reading side inherits the scenario's
    ({"reading_cost": {"preset": H100}}, "h100-80gb", "a100-80gb"),
    ({"reading_gpu": "h100-80gb", "writing_gpu": "a100-80gb"}, "h100-80gb", "a100-80gb"),
], ids=["writing-preset", "reading-preset", "kind-keys"])
def test_roles_on_two_kinds_are_refused_however_a_side_gets_its_kind(tmp_path, capsys, sides, reading, writing):
    spec = {"name": "mixed", "seed": 1, "max_sim_s": 20, "workload": SMALL_TRAFFIC, "cost": {"preset": A100},
            "arrangements": [{**SPLIT, **sides}]}
    assert_scenario_refused(tmp_path, capsys, spec, f"arrangements[0].roles: got reading GPUs {reading} and "
                                                    f"writing GPUs {writing}, expected one GPU kind on both sides")
