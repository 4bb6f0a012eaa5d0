"""The Python API: `run(scenario)` runs every arrangement on one request stream.

Data flows one way: scenario -> workload (the request stream) -> model (one engine per
arrangement, leaving records) -> results (verdicts, then frames on demand, in `RunResult`).
"""

from __future__ import annotations

from collections.abc import Iterator

from .model.engine import Engine
from .model.records import ArrangementRecords
from .results.metrics import LimitsNs, reply_gaps
from .results.run_result import RunResult
from .scenario.schema import Scenario
from .workload.stream import Requests, streams_by_gpus

__all__ = ["RunResult", "run", "run_arrangement", "run_each"]


def run_arrangement(scenario: Scenario, arrangement, stream: Requests) -> ArrangementRecords:
    """Run one arrangement on `stream` (the same stream every arrangement gets)."""
    return Engine(scenario, arrangement, stream).run()


def run_each(scenario: Scenario, seed: int | None = None) -> Iterator[RunResult]:
    """`run`, an arrangement at a time: one RunResult per arrangement (all on the same stream;
    with `n_requests_per_gpu`, each on its first per GPU x GPUs requests), so a caller that
    writes and drops each holds one arrangement's records at a time."""
    seed = scenario.seed if seed is None else seed
    streams = streams_by_gpus(scenario, seed)
    largest = streams[max(streams)]
    limits = LimitsNs.from_slo(scenario.slo)
    for arrangement in scenario.arrangements:
        rec = run_arrangement(scenario, arrangement, streams[arrangement.n_gpus])
        yield RunResult(scenario, seed, largest, {arrangement.name: rec}, {arrangement.name: reply_gaps(rec, limits)})


def run(scenario: Scenario, seed: int | None = None) -> RunResult:
    """Run every arrangement of `scenario` on one seeded request stream (with
    `n_requests_per_gpu`, each on its first per GPU x GPUs requests of it)."""
    seed = scenario.seed if seed is None else seed
    streams = streams_by_gpus(scenario, seed)
    stream = streams[max(streams)]
    limits = LimitsNs.from_slo(scenario.slo)
    records, gaps = {}, {}
    for arrangement in scenario.arrangements:
        rec = run_arrangement(scenario, arrangement, streams[arrangement.n_gpus])
        records[arrangement.name] = rec
        gaps[arrangement.name] = reply_gaps(rec, limits)
    return RunResult(scenario, seed, stream, records, gaps)
