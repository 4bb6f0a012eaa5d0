"""`presets compare A B`: two presets' iteration times side by side over a fixed grid (writing
batches, whole prompts read, a chunk read beside writing), as the model charges them (M1, E2, E3,
E7, E14, E15: `CostNs.iteration_ns_full`), so a user sees what another engine, GPU or TP degree
does before simulating. A cell beyond a preset's fitted range is marked `*`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..costs import presets as P
from ..errors import InputError
from ..texts import aligned
from .common import path_flag

CONTEXT = 1024  # tokens of context a reply holds in the grid's writing iterations
#: (kind, replies, prompt tokens read, earlier tokens of that prompt)
GRID = (
    *(("writing", r, 0, 0) for r in (1, 8, 32, 64, 128, 256)),
    *(("prompt read", 0, c, 0) for c in (128, 512, 1024, 2048, 4096, 8192)),
    *(("mixed", r, 512, o) for r in (8, 32) for o in (0, 2048)),
)
COLUMNS = ("kind", "replies", "context_per_reply", "prompt_tokens", "earlier_tokens", "a_ms", "b_ms", "b_over_a",
           "a_in_range", "b_in_range")


def add_compare_parser(sub) -> None:
    c = sub.add_parser("compare", help="two presets' iteration times side by side over a grid of iterations")
    c.add_argument("a", metavar="A", help=f"a preset name, e.g. {P.EXAMPLE}")
    c.add_argument("b", metavar="B", help="another preset name")
    c.add_argument("--json", action="store_true", help="print the rows as JSON instead of the table")
    c.add_argument("--out", type=path_flag("--out"), metavar="DIR", help="also write the rows to DIR/compare.csv")
    c.add_argument("--format", choices=("csv", "parquet"), default="csv",
                   help="with --out: compare.csv (default) or compare.parquet (the same columns, typed)")


def iteration_ms(name: str, replies: int, prompt: int, earlier: int, attention: bool) -> float:
    """What the model charges for one iteration under preset `name`'s fields (every reply holding
    CONTEXT tokens; a prompt read as one chunk after `earlier` tokens of it)."""
    from ..model.costs import CostNs

    fields: dict = P.cost_fields(name, attention)
    cost = CostNs.from_ms(kv_ship_ms_per_token=0.0, **fields)
    pairs = prompt * earlier + prompt * (prompt + 1) // 2 if attention else 0
    ns = cost.iteration_ns_full(replies, prompt, earlier if prompt else 0, replies * CONTEXT, pairs)
    return ns / 1e6


def _in_range(name: str, replies: int, prompt: int) -> bool:
    """Whether the iteration is of a kind the preset was fitted on, within its fitted range."""
    if replies and prompt and "chunked" not in P.covers(name):
        return False
    r = P.fitted_range(name)
    inside = replies <= r["replies"][1] and (not prompt or r["prompt_tokens"][0] <= prompt <= r["prompt_tokens"][1])
    if replies:
        inside &= r["context_per_reply"][0] <= CONTEXT <= r["context_per_reply"][1]
    return bool(inside)


def rows(a: str, b: str) -> list[dict]:
    from ..scenario.schema import has_attention_term

    attention = has_attention_term()
    out = []
    for kind, replies, prompt, earlier in GRID:
        ta, tb = (iteration_ms(n, replies, prompt, earlier, attention) for n in (a, b))
        out.append({"kind": kind, "replies": replies, "context_per_reply": CONTEXT if replies else 0,
                    "prompt_tokens": prompt, "earlier_tokens": earlier, "a_ms": round(ta, 3), "b_ms": round(tb, 3),
                    "b_over_a": round(tb / ta, 3), "a_in_range": _in_range(a, replies, prompt),
                    "b_in_range": _in_range(b, replies, prompt)})
    return out


def text(a: str, b: str, found: list[dict]) -> str:
    header = ["kind", "replies", "context/reply", "prompt tokens", "earlier", "A ms", "B ms", "B/A"]
    cells = [header]
    for r in found:
        cells.append([r["kind"], str(r["replies"]), f"{r['context_per_reply']:,}" if r["replies"] else "-",
                      f"{r['prompt_tokens']:,}" if r["prompt_tokens"] else "-", f"{r['earlier_tokens']:,}",
                      f"{r['a_ms']:.2f}" + (" " if r["a_in_range"] else "*"),
                      f"{r['b_ms']:.2f}" + (" " if r["b_in_range"] else "*"), f"{r['b_over_a']:.2f}x"])
    lines = [f"A: {a}", f"B: {b}", "", *aligned(cells, left={0})]
    if not all(r["a_in_range"] and r["b_in_range"] for r in found):
        lines += ["", "*: beyond the preset's fitted range (presets show NAME states it)"]
    return "\n".join(lines)


def compare_command(args: argparse.Namespace) -> int:
    for key in ("a", "b"):
        bad = P.problem(getattr(args, key))
        if bad:
            raise InputError(f"presets compare: {key.upper()}: {bad}")
    if args.out is None and args.format != "csv":
        raise InputError(f"presets compare: --format: got {args.format} without --out, expected --out DIR (the "
                         "format is that of the file written there)")
    if args.out is not None:  # checked before anything is computed, as every command's --out
        from ..files import check_folder, check_output_file

        check_folder(args.out, "--out")
        check_output_file(args.out / f"compare.{args.format}", "--out")
    found = rows(args.a, args.b)
    if args.out is not None:
        _write(found, args.out, args.format)
    print(json.dumps({"a": args.a, "b": args.b, "rows": found}, indent=2) if args.json else text(args.a, args.b, found))
    return 0


def _write(found: list[dict], out: Path, fmt: str) -> None:
    import pandas as pd

    from ..files import atomic_path, atomic_write_text, make_folder

    make_folder(out, "--out")
    frame = pd.DataFrame(found, columns=list(COLUMNS))
    if fmt == "parquet":
        path = out / "compare.parquet"
        with atomic_path(path) as tmp:
            frame.to_parquet(tmp, index=False)
    else:
        path = out / "compare.csv"
        atomic_write_text(path, frame.to_csv(index=False))
    print(f"wrote {path}", file=sys.stderr)
