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
        want = preset_on(name, kind)
        if want is None:
            have = sorted(k for k in gpus.NAMES if preset_on(name, k))
            raise ValueError(f"@arrangements[{i}].{key}: got {kind!r}, but no preset {gpus.swap(name, kind)} exists "
                             f"(the model, TP and engine of {name} on {kind}, in any version); expected one of "
                             f"{', '.join(have)} (python -m disagg_simpy presets lists them)")
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


def _version(name: str) -> tuple[int, ...]:
    """A preset's engine version as numbers (`0.24.0` -> (0, 24, 0)); () where it is no version number."""
    parts = str(shipped.PRESETS[name].get("engine_version", "")).split(".")
    return tuple(int(p) for p in parts) if all(p.isdigit() for p in parts) else ()


_SAME = ("model", "tp", "dtype", "engine")


def preset_on(preset: str, kind: str) -> str | None:
    """The preset `preset` on GPU kind `kind`: the same name (model, TP, engine and its version)
    where it is shipped; else, where the engine's versions differ by GPU kind (the composed
    presets have vLLM 0.14 on A100s and 0.24 on H100s), the newest version of the same engine
    with the same model, TP and dtype on that kind (`version_note` says so); else None."""
    name = gpus.swap(preset, kind)
    if not shipped.problem(name):
        return name
    if shipped.problem(preset):
        return None
    mine = shipped.PRESETS[preset]
    same = [n for n in shipped.NAMES if gpus.of_preset(n) == kind and _version(n)
            and all(shipped.PRESETS[n].get(k) == mine.get(k) for k in _SAME)]
    return max(same, key=_version) if same and _version(preset) else None


def version_note(preset: str, kind: str) -> str | None:
    """Why `kind` runs another version of `preset`'s engine (`preset_on`), or None where it runs the same."""
    got = preset_on(preset, kind)
    if got is None or got == gpus.swap(preset, kind):
        return None
    mine, theirs = shipped.PRESETS[preset], shipped.PRESETS[got]
    return (f"{kind} has no {mine['engine']} {mine['engine_version']} preset of {mine['model']} TP{mine['tp']}: it "
            f"runs {got}, the newest {theirs['engine']} there ({theirs['engine_version']})")


def preset_at_tp(preset: str, tp: int) -> tuple[str, bool]:
    """The name of `preset`'s GPU, model and engine at TP `tp`, and whether it is shipped."""
    name = shipped.at_tp(preset, tp)
    return name, name in shipped.NAMES


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


def roles_kinds_problem(scenario, a) -> tuple[str, str] | None:
    """A split whose GPUs change side (`roles`) on two GPU kinds: ('roles', why), else None. Each
    side's kind as its costs are (its kind key, its own preset, else the scenario's): a GPU that
    changes side keeps its kind, but the model would run it at the other side's costs."""
    if getattr(a, "role_changes", None) is None:
        return None
    reading, writing = side_kinds(scenario, a)
    if reading is None or writing is None or reading == writing:
        return None
    return "roles", (f"got reading GPUs {reading} and writing GPUs {writing}, expected one GPU kind on both sides "
                     "when roles change (a GPU that changes side keeps its kind, but would run at the other kind's "
                     "speed): drop roles, or put both sides on one kind")


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
