"""A benchmark client's count on a trace: which requests it sends (`pick`) and the cap of a run
that sends exactly that many (docs/traffic.md)."""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from ..scenario.schema import Scenario, TraceWorkload
from ..units import NS_PER_S


def picked_rows(w: TraceWorkload, n_rows: int, rng: np.random.Generator, source: str) -> np.ndarray:
    """Which of a trace's `n_rows` requests (after its window and shaping) a count sends, in
    time order: the first `n_requests`, or `n_requests` drawn without replacement with the
    seed's own stream `rng` (`pick: sampled`)."""
    n = w.n_requests
    assert n is not None
    if n > n_rows:
        where = " in its window" if w.start_s is not None or w.duration_s is not None else ""
        raise InputError(f"{source}: workload.n_requests: got {n:,}, but the trace holds {n_rows:,} requests{where}; "
                         "expected at most that many (with n_requests_per_gpu: that many per GPU x the largest "
                         "arrangement's GPUs)")
    if w.pick == "first":
        return np.arange(n)
    return np.sort(rng.choice(n_rows, size=n, replace=False))


def counted_cap(scenario: Scenario, arrived_ns: np.ndarray, n: int) -> float:
    """The cap of a run that sends exactly `n` requests: `max_sim_s` (refused if the last arrives
    after it) or the last arrival + the default slack."""
    last = float(arrived_ns[-1]) / NS_PER_S if len(arrived_ns) else 0.0
    cap_s = scenario.cap_s(last)
    if last > cap_s:
        raise InputError(f"{scenario.source}: max_sim_s: got {cap_s:g}, but request {n:,} of n_requests arrives at "
                         f"{last:.6g} s; expected at least that (n_requests sends every request)")
    return cap_s
