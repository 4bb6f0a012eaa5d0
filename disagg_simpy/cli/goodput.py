"""`python -m disagg_simpy goodput SCENARIO [--target 90]`: per arrangement, the highest offered
rate whose mean on-time share over the seeds meets the target, found by bisection."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..texts import aligned
from .batch import Batch, Job, batch_parser, output_files, refuse_varying_traffic, run_batch, target_flag
from .common import cost_error_flag, positive_float

OUTPUT_FILES = output_files("goodput")


def build_goodput_parser():
    p = batch_parser("goodput", "Find, per arrangement, the highest offered rate (requests/s) at which the mean "
                     "on-time share over the seeds is at least the target: its goodput.")
    p.add_argument("--set", dest="fixed", action="append", default=[], metavar="KEY=VALUE",
                   help="set a scenario key for every run, e.g. router=prefix_aware (repeatable)")
    p.add_argument("--target", type=target_flag, default=90.0, metavar="PCT",
                   help="on-time share to meet, in percent (default 90)")
    p.add_argument("--tolerance", type=positive_float("--tolerance"), default=None, metavar="PER_S",
                   help="stop when the passing and failing rates are this close (default 0.1 requests/s; "
                   "with --vary slo, scales: default 0.01)")
    p.add_argument("--cost-error", type=cost_error_flag, metavar="PCT",
                   help="re-run the two best with each side's costs off by up to PCT %% (one side at a time) and say "
                   "whether the winner holds or which cost error flips it (default: the cost preset's stated errors, "
                   "when the scenario names a preset)")
    p.add_argument("--rate-per-gpu", type=positive_float("--rate-per-gpu"), metavar="PER_S",
                   help="start each arrangement's search at this rate per GPU x its GPUs (instead of the scenario's rate)")
    p.add_argument("--vary", choices=("rate", "slo"), default="rate",
                   help="rate (default): the highest rate meeting the target; slo: at the scenario's rate, the smallest "
                   "SLO scale s (every limit that is on times s) meeting it, into slo_scale.csv")
    return p


def format_goodput(table, share: str = "on time %") -> str:
    """Aligned text: goodput with its 95% interval, per GPU, the bracketing rates with their
    per-request shares (mean and interval over seeds; `share`: their header, `Slo.share_header`),
    the limit; the costs, if any, per request at the goodput (results/costs.py)."""
    from ..results.intervals import Interval, decimals_below
    from . import cost_text

    costs = cost_text.has_costs(table)
    header = ["arrangement", "gpus", "goodput/s (95% interval)", "per GPU", "passes at", share, "fails at",
              share, "fails first", *(cost_text.header() if costs else [])]
    rows = []
    for r in table.itertuples():
        rate = lambda x: "-" if math.isnan(x) else f"{x:.2f}"  # noqa: E731
        good = f"{r.goodput_per_s:.2f}" + ("" if math.isnan(r.goodput_low_per_s) else
                                           f" ({r.goodput_low_per_s:.2f}-{r.goodput_high_per_s:.2f})")
        passing = Interval(r.passing_on_time_pct, r.passing_on_time_low_pct, r.passing_on_time_high_pct, 0)
        failing = Interval(r.failing_on_time_pct, r.failing_on_time_low_pct, r.failing_on_time_high_pct, 0)
        fails = failing.text(decimals_below(failing.mean, r.target_pct))  # never '90.0' below a 90% target
        rows.append([r.arrangement, str(r.n_gpus), good, f"{r.goodput_per_gpu_per_s:.2f}",
                     rate(r.passing_rate_per_s), passing.text(), rate(r.failing_rate_per_s), fails,
                     r.binding_limit or "-", *(cost_text.cells(r) if costs else [])])
    return "\n".join(aligned([header, *rows], sep=" "))


def _goodput(job: Job) -> Batch:
    from ..page.commands import goodput_page
    from ..sweep.goodput import criterion_text, goodput

    scenario, seeds, args = job.scenario, job.seeds, job.args
    args.tolerance = 0.1 if args.tolerance is None else args.tolerance
    starts = None
    if args.rate_per_gpu is not None:
        starts = {a.name: args.rate_per_gpu * a.n_gpus for a in scenario.arrangements}
    table = goodput(scenario, job.runner, seeds, args.target, args.tolerance, starts=starts)
    w = scenario.workload
    window = f"requests arriving in [{w.warmup_s:g}, {w.measure_s:g}) s measured" if w.measure_s else "every request measured"
    at = scenario.slo.at_text(args.target)
    title = (f"{scenario.name}: goodput {at} (mean of {len(seeds)} seed"
             f"{'s' * (len(seeds) > 1)}; {window})")

    def picture(folder):
        from ..plots.capacity import save_goodput

        return save_goodput(table, folder / "goodput.png", title, scenario.slo.carried_text())

    from ..sweep.cost_error import cost_error_line

    sure = cost_error_line(scenario, job.runner, seeds, args.target, args.tolerance, table, args.cost_error)
    return Batch(table, info={"target_pct": args.target, "tolerance_per_s": args.tolerance, "cost_error": sure},
                 lines=[f"{title}; bisection to {args.tolerance:g} requests/s",
                        f"criterion: {criterion_text(scenario.slo, args.target)}",
                        format_goodput(table, scenario.slo.share_header()), *([sure] if sure else [])],
                 picture=picture, page=lambda path: goodput_page(path, table, title))


def _slo_scale(job: Job) -> Batch:
    """goodput --vary slo: each arrangement's smallest SLO scale meeting the target at the
    scenario's rate, into slo_scale.csv."""
    from ..errors import InputError
    from ..sweep.goodput import criterion_text
    from ..sweep.slo_scale import format_scales, slo_scales

    scenario, seeds, args = job.scenario, job.seeds, job.args
    if args.rate_per_gpu is not None:
        raise InputError(f"--rate-per-gpu: got {args.rate_per_gpu:g} with --vary slo, expected the scenario's own rate "
                         "(the SLO scale is searched at one rate; set it with the scenario's rate_per_s)")
    tolerance = 0.01 if args.tolerance is None else args.tolerance
    table = slo_scales(scenario, job.runner, seeds, args.target, tolerance)
    line = (f"{scenario.name}: the smallest SLO scale meeting {criterion_text(scenario.slo, args.target)} at "
            f"{scenario.workload.rate_per_s:g} requests/s (mean of {len(seeds)} seed{'s' * (len(seeds) > 1)}; "
            f"bisection to {tolerance:g})")
    from ..page.commands import slo_scale_page

    return Batch(table, info={"target_pct": args.target, "tolerance": tolerance, "vary": "slo"},
                 lines=[line, format_scales(table)], page=lambda path: slo_scale_page(path, table, line))


def goodput_command(argv: Sequence[str]) -> int:
    """Find each arrangement's goodput: the highest rate it carries with the target share on time."""
    parser = build_goodput_parser()
    prepare = lambda args, scenario: refuse_varying_traffic(scenario, "goodput")  # noqa: E731
    if parser.parse_args(argv).vary == "slo":
        return run_batch(argv, parser, "slo_scale", _slo_scale, prepare=prepare)
    return run_batch(argv, parser, "goodput", _goodput, prepare=prepare)
