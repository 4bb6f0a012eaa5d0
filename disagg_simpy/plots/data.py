"""What the pictures need, derived from the result frames only (no matplotlib here).

Everything here reads the run result (`RunResult`: frames, word times, gaps, GPU roles); nothing
is recomputed from the model. Word times come from `RunResult.words(name, request_ids)`, for the
few replies a picture draws, which keeps a one-hour run cheap. No matplotlib here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import InputError
from ..units import NS_PER_S, SLACK_NS, Window

#: Default timeline window: this long, starting a third of the way into the measured window.
DEFAULT_WINDOW_S = 4.0

def frames_of(result, name: str) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """One arrangement's rows of `requests`, `iterations` and `reads`."""
    pick = lambda f: f[f["arrangement"] == name].reset_index(drop=True)  # noqa: E731
    return pick(result.requests), pick(result.iterations), pick(result.reads)


def default_window(result) -> Window:
    lo, hi = result.measured_span_s
    start = lo + (hi - lo) / 3
    return start, start + DEFAULT_WINDOW_S


def run_end_s(result) -> float:
    """When the last iteration of any arrangement ended."""
    ended = result.iterations["ended_at_s"]
    return float(ended.max()) if len(ended) else 0.0


class PlotOptionError(InputError):
    """A picture option that does not fit the run. `option` names it ('window', 'follow',
    'replies'), so a caller can say which of its own flags or arguments was wrong."""

    def __init__(self, option: str, detail: str):
        super().__init__(f"{option}: {detail}")
        self.option = option
        self.detail = detail


def check_window(result, window: Window) -> None:
    end = run_end_s(result)
    if window[0] >= end:
        raise PlotOptionError(
            "window", f"got '{window[0]:g}:{window[1]:g}', but the run ends at {end:.1f} s; pick a START below that"
        )


def check_follow(result, request_id: int) -> None:
    ids = result.requests["request_id"]
    if not (ids == request_id).any():
        lo, hi = (int(ids.min()), int(ids.max())) if len(ids) else (0, -1)
        raise PlotOptionError("follow", f"got {request_id}, expected the id of a measured request ({lo} to {hi})")


def _evenly(frame: pd.DataFrame, n: int) -> pd.DataFrame:
    """`n` rows of `frame` spread evenly over it (all of them if it has no more)."""
    if len(frame) <= n:
        return frame
    return frame.iloc[np.unique(np.round(np.linspace(0, len(frame) - 1, n)).astype(int))] if n else frame.iloc[:0]


def sample_replies(requests: pd.DataFrame, window: Window, n: int, on_time_share: float | None = None) -> pd.DataFrame:
    """Up to `n` measured replies in progress during `window`, in arrival order, evenly spread.

    With `on_time_share` (the whole run's), on-time and late replies are picked in that
    proportion, so the sample does not contradict the run's figure; where the window holds too
    few of one kind, the other fills the sample."""
    start, end = window
    finished = requests["finished_at_s"]
    active = requests[(requests["arrived_at_s"] < end) & (finished.isna() | (finished >= start))]
    if len(active) <= n:
        return active.reset_index(drop=True)
    if on_time_share is None or not np.isfinite(on_time_share):
        return _evenly(active, n).reset_index(drop=True)
    on_time = active["on_time"].to_numpy(dtype=bool)
    n_on = min(max(round(n * on_time_share), n - int((~on_time).sum())), int(on_time.sum()))
    picked = pd.concat([_evenly(active[on_time], n_on), _evenly(active[~on_time], n - n_on)])
    return picked.sort_index().reset_index(drop=True)


def empty_window_note(result, window: Window) -> str | None:
    """Why the timelines of `window` would show no reply: for every arrangement (naming the span
    in which measured replies were written), or for the arrangements named; None if each has
    one in progress there."""
    r = result.requests
    finished = r["finished_at_s"]
    active = (r["arrived_at_s"] < window[1]) & (finished.isna() | (finished >= window[0]))
    if not len(r):
        return None
    if active.any():
        busy = set(r.loc[active, "arrangement"])
        idle = [str(a) for a in dict.fromkeys(r["arrangement"]) if a not in busy]
        if not idle:
            return None
        return (f"no measured reply of {', '.join(idle)} is in progress from {window[0]:g} to {window[1]:g} s, so "
                f"{'its timeline shows' if len(idle) == 1 else 'their timelines show'} none")
    first, last = r["first_word_at_s"].min(), finished.max()
    return (f"no measured reply is in progress from {window[0]:g} to {window[1]:g} s, so the timelines show none; "
            f"measured replies were written from {first:.2f} to {last:.2f} s")


@dataclass(frozen=True)
class Gaps:
    """Gaps between consecutive words: word k at `from_s` to word k+1 at `to_s`."""

    request_id: np.ndarray
    from_s: np.ndarray
    to_s: np.ndarray

    def over(self, limit_s: float | None) -> Gaps:
        """The gaps over `limit_s` (none when the limit is off)."""
        keep = self.to_s - self.from_s > (math.inf if limit_s is None else limit_s + SLACK_NS / NS_PER_S)
        return Gaps(self.request_id[keep], self.from_s[keep], self.to_s[keep])

    def in_window(self, window: Window) -> Gaps:
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


def freeze_s(slo) -> float | None:
    """The freeze limit in seconds, None when it is off."""
    return None if slo.freeze_ms is None else slo.freeze_ms / 1000


def late_reason(row, slo) -> str:
    """Why a reply is not on time, in a few words ('' if it is on time)."""
    if row.on_time:
        return ""
    if pd.isna(row.finished_at_s):
        return "unfinished"
    reasons = []
    if slo.first_word_s is not None and (pd.isna(row.first_word_s) or row.first_word_s > slo.first_word_s + SLACK_NS / NS_PER_S):
        reasons.append("slow 1st word")
    if slo.mean_gap_ms is not None and pd.notna(row.mean_gap_ms) and row.mean_gap_ms > slo.mean_gap_ms + 1e-6:
        reasons.append("slow words")
    if pd.notna(row.n_freezes) and row.n_freezes > 0:
        reasons.append("froze")
    return ", ".join(reasons) or "late"
