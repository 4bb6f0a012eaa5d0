"""`python -m disagg_simpy presets build --model-config config.json --gpu KIND --engine ENGINE --tp N`:
a cost block for any Hugging Face config, composed from AIConfigurator's per-operator tables and
fitted as the shipped presets are (costs/composed.py); refused in one line where the tables do not
hold a shape. Needs the tables ($DISAGG_SIMPY_AICONFIGURATOR; docs/real-units.md says how to get
them)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..errors import InputError


def add_build_parser(sub) -> None:
    from ..costs import operators as O

    b = sub.add_parser("build", help="a cost block for any Hugging Face config.json, composed from AIConfigurator's "
                       f"per-operator tables (${O.ENV_FOLDER})")
    b.add_argument("--model-config", required=True, metavar="FILE", help="the model's Hugging Face config.json")
    b.add_argument("--gpu", required=True, metavar="KIND", help=f"one of {', '.join(O.GPUS)}")
    b.add_argument("--engine", required=True, metavar="ENGINE", help=f"one of {', '.join(O.ENGINES)}, or its start "
                   "(vllm, sglang) as in the listing's --engine: the version the tables hold for --gpu (vLLM 0.14 and "
                   "SGLang 0.5.10 on the A100, 0.24 and 0.5.14 on the others)")
    b.add_argument("--tp", required=True, type=int, metavar="N", help="tensor-parallel degree: 1, 2, 4 or 8")
    b.add_argument("--json", action="store_true", help="print every fact as JSON instead of the block")


def build(args: argparse.Namespace) -> int:
    """Compose, fit and print (each refusal one line, naming what the tables lack)."""
    from ..costs import composed as C
    from ..costs import operators as O
    from ..costs.hf_config import read_model_config

    model = read_model_config(Path(args.model_config))
    if args.gpu not in O.GPUS:
        raise InputError(f"--gpu: got {args.gpu!r}, expected one of {', '.join(O.GPUS)}")
    engine = C.engine_for(args.engine, args.gpu)
    O.check_tp(model, args.tp)
    t = O.tables(O.require_folder(), args.gpu, engine)
    path = Path(args.model_config)
    label = path.parent.resolve().name if path.stem == "config" else path.stem
    p = C.compose(model, t, args.tp, label)
    print(json.dumps(p, indent=2) if args.json else block(p, f"{args.model_config}"))
    return 0


def block(p: dict, config: str) -> str:
    """The cost fields (with E7's attention term and E14/E15 where the fit kept them) as a paste-ready
    `cost:` block, its errors and range in comments, and the KV capacity to write on each arrangement."""
    r, e = p["range"], p["attention_errors_pct"]
    ships = p["kv_ship_ms_per_token"]
    lines = [f"# {config}: {p['gpu']}, TP{p['tp']}, {p['engine']} {p['engine_version']}, {p['dtype']}; {p['source']} "
             f"({p['licence']})",
             f"# fitted on replies {r['replies'][0]:g}-{r['replies'][1]:g}, prompt tokens {r['prompt_tokens'][0]:g}-"
             f"{r['prompt_tokens'][1]:g}, context {r['context_per_reply'][0]:g}-{r['context_per_reply'][1]:g} tokens "
             "a reply; largest error against the composed times: " + ", ".join(f"{k} {v:+.1f}%" for k, v in e.items()),
             "cost:"]
    lines += [f"  {k}: {v:g}" for k, v in p["attention_cost"].items()]
    lines += [f"  kv_ship_ms_per_token: {ships['intra_node']:g}  # intra_node; inter_node: {ships['inter_node']:g}",
              f"# kv_capacity_tokens: {p['kv_capacity_tokens']}  (write it on each arrangement: per instance, "
              f"{p['memory_utilisation']:.0%} of GPU memory less the weights and collective buffers; "
              f"{p['kv_bytes_per_token']:,} bytes of KV a token on each GPU)"]
    return "\n".join(lines)
