"""`python -m disagg_simpy sweep SCENARIO --rate 4:24:1 [--set KEY=V1,V2 ...]`: every point of a
grid, every seed, every arrangement; a tidy table (Parquet and CSV) and `sweep.png`."""

from __future__ import annotations

from collections.abc import Sequence

from .batch import Batch, Job, batch_parser, output_files, run_batch, target_flag

OUTPUT_FILES = output_files("sweep", parquet=True)


def build_sweep_parser():
    p = batch_parser("sweep", "Run every point of a grid (rates x --set values), every seed, every arrangement; "
                     "print the on-time share (mean and 95% interval over seeds) per point and arrangement.", prices=False)
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


def _grid(args, scenario):
    from ..errors import InputError
    from ..sweep.grid import make_grid, resolve

    grid = make_grid(scenario, args.rate, args.set, args.slo_scale, args.rate_per_gpu)
    varied = [k for k, _ in grid.sets if k.startswith("slo.")]
    slos = {tuple((k, repr(v)) for k, v in p.items() if k in varied): p for p in grid.points()}.values()
    criteria = dict.fromkeys(resolve(scenario, {k: p[k] for k in varied}).slo.criterion for p in slos)
    if len(criteria) > 1:
        raise InputError(f"--set {', '.join(varied)}: got points judged by {' and '.join(criteria)}, expected one "
                         "criterion (the table shows on-time shares or the percentiles' ratio, not both): sweep "
                         "each criterion apart")
    return grid


def _sweep(job: Job) -> Batch:
    from ..page.commands import sweep_page
    from ..sweep.grid import SLO_SCALE
    from ..sweep.table import format_bands, on_time_bands, sweep

    scenario, seeds, grid, args = job.scenario, job.seeds, job.prepared, job.args
    table = sweep(scenario, grid, seeds, job.runner)
    percentiles = scenario.slo.criterion == "percentiles"
    on_time = on_time_bands(table, grid.keys)  # (the picture draws on-time shares whatever the criterion)
    bands = on_time_bands(table, grid.keys, "slo_ratio") if percentiles else on_time
    n_points = len(grid.points())
    x = SLO_SCALE if len(grid.rates) == 1 and args.slo_scale is not None else grid.rate_key
    share = scenario.slo.share_words()
    title = (f"{scenario.name}: {share} against {'the SLO scale' if x == SLO_SCALE else 'offered rate'}, "
             f"mean of {len(seeds)} seed{'s' * (len(seeds) > 1)} with 95% band")
    n = table["arrangement"].nunique()
    counts = f"{n_points} point{'s' * (n_points > 1)} x {len(seeds)} seed{'s' * (len(seeds) > 1)} x {n} arrangements"

    what = (f"{share} (%)" if not percentiles else
            f"criterion percentiles ({scenario.slo.words()}): the worst figure / its limit (at most 1 meets)")

    def picture(folder):
        from ..plots.capacity import save_sweep

        return save_sweep(on_time, grid.keys, folder / "sweep.png", title, args.target, x=x, limits=args.limits,
                          share=share)

    return Batch(
        table,
        info={"grid": {grid.rate_key: list(grid.rates), **{k: list(v) for k, v in grid.sets}}},
        lines=[f"{scenario.name}: {counts}; {what}" + (", mean and 95% interval over seeds" if len(seeds) > 1 else ""),
               f"limits: {scenario.slo.words()}" + "".join(f"; {k} as each row sets it" for k, _ in grid.sets
                                                          if k.startswith("slo.")), format_bands(bands, grid.keys)],
        picture=picture,
        page=lambda path: sweep_page(path, on_time, grid.keys, title, args.target,
                                     x=SLO_SCALE if len(grid.rates) == 1 and args.slo_scale is not None else grid.rate_key,
                                     limits=args.limits),
    )


def sweep_command(argv: Sequence[str]) -> int:
    """Run every point of a grid (rates x --set values), every seed, every arrangement."""
    return run_batch(argv, build_sweep_parser(), "sweep", _sweep, prepare=_grid, parquet=True)
