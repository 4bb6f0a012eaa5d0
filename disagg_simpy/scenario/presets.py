"""`preset: NAME` in a cost block: the preset's fields fill what the block does not write.

Where a preset may stand: the scenario's `cost:`, a colocated arrangement's `cost:`, a split's
`reading_cost:` and `writing_cost:`. Fields written beside it override it (run.json lists them).
An arrangement whose cost comes from a preset also takes the preset's `kv_capacity_tokens`
(unless it writes its own; a split whose two sides differ takes the smaller, until each side has
its own) and, on a split, ships KV at the preset's cost for its `kv_path` (`intra_node` unless
written; the reading side's preset, else the writing side's, else the scenario's) unless it
writes `kv_ship_ms_per_token`.
"""

from __future__ import annotations

from typing import Any

from ..costs import presets as shipped

SIDES = ("cost", "reading_cost", "writing_cost")
_GPUS = {"cost": "GPUs", "reading_cost": "reading GPUs", "writing_cost": "writing GPUs"}


def _preset(block: Any, key: str) -> str | None:
    if not isinstance(block, dict) or "preset" not in block:
        return None
    bad = shipped.problem(block["preset"])
    if bad:
        raise ValueError(f"@{key}.preset: {bad}")
    return block["preset"]


def fill(raw: Any, attention: bool) -> Any:
    """The raw scenario mapping with every preset's fields filled in where not written."""
    if not isinstance(raw, dict):
        return raw
    raw = dict(raw)
    base = _preset(raw.get("cost"), "cost")
    if base:
        ship = shipped.kv_ship_ms_per_token(base)
        raw["cost"] = {**shipped.cost_fields(base, attention), "kv_ship_ms_per_token": ship, **raw["cost"]}
    arrangements = raw.get("arrangements")
    if isinstance(arrangements, (list, tuple)):
        raw["arrangements"] = [_fill_arrangement(a, i, base, attention) if isinstance(a, dict) else a
                               for i, a in enumerate(arrangements)]
    return raw


def _fill_arrangement(a: dict, i: int, base: str | None, attention: bool) -> dict:
    a = dict(a)
    own = {}
    for side in SIDES:
        name = _preset(a.get(side), f"arrangements[{i}].{side}")
        if name:
            own[side] = name
            a[side] = {**shipped.cost_fields(name, attention), **a[side]}
    capacity, ship = _derived(a, own, base)
    if "kv_capacity_tokens" not in a and capacity is not None:
        a["kv_capacity_tokens"] = capacity
    if a.get("kind") == "disaggregated" and "kv_ship_ms_per_token" not in a:
        if ship is None and a.get("kv_path") in shipped.KV_PATHS:
            raise ValueError(f"@arrangements[{i}].kv_path: got {a['kv_path']!r} with no preset on this arrangement "
                             "or in cost, expected a preset to take the KV ship cost from (or kv_ship_ms_per_token)")
        if ship is not None:
            a["kv_ship_ms_per_token"] = ship
    return a


def _derived(a: dict, own: dict[str, str], base: str | None) -> tuple[int | None, float | None]:
    """(KV capacity, KV ship cost) an arrangement takes from its presets (None: no preset)."""
    split = a.get("kind") == "disaggregated"
    used = [own.get(s, base) for s in (("reading_cost", "writing_cost") if split else ("cost",))]
    capacity = min((shipped.kv_capacity_tokens(n) for n in used if n), default=None)
    sender = next((n for n in (*used, base) if n), None)
    path = a.get("kv_path") or "intra_node"
    ship = shipped.kv_ship_ms_per_token(sender, path) if sender and split and path in shipped.KV_PATHS else None
    return capacity, ship


def unfill(raw: dict, attention: bool) -> dict:
    """A validated scenario's dump with what its presets filled in taken out again (fields equal
    to the preset's), so that re-validating it after a change fills afresh: a sweep or an override
    of `cost.preset` then takes the new preset's fields, not the old one's."""
    cost = raw.get("cost") or {}
    base = cost.get("preset")
    if base:
        filled = {**shipped.cost_fields(base, attention), "kv_ship_ms_per_token": shipped.kv_ship_ms_per_token(base)}
        raw["cost"] = {k: v for k, v in cost.items() if filled.get(k, object()) != v}
    for a in raw.get("arrangements", []):
        own = {side: a[side]["preset"] for side in SIDES if isinstance(a.get(side), dict) and a[side].get("preset")}
        for side, name in own.items():
            filled = shipped.cost_fields(name, attention)
            a[side] = {k: v for k, v in a[side].items() if filled.get(k, object()) != v}
        capacity, ship = _derived(a, own, base)
        if capacity is not None and a.get("kv_capacity_tokens") == capacity:
            del a["kv_capacity_tokens"]
        if ship is not None and a.get("kv_ship_ms_per_token") == ship:
            del a["kv_ship_ms_per_token"]
    return raw


def blocks(scenario) -> list[tuple[str, Any]]:
    """(key, cost block) of every cost block that names a preset."""
    out = [("cost", scenario.cost)] if scenario.cost.preset else []
    for i, a in enumerate(scenario.arrangements):
        for side in SIDES:
            block = getattr(a, side, None)
            if block is not None and block.preset:
                out.append((f"arrangements[{i}].{side}", block))
    return out


def info(scenario, attention: bool) -> dict:
    """For run.json: each preset used, the fields written beside it, and the warnings; {} if none."""
    used = blocks(scenario)
    if not used:
        return {}
    listed = {}
    for key, block in used:
        fields = shipped.cost_fields(block.preset, attention)
        written = sorted(k for k, v in fields.items() if getattr(block, k) != v)
        listed[key] = {"preset": block.preset, "overridden": written}
    return {"presets": listed, "preset_warnings": warnings(scenario)}


def warnings(scenario) -> list[str]:
    """A preset used for a kind of iteration it was not fitted on (warned, not refused: its
    figures are still the best estimate at hand, but their error there is unknown)."""
    out = []
    base = scenario.cost.preset
    for i, a in enumerate(scenario.arrangements):
        split = getattr(a, "kind", "") == "disaggregated"
        needs = {"reading_cost": {"chunked" if a.chunk_tokens else "whole prompt"},
                 "writing_cost": {"chunked"} if getattr(a, "local_prompt_max_tokens", None) else {"writing only"},
                 "cost": {"writing only", "chunked"}}
        for side in (("reading_cost", "writing_cost") if split else ("cost",)):
            block = getattr(a, side, None)
            name = (block.preset if block is not None else None) or base
            if not name:
                continue
            missing = needs[side] - shipped.covers(name)
            if missing:
                where = f"arrangements[{i}].{side}" if block is not None and block.preset else "cost"
                out.append(f"{where}: preset {name} was fitted on no {' or '.join(sorted(missing))} iterations, "
                           f"which {a.name}'s {_GPUS[side]} run; its error there is unknown")
    return out
