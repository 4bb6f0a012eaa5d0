"""Which GPU kind each side of an arrangement runs on, and what an arrangement costs an hour.

A side's kind is its arrangement's `gpu:` (colocated) or `reading_gpu:` / `writing_gpu:`
(split), else the GPU of the preset its costs come from, else unknown. A kind key on a side
whose costs come from a preset picks the same preset (model, TP, engine) on that kind
(`fill_kinds`, run before the presets fill the fields), so a mixed pool is two presets; the KV
ship cost of a split whose sides are on different kinds is the slower of their two presets'
for its `kv_path` (scenario/presets.py). With no preset, the kind only prices the side.

Costs are shown (`shows_costs`) when the scenario names a kind or a price (`prices:`, a kind
key, or a command's `--price` / `--gpu-kinds`): a scenario without them prints what it printed.
"""

from __future__ import annotations

from typing import Any

from ..costs import gpus
from ..costs import presets as shipped

#: the key naming each cost block's GPU kind
KIND_KEYS = {"cost": "gpu", "reading_cost": "reading_gpu", "writing_cost": "writing_gpu"}


def _sides(a: dict) -> tuple[str, ...]:
    return ("reading_cost", "writing_cost") if a.get("kind") == "disaggregated" else ("cost",)


def fill_kinds(a: dict, i: int, base: str | None) -> dict:
    """The raw arrangement with each kind key's side on that kind's preset (its own preset's,
    else the scenario's, with the GPU swapped); unchanged where no kind key is written."""
    for side in _sides(a):
        key = KIND_KEYS[side]
        kind = a.get(key)
        if kind is None:
            continue
        bad = gpus.problem(kind)
        if bad:
            raise ValueError(f"@arrangements[{i}].{key}: {bad}")
        block = a.get(side)
        own = block.get("preset") if isinstance(block, dict) else None
        name = own if isinstance(own, str) else base
        if name is None or shipped.problem(name):  # no preset: the kind prices the side (a bad one: presets say)
            continue
        want = gpus.swap(name, kind)
        if shipped.problem(want):
            have = sorted(k for k in gpus.NAMES if gpus.swap(name, k) in shipped.NAMES)
            raise ValueError(f"@arrangements[{i}].{key}: got {kind!r}, but no preset {want} exists (the model, TP "
                             f"and engine of {name} on {kind}); expected one of {', '.join(have)} "
                             "(python -m disagg_simpy presets lists them)")
        if want != name:
            a = {**a, side: {**(block if isinstance(block, dict) else {}), "preset": want}}
    return a


def prices_problem(prices: Any) -> str | None:
    """`@prices...: why` for a bad `prices:` mapping, or None."""
    if not isinstance(prices, dict):
        return f"@prices: got {prices!r}, expected a mapping of GPU kind to USD per GPU-hour, like {{h100-80gb: 2.49}}"
    for kind, price in prices.items():
        bad = gpus.problem(kind)
        if bad:
            return f"@prices: {bad}"
        bad = gpus.price_problem(price)
        if bad:
            return f"@prices.{kind}: {bad}"
    return None


#: the GPU kinds by name, and why a name is none (for later stages, which read costs/ through here)
KIND_NAMES = gpus.NAMES
kind_problem = gpus.problem


def preset_on(preset: str, kind: str) -> str | None:
    """The preset `preset` on GPU kind `kind` (same model, TP and engine), None if none is shipped."""
    name = gpus.swap(preset, kind)
    return None if shipped.problem(name) else name


def preset_tp(preset: str) -> int:
    """The TP degree a shipped preset costs."""
    return int(shipped.PRESETS[preset]["tp"])


def omit_prices(out: Any, info) -> Any:
    """The scenario's dump in files without `prices` while unset (dumped as before it existed)."""
    if info.mode_is_json() and isinstance(out, dict) and out.get("prices") is None:
        out.pop("prices", None)
    return out


def side_kinds(scenario, a) -> tuple[str | None, str | None]:
    """(reading side's, writing side's) GPU kind, None where unknown (a colocated arrangement: the same twice)."""
    def kind(side: str) -> str | None:
        own = getattr(a, KIND_KEYS[side], None)
        if own is not None:
            return own
        block = getattr(a, side, None)
        return gpus.of_preset((block.preset if block is not None else None) or scenario.cost.preset)

    if a.is_split:
        return kind("reading_cost"), kind("writing_cost")
    k = kind("cost")
    return k, k


def price(scenario, kind: str) -> float:
    """USD per GPU-hour of `kind`: the scenario's `prices:`, else the table's default."""
    given = scenario.prices or {}
    return float(given.get(kind, gpus.KINDS[kind].price_per_hour))


def shows_costs(scenario) -> bool:
    """Whether the tables show costs: the scenario names a price or a GPU kind."""
    if scenario.prices:
        return True
    return any(getattr(a, key, None) is not None for a in scenario.arrangements for key in KIND_KEYS.values())


def _per_side(scenario, a, figure) -> float | None:
    reading, writing = side_kinds(scenario, a)
    if reading is None or writing is None:
        return None
    if not a.is_split:
        return a.n_gpus * figure(reading)
    return a.n_reading_gpus * figure(reading) + a.n_writing_gpus * figure(writing)


def dollars_per_hour(scenario, a) -> float | None:
    """What the arrangement's GPUs cost an hour (USD), None where a side's kind is unknown."""
    return _per_side(scenario, a, lambda k: price(scenario, k))


def power_kw(scenario, a) -> float | None:
    """The arrangement's GPUs' board power (kW), None where a side's kind is unknown."""
    return _per_side(scenario, a, lambda k: gpus.KINDS[k].power_w / 1000)


def kinds_text(scenario, a) -> str:
    """'h100-80gb', 'h100-80gb reading, a100-80gb writing', or '' where unknown."""
    reading, writing = side_kinds(scenario, a)
    if reading is None or writing is None:
        return ""
    return reading if reading == writing else f"{reading} reading, {writing} writing"
