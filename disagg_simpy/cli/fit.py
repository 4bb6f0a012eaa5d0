"""`python -m disagg_simpy fit TABLE.csv [--out DIR] [--json] [--unsaturated]`: cost fields fitted
to your own measured iterations (columns replies, prompt_tokens, context_tokens, ms; optional
earlier_tokens, prompts), with the error per kind of iteration, the range the fit holds on and a
residual picture (fit.yaml, fit.csv, fit.png in the folder); `--unsaturated` also fits E14's
prompt_iteration_ms and free_prompt_tokens, `--token-tile N` E15's per_token_tile_ms at tiles of N."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from .common import Parser, int_at_least, path_flag


def build_fit_parser() -> argparse.ArgumentParser:
    p = Parser(prog="python -m disagg_simpy fit",
               description="Fit the cost fields (iteration_ms, per_reply_ms, per_prompt_token_ms, "
               "per_context_token_ms; per_reread_token_ms when rows have earlier_tokens; the attention term "
               "when the model has it) to a CSV of measured iterations, one row each: replies, prompt_tokens, "
               "context_tokens (sum of the replies' contexts), ms; optional earlier_tokens (a chunk's earlier "
               "tokens of its prompt) and prompts (equal prompts read in the row, default 1). Least squares on "
               "relative error with coefficients >= 0.")
    p.add_argument("table", type=Path, metavar="TABLE.csv", help="measured iterations, one row each")
    p.add_argument("--out", type=path_flag("--out"), metavar="DIR",
                   help="folder for fit.yaml, fit.csv, fit.png (default: runs/fit-<table name>/)")
    p.add_argument("--json", action="store_true", help="print the fit as JSON instead of YAML and text")
    p.add_argument("--unsaturated", action="store_true",
                   help="also fit E14 (unsaturated reading): prompt_iteration_ms, paid once by an iteration that "
                   "reads prompt tokens, and free_prompt_tokens, the tokens it reads before paying per token "
                   "(searched over 0, multiples of 32 up to 512 and every row's prompt tokens); needs writing-only "
                   "rows")
    p.add_argument("--token-tile", type=int_at_least("--token-tile", 1), metavar="N",
                   help="also fit E15 (token tiles): per_token_tile_ms, paid once per started tile of N rows (prompt "
                   "tokens read + replies written) in an iteration; N is your GPU's matrix-product tile, e.g. 128 "
                   "where measured iterations step every 128 tokens")
    return p


def fit_command(argv: Sequence[str]) -> int:
    """Fit cost fields to your own measured iterations (fit TABLE.csv)."""
    args = build_fit_parser().parse_args(argv)
    from ..costs.fitting import fit
    from ..costs.table import read_table
    from ..errors import InputError
    from ..files import check_folder, check_outputs_apart, folders_undone_on_failure, make_folder
    from ..scenario.schema import Cost
    from .batch import write_all

    rows = read_table(args.table)
    out = check_folder(args.out if args.out is not None else Path("runs") / f"fit-{args.table.stem}", "--out")
    check_outputs_apart({"--out": out / "fit.csv"}, {"TABLE.csv": args.table})
    attention = "per_attention_pair_ms" in Cost.model_fields
    try:
        result = fit(rows, attention=attention, unsaturated=args.unsaturated, tile=args.token_tile or 0)
        plain = fit(rows, unsaturated=args.unsaturated, tile=args.token_tile or 0) if attention else result
    except InputError as err:
        raise InputError(f"{args.table}: {err}") from None
    facts = {"table": str(args.table), "rows": result.rows, "cost": result.coefficients,
             "errors_pct": result.errors_pct, "range": result.ranges,
             "errors_pct_without_attention": plain.errors_pct}
    text = cost_block(facts)
    table = rows.assign(kind=_kinds(rows), fitted_ms=result.fitted,
                        error_pct=(100 * (result.fitted / rows.ms - 1)).round(2))

    def picture(folder: Path) -> None:
        from ..plots.fit import save_fit

        save_fit(table, folder / "fit.png", f"fit of {args.table.name}: {len(table)} iterations")

    with folders_undone_on_failure(out):
        make_folder(out, "--out")
        write_all(out, {"fit.yaml": text + "\n", "fit.csv": table.to_csv(index=False)}, {}, picture)
    print(json.dumps(facts, indent=2) if args.json else text + f"\nwritten: {out}/fit.yaml, fit.csv, fit.png")
    return 0


def _kinds(rows):
    from ..costs.fitting import kinds

    return kinds(rows)


def cost_block(facts: dict) -> str:
    """The fit as a paste-able cost: block, its errors and range as comments."""
    r = facts["range"]
    errors = ", ".join(f"{k} {v:+.1f}%" for k, v in facts["errors_pct"].items())
    lines = [f"# fitted to {facts['table']}: " + ", ".join(f"{n} {k}" for k, n in facts["rows"].items()) + " rows",
             f"# largest relative error: {errors}"]
    if facts["errors_pct_without_attention"] != facts["errors_pct"]:
        lines.append("# without the attention term: " + ", ".join(
            f"{k} {v:+.1f}%" for k, v in facts["errors_pct_without_attention"].items()))
    span = [f"{name} {r[key][0]:g}-{r[key][1]:g}" for key, name in
            (("replies", "replies"), ("prompt_tokens", "prompt tokens"), ("context_per_reply", "context a reply"))
            if r[key]]
    lines += [f"# holds on {', '.join(span)}", "cost:"]
    lines += [f"  {k}: {v:g}" for k, v in facts["cost"].items()]
    return "\n".join(lines)
