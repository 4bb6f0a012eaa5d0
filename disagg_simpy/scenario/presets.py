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

from ..costs import gpus
from ..costs import presets as shipped
from .gpu_kinds import fill_kinds

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


_TP_KEYS = {"cost": "tp", "reading_cost": "reading_tp", "writing_cost": "writing_tp"}
_CAPACITY_KEYS = ("kv_capacity_tokens", "reading_kv_capacity_tokens", "writing_kv_capacity_tokens")


def _fill_arrangement(a: dict, i: int, base: str | None, attention: bool) -> dict:
    a = fill_kinds(dict(a), i, base)  # `gpu:` keys: each side's preset on its GPU kind
    own = {}
    for side in SIDES:
        name = _preset(a.get(side), f"arrangements[{i}].{side}")
        if name:
            own[side] = name
            a[side] = {**shipped.cost_fields(name, attention), **a[side]}
    for side, name in _used(a, own, base).items():
        want, tp_key = shipped.PRESETS[name]["tp"], _TP_KEYS[side]
        got = a.get(tp_key)
        if (got is None or isinstance(got, int)) and (got or 1) != want:  # other values: pydantic says
            shown = got if got is not None else "none (TP1)"
            raise ValueError(f"@arrangements[{i}].{tp_key}: got {shown}, but the preset {name} costs TP{want} "
                             f"instances; expected {tp_key}: {want} (or a TP{got or 1} preset)")
    capacities, ship = _derived(a, own, base)
    if not any(k in a for k in _CAPACITY_KEYS):
        a.update(capacities)
    if a.get("kind") == "disaggregated" and "kv_ship_ms_per_token" not in a:
        if ship is None and a.get("kv_path") in shipped.KV_PATHS:
            raise ValueError(f"@arrangements[{i}].kv_path: got {a['kv_path']!r} with no preset on this arrangement "
                             "or in cost, expected a preset to take the KV ship cost from (or kv_ship_ms_per_token)")
        if ship is not None:
            a["kv_ship_ms_per_token"] = ship
    return a


def _used(a: dict, own: dict[str, str], base: str | None) -> dict[str, str]:
    """side -> the preset its costs come from (its own, else the scenario's), sides with one only."""
    sides = ("reading_cost", "writing_cost") if a.get("kind") == "disaggregated" else ("cost",)
    return {s: n for s in sides if (n := own.get(s, base))}


def _derived(a: dict, own: dict[str, str], base: str | None) -> tuple[dict[str, int], float | None]:
    """(KV capacity keys, KV ship cost) an arrangement takes from its presets: one capacity for
    both sides when they agree (or only one side has a preset), else each side its own."""
    used = _used(a, own, base)
    caps = {side: shipped.kv_capacity_tokens(n) for side, n in used.items()}
    if len(set(caps.values())) > 1:
        capacities = {"reading_kv_capacity_tokens": caps["reading_cost"],
                      "writing_kv_capacity_tokens": caps["writing_cost"]}
    else:
        capacities = {"kv_capacity_tokens": next(iter(caps.values()))} if caps else {}
    sender = next(iter(used.values()), None)
    path = a.get("kv_path") or "intra_node"
    split = a.get("kind") == "disaggregated"
    ship = shipped.kv_ship_ms_per_token(sender, path) if sender and split and path in shipped.KV_PATHS else None
    if ship is not None and len({gpus.of_preset(n) for n in used.values()}) > 1:  # a mixed pool: the slower end
        ship = max(shipped.kv_ship_ms_per_token(n, path) for n in used.values())
    return capacities, ship


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
        capacities, ship = _derived(a, own, base)
        if capacities and all(a.get(k) == v for k, v in capacities.items()):
            for k in capacities:
                del a[k]
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


def sides(scenario) -> list[tuple[int, Any, str, str, str]]:
    """(arrangement index, arrangement, side, where the preset is named, preset) of every side
    whose costs come from a preset: a split's reading_cost and writing_cost, else its cost."""
    out = []
    base = scenario.cost.preset
    for i, a in enumerate(scenario.arrangements):
        split = getattr(a, "kind", "") == "disaggregated"
        for side in (("reading_cost", "writing_cost") if split else ("cost",)):
            block = getattr(a, side, None)
            name = (block.preset if block is not None else None) or base
            if name:
                where = f"arrangements[{i}].{side}" if block is not None and block.preset else "cost"
                out.append((i, a, side, where, name))
    return out


def warnings(scenario) -> list[str]:
    """A preset used for a kind of iteration it was not fitted on (warned, not refused: its
    figures are still the best estimate at hand, but their error there is unknown), and a split
    whose sides lay the KV cache out differently (`layout_warnings`)."""
    out = []
    used = sides(scenario)
    for i, a in enumerate(scenario.arrangements):
        for _, _, side, where, name in (u for u in used if u[0] == i):
            mixes = a.chunk_tokens or getattr(a, "mixed_iterations", None) is not False  # E10 off: reads or writes
            needs = {"reading_cost": {"chunked" if a.chunk_tokens else "whole prompt"},
                     "writing_cost": {"chunked"} if getattr(a, "local_prompt_max_tokens", None) else {"writing only"},
                     "cost": {"writing only", "chunked" if mixes else "whole prompt"}}
            missing = needs[side] - shipped.covers(name)
            if missing:
                out.append(f"{where}: preset {name} was fitted on no {' or '.join(sorted(missing))} iterations, "
                           f"which {a.name}'s {_GPUS[side]} run; its error there is unknown")
        if getattr(a, "kind", "") == "disaggregated":
            out += layout_warnings(a, i, scenario.cost.preset)
        out += version_warnings({side: n for j, _, side, _, n in used if j == i}, a, i, scenario.cost.preset)
    return out


_SIDE_WORDS = {"reading_cost": " reading", "writing_cost": " writing", "cost": ""}


def version_warnings(names: dict[str, str], a, i: int, base: str | None) -> list[str]:
    """An arrangement on two versions of one engine: its two sides' presets, or a side put on
    another GPU kind (a `gpu:` key) and the scenario's preset, where no one version has a preset
    on both kinds, so each kind runs its newest (scenario/gpu_kinds.py `preset_on`; warned: its
    figures then compare engine versions as well as GPUs)."""
    from .gpu_kinds import KIND_KEYS

    facts = {side: shipped.PRESETS[n] for side, n in names.items() if n in shipped.PRESETS}
    if len({f["engine"] for f in facts.values()}) != 1:
        return []
    engine = next(iter(facts.values()))["engine"]
    each = " and ".join(f"{f['engine_version']}{_SIDE_WORDS[s]} ({names[s]})" for s, f in facts.items())
    if len({f["engine_version"] for f in facts.values()}) > 1:
        return [f"arrangements[{i}]: {a.name} runs {engine} {each}: no one version has a preset on both GPU kinds, "
                "so each kind runs its newest (docs/cost.md); its figures compare engine versions as well as GPUs"]
    mine = shipped.PRESETS.get(base or "")
    kinded = any(getattr(a, k, None) is not None for k in KIND_KEYS.values())
    if not kinded or mine is None or mine["engine"] != engine or mine["engine_version"] in {
            f["engine_version"] for f in facts.values()}:
        return []
    return [f"arrangements[{i}]: {a.name} runs {engine} {each}, not the {mine['engine_version']} of the scenario's "
            f"preset {base}, which its GPU kind has no preset of, so it runs the newest there (docs/cost.md); "
            "against arrangements on that preset its figures compare engine versions as well as GPUs"]


def fitted_range(name: str) -> dict[str, list[float]]:
    """The preset's fitted range (replies, prompt tokens an iteration, context a reply)."""
    return shipped.fitted_range(name)


def layout_warnings(a, i: int, base: str | None) -> list[str]:
    """A split whose two sides' presets lay the KV cache out differently (TP degree or dtype):
    the ship cost is its preset's, but a real engine must re-shard or convert the cache on the way
    (warned, not refused: the model has no term for that work)."""
    reading, writing = ((getattr(a, s).preset if getattr(a, s) is not None else None) or base
                        for s in ("reading_cost", "writing_cost"))
    if reading is None or writing is None or reading == writing:
        return []
    names = (reading, writing)
    r, w, out = shipped.PRESETS[reading], shipped.PRESETS[writing], []
    if r["tp"] != w["tp"]:
        out.append(f"TP{r['tp']} reading and TP{w['tp']} writing")
    if r["dtype"] != w["dtype"]:
        out.append(f"{r['dtype']} reading and {w['dtype']} writing")
    if not out:
        return []
    return [f"arrangements[{i}]: {a.name}'s two sides lay the KV cache out differently ({'; '.join(out)}: presets "
            f"{names[0]} and {names[1]}); each ship re-shards or converts it, a cost the model leaves out"]
