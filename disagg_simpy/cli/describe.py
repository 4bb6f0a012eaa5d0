"""`python -m disagg_simpy describe TRACE`: a trace's statistics, and optionally a picture."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from ..files import make_folder
from .common import Parser


def build_describe_parser() -> argparse.ArgumentParser:
    from ..workload.traces import FORMATS

    p = Parser(
        prog="python -m disagg_simpy describe",
        description="Print a trace's statistics: requests, duration, rate, burstiness, busiest "
        "second and minute, prompt and reply percentiles.",
    )
    p.add_argument("trace", type=Path, help="trace file")
    p.add_argument("--format", choices=FORMATS, default="csv", help="trace format (default csv)")
    p.add_argument("--plot", type=Path, metavar="FILE", help="also write a PNG of arrivals per second and lengths")
    return p


def describe(argv: Sequence[str]) -> int:
    """Print a trace's statistics (requests, rate, burstiness, lengths); --plot draws them."""
    from ..plots.trace import plot_description
    from ..workload.trace_stats import describe_trace, format_description
    from ..workload.traces import read_trace

    args = build_describe_parser().parse_args(argv)
    table = read_trace(args.trace, args.format)
    print(format_description(describe_trace(table)))
    if table.attrs.get("ignored_columns"):
        print(f"note: {args.trace}: ignored column(s) {', '.join(map(repr, table.attrs['ignored_columns']))}, "
              f"which the {args.format} format does not use", file=sys.stderr)
    if args.plot is not None:
        make_folder(args.plot.parent if str(args.plot.parent) else Path("."), "--plot")
        plot_description(table, args.plot)
        print(f"plot in {args.plot}")
    return 0
