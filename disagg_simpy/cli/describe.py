"""`python -m disagg_simpy describe TRACE`: a trace's statistics, and optionally a picture."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from ..files import check_output_file, check_outputs_apart, folders_undone_on_failure, make_folder
from ..scenario.lengths import MAX_BINS
from .common import NotWritten, Parser, int_at_least, path_flag, positive_float


def build_describe_parser() -> argparse.ArgumentParser:
    from ..workload.traces import FORMATS

    p = Parser(
        prog="python -m disagg_simpy describe",
        description="Print a trace's statistics: requests, duration, rate, burstiness, busiest "
        "second and minute, prompt and reply percentiles, and its rate over time (per window).",
    )
    p.add_argument("trace", help="trace file, or a public trace's id (see `traces list`)")
    p.add_argument("--format", choices=FORMATS, help="trace format (default csv; a public trace's own)")
    p.add_argument("--plot", type=path_flag("--plot", "a file name"), metavar="FILE",
                   help="also write a PNG of arrivals over time and lengths")
    p.add_argument("--fit", action="store_true",
                   help="print instead, as YAML, the trace's prompt and reply lengths as histogram length "
                   "distributions: the prompt_mix and reply_words of a synthetic workload shaped like the trace")
    p.add_argument("--bins", type=int_at_least("--bins", 1, MAX_BINS), default=20, metavar="N",
                   help=f"bins of --fit (default 20, at most {MAX_BINS:,}): one per distinct length when there "
                   "are at most N, else edges at the lengths' quantiles")
    p.add_argument("--period-s", type=positive_float("--period-s"), metavar="SECONDS",
                   help="with --fit: print instead a schedule (E11) of periods this long of the trace's clock, each "
                   "with the rate and the length histograms of its own requests")
    p.add_argument("--time-scale", type=positive_float("--time-scale"), default=1.0, metavar="F",
                   help="with --period-s: replay the trace F times faster (periods F times shorter, rates F times "
                   "higher), as a trace workload's time_scale (default 1)")
    return p


def describe(argv: Sequence[str]) -> int:
    """Print a trace's statistics (requests, rate, burstiness, lengths); --plot draws them."""
    from ..workload.catalog import CATALOG, resolve_trace
    from ..workload.trace_stats import describe_trace, format_description
    from ..workload.traces import ignored_text, read_trace

    args = build_describe_parser().parse_args(argv)
    from ..errors import InputError

    if args.period_s is not None and not args.fit:
        raise InputError(f"--period-s: got {args.period_s:g} without --fit, expected --fit --period-s SECONDS")
    if args.time_scale != 1.0 and args.period_s is None:
        raise InputError(f"--time-scale: got {args.time_scale:g} without --period-s, expected --fit --period-s "
                         "SECONDS --time-scale F")
    fmt = args.format or (CATALOG[args.trace].format if args.trace in CATALOG else "csv")
    path = resolve_trace(args.trace, fmt, Path("."), "describe")
    if args.plot is not None:  # before reading: a bad path costs nothing, and never the trace
        check_output_file(args.plot, "--plot")
        check_outputs_apart({f"--plot {args.plot}": args.plot}, {"trace file": Path(path)})
    table = read_trace(path, fmt)
    if args.fit:
        from ..workload.trace_stats import fit_schedule_text, fit_text

        if args.period_s is not None:
            print(fit_schedule_text(table, args.bins, args.trace, args.period_s, args.time_scale), end="")
        else:
            print(fit_text(table, args.bins, args.trace), end="")
    else:
        from ..workload.trace_stats import format_rate_over_time, rate_over_time

        print(format_description(describe_trace(table)))
        windows = rate_over_time(table)
        if windows is not None:
            print("\n" + format_rate_over_time(windows))
    if table.attrs.get("ignored_columns"):
        print(f"note: {args.trace}: ignored column(s) {ignored_text(table.attrs['ignored_columns'])}, "
              f"which the {fmt} format does not use", file=sys.stderr)
    if args.plot is not None:
        from ..plots.trace import plot_description

        with folders_undone_on_failure(args.plot.parent):
            make_folder(args.plot.parent, "--plot")
            try:
                plot_description(table, args.plot, args.trace)
            except OSError as err:
                raise NotWritten(f"cannot write --plot {args.plot}: {err.strerror or err}; nothing was replaced") from None
        print(f"plot in {args.plot}")
    return 0
