"""`python -m disagg_simpy sweep SCENARIO --rate 4:24:1 [--set KEY=V1,V2 ...]`: every point of a
grid, every seed, every arrangement; a tidy table (Parquet and CSV) and `sweep.png`."""

from __future__ import annotations

from collections.abc import Sequence

from .batch import Batch, Job, batch_parser, output_files, run_batch, target_flag

OUTPUT_FILES = output_files("sweep", parquet=True)


def build_sweep_parser():
    p = batch_parser("sweep", "Run every point of a grid (rates x --set values), every seed, every arrangement; "
                     "print the on-time share (mean and 95% interval over seeds) per point and arrangement.")
    p.add_argument("--rate", metavar="RATES",
                   help="offered rates, START:STOP:STEP (STOP included), R1,R2,... or one (default: the scenario's)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=V1,V2",
                   help="also vary a scenario key (repeatable), e.g. arrangements.chunked-512.chunk_tokens=256,512 "
                   "or workload.reply_words=[50,100],[100,400]")
    p.add_argument("--target", type=target_flag, default=90.0, metavar="PCT",
                   help="on-time share drawn as a line on sweep.png (default 90)")
    return p


def _grid(args, scenario):
    from ..sweep.grid import make_grid

    return make_grid(scenario, args.rate, args.set)


def _sweep(job: Job) -> Batch:
    from ..sweep.table import format_bands, on_time_bands, sweep

    scenario, seeds, grid = job.scenario, job.seeds, job.prepared
    table = sweep(scenario, grid, seeds, job.runner)
    bands = on_time_bands(table, grid.keys)
    n_points = len(grid.points())
    title = (f"{scenario.name}: on time against offered rate, mean of {len(seeds)} seed{'s' * (len(seeds) > 1)} "
             "with 95% band")
    n = table["arrangement"].nunique()
    counts = f"{n_points} point{'s' * (n_points > 1)} x {len(seeds)} seed{'s' * (len(seeds) > 1)} x {n} arrangements"

    def picture(folder):
        from ..plots.capacity import save_sweep

        return save_sweep(bands, grid.keys, folder / "sweep.png", title, job.args.target)

    return Batch(
        table,
        info={"grid": {"rate_per_s": list(grid.rates), **{k: list(v) for k, v in grid.sets}}},
        lines=[f"{scenario.name}: {counts}; on time (%)" + (", mean and 95% interval over seeds" if len(seeds) > 1
                                                             else ""),
               format_bands(bands, grid.keys)],
        picture=picture,
    )


def sweep_command(argv: Sequence[str]) -> int:
    """Run every point of a grid (rates x --set values), every seed, every arrangement."""
    return run_batch(argv, build_sweep_parser(), "sweep", _sweep, prepare=_grid, parquet=True)
