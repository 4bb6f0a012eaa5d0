"""What the pictures need, derived from the result frames only (no matplotlib here).

Word times are not a frame column: word 1 is `first_word_at_s`; words 2..n are the ends of
the n-1 iterations of the writing GPU that start at or after `joined_at_s` (D5: a reply that
reaches a GPU joins the iteration it starts at that instant, or its next one). Deriving them
for a few replies keeps a one-hour run cheap: `RunResult.words` would build every word.
No matplotlib here: the CLI imports this module for the plot flags' syntax.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .errors import InputError
from .plot_args import Window, parse_window  # noqa: F401  (re-exported)

#: Default timeline window: this long, starting a third of the way into the measured window.
DEFAULT_WINDOW_S = 4.0
#: D8: a gap is over a limit only above limit + 1 ns.
SLACK_S = 1e-9

def frames_of(result, name: str) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """One arrangement's rows of `requests`, `iterations` and `reads`."""
    pick = lambda f: f[f["arrangement"] == name].reset_index(drop=True)  # noqa: E731
    return pick(result.requests), pick(result.iterations), pick(result.reads)


def gpu_roles(arrangement) -> list[str]:
    """'reads', 'writes' or 'both' by GPU number (a split numbers its reading GPUs first)."""
    if arrangement.kind == "colocated":
        return ["both"] * arrangement.gpus
    return ["reads"] * arrangement.reading_gpus + ["writes"] * arrangement.writing_gpus


def measured_span(result) -> Window:
    """The measured window [warmup_s, measure_s); a trace without measure_s ends at its last
    measured arrival."""
    w = result.scenario.workload
    end = w.measure_s
    if end is None:
        end = float(result.requests["arrived_at_s"].max()) if len(result.requests) else w.warmup_s + 1
    return float(w.warmup_s), float(end)


def default_window(result) -> Window:
    lo, hi = measured_span(result)
    start = lo + (hi - lo) / 3
    return start, start + DEFAULT_WINDOW_S


def run_end_s(result) -> float:
    """When the last iteration of any arrangement ended."""
    ended = result.iterations["ended_at_s"]
    return float(ended.max()) if len(ended) else 0.0


def check_window(result, window: Window) -> None:
    end = run_end_s(result)
    if window[0] >= end:
        raise InputError(
            f"--window: got '{window[0]:g}:{window[1]:g}', but the run ends at {end:.1f} s; "
            f"pick a START below that"
        )


def check_follow(result, request_id: int) -> None:
    ids = result.requests["request_id"]
    if not (ids == request_id).any():
        lo, hi = (int(ids.min()), int(ids.max())) if len(ids) else (0, -1)
        raise InputError(
            f"--follow: got {request_id}, expected the id of a measured request ({lo} to {hi})"
        )


def _gpu_offsets(iterations: pd.DataFrame, n_gpus: int) -> np.ndarray:
    """Rows `offsets[g]:offsets[g+1]` of one arrangement's `iterations` are GPU g's."""
    gpu = iterations["gpu"].to_numpy()
    if len(gpu) > 1 and np.any(np.diff(gpu) < 0):
        raise ValueError("iterations must be ordered by GPU, then iteration")
    return np.searchsorted(gpu, np.arange(n_gpus + 1), side="left")


def word_rows(requests: pd.DataFrame, iterations: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """For each request: the `iterations` row that writes its word 2, and how many of its words
    2..n the frame holds (0 for one-word replies and replies that never joined a writer)."""
    n_gpus = int(iterations["gpu"].max()) + 1 if len(iterations) else 0
    offsets = _gpu_offsets(iterations, n_gpus)
    starts = iterations["started_at_s"].to_numpy()
    gpu = requests["writing_gpu"].to_numpy(dtype=float, na_value=np.nan)
    joined = requests["joined_at_s"].to_numpy(dtype=float)
    wanted = requests["n_reply_words"].to_numpy() - 1
    first = np.zeros(len(requests), dtype=np.int64)
    written = np.zeros(len(requests), dtype=np.int64)
    for g in range(n_gpus):
        mine = (gpu == g) & ~np.isnan(joined)
        lo, hi = offsets[g], offsets[g + 1]
        first[mine] = lo + np.searchsorted(starts[lo:hi], joined[mine], side="left")
        written[mine] = np.clip(np.minimum(wanted[mine], hi - first[mine]), 0, None)
    return first, written


def reply_words(requests: pd.DataFrame, iterations: pd.DataFrame) -> pd.DataFrame:
    """Every word of `requests` (one arrangement): `request_id, word, at_s`, word from 1."""
    first, written = word_rows(requests, iterations)
    has_first = ~np.isnan(requests["first_word_at_s"].to_numpy(dtype=float))
    per = written + has_first
    starts = np.cumsum(per) - per
    word = np.arange(int(per.sum())) - np.repeat(starts, per) + 1
    at = np.empty(len(word))
    is_first = word == 1
    at[is_first] = requests["first_word_at_s"].to_numpy(dtype=float)[has_first]
    ended = iterations["ended_at_s"].to_numpy()
    later = ~is_first
    at[later] = ended[np.repeat(first - 2, per)[later] + word[later]]
    ids = np.repeat(requests["request_id"].to_numpy(), per)
    return pd.DataFrame({"request_id": ids, "word": word, "at_s": at})


def gap_distribution(requests: pd.DataFrame, iterations: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Every gap between words of the finished replies of one arrangement, in seconds, as
    distinct values and how often each occurs (a reply's first gap includes its ship)."""
    done = requests[requests["finished_at_s"].notna() & (requests["n_reply_words"] >= 2)]
    first, written = word_rows(done, iterations)
    ended = iterations["ended_at_s"].to_numpy()
    gpu = iterations["gpu"].to_numpy()
    diffs = np.diff(ended, append=ended[-1:])
    if len(diffs):  # (an arrangement with no iteration at all has no gap)
        diffs[np.r_[gpu[1:] != gpu[:-1], True]] = 0  # never a gap across GPUs
    first_gap = ended[first] - done["first_word_at_s"].to_numpy() if len(done) else np.zeros(0)
    # gaps 2..n-1 of a reply are diffs[first : first + written - 1]
    weight = np.zeros(len(diffs) + 1, dtype=np.int64)
    np.add.at(weight, first, 1)
    np.add.at(weight, first + written - 1, -1)
    weight = np.cumsum(weight[:-1])
    values = np.concatenate([diffs[weight > 0], first_gap])
    counts = np.concatenate([weight[weight > 0], np.ones(len(first_gap), dtype=np.int64)])
    values, inverse = np.unique(values, return_inverse=True)
    return values, np.bincount(inverse, weights=counts, minlength=len(values)).astype(np.int64)


def sample_replies(requests: pd.DataFrame, window: Window, n: int) -> pd.DataFrame:
    """Up to `n` measured replies in progress during `window`, evenly spread in arrival order."""
    start, end = window
    finished = requests["finished_at_s"]
    active = requests[(requests["arrived_at_s"] < end) & (finished.isna() | (finished >= start))]
    if len(active) <= n:
        return active.reset_index(drop=True)
    rows = np.unique(np.round(np.linspace(0, len(active) - 1, n)).astype(int))
    return active.iloc[rows].reset_index(drop=True)


@dataclass(frozen=True)
class Gaps:
    """Gaps between consecutive words: word k at `from_s` to word k+1 at `to_s`."""

    request_id: np.ndarray
    from_s: np.ndarray
    to_s: np.ndarray

    def over(self, limit_s: float) -> "Gaps":
        keep = self.to_s - self.from_s > limit_s + SLACK_S
        return Gaps(self.request_id[keep], self.from_s[keep], self.to_s[keep])

    def in_window(self, window: Window) -> "Gaps":
        keep = (self.to_s > window[0]) & (self.from_s < window[1])
        return Gaps(self.request_id[keep], self.from_s[keep], self.to_s[keep])

    def __len__(self) -> int:
        return len(self.from_s)


def gaps_of(words: pd.DataFrame) -> Gaps:
    """The gaps of a `request_id, word, at_s` frame sorted by request, then word."""
    rid = words["request_id"].to_numpy()
    at = words["at_s"].to_numpy()
    same = rid[1:] == rid[:-1]
    return Gaps(rid[1:][same], at[:-1][same], at[1:][same])


def late_reason(row, slo) -> str:
    """Why a reply is not on time, in a few words ('' if it is on time)."""
    if row.on_time:
        return ""
    if pd.isna(row.finished_at_s):
        return "unfinished"
    reasons = []
    if pd.isna(row.first_word_s) or row.first_word_s > slo.first_word_s + SLACK_S:
        reasons.append("slow 1st word")
    if pd.notna(row.mean_gap_ms) and row.mean_gap_ms > slo.mean_gap_ms + 1e-6:
        reasons.append("slow words")
    if pd.notna(row.n_freezes) and row.n_freezes > 0:
        reasons.append("froze")
    return ", ".join(reasons) or "late"
