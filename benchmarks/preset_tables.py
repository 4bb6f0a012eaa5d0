"""Print docs/real-units.md's two catalogue tables from the fitted presets (not the composed ones): each preset's engine,
range, errors and source; and its fitted fields, KV capacity and KV ship cost.

    PYTHONPATH=. python benchmarks/preset_tables.py
"""

from __future__ import annotations

from disagg_simpy.costs.presets import PRESETS as ALL
from disagg_simpy.costs.presets import from_table, parts

COMPOSED = from_table("composed_presets.json")

#: the presets fitted to Vidur's, DistServe's and SplitwiseSim's files (the composed ones have their own page:
#: docs/composed-presets.md, `python -m disagg_simpy.costs.composed --report`)
PRESETS = {name: p for name, p in ALL.items() if name not in COMPOSED}

KINDS = ("writing only", "chunked", "whole prompt")


def _errors(p: dict, key: str) -> str:
    return " / ".join(f"{p[key][k]:+.1f}%" if k in p[key] else "n/a" for k in KINDS)


def _span(r: list[float]) -> str:
    return "{:g}-{:g}".format(*r) if r else "-"


def catalogue() -> list[str]:
    lines = ["| preset | engine, version | fitted on: replies, prompt tokens an iteration, context a reply | largest "
             "error: writing / chunked / whole prompt | with the attention term (and E14, E15) | source (licence) |",
             "|---|---|---|---|---|---|"]
    for name, p in PRESETS.items():
        r = p["range"]
        lines.append(f"| `{name}` | {p['engine']} {p['engine_version']} | {_span(r['replies'])}, "
                     f"{_span(r['prompt_tokens'])}, {_span(r['context_per_reply'])} | {_errors(p, 'errors_pct')} | "
                     f"{_errors(p, 'attention_errors_pct')} | {p['source'].split(':')[0]} |")
    return lines


def fields() -> list[str]:
    lines = ["| preset | iteration_ms | per_reply_ms | per_prompt_token_ms | per_context_token_ms | "
             "per_reread_token_ms | kv_capacity_tokens | kv_ship_ms_per_token intra / inter node |",
             "|---|---|---|---|---|---|---|---|"]
    for name, p in PRESETS.items():
        c, s = p["cost"], p["kv_ship_ms_per_token"]
        cells = [f"{c.get(k, 0):g}" for k in ("iteration_ms", "per_reply_ms", "per_prompt_token_ms",
                                               "per_context_token_ms", "per_reread_token_ms")]
        lines.append(f"| `{name}` | {' | '.join(cells)} | {p['kv_capacity_tokens']:,} | "
                     f"{s['intra_node']:g} / {s['inter_node']:g} |")
    return lines


if __name__ == "__main__":
    assert all(parts(n) for n in PRESETS)
    print("\n".join(catalogue()), "", "\n".join(fields()), sep="\n")
