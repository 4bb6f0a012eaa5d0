"""The iteration planner (model/planner.py, issue 36): under the options, every GPU starts its
iterations with the planner's one composition, whatever options are on (E2-E10, E12, E13, chunked
or whole, reading, writing or both; E9's paged memory is one of its memory policies, not a start of
its own, and replaces no method of the GPU). Its records are checked elsewhere (tests/model/test_reference.py,
the digest): this checks that no other start path is chosen."""

from __future__ import annotations

from helpers import write_scenario

from disagg_simpy import load_scenario
from disagg_simpy.model.engine import Engine
from disagg_simpy.workload.stream import make_requests

ROWS = [(0.0, 900, 5), (0.001, 300, 3), (0.002, 2000, 4), (0.010, 50, 2)]
COST = {"iteration_ms": 10, "per_reply_ms": 1, "per_prompt_token_ms": 0.01, "kv_ship_ms_per_token": 0.001}
ARRANGEMENTS = [
    {"name": "e8", "kind": "colocated", "gpus": 1, "max_batch_replies": 2, "max_batch_tokens": 1000},
    {"name": "e8-chunk", "kind": "colocated", "gpus": 1, "max_batch_tokens": 300, "chunk_tokens": 512},
    {"name": "e10", "kind": "colocated", "gpus": 1, "mixed_iterations": False},
    {"name": "e4-e10", "kind": "colocated", "gpus": 1, "mixed_iterations": False, "kv_capacity_tokens": 4000},
    {"name": "e4-split", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 1, "kv_capacity_tokens": 4000},
    {"name": "e6-e8-split", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 1,
     "local_prompt_max_tokens": 400, "max_batch_replies": 1},
    {"name": "e9", "kind": "colocated", "gpus": 1, "kv_policy": "paged", "kv_capacity_tokens": 4000},
    {"name": "e9-e10-e8", "kind": "colocated", "gpus": 1, "kv_policy": "paged", "kv_capacity_tokens": 4000,
     "mixed_iterations": False, "max_batch_replies": 2},
    {"name": "e9-split", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 1, "kv_policy": "paged",
     "kv_capacity_tokens": 4000, "preemption": "swap", "swap_ms_per_token": 0.001},
    {"name": "e12", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 1,
     "roles": {"policy": "queue", "switch_s": 0.01, "check_s": 0.005, "cooldown_s": 0.01}},
]
PLANNER = {"compose.<locals>.start", "compose.<locals>.start_unmixed"}


def test_every_gpu_starts_with_the_planners_one_composition(tmp_path):
    path = write_scenario(tmp_path, ROWS, ARRANGEMENTS, cost={**COST, "per_attention_pair_ms": 0.000001})
    scenario = load_scenario(path)
    stream = make_requests(scenario)
    for arrangement in scenario.arrangements:
        engine = Engine(scenario, arrangement, stream)
        engine.run()
        for gpu in engine.gpus:
            assert gpu._start is not None, arrangement.name
            assert gpu._start.__qualname__ in PLANNER, (arrangement.name, gpu._start.__qualname__)
            assert not {"has_work", "kv_need", "_seat", "add_reply", "_release"} & vars(gpu).keys(), arrangement.name


def test_with_every_option_off_the_gpus_loop_starts_its_iterations_itself(tmp_path):
    """The kept fusion: with every option off no planner is built (`Gpu.run` inline)."""
    path = write_scenario(tmp_path, ROWS, [{"name": "plain", "kind": "colocated", "gpus": 2}], cost=COST)
    scenario = load_scenario(path)
    engine = Engine(scenario, scenario.arrangements[0], make_requests(scenario))
    engine.run()
    assert all(gpu._start is None for gpu in engine.gpus)
