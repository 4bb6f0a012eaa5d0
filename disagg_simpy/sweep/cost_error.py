"""Costs scaled by a factor per side: how far an answer moves when the cost model is off.

A reading factor scales what reading prompts costs (per prompt token, re-read and attention
terms, E14's prompt iteration, E15's tiles); a writing factor what writing words costs (the
iteration's fixed cost, per reply, per context token). A split's reading GPUs take the reading
factor on every term, its writing GPUs the writing factor; a colocated GPU takes each factor on
its own terms. The validate gate's test slows every writing iteration so; goodput and plan
re-run their top candidates so (`--cost-error`).
"""

from __future__ import annotations

from ..scenario.cost_fields import SideCost
from ..scenario.schema import Cost, Scenario

#: the terms of a colocated GPU's iteration that writing words pays, and those reading prompts pays
WRITING_TERMS = ("iteration_ms", "per_reply_ms", "per_context_token_ms")
READING_TERMS = ("per_prompt_token_ms", "per_reread_token_ms", "per_attention_pair_ms", "prompt_iteration_ms",
                 "per_token_tile_ms", "per_cached_token_ms")


def _side(cost: Cost, factors: dict[str, float]) -> SideCost:
    """`cost` as an arrangement's own cost block with each term in `factors` scaled."""
    values = {k: v for k, v in cost.model_dump(exclude={"preset", "kv_ship_ms_per_token"}).items()
              if v is not None and k in SideCost.model_fields}
    return SideCost.model_validate({k: (v * factors[k] if k in factors else v) for k, v in values.items()})


def scaled_costs(scenario: Scenario, reading: float = 1.0, writing: float = 1.0) -> Scenario:
    """`scenario` with every arrangement's reading costs x `reading` and writing costs x `writing`."""
    if reading == 1.0 and writing == 1.0:
        return scenario
    arrangements = []
    for a in scenario.arrangements:
        r, w = a.side_costs(scenario.cost)
        if a.is_split:
            a = a.model_copy(update={"reading_cost": _side(r, dict.fromkeys(Cost.model_fields, reading)),
                                     "writing_cost": _side(w, dict.fromkeys(Cost.model_fields, writing))})
        else:
            a = a.model_copy(update={"cost": _side(r, dict.fromkeys(READING_TERMS, reading)
                                                    | dict.fromkeys(WRITING_TERMS, writing))})
        arrangements.append(a)
    return scenario.model_copy(update={"arrangements": tuple(arrangements)})
