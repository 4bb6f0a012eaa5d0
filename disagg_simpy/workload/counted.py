"""A benchmark client's count on a trace: which requests it sends (`pick`) and the cap of a run
that sends exactly that many (docs/traffic.md)."""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from ..scenario.schema import Scenario, TraceWorkload
from ..units import NS_PER_S


def picked_rows(w: TraceWorkload, n_rows: int, rng: np.random.Generator, source: str) -> np.ndarray:
    """Which of a trace's `n_rows` requests (after its window and shaping) a count sends, in
    time order: the first `n_requests`, or (`pick: sampled`) the first `n_requests` of one order
    of the rows shuffled with the seed's own stream `rng`, so a smaller count's rows are a subset
    of a larger one's (`n_requests_per_gpu`: every arrangement size draws from one order)."""
    n = w.n_requests
    assert n is not None
    if n > n_rows:
        where = " in its window" if w.start_s is not None or w.duration_s is not None else ""
        raise InputError(f"{source}: workload.n_requests: got {n:,}, but the trace holds {n_rows:,} requests{where}; "
                         "expected at most that many (with n_requests_per_gpu: that many per GPU x the largest "
                         "arrangement's GPUs)")
    if w.pick == "first":
        return np.arange(n)
    return np.sort(rng.permutation(n_rows)[:n])


def last_arrival_s(arrived_ns: np.ndarray) -> float:
    """The last arrival of a stream in seconds (0 for none)."""
    return float(arrived_ns[-1]) / NS_PER_S if len(arrived_ns) else 0.0


def counted_cap(scenario: Scenario, last: float, n: int, key: str = "n_requests") -> float:
    """The cap of a run that sends exactly `n` requests, the last arriving at `last` seconds:
    `max_sim_s` (refused if the last arrives after it) or the last arrival + the default slack.
    `key`: the count's key as the file wrote it (`n_requests` or `n_requests_per_gpu`)."""
    cap_s = scenario.cap_s(last)
    if last > cap_s:
        raise InputError(f"{scenario.source}: max_sim_s: got {cap_s:g}, but request {n:,} of {key} arrives at "
                         f"{last:.6g} s; expected at least that ({key} sends every request)")
    return cap_s
