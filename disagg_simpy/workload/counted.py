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


def origin_in(mine: np.ndarray | None, n_mine: int, theirs: np.ndarray | None, n_theirs: int) -> np.ndarray:
    """n_requests_per_gpu: the place in the largest arrangement's stream of each request of a
    smaller one's, matched by what names a request (a trace row, a turn's place in session order;
    None: its position), so a request drawn once keeps its draws and identity in every
    arrangement (M6) even where the smaller stream is a subset in another order (`pick: sampled`,
    sessions), not a prefix."""
    mine = mine if mine is not None else np.arange(n_mine)
    theirs = theirs if theirs is not None else np.arange(n_theirs)
    order = np.argsort(theirs, kind="stable")
    at = np.minimum(np.searchsorted(theirs[order], mine), max(len(theirs) - 1, 0))
    if len(mine) and (not len(theirs) or not np.array_equal(theirs[order][at], mine)):
        raise AssertionError("n_requests_per_gpu: a smaller arrangement's stream is not within the largest one's")
    return order[at]


def own_id(origin: np.ndarray | None, n: int, request_id: int) -> int | None:
    """The id in a stream of `n` requests (places `origin` in the largest stream, None: the same)
    of the request `request_id` names in the largest stream; None if that stream does not send it."""
    if origin is None:
        return request_id if request_id < n else None
    hit = np.flatnonzero(origin == request_id)
    return int(hit[0]) if hit.size else None
