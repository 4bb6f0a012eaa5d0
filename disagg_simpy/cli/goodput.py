"""`python -m disagg_simpy goodput SCENARIO [--target 90]`: per arrangement, the highest offered
rate whose mean on-time share over the seeds meets the target, found by bisection."""

from __future__ import annotations

import math
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
from .common import positive_float

OUTPUT_FILES = ("goodput.csv", "goodput.png", "run.json")
SLO_OUTPUT_FILES = ("slo_scale.csv", "run.json")  # --vary slo


def build_goodput_parser():
    p = batch_parser("goodput", "Find, per arrangement, the highest offered rate (requests/s) at which the mean "
                     "on-time share over the seeds is at least the target: its goodput.")
    p.add_argument("--target", type=target_flag, default=90.0, metavar="PCT",
                   help="on-time share to meet, in percent (default 90)")
    p.add_argument("--tolerance", type=positive_float("--tolerance"), default=None, metavar="PER_S",
                   help="stop when the passing and failing rates are this close (default 0.1 requests/s; "
                   "with --vary slo, scales: default 0.01)")
    p.add_argument("--rate-per-gpu", type=positive_float("--rate-per-gpu"), metavar="PER_S",
                   help="start each arrangement's search at this rate per GPU x its GPUs (instead of the scenario's rate)")
    p.add_argument("--vary", choices=("rate", "slo"), default="rate",
                   help="rate (default): the highest rate meeting the target; slo: at the scenario's rate, the smallest "
                   "SLO scale s (every limit that is on times s) meeting it, into slo_scale.csv")
    return p


def _pm(mean: float, half: float) -> str:
    if math.isnan(mean):
        return "-"
    return f"{mean:.1f}" + ("" if math.isnan(half) else f"±{half:.1f}")


def format_goodput(table) -> str:
    """Aligned text: goodput, per GPU, the bracketing rates with their on-time shares, the limit."""
    header = ["arrangement", "gpus", "goodput/s", "per GPU", "passes at", "on time %", "fails at", "on time %",
              "fails first"]
    rows = []
    for r in table.itertuples():
        rate = lambda x: "-" if math.isnan(x) else f"{x:.2f}"  # noqa: E731
        rows.append([r.arrangement, str(r.n_gpus), f"{r.goodput_per_s:.2f}", f"{r.goodput_per_gpu_per_s:.2f}",
                     rate(r.passing_rate_per_s), _pm(r.passing_on_time_pct, r.passing_on_time_half_width_pct),
                     rate(r.failing_rate_per_s), _pm(r.failing_on_time_pct, r.failing_on_time_half_width_pct),
                     r.binding_limit or "-"])
    widths = [max(len(x[i]) for x in [header, *rows]) for i in range(len(header))]
    lines = [" ".join([x[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(x[1:], widths[1:]))]) for x in [header, *rows]]
    return "\n".join(lines)


def goodput_command(argv: Sequence[str]) -> int:
    """Find each arrangement's goodput: the highest rate it carries with the target share on time."""
    import json

    from ..results.csv_text import csv_text
    from ..sweep.goodput import criterion_text, goodput

    args = build_goodput_parser().parse_args(argv)
    scenario = load(args)
    if args.vary == "slo":
        return _vary_slo(args, argv, scenario)
    seeds, note = seeds_of(scenario)
    starts = None
    if args.rate_per_gpu is not None:
        starts = {a.name: args.rate_per_gpu * a.n_gpus for a in scenario.arrangements}
    out = out_folder(args, scenario, list(OUTPUT_FILES))
    if note:
        print(note, file=sys.stderr)
    args.tolerance = 0.1 if args.tolerance is None else args.tolerance
    runner = open_runner(args, out)
    try:
        table = goodput(scenario, runner, seeds, args.target, args.tolerance, starts=starts)
    finally:
        runner.close()
    w = scenario.workload
    window = f"requests arriving in [{w.warmup_s:g}, {w.measure_s:g}) s measured" if w.measure_s else "every request measured"
    info = run_info(argv, scenario, seeds, target_pct=args.target, tolerance_per_s=args.tolerance,
                    store=str(runner.store.path), runs_skipped=runner.skipped, runs_done=runner.ran)
    at = f"at {args.target:g}% on time" if scenario.slo.criterion == "per_request" else "by the percentiles criterion"
    title = (f"{scenario.name}: goodput {at} (mean of {len(seeds)} seed"
             f"{'s' * (len(seeds) > 1)}; {window})")
    picture = None
    if not args.no_plots:
        from ..plots.capacity import save_goodput

        picture = lambda folder: save_goodput(table, folder / "goodput.png", title)  # noqa: E731
    write_all(out, {"goodput.csv": csv_text(table), "run.json": json.dumps(info, indent=2) + "\n"}, {}, picture)
    if args.json:
        print(json_rows(table))
    else:
        print(f"{title}; bisection to {args.tolerance:g} requests/s")
        print(f"criterion: {criterion_text(scenario.slo, args.target)}")
        print(format_goodput(table))
        print(f"results in {out}/")
    print(skipped_line(runner), file=sys.stderr)
    return 0


def _vary_slo(args, argv: Sequence[str], scenario) -> int:
    """goodput --vary slo: each arrangement's smallest SLO scale meeting the target at the
    scenario's rate, into slo_scale.csv."""
    import json

    from ..errors import InputError
    from ..results.csv_text import csv_text
    from ..sweep.goodput import criterion_text
    from ..sweep.slo_scale import format_scales, slo_scales

    if args.rate_per_gpu is not None:
        raise InputError(f"--rate-per-gpu: got {args.rate_per_gpu:g} with --vary slo, expected the scenario's own rate "
                         "(the SLO scale is searched at one rate; set it with the scenario's rate_per_s)")
    seeds, note = seeds_of(scenario)
    out = out_folder(args, scenario, list(SLO_OUTPUT_FILES))
    if note:
        print(note, file=sys.stderr)
    tolerance = 0.01 if args.tolerance is None else args.tolerance
    runner = open_runner(args, out)
    try:
        table = slo_scales(scenario, runner, seeds, args.target, tolerance)
    finally:
        runner.close()
    info = run_info(argv, scenario, seeds, target_pct=args.target, tolerance=tolerance, vary="slo",
                    store=str(runner.store.path), runs_skipped=runner.skipped, runs_done=runner.ran)
    write_all(out, {"slo_scale.csv": csv_text(table), "run.json": json.dumps(info, indent=2) + "\n"}, {}, None)
    if args.json:
        print(json_rows(table))
    else:
        rate = scenario.workload.rate_per_s
        print(f"{scenario.name}: the smallest SLO scale meeting {criterion_text(scenario.slo, args.target)} at "
              f"{rate:g} requests/s (mean of {len(seeds)} seed{'s' * (len(seeds) > 1)}; bisection to {tolerance:g})")
        print(format_scales(table))
        print(f"results in {out}/")
    print(skipped_line(runner), file=sys.stderr)
    return 0
