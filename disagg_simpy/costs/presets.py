"""The preset catalogue, looked up by name: `<gpu>/<model>/tp<N>/<engine>`.

A preset is one GPU model, LLM, TP degree, dtype and serving engine (with its version), with the
cost fields fitted to public measurements, the range they were fitted on and their largest error
there per kind of iteration, the KV cache one instance holds and the KV ship cost per token on
two kinds of path. The catalogue is every generated table of presets merged (`TABLES`, JSON
files beside this module): `fitted.json` (fitted from Vidur's, DistServe's and SplitwiseSim's
files: `python -m disagg_simpy.costs.catalog > disagg_simpy/costs/fitted.json`) and
`composed_presets.json` (composed from AIConfigurator's per-operator tables and fitted:
`python -m disagg_simpy.costs.composed`);
a table generated another way joins by being added there, each of its records holding
`RECORD_FIELDS`.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Any

#: every generated table of presets (JSON beside this module), merged in this order (a name in two is an error)
TABLES = ("fitted.json", "composed_presets.json")
#: what every preset record holds (tests/costs/test_presets.py checks each one)
RECORD_FIELDS = ("gpu", "model", "tp", "dtype", "engine", "engine_version", "source", "licence", "measured",
                 "assumed", "cost", "errors_pct", "range", "kv_capacity_tokens", "kv_ship_ms_per_token")
#: the range keys: replies written per iteration, prompt tokens read per iteration, context a reply
RANGE_KEYS = ("replies", "prompt_tokens", "context_per_reply")


def _merged() -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Every preset, and the table (file) each comes from."""
    out: dict[str, dict[str, Any]] = {}
    origin: dict[str, str] = {}
    for file in TABLES:
        table = json.loads((Path(__file__).parent / file).read_text(encoding="utf-8"))
        clash = set(out) & set(table)
        if clash:
            raise RuntimeError(f"preset {sorted(clash)[0]} is in two tables of presets ({file} and another)")
        out.update(table)
        origin.update(dict.fromkeys(table, file))
    return out, origin


PRESETS, _TABLE_OF = _merged()


def from_table(file: str) -> dict[str, dict[str, Any]]:
    """The presets of one of TABLES (`composed_presets.json`: the composed ones), as the package
    reads them: the one reader of the shipped tables."""
    if file not in TABLES:
        raise ValueError(f"{file}: not one of the tables of presets ({', '.join(TABLES)})")
    return {name: p for name, p in PRESETS.items() if _TABLE_OF[name] == file}


NAMES = tuple(PRESETS)
KV_PATHS = ("intra_node", "inter_node")
EXAMPLE = "a100-80gb/llama-3-8b/tp1/vidur-sarathi"
#: names before presets named their engine -> the preset of the same numbers
RENAMED = {
    "a100-80gb/llama-2-7b/tp1": "a100-80gb/llama-2-7b/tp1/vidur-sarathi",
    "a100-80gb/llama-3-8b/tp1": "a100-80gb/llama-3-8b/tp1/vidur-sarathi",
    "a100-80gb/codellama-34b/tp2": "a100-80gb/codellama-34b/tp2/vidur-sarathi",
    "h100-80gb/llama-2-7b/tp1": "h100-80gb/llama-2-7b/tp1/vidur-sarathi",
    "a100-80gb/opt-13b/tp1": "a100-80gb/opt-13b/tp1/distserve",
    "a100-80gb/opt-13b/tp2": "a100-80gb/opt-13b/tp2/distserve",
    "a100-80gb/opt-66b/tp4": "a100-80gb/opt-66b/tp4/distserve",
    "a100-80gb/llama-2-70b/tp4": "a100-80gb/llama-2-70b/tp4/vllm-splitwise",
    "h100-80gb/llama-2-70b/tp4": "h100-80gb/llama-2-70b/tp4/vllm-splitwise",
}
_LIST = "python -m disagg_simpy presets lists them"


def parts(name: str) -> tuple[str, str, int, str] | None:
    """(gpu, model, TP, engine) of a name shaped `<gpu>/<model>/tp<N>/<engine>`, else None."""
    bits = name.split("/")
    if len(bits) != 4 or not bits[2].startswith("tp") or not bits[2][2:].isdigit():
        return None
    return bits[0], bits[1], int(bits[2][2:]), bits[3]


def at_tp(name: str, tp: int) -> str:
    """The name of the preset of `name`'s GPU, model and engine at TP `tp` (it may not exist)."""
    gpu, model, _, engine = parts(name) or ("", "", 0, "")
    return f"{gpu}/{model}/tp{tp}/{engine}"


def problem(name: object) -> str | None:
    """Why `name` is no preset (an old name: the new one; else a did-you-mean), or None."""
    if isinstance(name, str) and name in PRESETS:
        return None
    if not isinstance(name, str):
        return f"got {name!r}, expected a preset name like {EXAMPLE} ({_LIST})"
    new = RENAMED.get(name.lower().rstrip("/"))
    if new:
        others = [n for n in NAMES if n.startswith(name.lower().rstrip("/") + "/") and n != new]
        also = f"; other engines: {', '.join(others)}" if others else ""
        return (f"got {name!r}, a name from before presets named their engine; did you mean {new!r}? "
                f"(the same numbers{also})")
    near = difflib.get_close_matches(name.lower(), NAMES, n=1, cutoff=0.5)
    hint = f"did you mean {near[0]!r}? " if near else ""
    return f"got {name!r}, no such preset; {hint}expected a preset name like {EXAMPLE} ({_LIST})"


def cost_fields(name: str, attention: bool) -> dict[str, float]:
    """The cost fields of preset `name`: with the attention term (per_attention_pair_ms) when the model has it."""
    p = PRESETS[name]
    return dict(p["attention_cost"] if attention else p["cost"])


def kv_ship_ms_per_token(name: str, path: str = "intra_node") -> float:
    return PRESETS[name]["kv_ship_ms_per_token"][path]


def kv_capacity_tokens(name: str) -> int:
    return PRESETS[name]["kv_capacity_tokens"]


def covers(name: str) -> set[str]:
    """The kinds of iteration the preset was fitted on."""
    return set(PRESETS[name]["errors_pct"])


def fitted_range(name: str) -> dict[str, list[float]]:
    """What the preset was fitted on: [low, high] of replies and prompt tokens per iteration and of
    the context a reply holds (RANGE_KEYS)."""
    return PRESETS[name]["range"]
