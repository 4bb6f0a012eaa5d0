"""Shaping a trace's arrivals and lengths: a window, ties spread, time scaled, lengths clipped,
and drawn arrivals for length-only traces. All times are whole nanoseconds (D10)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..scenario.limits import MAX_TIME_S
from ..units import NS_PER_S as _NS_PER_S
from ..units import nearest_ns as _nearest_ns
from .traces import _error


def _positive(source, key, value, *, allow_none=True, zero_ok=False) -> float | None:
    """A finite number > 0 (>= 0 with zero_ok) from a setting, as float; None passes if allowed."""
    if value is None and allow_none:
        return None
    number = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))
    if not number or not np.isfinite(value) or value < 0 or (value == 0 and not zero_ok):
        shown = value.item() if isinstance(value, np.generic) else value
        raise _error(source, None, key, repr(shown), "a number >= 0" if zero_ok else "a positive number")
    return float(value)


def _spread(t: np.ndarray) -> tuple[np.ndarray, int]:
    """Spread the k-th of m equal times t to t + k*(t_next - t)/m; the last group stays put."""
    uniq, first, n_same = np.unique(t, return_index=True, return_counts=True)
    group = np.repeat(np.arange(uniq.size), n_same)
    k = np.arange(t.size) - first[group]
    step = np.append(np.diff(uniq), 0.0) / n_same
    return t + k * step[group], int(np.count_nonzero((k > 0) & (group < uniq.size - 1)))


def shape_arrivals(arrived_at_ns, *, start_s=None, duration_s=None, spread_ties=False, time_scale=None,
                   rate_per_s=None, source="<file>") -> tuple[np.ndarray, np.ndarray, dict]:
    """Cut a window out of a trace's arrivals and reshape them, in this order:

    0. times and start_s are on arrived_at_ns's clock (read_trace: a csv trace's own seconds,
       the other formats' counted from their first row);
    1. window: keep rows with start_s <= t < start_s + duration_s; times then count from start_s;
    2. spread_ties: spread each group of equal times evenly up to the next distinct time (the
       last group stays), to smooth traces whose clock ticks coarsely (Mooncake: ~3 s);
    3. time_scale (2.0 replays twice as fast) OR rate_per_s (stretch so that kept rows divided by
       the window length, duration_s or else last - first kept arrival, equals it).

    Returns (boolean mask of kept input rows, their new int64 arrival ns, info for run.json).
    """
    if arrived_at_ns is None:
        raise _error(source, None, "arrived_at_ns", "none (a lengths-only trace)", "a trace with arrival times")
    t_ns = np.asarray(arrived_at_ns)
    if t_ns.ndim != 1 or t_ns.dtype.kind not in "iu" or t_ns.size == 0:
        raise _error(source, None, "arrived_at_ns", f"{t_ns.dtype} array of shape {t_ns.shape}",
                     "a non-empty 1-d integer array")
    if np.any(np.diff(t_ns) < 0):
        raise _error(source, None, "arrived_at_ns", "times that decrease", "arrival times that never decrease")
    if time_scale is not None and rate_per_s is not None:
        raise _error(source, None, "time_scale", f"{time_scale!r} together with rate_per_s={rate_per_s!r}",
                     "at most one of time_scale and rate_per_s")
    time_scale = _positive(source, "time_scale", time_scale)
    rate_per_s = _positive(source, "rate_per_s", rate_per_s)
    duration_s = _positive(source, "duration_s", duration_s)
    start_s = _positive(source, "start_s", start_s, zero_ok=True)

    start_ns = int(_nearest_ns((start_s or 0) * _NS_PER_S))
    keep = t_ns >= start_ns
    if duration_s is not None:
        keep &= t_ns < start_ns + int(_nearest_ns(duration_s * _NS_PER_S))
    n_kept = int(np.count_nonzero(keep))
    if n_kept == 0:
        window = f"[{start_s or 0:g} s, {'end' if duration_s is None else f'{(start_s or 0) + duration_s:g} s'})"
        raise _error(source, None, "window", (f"no arrivals in {window} "
                     f"(arrivals span {t_ns[0] / _NS_PER_S:g} to {t_ns[-1] / _NS_PER_S:g} s)"),
                     "a window with at least one arrival")
    t = (t_ns[keep] - start_ns).astype(np.float64)

    n_spread = 0
    if spread_ties:
        t, n_spread = _spread(t)

    window_length_s = None
    if rate_per_s is not None:
        window_length_s = duration_s if duration_s is not None else (t[-1] - t[0]) / _NS_PER_S
        if window_length_s <= 0:
            raise _error(source, None, "rate_per_s", f"{rate_per_s:g} for {n_kept} arrivals all at one time",
                         "a window of non-zero length (give duration_s)")
        time_scale = rate_per_s * window_length_s / n_kept
    factor = 1.0 if time_scale is None else time_scale
    last_s = float(t[-1]) / factor / _NS_PER_S
    if not last_s <= MAX_TIME_S:
        key, value = ("rate_per_s", rate_per_s) if rate_per_s is not None else ("time_scale", time_scale)
        raise _error(source, None, key, f"{value:g}, which puts the last arrival at {last_s:.3g} s",
                     f"arrivals within {MAX_TIME_S:g} s")
    info = {
        "n_rows_in": int(t_ns.size), "n_rows_kept": n_kept,
        "window_start_s": start_s, "window_duration_s": duration_s,
        "spread_ties": bool(spread_ties), "n_rows_spread": n_spread,
        "time_scale": factor, "rate_per_s": rate_per_s, "rate_window_s": window_length_s,
    }
    return keep, _nearest_ns(t / factor), info


def clip_lengths(df: pd.DataFrame, reply_words_max=None, prompt_tokens_max=None) -> tuple[pd.DataFrame, dict]:
    """Cap prompt and reply lengths (e.g. to a model's context); info counts the clipped rows."""
    out = df.copy()
    info = {}
    for column, key, cap in (("n_prompt_tokens", "prompt_tokens_max", prompt_tokens_max),
                             ("n_reply_words", "reply_words_max", reply_words_max)):
        n_clipped = 0
        if cap is not None:
            if isinstance(cap, (bool, np.bool_)) or not isinstance(cap, (int, np.integer)) or cap <= 0:
                raise _error("clip_lengths", None, key, repr(cap), "a positive whole number")
            over = out[column].to_numpy() > cap
            n_clipped = int(np.count_nonzero(over))
            out[column] = np.minimum(out[column].to_numpy(), cap).astype(np.int64)
        info[key] = None if cap is None else int(cap)
        info[f"{column}_clipped"] = n_clipped
    return out, info


def lengths_arrivals(n, rate_per_s, burstiness_cv, rng_arrivals, *, source="<scenario>") -> np.ndarray:
    """Made-up arrivals for length-only traces: Poisson (cv None or 1) or Gamma gaps with shape
    1/cv^2 and mean 1/rate; the first request arrives after the first gap. Returns int64 ns."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise _error(source, None, "n_requests", repr(n), "a whole number >= 0")
    rate = _positive(source, "rate_per_s", rate_per_s, allow_none=False)
    assert rate is not None  # (allow_none=False)
    mean_gap_s = 1.0 / rate
    cv = _positive(source, "burstiness_cv", burstiness_cv)
    if cv is None or cv == 1.0:
        gaps_s = rng_arrivals.exponential(mean_gap_s, size=n)
    else:
        shape = 1.0 / cv**2
        gaps_s = rng_arrivals.gamma(shape, mean_gap_s / shape, size=n)
    # times past any cap (which is at most MAX_TIME_S + slack) are clipped so they fit int64 ns
    return _nearest_ns(np.minimum(np.cumsum(gaps_s), 2 * MAX_TIME_S) * _NS_PER_S)


def sample_lengths(table: pd.DataFrame, n, rng) -> tuple[np.ndarray, np.ndarray]:
    """Draw n (prompt, reply) length pairs uniformly with replacement from a lengths table."""
    if len(table) == 0:
        raise _error("sample_lengths", None, "table", "an empty table", "at least one row of lengths")
    rows = rng.integers(0, len(table), size=n)
    return (table["n_prompt_tokens"].to_numpy(dtype=np.int64)[rows],
            table["n_reply_words"].to_numpy(dtype=np.int64)[rows])
