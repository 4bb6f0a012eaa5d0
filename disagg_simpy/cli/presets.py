"""`python -m disagg_simpy presets [--engine E] [--gpu G] [--model M] [--tp N] [--json]` lists the
cost presets (those matching every filter); `presets show NAME [--json]` prints one as the YAML
block a scenario can paste (or its facts as JSON); `presets compare A B` two presets' iteration
times side by side (cli/presets_compare.py); `presets gpus [--json]` the GPU kinds with memory,
power and default price (costs/gpus.py)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence

from ..costs import presets as P
from ..costs.presets import PRESETS
from ..errors import InputError
from ..texts import aligned
from .common import Parser, int_at_least
from .presets_build import add_build_parser, build

_KINDS = ("writing only", "chunked", "whole prompt")
#: filter flag -> the part of a name it matches (gpu, model, TP, engine: `costs.presets.parts`)
_FILTERS = {"gpu": 0, "model": 1, "tp": 2, "engine": 3}


def build_presets_parser() -> argparse.ArgumentParser:
    p = Parser(prog="python -m disagg_simpy presets",
               description="Cost presets fitted from public measurements (Vidur, DistServe, SplitwiseSim), named "
               "<gpu>/<model>/tp<N>/<engine>: GPU, model, TP, the engine and version timed, source and licence, "
               "the range each fit holds on and its largest error there per kind of iteration. `presets show "
               "NAME` prints the block to paste into a scenario's cost:; `presets compare A B` their iteration "
               "times side by side.")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table (or YAML)")
    p.add_argument("--engine", metavar="ENGINE",
                   help="only presets of this engine: a name's last part (vllm-0.2) or its start (vllm)")
    p.add_argument("--gpu", metavar="GPU", help="only presets of this GPU (a100-80gb, or its start: a100)")
    p.add_argument("--model", metavar="MODEL", help="only presets of this model (opt-66b, or its start: opt)")
    p.add_argument("--tp", type=int_at_least("--tp", 1, 1024), metavar="N", help="only presets of TP degree N")
    sub = p.add_subparsers(dest="command", metavar="{show,compare,gpus,build}", parser_class=Parser)
    show = sub.add_parser("show", help="one preset as a paste-able cost: block (with --json: all its facts)")
    show.add_argument("name", metavar="NAME", help=f"a preset name, e.g. {P.EXAMPLE}")
    show.add_argument("--json", action="store_true", help="print its facts as JSON")
    from .presets_compare import add_compare_parser

    add_compare_parser(sub)
    gpus = sub.add_parser("gpus", help="the GPU kinds: memory, power (W) and default price per GPU-hour, with sources")
    gpus.add_argument("--json", action="store_true", help="print JSON instead of a table")
    add_build_parser(sub)
    return p


def presets_command(argv: Sequence[str]) -> int:
    """List the cost presets fitted from public measurements (presets [show NAME | compare A B | gpus | build])."""
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
    if args.command == "compare":
        from .presets_compare import compare_command

        return compare_command(args)
    names = chosen(args)
    if args.json:
        print(json.dumps([{"name": n, **PRESETS[n]} for n in names], indent=2))
        return 0
    print(table(names))
    return 0


def _matches(part: str | int, wanted: str | int) -> bool:
    """A filter matches a name's part exactly, or its start up to a dash (vllm: vllm-0.2)."""
    if isinstance(part, int):
        return part == wanted
    wanted = str(wanted).lower()
    return part == wanted or part.startswith(wanted + "-")


def chosen(args) -> list[str]:
    """The names matching every filter given (each filter that matches no preset: one line)."""
    names = list(P.NAMES)
    for flag, i in _FILTERS.items():
        wanted = getattr(args, flag, None)
        if wanted is None:
            continue
        known = sorted({(P.parts(n) or ("", "", 0, ""))[i] for n in P.NAMES}, key=str)
        if not any(_matches(v, wanted) for v in known):
            raise InputError(f"presets --{flag}: got {wanted!r}, no preset has it; expected one of "
                             f"{', '.join(map(str, known))}")
        names = [n for n in names if _matches((P.parts(n) or ("", "", 0, ""))[i], wanted)]
    if not names:
        given = " ".join(f"--{f} {getattr(args, f)}" for f in _FILTERS if getattr(args, f, None) is not None)
        raise InputError(f"presets: no preset matches {given}; expected filters one preset has together "
                         "(python -m disagg_simpy presets lists them)")
    return names


def _errors(p: dict, key: str) -> str:
    return " / ".join(f"{p[key][k]:+.1f}%" if k in p[key] else "n/a" for k in _KINDS)


def _span(r: list[float]) -> str:
    return "{:g}-{:g}".format(*r) if r else "-"


def table(names: Sequence[str] = P.NAMES) -> str:
    """The presets as an aligned table; errors as writing only / chunked / whole prompt."""
    rows = [("name", "GPU", "model", "TP", "engine", "version", "replies", "prompt tokens", "context/reply",
             "largest error (writing / chunked / whole prompt)", "with attention term", "source")]
    for name in names:
        p = PRESETS[name]
        r = p["range"]
        rows.append((name, p["gpu"], p["model"], str(p["tp"]), p["engine"], p["engine_version"],
                     _span(r["replies"]), _span(r["prompt_tokens"]), _span(r["context_per_reply"]),
                     _errors(p, "errors_pct"), _errors(p, "attention_errors_pct"),
                     f"{p['source'].split(' (')[0]} ({p['licence']})"))
    lines = aligned(rows, left=set(range(len(rows[0]))), pad_last=False)
    assumed: dict[str, list[str]] = {}  # one line per statement (131 composed presets share theirs)
    for name in names:
        if PRESETS[name]["assumed"]:
            assumed.setdefault(PRESETS[name]["assumed"], []).append(name)
    notes = [f"{these[0]}: partly assumed: {text}" if len(these) == 1 else
             f"{len(these)} presets ({these[0]} ...): partly assumed: {text}" for text, these in assumed.items()]
    engines = {f"{P.parts(n)[3]}: {PRESETS[n].get('engine_note', PRESETS[n]['engine_version'])}"  # type: ignore[index]
               for n in names}
    return "\n".join(lines + ["", "Ranges: replies and prompt tokens per iteration, context tokens a reply; a run "
                              "beyond them warns. KV capacity: the engine's share of GPU memory less the weights and its "
                              "reserve (fitted presets: each source's own, 90% for Vidur's planner and Splitwise's "
                              "vLLM, 95% less 1% for DistServe and its vLLM 0.2; composed: vLLM 90-92%, SGLang "
                              "82-91%, less collective buffers; activations beyond the reserve ignored); errors "
                              "against the source's iterations (DistServe: against its own fitted model; composed "
                              "presets: against the composed times). Engines:",
                              *(f"  {e}" for e in sorted(engines)), *notes])


def block(name: str) -> str:
    """A `cost:` block with the preset named and its fields written out (comments say where they
    come from); pasted into a scenario it runs as is (the written fields equal the preset's)."""
    from ..scenario.schema import Cost

    p = PRESETS[name]
    attention = "per_attention_pair_ms" in Cost.model_fields
    fields = P.cost_fields(name, attention)
    errors = p["attention_errors_pct"] if attention else p["errors_pct"]
    r = p["range"]
    note = f": {p['engine_note']}" if p.get("engine_note") else ""
    lines = [f"# {p['gpu']}, {p['model']}, TP{p['tp']}, {p['dtype']}, {p['engine']} {p['engine_version']}{note}",
             f"# source: {p['source']} (licence {p['licence']})",
             f"# fitted on replies {_span(r['replies'])}, prompt tokens {_span(r['prompt_tokens'])} an iteration, "
             f"context {_span(r['context_per_reply'])} tokens a reply; largest error: "
             + ", ".join(f"{k} {v:+.1f}%" for k, v in errors.items()),
             "cost:", f"  preset: {name}"]
    lines += [f"  {k}: {v:g}" for k, v in fields.items()]
    ships = p["kv_ship_ms_per_token"]
    lines += [f"  kv_ship_ms_per_token: {ships['intra_node']:g}  # intra_node; inter_node: {ships['inter_node']:g} "
              "(a split's kv_path: inter_node)",
              f"# kv_capacity_tokens: {p['kv_capacity_tokens']}  (per instance, {p['memory_utilisation']:.0%} of "
              "GPU memory less the weights and reserve; taken by every arrangement using the preset unless it writes its own)"]
    return "\n".join(lines + kv_terms(p))


def kv_terms(p: dict) -> list[str]:
    """Comment lines stating each term of the preset's KV capacity (where its record has them)."""
    m = p.get("kv_memory")
    if not m:
        return []
    lines = [f"#   = ({m['gpu_memory_gib']:g} GiB x {m['memory_share']:g} - weights {m['weights_gib_per_gpu']:g} GiB - reserve "
             f"{m['reserve_gib_per_gpu']:g} GiB) / {m['kv_bytes_per_token_per_gpu']:,.0f} bytes a token, per GPU",
             f"#   share: {m['share_source']}; reserve for activations and collectives: {m['reserve_source']}"]
    stated = p.get("kv_capacity_stated")
    if stated:
        lines.append(f"#   the source states {stated['tokens']:,} tokens ({stated['source']}): docs/real-units.md says why")
    return lines
