"""`RunResult`: one seed's run of every arrangement, with its frames built on first use.

The pictures, the page and the command line read a run only through this object: its frames,
its per-reply verdicts (`gaps`), its records (word times, GPU roles), never the model itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..model.records import ArrangementRecords
from ..scenario.schema import Scenario
from ..units import NS_PER_S
from ..workload.stream import Requests
from .frames import iterations_frame, reads_frame, requests_frame, words_frame
from .metrics import SUMMARY_COLUMNS, ReplyGaps, summary_row


@dataclass
class RunResult:
    """One seed's run of every arrangement: `summary`, `requests`, `iterations` and `reads` are
    the CSVs' tables (built on first use, then kept), `words(arrangement)` every word's time.
    Frames have one block of rows per arrangement."""

    scenario: Scenario
    seed: int
    stream: Requests  # the request stream every arrangement saw
    records: dict[str, ArrangementRecords]
    gaps: dict[str, ReplyGaps] = field(repr=False)
    _frames: dict[str, pd.DataFrame] = field(default_factory=dict, init=False, repr=False, compare=False)

    def _frame(self, name: str, build) -> pd.DataFrame:
        if name not in self._frames:
            self._frames[name] = build()
        return self._frames[name]

    @property
    def summary(self) -> pd.DataFrame:
        """One row per arrangement: the `summary.csv` columns (README, Outputs)."""
        return self._frame("summary", lambda: pd.DataFrame(
            [summary_row(self.records[n], self.gaps[n]) for n in self.records], columns=list(SUMMARY_COLUMNS)))

    @property
    def requests(self) -> pd.DataFrame:
        """One row per measured request per arrangement: the `requests.csv` columns."""
        return self._frame("requests", lambda: _concat(
            [requests_frame(self.records[n], self.gaps[n]) for n in self.records], list(self.records)))

    @property
    def iterations(self) -> pd.DataFrame:
        """Every iteration of every GPU, by arrangement, GPU, then iteration: `iterations.csv`."""
        return self._frame("iterations", lambda: _concat(
            [iterations_frame(r) for r in self.records.values()], list(self.records)))

    @property
    def reads(self) -> pd.DataFrame:
        """Which iteration read how many tokens of which prompt: `reads.csv`."""
        return self._frame("reads", lambda: _concat([reads_frame(r) for r in self.records.values()], list(self.records)))

    @property
    def capped(self) -> list[str]:
        """Arrangements whose run the safety cap ended with measured replies unfinished."""
        return [name for name, rec in self.records.items() if rec.capped]

    def words(self, arrangement: str, request_ids=None) -> pd.DataFrame:
        """Every word written to the measured requests (or to `request_ids`, in id order):
        `request_id, word, at_s`, built now from the writing GPUs' iteration ends."""
        rec = self._records_of(arrangement)
        if request_ids is None:
            rows = np.flatnonzero(rec.requests["measured"])
        else:
            rows = np.unique(np.asarray(request_ids, dtype=np.int64))  # request id = row
        return words_frame(rec, rows)

    def gap_distribution(self, arrangement: str) -> tuple[np.ndarray, np.ndarray]:
        """Every gap between words of the finished measured replies, in seconds, as distinct
        values and how often each occurs (a split reply's first gap includes its ship)."""
        gaps = self.gaps[self._records_of(arrangement).name]
        return gaps.gap_values_ns / NS_PER_S, gaps.gap_counts

    def gpu_roles(self, arrangement: str) -> tuple[str, ...]:
        """'reads', 'writes' or 'both', by GPU number (a split numbers its reading GPUs first)."""
        return self._records_of(arrangement).gpu_roles

    def _records_of(self, arrangement: str) -> ArrangementRecords:
        if arrangement not in self.records:
            known = ", ".join(self.records)
            raise KeyError(f"unknown arrangement {arrangement!r}; this run has {known}")
        return self.records[arrangement]


def _concat(frames: list[pd.DataFrame], names: list[str]) -> pd.DataFrame:
    out = pd.concat(frames, ignore_index=True)
    out["arrangement"] = pd.Categorical(out["arrangement"], categories=names)
    return out
