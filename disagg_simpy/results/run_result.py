"""`RunResult`: one seed's run of every arrangement, with its frames built on first use.

The pictures, the page and the command line read a run only through this object: its frames,
its per-reply verdicts (`gaps`), its records (word times, GPU roles), never the model itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..model.records import ArrangementRecords
from ..scenario.gpu_kinds import shows_costs
from ..scenario.schema import Scenario
from ..units import NS_PER_S
from ..workload.stream import Requests
from .blame import FreezeBlame, freeze_blame, freezes_frame, long_prompt_tokens
from .breakdown import summary_figures, time_columns
from .columns import PAGED_COLUMNS, PREFIX_COLUMNS, SUMMARY_COLUMNS, SUMMARY_COST_COLUMNS
from .costs import on_time_figures
from .frames import iterations_frame, paged_columns, reads_frame, requests_frame, words_frame
from .metrics import LimitsNs, ReplyGaps, off_columns, paged_figures
from .over_time import over_time_edges_ns, over_time_frame
from .rules import rule_columns


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
    chosen: str = field(default="", compare=False)  # why this seed is the one shown (results/seeds.py), if chosen
    _frames: dict[str, object] = field(default_factory=dict, init=False, repr=False, compare=False)  # built on first use

    @property
    def seed_text(self) -> str:
        """'seed 7', or 'seed 7 (the seed whose ... )' when it was chosen among several."""
        return f"seed {self.seed}" + (f" ({self.chosen})" if self.chosen else "")

    def _frame(self, name: str, build):
        if name not in self._frames:
            self._frames[name] = build()
        return self._frames[name]

    @property
    def summary(self) -> pd.DataFrame:
        """One row per arrangement: the `summary.csv` columns (docs/outputs.md)."""
        def build() -> pd.DataFrame:
            arrangements = {a.name: a for a in self.scenario.arrangements}
            rows = [summary_figures(self.scenario, arrangements[n], self.records[n], self.gaps[n], self.limits)
                    for n in self.records]
            extra = rule_columns(self.scenario.slo)
            extra += list(PREFIX_COLUMNS) if self.scenario.prefix_cache_tokens is not None else []  # E13
            if self.paged:  # E9's figures, only when some arrangement is paged (R59)
                for row, n in zip(rows, self.records):
                    row.update(paged_figures(self.records[n], self.gaps[n]))
                extra = [*PAGED_COLUMNS, *extra]
            if shows_costs(self.scenario):  # costs, when the scenario names a GPU kind or a price (costs.py)
                for row, n in zip(rows, self.records):
                    row.update(on_time_figures(self.scenario, arrangements[n], row["n_requests"], row["on_time_pct"]))
                extra += list(SUMMARY_COST_COLUMNS)
            return pd.DataFrame(rows, columns=[*SUMMARY_COLUMNS, *extra])

        return self._frame("summary", build)

    @property
    def requests(self) -> pd.DataFrame:
        """One row per measured request per arrangement: the `requests.csv` columns."""
        return self._frame("requests", lambda: _concat([self._requests_frame(n) for n in self.records], list(self.records)))

    @property
    def paged(self) -> bool:
        """Whether some arrangement has paged KV (E9): its columns are written then (R59)."""
        return any(rec.preemptions is not None for rec in self.records.values())

    def _requests_frame(self, name: str) -> pd.DataFrame:
        rec, gaps = self.records[name], self.gaps[name]
        frame = requests_frame(rec, gaps).assign(**time_columns(rec, gaps, self.limits))
        if self.paged:
            frame = frame.assign(**paged_columns(rec, gaps))
        for column in off_columns(self.scenario.slo) & set(frame.columns):  # a limit that is off judges nothing
            frame[column] = np.nan
        return frame

    @property
    def freezes(self) -> pd.DataFrame:
        """One row per freeze of a measured reply, with what caused it: `freezes.csv`."""
        return self._frame("freezes", lambda: _concat(
            [freezes_frame(n, self.seed, self.blame[n]) for n in self.records], list(self.records)))

    @property
    def over_time(self) -> pd.DataFrame:
        """The offered rate and the on-time share per time window, per arrangement:
        `over_time.csv` (`over_time.py`)."""
        def build() -> pd.DataFrame:
            edges = over_time_edges_ns(self.scenario, self.stream.arrived_at_ns)
            return _concat([over_time_frame(self.records[n], self.gaps[n], edges) for n in self.records],
                           list(self.records))

        return self._frame("over_time", build)

    def tables_of(self, name: str) -> dict[str, pd.DataFrame]:
        """Arrangement `name`'s rows of `requests`, `iterations`, `reads` and `freezes`, built
        now and not kept (a command writing a table a block at a time keeps none)."""
        rec = self.records[name]
        tables = {"requests": self._requests_frame(name), "iterations": iterations_frame(rec),
                  "reads": reads_frame(rec), "freezes": freezes_frame(name, self.seed, self.blame[name])}
        for frame in tables.values():
            frame["arrangement"] = pd.Categorical.from_codes(np.zeros(len(frame), np.int8), categories=[name])
        return tables

    @property
    def blame(self) -> dict[str, FreezeBlame]:
        """Each arrangement's freezes and their causes, as arrays (`freezes` is the frame)."""
        return self._frame("blame", lambda: {n: freeze_blame(self.records[n], self.gaps[n], self.limits)
                                             for n in self.records})

    @property
    def limits(self) -> LimitsNs:
        """The scenario's on-time limits in whole ns."""
        return LimitsNs.from_slo(self.scenario.slo)

    @property
    def long_prompt_tokens(self) -> dict[str, int | None]:
        """N of "freezes caused by prompts over N tokens", by arrangement: a prompt over N tokens,
        read whole, freezes every reply on its GPU by itself (None without a cost per token)."""
        return self._frame("long_prompt_tokens", lambda: {
            a.name: long_prompt_tokens(self.scenario, a, self.limits) for a in self.scenario.arrangements})

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
    def measured_span_s(self) -> tuple[float, float]:
        """The measured window [warmup_s, measure_s); a trace without measure_s ends at its last
        measured arrival."""
        w = self.scenario.workload
        end = w.measure_s
        if end is None:
            arrived = self.requests["arrived_at_s"]
            end = float(arrived.max()) if len(arrived) else w.warmup_s + 1
        return float(w.warmup_s), float(end)

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
    """One frame of arrangement `names[i]`'s rows `frames[i]`, in turn, its `arrangement` column a
    categorical coded from the frames' lengths (factorizing the repeated names cost a third of
    building the frames)."""
    out = pd.concat(frames, ignore_index=True)
    codes = np.repeat(np.arange(len(frames)), [len(f) for f in frames])
    out["arrangement"] = pd.Categorical.from_codes(codes, categories=names)
    return out
