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
    p.add_argument("trace", help="trace file, or a public trace's id (see `traces list`)")
    p.add_argument("--format", choices=FORMATS, help="trace format (default csv; a public trace's own)")
    p.add_argument("--plot", type=Path, metavar="FILE", help="also write a PNG of arrivals per second and lengths")
    return p


def describe(argv: Sequence[str]) -> int:
    """Print a trace's statistics (requests, rate, burstiness, lengths); --plot draws them."""
    from ..plots.trace import plot_description
    from ..workload.catalog import CATALOG, resolve_trace
    from ..workload.trace_stats import describe_trace, format_description
    from ..workload.traces import read_trace

    args = build_describe_parser().parse_args(argv)
    fmt = args.format or (CATALOG[args.trace].format if args.trace in CATALOG else "csv")
    table = read_trace(resolve_trace(args.trace, fmt, Path("."), "describe"), fmt)
    print(format_description(describe_trace(table)))
    if table.attrs.get("ignored_columns"):
        print(f"note: {args.trace}: ignored column(s) {', '.join(map(repr, table.attrs['ignored_columns']))}, "
              f"which the {args.format} format does not use", file=sys.stderr)
    if args.plot is not None:
        make_folder(args.plot.parent if str(args.plot.parent) else Path("."), "--plot")
        plot_description(table, args.plot)
        print(f"plot in {args.plot}")
    return 0
