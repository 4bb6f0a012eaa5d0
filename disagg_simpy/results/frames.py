"""Records as pandas frames, in seconds, with the output's column names.

Column grammar: points in time end in `_at_s`, durations in `_s` or `_ms`, counts start with
`n_`, shares end in `_pct`. "Never happened" is empty (NaN or <NA>), never zero.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..model.records import ArrangementRecords
from ..units import NS_PER_S
from .metrics import ReplyGaps


def _seconds(v: np.ndarray) -> np.ndarray:
    return np.where(v >= 0, v / NS_PER_S, np.nan)


def _count_or_empty(v: np.ndarray) -> pd.arrays.IntegerArray:
    """Whole numbers with <NA> where `v` is -1 ("none")."""
    return pd.arrays.IntegerArray(v.astype(np.int64), v < 0)


def requests_frame(rec: ArrangementRecords, gaps: ReplyGaps) -> pd.DataFrame:
    """One row per measured request (the `requests.csv` columns; with E13, `cached_tokens` last)."""
    r = {k: v[gaps.rows] for k, v in rec.requests.items()}
    frame = pd.DataFrame(
        {
            "arrangement": rec.name,
            "request_id": r["request_id"],
            "arrived_at_s": _seconds(r["arrived_at_ns"]),
            "n_prompt_tokens": r["n_prompt_tokens"],
            "n_reply_words": r["n_reply_words"],
            "reading_gpu": _count_or_empty(r["reading_gpu"]),
            "read_started_at_s": _seconds(r["read_started_at_ns"]),
            "first_word_at_s": _seconds(r["first_word_at_ns"]),
            "writing_gpu": _count_or_empty(r["writing_gpu"]),
            "joined_at_s": _seconds(r["joined_at_ns"]),
            "finished_at_s": _seconds(r["finished_at_ns"]),
            "first_word_s": _seconds(gaps.first_word_ns),
            "mean_gap_ms": gaps.mean_gap_ns / 1e6,
            "max_gap_ms": np.where(gaps.max_gap_ns >= 0, gaps.max_gap_ns / 1e6, np.nan),
            "n_freezes": _count_or_empty(gaps.n_freezes),
            "on_time": gaps.on_time,
            "handoff_wait_s": _wait(r["first_word_at_ns"], r["handoff_at_ns"], rec.kv_capacity_tokens is not None
                                    and rec.is_split),
            "link_wait_s": _wait(r["handoff_at_ns"], r["ship_started_at_ns"], rec.is_split and rec.kv_link != "independent"),
        }
    )
    if rec.cached_tokens is not None:  # E13
        frame["cached_tokens"] = rec.cached_tokens[gaps.rows]
    return frame


def paged_columns(rec: ArrangementRecords, gaps: ReplyGaps) -> dict:
    """E9's requests.csv columns (R59): preemptions and whether dropped (empty when the
    arrangement is not paged)."""
    r = rec.requests
    if "n_preemptions" not in r:
        n = len(gaps.rows)
        return {"n_preemptions": _count_or_empty(np.full(n, -1)), "dropped": pd.array([pd.NA] * n, dtype="boolean")}
    return {"n_preemptions": _count_or_empty(r["n_preemptions"][gaps.rows]),
            "dropped": pd.array(r["dropped_at_ns"][gaps.rows] >= 0, dtype="boolean")}


def _wait(since: np.ndarray, until: np.ndarray, option_on: bool) -> np.ndarray:
    """Seconds from `since` to `until` where both happened; empty throughout if the option
    behind it is off (E4e handoff, E5 link)."""
    if not option_on:
        return np.full(len(since), np.nan)
    return np.where((since >= 0) & (until >= 0), (until - since) / NS_PER_S, np.nan)


def iterations_frame(rec: ArrangementRecords) -> pd.DataFrame:
    it = rec.iterations
    return pd.DataFrame(
        {
            "arrangement": rec.name,
            "gpu": it["gpu"],
            "iteration": it["iteration"],
            "started_at_s": it["started_at_ns"] / NS_PER_S,
            "ended_at_s": it["ended_at_ns"] / NS_PER_S,
            "n_replies_written": it["n_replies_written"],
            "n_prompt_tokens_read": it["n_prompt_tokens_read"],
            "kv_used_tokens": _count_or_empty(it["kv_used_tokens"] if "kv_used_tokens" in it
                                              else np.full(len(it["gpu"]), -1)),  # empty without E4
        }
    )


def reads_frame(rec: ArrangementRecords) -> pd.DataFrame:
    return pd.DataFrame({"arrangement": rec.name, **rec.reads})


def words_frame(rec: ArrangementRecords, rows: np.ndarray) -> pd.DataFrame:
    """Every written word of requests `rows`: `request_id, word, at_s` (14 bytes a word:
    int32, int16, float64), built without copies."""
    request_id, word, at_s = rec.word_times(rows, ns_per_unit=NS_PER_S)
    return pd.DataFrame({"request_id": request_id, "word": word, "at_s": at_s}, copy=False)


def switches_frame(rec: ArrangementRecords) -> pd.DataFrame:
    """E12: one row per move of an instance (`switches.csv`); no rows with static roles."""
    from .columns import names

    sw = rec.switches or {k: [] for k in ("gpu", "from_role", "to_role", "why", "requested_at_ns",
                                          "drained_at_ns", "serving_at_ns")}
    at = {k: np.asarray(sw[k + "_ns"], dtype=np.int64) for k in ("requested_at", "drained_at", "serving_at")}
    frame = pd.DataFrame({"arrangement": rec.name, "gpu": np.asarray(sw["gpu"], dtype=np.int64),
                          **{k: pd.array(sw[k], dtype="string") for k in ("from_role", "to_role", "why")},
                          **{f"{k}_s": _seconds(v) for k, v in at.items()}})
    return frame[list(names("switches"))]
