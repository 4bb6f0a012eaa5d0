"""scenarios/day.yaml keeps what its comment says: each period alone, at its own constant rate and
mix (`workload.periods.periods`), is carried by a different split: split-3-1 in the
reading-heavy first period, split-1-3 in the writing-heavy second."""

from __future__ import annotations

from helpers import ROOT

from disagg_simpy import load_scenario, run
from disagg_simpy.scenario.loading import validate
from disagg_simpy.workload.periods import periods


def test_each_period_of_the_day_has_its_own_best_split():
    day = load_scenario(ROOT / "scenarios" / "day.yaml")
    splits = [a.model_dump(mode="json", exclude_none=True) for a in day.arrangements if a.is_split]
    on_time = []
    for p in periods(day.workload):
        steady = p.workload.model_dump(mode="json", exclude_none=True) | {"measure_s": 30.0}
        alone = validate({"name": f"period-{p.index}", "workload": steady, "arrangements": splits, "max_sim_s": 90},
                         "day-period.yaml")
        summary = run(alone, seed=1).summary.set_index("arrangement")["on_time_pct"]
        on_time.append(summary.to_dict())
    first, second = on_time
    assert first["split-3-1"] >= 95 and first["split-1-3"] <= 20 and first["split-2-2"] < first["split-3-1"], first
    assert second["split-1-3"] >= 95 and second["split-3-1"] <= 20 and second["split-2-2"] < second["split-1-3"], second
