"""`python -m disagg_simpy sweep SCENARIO --rate 4:24:1 [--set KEY=V1,V2 ...]`: every point of a
grid, every seed, every arrangement; a tidy table (Parquet and CSV) and `sweep.png`."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from .batch import (
    batch_parser,
    json_rows,
    load,
    open_runner,
    out_folder,
    run_info,
    seeds_of,
    skipped_line,
    target_flag,
    write_all,
)

OUTPUT_FILES = ("sweep.parquet", "sweep.csv", "sweep.png", "run.json")


def build_sweep_parser():
    p = batch_parser("sweep", "Run every point of a grid (rates x --set values), every seed, every arrangement; "
                     "print the on-time share (mean ± 95%% half-width over seeds) per point and arrangement.")
    p.add_argument("--rate", metavar="RATES",
                   help="offered rates, START:STOP:STEP (STOP included), R1,R2,... or one (default: the scenario's)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=V1,V2",
                   help="also vary a scenario key (repeatable), e.g. arrangements.chunked-512.chunk_tokens=256,512 "
                   "or workload.reply_words=[50,100],[100,400]")
    p.add_argument("--rate-per-gpu", metavar="RATES",
                   help="offered rates per GPU instead of --rate (same forms): each arrangement runs at the rate x its "
                   "GPUs, so arrangements of different sizes compare at equal load per GPU; sweep.png's x is per GPU")
    p.add_argument("--slo-scale", metavar="SCALES",
                   help="also vary an SLO scale, START:STOP:STEP or S1,S2,...: every limit that is on multiplied by it "
                   "(e.g. 0.5:2:0.1); with one rate, sweep.png draws on time against the scale")
    p.add_argument("--limits", action="store_true",
                   help="sweep.png also draws, per arrangement, the share within the first-word limit alone and within "
                   "the mean-gap limit alone (dashed, dotted) beside the joint on-time line")
    p.add_argument("--target", type=target_flag, default=90.0, metavar="PCT",
                   help="on-time share drawn as a line on sweep.png (default 90)")
    return p


def sweep_command(argv: Sequence[str]) -> int:
    """Run every point of a grid (rates x --set values), every seed, every arrangement."""
    import json

    from ..results.csv_text import csv_text
    from ..sweep.grid import SLO_SCALE, make_grid
    from ..sweep.table import format_bands, on_time_bands, sweep

    args = build_sweep_parser().parse_args(argv)
    scenario = load(args)
    grid = make_grid(scenario, args.rate, args.set, args.slo_scale, args.rate_per_gpu)
    seeds, note = seeds_of(scenario)
    out = out_folder(args, scenario, list(OUTPUT_FILES))
    if note:
        print(note, file=sys.stderr)
    runner = open_runner(args, out)
    try:
        table = sweep(scenario, grid, seeds, runner)
    finally:
        runner.close()
    percentiles = scenario.slo.criterion == "percentiles"
    bands = on_time_bands(table, grid.keys, "slo_ratio" if percentiles else "on_time_pct")
    info = run_info(argv, scenario, seeds, grid={grid.rate_key: list(grid.rates), **{k: list(v) for k, v in grid.sets}},
                    store=str(runner.store.path), runs_skipped=runner.skipped, runs_done=runner.ran)
    n_points = len(grid.points())
    title = (f"{scenario.name}: on time against offered rate, mean of {len(seeds)} seed{'s' * (len(seeds) > 1)} "
             "with 95% band")
    picture = None
    if not args.no_plots:
        from ..plots.capacity import save_sweep

        on_time = on_time_bands(table, grid.keys)  # (the picture draws on-time shares whatever the criterion)
        x = SLO_SCALE if len(grid.rates) == 1 and args.slo_scale is not None else grid.rate_key
        picture = lambda folder: save_sweep(on_time, grid.keys, folder / "sweep.png", title, args.target,  # noqa: E731
                                            x=x, limits=args.limits)
    write_all(out, {"sweep.csv": csv_text(table), "run.json": json.dumps(info, indent=2) + "\n"},
              {"sweep.parquet": table}, picture)
    if args.json:
        print(json_rows(table))
    else:
        n = table["arrangement"].nunique()
        counts = f"{n_points} point{'s' * (n_points > 1)} x {len(seeds)} seed{'s' * (len(seeds) > 1)} x {n} arrangements"
        what = ("on time (%)" if not percentiles else
                f"criterion percentiles: the worst P{scenario.slo.level:g} figure / its limit (at most 1 meets)")
        print(f"{scenario.name}: {counts}; {what}" + (", mean ± 95% half-width over seeds" if len(seeds) > 1 else ""))
        print(f"limits: {scenario.slo.words()}")
        print(format_bands(bands, grid.keys))
        print(f"results in {out}/")
    print(skipped_line(runner), file=sys.stderr)
    return 0

