"""The Python API: `run(scenario)` runs every arrangement on one request stream.

Data flows one way: scenario -> workload -> model (engine) -> records -> frames -> metrics.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pandas as pd

from .engine import Engine
from .frames import iterations_frame, reads_frame, requests_frame, words_frame
from .metrics import SUMMARY_COLUMNS, LimitsNs, ReplyGaps, reply_gaps, summary_row
from .records import ArrangementRecords
from .scenario import Scenario
from .workload import Requests, make_requests


@dataclass
class RunResult:
    """One seed's run of every arrangement. Frames have one block of rows per arrangement."""

    scenario: Scenario
    seed: int
    stream: Requests  # the request stream every arrangement saw
    records: dict[str, ArrangementRecords]
    gaps: dict[str, ReplyGaps] = field(repr=False)

    @cached_property
    def summary(self) -> pd.DataFrame:
        rows = [summary_row(self.records[n], self.gaps[n]) for n in self.records]
        return pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))

    @cached_property
    def requests(self) -> pd.DataFrame:
        return _concat([requests_frame(self.records[n], self.gaps[n]) for n in self.records], list(self.records))

    @cached_property
    def iterations(self) -> pd.DataFrame:
        return _concat([iterations_frame(r) for r in self.records.values()], list(self.records))

    @cached_property
    def reads(self) -> pd.DataFrame:
        return _concat([reads_frame(r) for r in self.records.values()], list(self.records))

    @property
    def capped(self) -> list[str]:
        """Arrangements whose run the safety cap ended with measured replies unfinished."""
        return [name for name, rec in self.records.items() if rec.capped]

    def words(self, arrangement: str) -> pd.DataFrame:
        """Every word written to a measured request: `request_id, word, at_s`, built now."""
        if arrangement not in self.records:
            known = ", ".join(self.records)
            raise KeyError(f"unknown arrangement {arrangement!r}; this run has {known}")
        rec = self.records[arrangement]
        return words_frame(rec, np.flatnonzero(rec.requests["measured"]))


def _concat(frames: list[pd.DataFrame], names: list[str]) -> pd.DataFrame:
    out = pd.concat(frames, ignore_index=True)
    out["arrangement"] = pd.Categorical(out["arrangement"], categories=names)
    return out


def run_arrangement(scenario: Scenario, arrangement, stream: Requests) -> ArrangementRecords:
    """Run one arrangement on `stream` (the same stream every arrangement gets)."""
    return Engine(scenario, arrangement, stream).run()


def run(scenario: Scenario, seed: int | None = None) -> RunResult:
    """Run every arrangement of `scenario` on one seeded request stream."""
    seed = scenario.seed if seed is None else seed
    stream = make_requests(scenario, seed)
    limits = LimitsNs.from_slo(scenario.slo)
    records, gaps = {}, {}
    for arrangement in scenario.arrangements:
        rec = run_arrangement(scenario, arrangement, stream)
        records[arrangement.name] = rec
        gaps[arrangement.name] = reply_gaps(rec, limits)
    return RunResult(scenario, seed, stream, records, gaps)
