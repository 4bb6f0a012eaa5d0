"""The picture flags of the command line and their syntax (standard library only, so
`python -m disagg_simpy --help` stays fast). Values are checked against the run by `plots`."""

from __future__ import annotations

import math
from pathlib import Path

from ..errors import InputError
from ..units import Window


def parse_window(text: str) -> Window:
    """`START:END` in seconds, 0 <= START < END (the `--window` flag's syntax)."""
    parts = text.split(":")
    bad = InputError(f"--window: got {text!r}, expected START:END in seconds with 0 <= START < END")
    if len(parts) != 2:
        raise bad
    try:
        start, end = float(parts[0]), float(parts[1])
    except ValueError:
        raise bad from None
    if not (math.isfinite(start) and math.isfinite(end) and 0 <= start < end):
        raise bad
    return start, end


def parse_request_id(text: str) -> int:
    """A request id, a whole number >= 0 (the `--follow` flag's syntax)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise InputError(f"--follow: got {text!r}, expected a request id (a whole number >= 0)")
    return value


def parse_replies(text: str) -> int:
    """How many replies a timeline samples, 1 to 200 (the `--replies` flag's syntax)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 200:
        raise InputError(f"--replies: got {text!r}, expected a whole number from 1 to 200")
    return value


def add_plot_arguments(p) -> None:
    """The CLI flags of the PNG pictures (`disagg_simpy.plots`); with --seeds N, the first
    seed's run is drawn. Syntax is checked here, before the run; values against the run after."""
    where = p.add_mutually_exclusive_group()
    where.add_argument("--plots", type=Path, metavar="DIR", help="folder for the PNG pictures (default: <out>/plots/)")
    where.add_argument("--no-plots", action="store_true", help="skip the PNG pictures")
    p.add_argument("--window", type=parse_window, metavar="START:END",
                   help="timeline window in seconds (default: 4 s from a third into the measured window)")
    p.add_argument("--replies", type=parse_replies, metavar="N", default=25,
                   help="replies sampled on each timeline, 1 to 200 (default: 25)")
    p.add_argument("--follow", type=parse_request_id, metavar="REQUEST_ID",
                   help="also draw follow-<id>.png: one measured request's journey in every arrangement")


def plot_flag_error(err) -> InputError:
    """A picture option the run refused (`plots.PlotOptionError`), said with its flag."""
    return InputError(f"--{err.option}: {err.detail}")
