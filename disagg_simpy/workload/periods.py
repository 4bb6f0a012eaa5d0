"""Traffic that changes over time (E11): its periods, its rate, and arrivals drawn by thinning.

`periods(workload)` is the accessor other stages use (`plan --over-time`, roles that change):
each period's start and end (s), its rate and a constant-rate workload drawing its traffic.

Arrivals (`thinned_arrivals`): a non-homogeneous Poisson process by thinning against an envelope
that is constant within each period: L_k = the period's rate (schedule) or the curve's peak
(rate curve). Period k (the whole run, without a schedule) draws candidates from its own random
stream, spawned from the arrivals stream (`Generator.spawn`), so no period's arrivals depend on
another's or on the cap. Candidate j takes two uniforms (g_j, a_j): it comes -ln(1 - g_j) / L_k
after the one before (the first after the period's start), is rounded to whole ns (D10), and is
an arrival if it lies in the period, start_ns <= t_ns < end_ns (the last period: up to the cap),
and a_j x L_k < rate(t_ns). The first candidate at or past end_ns ends the period and is dropped
(the process is memoryless, so the next period starts afresh at its start). A schedule's rate is
constant in a period, so every candidate inside it is kept; a curve's envelope is its peak,
mean x (1 + amplitude), so on average at most twice as many candidates as arrivals are drawn.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..scenario.schedule import peak_rate, period_starts
from ..scenario.schema import SyntheticWorkload
from ..units import NS_PER_S, seconds_to_ns


@dataclass(frozen=True)
class WorkloadPeriod:
    """One period of a workload's traffic. `end_s` is the period's `until_s` (the last period's
    traffic goes on after it, to the end of the run); `rate_per_s` its rate (with a rate curve,
    the curve's mean over [start_s, end_s)); `workload` a constant-rate synthetic workload of the
    period's rate, prompt mix and reply lengths, measured over the period's length from 0
    (`warmup_s` 0, `measure_s` end_s - start_s): what a steady run of this period alone would draw."""

    index: int
    start_s: float
    end_s: float
    rate_per_s: float
    workload: SyntheticWorkload


def periods(w: SyntheticWorkload, window_s: float | None = None, end_s: float | None = None) -> list[WorkloadPeriod]:
    """The periods of `w`: a schedule's periods; with a rate curve and no schedule, windows of
    `window_s` from 0 up to `end_s` (both needed); with neither, one period [0, measure_s) (or
    [0, end_s)) of the workload itself."""
    if w.schedule is not None:
        bounds = list(zip(period_starts(w.schedule), (p.until_s for p in w.schedule)))
        parts = [(p.prompt_mix or w.prompt_mix, p.reply_words or w.reply_words, p.rate_per_s) for p in w.schedule]
    elif w.rate_curve is not None:
        if window_s is None or end_s is None or not window_s > 0 or not end_s > 0:
            raise ValueError("periods of a rate curve without a schedule need window_s > 0 and end_s > 0")
        n = int(np.ceil(end_s / window_s))
        bounds = [(k * window_s, min((k + 1) * window_s, end_s)) for k in range(n)]
        parts = [(w.prompt_mix, w.reply_words, None)] * n
    else:
        end = end_s if end_s is not None else w.measure_s
        if end is None:
            raise ValueError("periods of a workload without measure_s need end_s")
        bounds, parts = [(0.0, float(end))], [(w.prompt_mix, w.reply_words, w.rate_per_s)]
    out = []
    for k, ((start, end), (mix, reply, rate)) in enumerate(zip(bounds, parts)):
        if rate is None:
            assert w.rate_curve is not None  # (only a curve leaves a period's rate unset)
            rate = w.rate_curve.integral(start, end) / (end - start)
        steady = SyntheticWorkload.model_validate({
            "rate_per_s": float(rate), "warmup_s": 0.0, "measure_s": end - start, "prompt_mix": mix,
            "reply_words": reply, "arrivals": "poisson"})
        out.append(WorkloadPeriod(k, float(start), float(end), float(rate), steady))
    return out


def boundaries_ns(w: SyntheticWorkload) -> np.ndarray:
    """The starts of periods 1, 2, ... in whole ns (empty without a schedule): the period of an
    arrival at t_ns is `np.searchsorted(boundaries_ns(w), t_ns, side="right")`."""
    if w.schedule is None:
        return np.zeros(0, dtype=np.int64)
    return seconds_to_ns([p.until_s for p in w.schedule[:-1]])


class RateSteps:
    """A workload's period boundaries and rates, built once (O(periods)), so that each lookup
    after is a binary search, O(log periods): thinning looks up every block of candidates of
    every period, which rebuilt from the schedule each time was quadratic in periods."""

    def __init__(self, w: SyntheticWorkload):
        self.w = w
        self.bounds_ns = boundaries_ns(w)
        self.rates = (np.array([p.rate_per_s for p in w.schedule], dtype=np.float64)
                      if w.schedule is not None and w.rate_curve is None else None)

    def period_of(self, t_ns: np.ndarray) -> np.ndarray:
        """The period (from 0) each arrival time `t_ns` falls in: [start_ns, end_ns), the last open."""
        return np.searchsorted(self.bounds_ns, np.asarray(t_ns, dtype=np.int64), side="right")

    def rate_at(self, t_ns: np.ndarray) -> np.ndarray:
        """The rate (requests/s) at whole-ns times `t_ns`."""
        t_ns = np.asarray(t_ns, dtype=np.int64)
        w = self.w
        if w.rate_curve is not None:
            return w.rate_curve.rate(t_ns / NS_PER_S)
        if self.rates is None:
            assert w.rate_per_s is not None
            return np.full(t_ns.shape, w.rate_per_s)
        return self.rates[self.period_of(t_ns)]


def period_of(w: SyntheticWorkload, t_ns: np.ndarray) -> np.ndarray:
    """The period (from 0) each arrival time `t_ns` falls in (`RateSteps.period_of`; builds the
    boundaries once for this call: for many calls, keep a `RateSteps`)."""
    return RateSteps(w).period_of(t_ns)


def rate_at(w: SyntheticWorkload, t_ns: np.ndarray) -> np.ndarray:
    """The rate (requests/s) at whole-ns times `t_ns` (`RateSteps.rate_at`, built for this call)."""
    return RateSteps(w).rate_at(t_ns)


def thinned_arrivals(w: SyntheticWorkload, rng: np.random.Generator, cap_s: float,
                     n_requests: int | None = None) -> np.ndarray:
    """Arrival times (int64 ns, increasing) of `w`'s changing rate up to `cap_s` (inclusive), or
    its first `n_requests` arrivals: thinning (module docstring)."""
    starts = period_starts(w.schedule) if w.schedule is not None else [0.0]
    ends = [p.until_s for p in w.schedule[:-1]] if w.schedule is not None else []
    cap_ns = int(seconds_to_ns(cap_s)) if n_requests is None else 2**62  # (n_requests: no cap)
    streams = rng.spawn(len(starts))
    if w.rate_curve is not None or w.schedule is None:
        envelopes = [peak_rate(w)] * len(starts)
    else:
        envelopes = [float(p.rate_per_s or 0.0) for p in w.schedule]  # (schedule_problem: each set)
    found: list[np.ndarray] = []
    n_found = 0
    steps = RateSteps(w)  # (built once: each block's lookup is then a binary search)
    for k, start in enumerate(starts):
        last = k == len(starts) - 1
        envelope = envelopes[k]
        start_ns = int(seconds_to_ns(start))
        end_ns = cap_ns + 1 if last else int(seconds_to_ns(ends[k]))
        if n_requests is None and start_ns > cap_ns:
            break
        if n_requests is not None and last:
            length_s = (n_requests - n_found) / envelope * 2
        else:
            length_s = (min(end_ns, cap_ns + 1) - start_ns) / NS_PER_S
        mean = envelope * length_s
        block = int(mean * 1.02 + 10 * np.sqrt(mean)) + 64
        t_s = float(start)
        while True:
            u = streams[k].random((block, 2))
            times = t_s + np.cumsum(-np.log1p(-u[:, 0]) / envelope)
            t_ns = seconds_to_ns(times)
            inside = t_ns < end_ns if not last or n_requests is None else np.ones(block, dtype=bool)
            if n_requests is None:
                inside &= t_ns <= cap_ns
            keep = inside & (u[:, 1] * envelope < steps.rate_at(t_ns))
            found.append(t_ns[keep])
            n_found += int(np.count_nonzero(keep))
            t_s = float(times[-1])
            if not inside.all() or (n_requests is not None and n_found >= n_requests):
                break
        if n_requests is not None and n_found >= n_requests:
            break
    arrived = np.concatenate(found) if found else np.zeros(0, dtype=np.int64)
    return arrived[:n_requests] if n_requests is not None else arrived


#: Widths of time windows to choose from (s), 0.1 s to a week: `over_time.csv`, `describe`.
WINDOW_WIDTHS_S = (0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600,
                   43200, 86400, 172800, 604800)


def window_width_s(span_s: float, max_windows: int = 48) -> float:
    """The smallest width of `WINDOW_WIDTHS_S` that cuts `span_s` seconds into at most
    `max_windows` windows (a week past that)."""
    return float(next((w for w in WINDOW_WIDTHS_S if span_s <= w * max_windows), WINDOW_WIDTHS_S[-1]))


def window_edges_ns(span_s: float, width_s: float | None = None, max_windows: int = 48) -> np.ndarray:
    """Edges (whole ns) of windows [k x width, (k + 1) x width) over [0, span_s]: 0, width,
    2 x width, ..., the last edge span_s (the last window may be shorter)."""
    width = window_width_s(span_s, max_windows) if width_s is None else width_s
    n = max(1, int(np.ceil(span_s / width - 1e-9)))
    edges = np.minimum(np.arange(n + 1) * width, span_s)
    edges[-1] = span_s
    return seconds_to_ns(edges)
