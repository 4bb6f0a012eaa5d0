"""Distributions pooled over a run's seeds, kept as counts on fixed grids, so the pictures and
the page show every seed without keeping any seed's run: per arrangement, how many measured
requests got their first word within each FIRST_WORD_GRID_S wait, and how many gaps between
words were at most each GAP_GRID_MS gap (D8: a value equal to a grid point + 1 ns still counts
as within it). Counts are whole numbers summed seed by seed, so the pooled shares are exact at
every grid point and the same whatever the order of the seeds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..units import NS_PER_S

#: Gap distribution: shares at these gaps (ms), log-spaced from 1 ms to 100 s (25 a decade).
GAP_GRID_MS = np.round(np.logspace(0, 5, 126), 4)
#: First-word waits: shares at these waits (s), log-spaced from 1 ms to 1000 s (25 a decade).
FIRST_WORD_GRID_S = np.round(np.logspace(-3, 3, 151), 7)
_GAP_GRID_NS = np.round(GAP_GRID_MS * 1e6).astype(np.int64) + 1
_FIRST_WORD_GRID_NS = np.round(FIRST_WORD_GRID_S * NS_PER_S).astype(np.int64) + 1


def gap_counts(values_ns: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """How many gaps are at most each GAP_GRID_MS value, from distinct gaps (ns, ascending) and
    how often each occurs."""
    cum = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])
    return cum[np.searchsorted(values_ns, _GAP_GRID_NS, side="right")]


def first_word_counts(first_word_s: np.ndarray) -> np.ndarray:
    """How many requests got their first word at most each FIRST_WORD_GRID_S after arrival
    (NaN: never, counted nowhere)."""
    s = np.asarray(first_word_s, dtype=float)
    waits = np.sort(np.round(s[~np.isnan(s)] * NS_PER_S).astype(np.int64))
    return np.searchsorted(waits, _FIRST_WORD_GRID_NS, side="right").astype(np.int64)


def shares(counts: np.ndarray, total: int) -> list[float]:
    """Counts as percentages of `total`, to 3 decimals ([] when there is none)."""
    if not total:
        return []
    return np.round(counts / total * 100, 3).tolist()


@dataclass
class Pooled:
    """Per arrangement, the first-word and gap counts on the grids and their totals, summed over
    the runs added (`add`, one arrangement's or several's run at a time) and their seeds."""

    first_words: dict[str, np.ndarray] = field(default_factory=dict)
    n_requests: dict[str, int] = field(default_factory=dict)
    gaps: dict[str, np.ndarray] = field(default_factory=dict)
    n_gaps: dict[str, int] = field(default_factory=dict)
    seeds: set[int] = field(default_factory=set)

    def add(self, result, seed: int | None = None) -> None:
        """Add every arrangement of a RunResult (a seed's run of one or more arrangements)."""
        requests = result.requests
        for name in result.records:
            gaps = result.gaps[name]
            waits = requests.loc[requests["arrangement"] == name, "first_word_s"].to_numpy(dtype=float)
            self.first_words[name] = self.first_words.get(name, 0) + first_word_counts(waits)
            self.n_requests[name] = self.n_requests.get(name, 0) + len(waits)
            self.gaps[name] = self.gaps.get(name, 0) + gap_counts(gaps.gap_values_ns, gaps.gap_counts)
            self.n_gaps[name] = self.n_gaps.get(name, 0) + int(np.sum(gaps.gap_counts))
        self.seeds.add(int(result.seed))

    def done(self, seed: int) -> None:
        """(A seed is over: nothing to do; counts are summed as they come.)"""

    def first_word_shares(self, name: str) -> list[float]:
        """% of the measured requests of every seed with their first word within each grid wait."""
        return shares(self.first_words[name], self.n_requests[name])

    def gap_shares(self, name: str) -> list[float]:
        """% of the gaps of every seed's finished replies at most each grid gap."""
        return shares(self.gaps[name], self.n_gaps[name])
