"""`python -m disagg_simpy presets [--json]` lists the cost presets; `presets show NAME [--json]`
prints one as the YAML block a scenario can paste (or its facts as JSON); `presets gpus [--json]`
the GPU kinds with memory, power and default price (costs/gpus.py)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence

from ..costs import presets as P
from ..costs.shipped import PRESETS
from ..errors import InputError
from .common import Parser
from .presets_build import add_build_parser, build

_KINDS = ("writing only", "chunked", "whole prompt")


def build_presets_parser() -> argparse.ArgumentParser:
    p = Parser(prog="python -m disagg_simpy presets",
               description="Cost presets fitted from public measurements (Vidur, DistServe, SplitwiseSim): GPU, "
               "model, TP, source and licence, the range each fit holds on and its largest error there per kind "
               "of iteration. `presets show NAME` prints the block to paste into a scenario's cost:.")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table (or YAML)")
    sub = p.add_subparsers(dest="command", metavar="{show,gpus,build}", parser_class=Parser)
    show = sub.add_parser("show", help="one preset as a paste-able cost: block (with --json: all its facts)")
    show.add_argument("name", metavar="NAME", help=f"a preset name, e.g. {P.EXAMPLE}")
    show.add_argument("--json", action="store_true", help="print its facts as JSON")
    gpus = sub.add_parser("gpus", help="the GPU kinds: memory, power (W) and default price per GPU-hour, with sources")
    gpus.add_argument("--json", action="store_true", help="print JSON instead of a table")
    add_build_parser(sub)
    return p


def presets_command(argv: Sequence[str]) -> int:
    """List the cost presets fitted from public measurements (presets [show NAME])."""
    args = build_presets_parser().parse_args(argv)
    if args.command == "build":
        return build(args)
    if args.command == "gpus":
        from dataclasses import asdict

        from ..costs import gpus

        print(json.dumps([asdict(k) for k in gpus.KINDS.values()], indent=2) if args.json else gpus.table())
        return 0
    if args.command == "show":
        bad = P.problem(args.name)
        if bad:
            raise InputError(f"presets show: {bad}")
        print(json.dumps({"name": args.name, **PRESETS[args.name]}, indent=2) if args.json else block(args.name))
        return 0
    if args.json:
        print(json.dumps([{"name": n, **p} for n, p in PRESETS.items()], indent=2))
        return 0
    print(table())
    return 0


def _errors(p: dict, key: str) -> str:
    return " / ".join(f"{p[key][k]:+.1f}%" if k in p[key] else "n/a" for k in _KINDS)


def table() -> str:
    """The presets as an aligned table; errors as writing only / chunked / whole prompt."""
    rows = [("name", "GPU", "model", "TP", "replies", "prompt tokens", "context/reply",
             "largest error (writing / chunked / whole prompt)", "with attention term", "source")]
    for name, p in PRESETS.items():
        r = p["range"]
        rows.append((name, p["gpu"], p["model"], str(p["tp"]), "{:g}-{:g}".format(*r["replies"]),
                     "{:g}-{:g}".format(*r["prompt_tokens"]), "{:g}-{:g}".format(*r["context_per_reply"]),
                     _errors(p, "errors_pct"), _errors(p, "attention_errors_pct"), p["source"].split(":")[0]))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)) + "  " + row[-1] for row in rows]
    notes = [f"{name}: partly assumed: {p['assumed']}" for name, p in PRESETS.items() if p["assumed"]]
    return "\n".join(lines + ["", "KV capacity at 90% of GPU memory less the weights (activations ignored); "
                              "errors against the source's iterations (DistServe: against its own fitted model).",
                              *notes])


def block(name: str) -> str:
    """A `cost:` block with the preset named and its fields written out (comments say where they
    come from); pasted into a scenario it runs as is (the written fields equal the preset's)."""
    from ..scenario.schema import Cost

    p = PRESETS[name]
    attention = "per_attention_pair_ms" in Cost.model_fields
    fields = P.cost_fields(name, attention)
    errors = p["attention_errors_pct"] if attention else p["errors_pct"]
    r = p["range"]
    lines = [f"# {p['gpu']}, {p['model']}, TP{p['tp']}, {p['dtype']}: {p['source']}",
             f"# fitted on replies {r['replies'][0]:g}-{r['replies'][1]:g}, prompt tokens "
             f"{r['prompt_tokens'][0]:g}-{r['prompt_tokens'][1]:g}, context {r['context_per_reply'][0]:g}-"
             f"{r['context_per_reply'][1]:g} tokens a reply; largest error: "
             + ", ".join(f"{k} {v:+.1f}%" for k, v in errors.items()),
             "cost:", f"  preset: {name}"]
    lines += [f"  {k}: {v:g}" for k, v in fields.items()]
    ships = p["kv_ship_ms_per_token"]
    lines += [f"  kv_ship_ms_per_token: {ships['intra_node']:g}  # intra_node; inter_node: {ships['inter_node']:g} "
              "(a split's kv_path: inter_node)",
              f"# kv_capacity_tokens: {p['kv_capacity_tokens']}  (per instance, {p['memory_utilisation']:.0%} of "
              "GPU memory less the weights; taken by every arrangement using the preset unless it writes its own)"]
    return "\n".join(lines)
