"""Costs scaled by a factor per side: how far an answer moves when the cost model is off.

A reading factor scales what reading prompts costs (per prompt token, re-read and attention
terms, E14's prompt iteration, E15's tiles); a writing factor what writing words costs (the
iteration's fixed cost, per reply, per context token). A split's reading GPUs take the reading
factor on every term, its writing GPUs the writing factor; a colocated GPU takes each factor on
its own terms. The validate gate's test slows every writing iteration so; goodput and plan
re-run their top candidates so (`--cost-error`). Only the ms terms scale (never
free_prompt_tokens, token_tile or E17's expert counts).
"""

from __future__ import annotations

import pandas as pd

from ..results.columns import COST_ERROR_COLUMNS
from ..scenario.cost_fields import SideCost
from ..scenario.schema import Cost, Scenario

#: the terms of a colocated GPU's iteration that writing words pays, and those reading prompts pays
WRITING_TERMS = ("iteration_ms", "per_reply_ms", "per_context_token_ms", "per_expert_ms")  # (E17: reading R98)
READING_TERMS = ("per_prompt_token_ms", "per_reread_token_ms", "per_attention_pair_ms", "prompt_iteration_ms",
                 "per_token_tile_ms", "per_cached_token_ms")


def _side(cost: Cost, factors: dict[str, float], own: SideCost | None) -> SideCost:
    """`cost` as an arrangement's own cost block with each term in `factors` scaled, keeping the
    block's own preset name (`own`'s), so that re-validating it (a `gpu:` key, a TP other than the
    scenario preset's) takes its figures over that preset, not a preset derived afresh."""
    values = {k: v for k, v in cost.model_dump(exclude={"preset", "kv_ship_ms_per_token"}).items()
              if v is not None and k in SideCost.model_fields}
    scaled = {k: (v * factors[k] if k in factors else v) for k, v in values.items()}
    return SideCost.model_validate(scaled | ({"preset": own.preset} if own is not None and own.preset else {}))


def _own(a, key: str) -> SideCost | None:
    """The arrangement's own cost block `key` (`cost`, `reading_cost` or `writing_cost`), if it writes one."""
    return getattr(a, key, None)


def scaled_costs(scenario: Scenario, reading: float = 1.0, writing: float = 1.0) -> Scenario:
    """`scenario` with every arrangement's reading costs x `reading` and writing costs x `writing`."""
    if reading == 1.0 and writing == 1.0:
        return scenario
    arrangements = []
    for a in scenario.arrangements:
        r, w = a.side_costs(scenario.cost)
        if a.is_split:
            a = a.model_copy(update={
                "reading_cost": _side(r, dict.fromkeys(READING_TERMS + WRITING_TERMS, reading), _own(a, "reading_cost")),
                "writing_cost": _side(w, dict.fromkeys(READING_TERMS + WRITING_TERMS, writing), _own(a, "writing_cost"))})
        else:
            a = a.model_copy(update={"cost": _side(r, dict.fromkeys(READING_TERMS, reading)
                                                    | dict.fromkeys(WRITING_TERMS, writing), _own(a, "cost"))})
        arrangements.append(a)
    # re-validated here, so that a copy the file's rules refuse says so without a probe's rate flag in it
    return scenario.model_copy(update={"arrangements": tuple(arrangements)}).with_overrides()


#: the field's word for each side's cost
SIDE_WORDS = {"reading": "prefill", "writing": "decode"}
#: bisection steps on a flip's size (each a goodput search of two arrangements)
FLIP_STEPS = 4


def preset_errors(scenario: Scenario, names: tuple[str, ...] = ()) -> dict[str, float] | None:
    """The scenario's cost preset's stated error bounds (%), per side: writing, its largest
    writing-only error; reading, its largest prompt error (chunked or whole); None without a
    preset (or one without stated errors). With `names` (the presets a plan over GPU kinds
    runs), the largest of theirs, per side."""
    found = [b for name in (names or (scenario.cost.preset,)) if (b := _stated(scenario, name))]
    if not found:
        return None
    return {side: max(b[side] for b in found) for side in ("reading", "writing")}


def _stated(scenario: Scenario, name: str | None) -> dict[str, float] | None:
    """One preset's stated error bounds (`preset_errors`), None where it states none."""
    from ..scenario import presets  # (its `shipped`: the presets' table, costs/presets.py)

    facts = presets.shipped.PRESETS.get(presets.shipped.RENAMED.get(name, name)) if name else None
    if facts is None:
        return None
    attention = scenario.cost.per_attention_pair_ms > 0 and facts.get("attention_errors_pct")
    errors = facts.get("attention_errors_pct") if attention else facts.get("errors_pct")
    if not errors:
        return None
    reading = [abs(v) for k, v in errors.items() if k != "writing only" and v is not None]
    return {"reading": max(reading, default=0.0), "writing": abs(errors.get("writing only") or 0.0)}


def cost_error_line(scenario: Scenario, runner, seeds: tuple[int, ...], target: float, tolerance: float, table,
                    cost_error: float | None) -> str | None:
    """goodput's and plan's line on how sure the answer is: with `--cost-error PCT` every side's
    costs off by up to PCT %, else the preset's stated errors; None when neither is known."""
    return cost_error_check(scenario, runner, seeds, target, tolerance, table, cost_error)[0]


def cost_error_check(scenario: Scenario, runner, seeds: tuple[int, ...], target: float, tolerance: float, table,
                     cost_error: float | None, per: dict[str, float] | None = None,
                     presets: tuple[str, ...] = ()) -> tuple[str | None, dict[str, tuple[float, float]]]:
    """`cost_error_line`'s line, and the top two's goodput range under the cost errors checked
    (name -> (lowest, highest) goodput found, the table's own included; {} when not checked).
    `per` and `presets`: a plan over GPU kinds, ranked per dollar (or kW), on these presets."""
    bounds = ({"reading": cost_error, "writing": cost_error} if cost_error is not None
              else preset_errors(scenario, presets))
    if not bounds:
        return None, {}
    where = ("--cost-error" if cost_error is not None else f"preset {scenario.cost.preset}'s stated errors"
             if not presets else f"the largest stated errors of {', '.join(presets)}")
    from ..errors import InputError

    seen: dict[str, list[float]] = {}
    try:
        line = f"cost error ({where}): " + robustness(scenario, runner, seeds, target, tolerance, table, bounds, seen,
                                                     per)
    except InputError as err:  # (e.g. a TP candidate whose preset is named per TP: the scaled copy is refused)
        return f"cost error ({where}): not checked ({str(err).split(': ', 1)[-1][:200]})", {}
    return line, {n: (min(g), max(g)) for n, g in seen.items()}


def robustness(scenario: Scenario, runner, seeds: tuple[int, ...], target: float, tolerance: float,
               table, bounds: dict[str, float], seen: dict[str, list[float]] | None = None,
               per: dict[str, float] | None = None) -> str:
    """Whether the winner of a goodput `table` (its two best arrangements by goodput; with `per`,
    by goodput per unit, like dollars an hour) survives each side's costs scaled by up to
    +-`bounds[side]` % (one side at a time): 'the winner W holds for cost errors up to +-X%', or
    'R overtakes W at +Y% decode cost' (the smallest flip found, to about 1/16 of the bound by
    bisection). `seen` gathers each of the two's goodputs found (the table's, then each one with
    the costs scaled)."""
    from .goodput import goodput

    unit = (lambda n: per[str(n)]) if per else (lambda n: 1.0)  # noqa: E731
    key = table["goodput_per_s"] / table["arrangement"].map(unit)
    ranked = table.assign(_key=key.fillna(-1.0)).sort_values("_key", ascending=False, kind="stable")
    if len(ranked) < 2:
        return "not checked (one arrangement: no winner to overturn)"
    w, r = str(ranked["arrangement"].iloc[0]), str(ranked["arrangement"].iloc[1])
    starts = {str(a): float(g) for a, g in zip(ranked["arrangement"], ranked["goodput_per_s"]) if g > 0}
    pair = scenario.model_copy(update={"arrangements": tuple(a for a in scenario.arrangements if a.name in (w, r))})
    seen = {} if seen is None else seen
    for name, g in zip(ranked["arrangement"].iloc[:2], ranked["goodput_per_s"].iloc[:2]):
        seen.setdefault(str(name), []).append(float(g))

    def flips(side: str, pct: float) -> bool:
        factors = {"reading": 1.0, "writing": 1.0} | {side: 1 + pct / 100}
        found = goodput(scaled_costs(pair, **factors), runner, seeds, target, tolerance, names=[w, r],
                        starts={k: v * factors[side] ** -1 for k, v in starts.items()} or None)
        g = dict(zip(found["arrangement"], found["goodput_per_s"]))
        for name in (w, r):
            seen[name].append(float(g[name]))
        return g[r] / unit(r) > g[w] / unit(w) + 1e-9

    smallest: tuple[float, str] | None = None
    for side in ("reading", "writing"):
        bound = bounds.get(side, 0.0)
        for sign in (1.0, -1.0):
            if bound <= 0 or not flips(side, sign * bound):
                continue
            lo, hi = 0.0, bound  # flips at hi, not at lo (the table's own answer)
            for _ in range(FLIP_STEPS):
                mid = (lo + hi) / 2
                lo, hi = (lo, mid) if flips(side, sign * mid) else (mid, hi)
            if smallest is None or hi < smallest[0]:
                smallest = (hi, f"{r} overtakes {w} at {sign * hi:+.0f}% {SIDE_WORDS[side]} cost")
    if smallest is not None:
        return smallest[1] + f" (checked to +-{bounds.get('reading', 0):g}% prefill, +-{bounds.get('writing', 0):g}% decode)"
    both = {bounds.get("reading", 0.0), bounds.get("writing", 0.0)}
    size = f"+-{bounds['reading']:g}%" if len(both) == 1 else \
        f"+-{bounds.get('reading', 0):g}% prefill and +-{bounds.get('writing', 0):g}% decode"
    return f"the winner {w} holds for cost errors up to {size} (each side alone; next: {r})"


def with_bands(table: pd.DataFrame, bands: dict[str, tuple[float, float]]) -> pd.DataFrame:
    """plan.csv with the top two's goodput range under cost error (`cost_error_check`), empty
    for the others; the table as it was when nothing was checked."""
    if not bands:
        return table
    low, high = COST_ERROR_COLUMNS
    out = table.copy()
    out[low] = out["arrangement"].map(lambda n: bands.get(str(n), (float("nan"),) * 2)[0]).astype(float)
    out[high] = out["arrangement"].map(lambda n: bands.get(str(n), (float("nan"),) * 2)[1]).astype(float)
    return out
