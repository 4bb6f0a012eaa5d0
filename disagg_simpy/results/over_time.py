"""Results over time: the offered rate and the on-time share in each time window, per
arrangement (`over_time.csv`), for traffic that changes over time (E11, a trace's own times).

Windows (`workload.periods.window_edges_ns`) cut the span from 0 to the end of the measured
window (to the last arrival, for traffic without `measure_s`) into at most 48, of a round width
(1 s, 15 s, 2 min, 30 min, ...). A request counts in the window its arrival falls in (whole ns,
half-open), as E11 puts it in a period; only measured requests count for the on-time share.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..model.records import ArrangementRecords
from ..units import NS_PER_S
from ..workload.periods import window_edges_ns
from .columns import checked, names
from .metrics import ReplyGaps


def changes_over_time(scenario) -> bool:
    """Whether a run's traffic changes over time, so `over_time.csv` is written: a schedule or a
    rate curve, or a trace with its own arrival times."""
    w = scenario.workload
    return bool(getattr(w, "varies", False) or getattr(w, "format", "lengths") != "lengths")


def mean_over_seeds(frame: pd.DataFrame) -> pd.DataFrame:
    """Per arrangement and window, the mean over seeds of the offered rate and of the on-time
    share (a seed with no measured request in a window leaves it out of that window's mean):
    what `over_time.png` and the page draw."""
    keys = ["arrangement", "window_start_s", "window_end_s"]
    return (frame.groupby(keys, observed=True, sort=False)[["offered_rate_per_s", "on_time_pct"]]
            .mean().reset_index())


def boundaries_s(scenario) -> list[float]:
    """A schedule's period boundaries (s), drawn as dotted lines over time (none otherwise)."""
    schedule = getattr(scenario.workload, "schedule", None)
    return [p.until_s for p in schedule[:-1]] if schedule else []


def over_time_edges_ns(scenario, arrived_at_ns: np.ndarray) -> np.ndarray:
    """The windows' edges for a run of `scenario` whose requests arrived at `arrived_at_ns`."""
    end = scenario.workload.measure_s
    if end is None:
        end = float(arrived_at_ns[-1]) / NS_PER_S if len(arrived_at_ns) else 0.0
    return window_edges_ns(max(float(end), 1e-9))


def over_time_frame(rec: ArrangementRecords, gaps: ReplyGaps, edges_ns: np.ndarray) -> pd.DataFrame:
    """One row per window for one arrangement: the `over_time.csv` columns (docs/outputs.md)."""
    n_windows = len(edges_ns) - 1

    def count(t_ns: np.ndarray) -> np.ndarray:
        k = np.searchsorted(edges_ns, t_ns, side="right") - 1
        return np.bincount(k[(k >= 0) & (k < n_windows)], minlength=n_windows)

    arrived = rec.requests["arrived_at_ns"]
    measured_at = arrived[gaps.rows]
    n_arrived, n_measured = count(arrived), count(measured_at)
    n_on_time = count(measured_at[gaps.on_time])
    width_s = np.diff(edges_ns) / NS_PER_S
    on_time_pct = 100.0 * n_on_time / np.maximum(n_measured, 1)
    row = {
        "arrangement": rec.name,
        "window_start_s": edges_ns[:-1] / NS_PER_S,
        "window_end_s": edges_ns[1:] / NS_PER_S,
        "n_arrived": n_arrived,
        "offered_rate_per_s": n_arrived / width_s,
        "n_measured": n_measured,
        "n_on_time": n_on_time,
        "on_time_pct": np.where(n_measured > 0, on_time_pct, np.nan),
    }
    return pd.DataFrame(checked(row, names("over_time"), "over_time"), columns=list(names("over_time")))


def reading_serving(start_reading: int, switches: dict | None, end_s: float) -> tuple[np.ndarray, np.ndarray]:
    """(times s, reading instances serving from each time on), a step function from 0 to `end_s`,
    from an arrangement's moves (E12: an instance leaves its side when its move is asked and joins
    the other once warmed up); `plan_over_time.png` and `plan --over-time`'s page draw it."""
    steps = [(0.0, 0)]
    sw = switches or {}
    for asked, serving, to in zip(sw.get("requested_at_ns", []), sw.get("serving_at_ns", []), sw.get("to_role", [])):
        if to == "writes":
            steps.append((asked / NS_PER_S, -1))
        elif serving >= 0:
            steps.append((serving / NS_PER_S, +1))
    steps.sort()
    t = np.array([s for s, _ in steps] + [end_s])
    n = start_reading + np.cumsum([d for _, d in steps] + [0])
    return t, n
