"""`python -m disagg_simpy validate [--fast] [--html FILE]`: the model against published
measurements (the catalog in disagg_simpy/validation/catalog.yaml, docs/accuracy.md): published,
ours, error and verdict per figure, a summary, and the accuracy gate against the figures recorded
in the repository (exit 1 when it fails)."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from pathlib import Path

from .common import Parser, int_at_least, path_flag


def build_validate_parser() -> Parser:
    p = Parser(prog="python -m disagg_simpy validate",
               description="Reproduce each published measurement of the catalog with its scenario under "
               "scenarios/validation/ and print published, ours, error and verdict per figure, a summary (figures "
               "within tolerance, median absolute error per metric) and the accuracy gate: it fails (exit 1) when a "
               "figure recorded within its tolerance leaves it, a figure's error moves by more than 5 points either way, or a "
               "metric's median error grows by more than 5 points.")
    p.add_argument("--fast", action="store_true", help="only the figures marked fast (under a minute; the CI gate)")
    p.add_argument("--out", type=path_flag("--out"), metavar="DIR",
                   help="folder for validate.csv, validate.json and validate.html (default: runs/validate/)")
    p.add_argument("--html", type=path_flag("--html", "a file name"), metavar="FILE",
                   help="write the page here instead of DIR/validate.html")
    p.add_argument("--json", action="store_true", help="print the rows and summary as JSON instead of the table")
    p.add_argument("--format", choices=("csv", "parquet"), default="csv", help="the table's file format (default csv)")
    p.add_argument("--seeds", type=int_at_least("--seeds", 1, 10_000), metavar="N",
                   help="seeds per goodput figure, from each scenario's seed (default: each scenario's seeds); the gate "
                   "is not run on other seeds than the recorded ones, and --record refuses them")
    p.add_argument("--workers", type=int_at_least("--workers", 1, 1024), metavar="N",
                   help="processes running simulations (default: 1)")
    p.add_argument("--record", action="store_true",
                   help="record these figures as the gate's reference (recorded.json beside the catalog) and "
                   "print the Markdown table for docs/accuracy.md")
    return p


def validate_command(argv: Sequence[str]) -> int:
    """Reproduce published measurements and run the accuracy gate (validate [--fast])."""
    args = build_validate_parser().parse_args(argv)
    return run_validate(args.fast, args.out, args.html, args.json, args.format, args.seeds, args.workers or 1,
                        args.record)


def run_validate(fast: bool, out: Path | None, page: Path | None, as_json: bool, fmt: str, seeds: int | None,
                 workers: int, record: bool = False, transform=None) -> int:
    """The command's work (a test passes `transform`, e.g. slower writing, to see the gate fail)."""
    import pandas as pd

    from .. import __version__
    from ..errors import InputError
    from ..files import atomic_write_text, check_folder, check_output_file, make_folder
    from ..sweep.runner import LocalPool, Runner
    from ..sweep.store import Store
    from ..validation import RECORDED, gate, load_catalog, load_recorded, measure, row, summary
    from ..validation.report import html_page, markdown_table, summary_lines, text_table

    if record and seeds is not None:  # (review G6) before any run: the reference stays the scenarios' own seeds
        raise InputError(f"validate: --record with --seeds {seeds}: the recorded figures are each scenario's own "
                         "seeds (the gate compares like with like); expected --record without --seeds")
    sources, figures = load_catalog()
    chosen = [f for f in figures if f.fast or not fast]
    if page is not None:  # before any run: a bad page path is refused in one line, nothing written
        check_output_file(page, "--html")
    folder = make_folder(check_folder(out if out is not None else Path("runs") / "validate", "--out"), "--out")
    # A throwaway store: runs repeated within this validate are shared, none is kept for the next one.
    # A gate exists to notice that the code changed, and a store keyed by scenario, seed and version
    # would hand the next validate (and --record) the figures of the model as it was (review F20).
    # Measured: --fast 9.5 s cold, 4.3 s warm; the whole catalog 40 s cold, 6 s warm (docs/accuracy.md).
    with tempfile.TemporaryDirectory(prefix="disagg-simpy-validate-") as scratch:
        store = Store(Path(scratch) / "store.sqlite", __version__)
        try:
            runner = Runner(store, LocalPool(workers), progress=False)
            rows = [row(f, sources, measure(f, runner, seeds, transform)) for f in chosen]
        finally:
            store.close()
    s = summary(rows)
    # the recorded figures are of each scenario's seeds: other seeds are not gated (noise is not a change)
    problems = gate(rows, load_recorded()) if seeds is None else []
    verdict = ("passes" if not problems else "FAILS: " + "; ".join(problems)) if seeds is None else (
        f"not run (--seeds {seeds}: the recorded figures are of each scenario's own seeds)")
    table = pd.DataFrame(rows)
    if fmt == "parquet":
        table.to_parquet(folder / "validate.parquet", index=False)
    else:
        atomic_write_text(folder / "validate.csv", table.to_csv(index=False))
    facts = {"fast": fast, "rows": rows, "summary": s, "gate": problems or verdict}
    atomic_write_text(folder / "validate.json", json.dumps(facts, indent=2) + "\n")
    title = f"disagg_simpy {__version__} against published measurements" + (" (fast subset)" if fast else "")
    atomic_write_text(page or folder / "validate.html", html_page(rows, sources, s, title))
    if record:  # (the rows run now replace theirs; the others stay as recorded)
        kept = {r["id"]: r for r in load_recorded().get("rows", [])} | {r["id"]: r for r in rows}
        ordered = [kept[f.id] for f in figures if f.id in kept]
        atomic_write_text(RECORDED, json.dumps({"rows": ordered, "summary": summary(ordered)}, indent=2) + "\n")
    if as_json:
        print(json.dumps(facts, indent=2))
    else:
        print(f"{title}: {len(rows)} figures")
        print(text_table(rows))
        print("\n".join(summary_lines(s)))
        print("accuracy gate: " + verdict)
        if record:
            print(markdown_table(rows))
        print(f"results in {folder}/")
    return 1 if problems else 0
