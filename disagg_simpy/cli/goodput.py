"""`python -m disagg_simpy goodput SCENARIO [--target 90]`: per arrangement, the highest offered
rate whose mean on-time share over the seeds meets the target, found by bisection."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..texts import aligned
from .batch import Batch, Job, batch_parser, output_files, run_batch, target_flag
from .common import positive_float

OUTPUT_FILES = output_files("goodput")


def build_goodput_parser():
    p = batch_parser("goodput", "Find, per arrangement, the highest offered rate (requests/s) at which the mean "
                     "on-time share over the seeds is at least the target: its goodput.")
    p.add_argument("--target", type=target_flag, default=90.0, metavar="PCT",
                   help="on-time share to meet, in percent (default 90)")
    p.add_argument("--tolerance", type=positive_float("--tolerance"), default=0.1, metavar="PER_S",
                   help="stop when the passing and failing rates are this close (default 0.1 requests/s)")
    return p


def format_goodput(table) -> str:
    """Aligned text: goodput with its 95% interval, per GPU, the bracketing rates with their
    on-time shares (mean and interval over seeds), the limit."""
    from ..results.intervals import Interval

    header = ["arrangement", "gpus", "goodput/s (95% interval)", "per GPU", "passes at", "on time %", "fails at",
              "on time %", "fails first"]
    rows = []
    for r in table.itertuples():
        rate = lambda x: "-" if math.isnan(x) else f"{x:.2f}"  # noqa: E731
        good = f"{r.goodput_per_s:.2f}" + ("" if math.isnan(r.goodput_low_per_s) else
                                           f" ({r.goodput_low_per_s:.2f}-{r.goodput_high_per_s:.2f})")
        passing = Interval(r.passing_on_time_pct, r.passing_on_time_low_pct, r.passing_on_time_high_pct, 0)
        failing = Interval(r.failing_on_time_pct, r.failing_on_time_low_pct, r.failing_on_time_high_pct, 0)
        rows.append([r.arrangement, str(r.n_gpus), good, f"{r.goodput_per_gpu_per_s:.2f}",
                     rate(r.passing_rate_per_s), passing.text(), rate(r.failing_rate_per_s), failing.text(),
                     r.binding_limit or "-"])
    return "\n".join(aligned([header, *rows], sep=" "))


def _goodput(job: Job) -> Batch:
    from ..sweep.goodput import goodput

    scenario, seeds, args = job.scenario, job.seeds, job.args
    table = goodput(scenario, job.runner, seeds, args.target, args.tolerance)
    w = scenario.workload
    window = f"requests arriving in [{w.warmup_s:g}, {w.measure_s:g}) s measured" if w.measure_s else "every request measured"
    title = (f"{scenario.name}: goodput at {args.target:g}% on time (mean of {len(seeds)} seed"
             f"{'s' * (len(seeds) > 1)}; {window})")

    def picture(folder):
        from ..plots.capacity import save_goodput

        return save_goodput(table, folder / "goodput.png", title)

    return Batch(table, info={"target_pct": args.target, "tolerance_per_s": args.tolerance},
                 lines=[f"{title}; bisection to {args.tolerance:g} requests/s", format_goodput(table)], picture=picture)


def goodput_command(argv: Sequence[str]) -> int:
    """Find each arrangement's goodput: the highest rate it carries with the target share on time."""
    return run_batch(argv, build_goodput_parser(), "goodput", _goodput)
