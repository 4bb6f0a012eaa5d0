"""The shipped presets (`shipped.py`, refitted by `catalog.py`), looked up by name.

A preset is one GPU model, LLM, TP degree and dtype, with the cost fields fitted to public
measurements, the range they were fitted on and their largest error there per kind of iteration,
the KV cache one instance holds and the KV ship cost per token on two kinds of path.
"""

from __future__ import annotations

import difflib

from .shipped import PRESETS

NAMES = tuple(PRESETS)
KV_PATHS = ("intra_node", "inter_node")
EXAMPLE = "a100-80gb/llama-3-8b/tp1"


def problem(name: object) -> str | None:
    """Why `name` is no preset (with a did-you-mean), or None."""
    if isinstance(name, str) and name in PRESETS:
        return None
    if not isinstance(name, str):
        return f"got {name!r}, expected a preset name like {EXAMPLE} (python -m disagg_simpy presets lists them)"
    near = difflib.get_close_matches(name.lower(), NAMES, n=1, cutoff=0.5)
    hint = f"did you mean {near[0]!r}? " if near else ""
    return f"got {name!r}, no such preset; {hint}expected a preset name like {EXAMPLE} (python -m disagg_simpy presets lists them)"


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
