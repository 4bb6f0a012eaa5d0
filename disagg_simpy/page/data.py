"""The page's data: a compact JSON-ready dict built from a RunResult's frames only.

Times are whole nanoseconds (the model's clock, so every number is exact) and delta-encoded:
arrivals from the previous arrival, a request's other times from its arrival or first word,
an iteration's start from the previous iteration's end on its GPU. "Never" is -1.

Word times are not stored: word 1 is the first word, words 2..n of a reply are the ends of
iterations `jit .. jit + n - 2` of its writing GPU (`jit`: the first iteration that starts at or
after the reply joins it), so the page derives them from the iterations it holds. Iterations are
kept only inside `span` (by default the measured window, at most MAX_SPAN_S long); the
per-request figures (table, charts, reply details) cover every measured request.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..errors import InputError

FORMAT_VERSION = 1
NS = 1_000_000_000
#: Longest stretch of iterations the page embeds by default (a one-hour run stays small).
MAX_SPAN_S = 60.0
#: Late-reason bits: which limit a reply broke.
LATE_FIRST_WORD, LATE_MEAN_GAP, FROZE, UNFINISHED = 1, 2, 4, 8
#: Gap distribution: shares at these gaps (ms), log-spaced from 1 ms to 100 s.
GAP_GRID_MS = np.round(np.logspace(0, 5, 126), 4)


def _ns(seconds) -> np.ndarray:
    """Frame seconds back to the model's whole nanoseconds; -1 where empty."""
    s = np.asarray(seconds, dtype=float)
    return np.where(np.isnan(s), -1, np.round(np.nan_to_num(s) * NS)).astype(np.int64)


def _nullable(column: pd.Series) -> list[int]:
    """An Int64 / float column as ints with -1 for empty."""
    v = column.to_numpy(dtype=float, na_value=np.nan)
    return np.where(np.isnan(v), -1, v).astype(np.int64).tolist()


def _since(later: np.ndarray, earlier: np.ndarray) -> list[int]:
    return np.where((later >= 0) & (earlier >= 0), later - earlier, -1).tolist()


def _clean(value):
    """A summary value for JSON: NaN becomes None, numpy scalars become Python numbers."""
    if isinstance(value, (float, np.floating)):
        return None if math.isnan(value) else round(float(value), 6)
    if isinstance(value, (np.integer,)):
        return int(value)
    return value


def measured_span_s(result) -> tuple[float, float]:
    """The measured window [warmup_s, measure_s); a trace without measure_s ends at its last
    measured arrival."""
    w = result.scenario.workload
    end = w.measure_s
    if end is None:
        arrived = result.requests["arrived_at_s"]
        end = float(arrived.max()) if len(arrived) else w.warmup_s + 1
    return float(w.warmup_s), float(end)


def default_span_s(result) -> tuple[float, float]:
    lo, hi = measured_span_s(result)
    return lo, min(hi, lo + MAX_SPAN_S)


def join_iterations(requests: pd.DataFrame, iterations: pd.DataFrame) -> np.ndarray:
    """Per request (one arrangement): the number, on its writing GPU, of the iteration that
    writes its word 2 (the first that starts at or after it joined); -1 if it never joined."""
    jit = np.full(len(requests), -1, dtype=np.int64)
    gpu = requests["writing_gpu"].to_numpy(dtype=float, na_value=np.nan)
    joined = requests["joined_at_s"].to_numpy(dtype=float)
    for g, rows in iterations.groupby("gpu", sort=True):
        mine = (gpu == g) & ~np.isnan(joined) & (requests["n_reply_words"].to_numpy() > 1)
        starts = rows["started_at_s"].to_numpy()
        jit[mine] = rows["iteration"].to_numpy()[0] + np.searchsorted(starts, joined[mine], side="left")
    return jit


def gap_shares(requests: pd.DataFrame, iterations: pd.DataFrame, jit: np.ndarray) -> list[float]:
    """Share (%) of the gaps between consecutive words of the finished replies of one
    arrangement at most each GAP_GRID_MS value (a reply's first gap includes its KV cache ship;
    a gap equal to a limit + 1 ns still counts as within it, D8)."""
    done = (requests["finished_at_s"].notna() & (requests["n_reply_words"] >= 2)).to_numpy()
    gpus = iterations["gpu"].to_numpy()
    ended = _ns(iterations["ended_at_s"])
    offsets = np.searchsorted(gpus, np.arange(int(gpus.max()) + 1 if len(gpus) else 0), side="left")
    wg = requests["writing_gpu"].to_numpy(dtype=float, na_value=-1).astype(np.int64)[done]
    first = offsets[wg] + jit[done]  # row of word 2 (iterations are numbered from 0 per GPU)
    last = first + requests["n_reply_words"].to_numpy()[done] - 2  # row of the last word
    diffs = np.diff(ended, append=ended[-1:])
    if len(diffs):
        diffs[np.r_[gpus[1:] != gpus[:-1], True]] = 0  # never a gap across GPUs
    first_gap = ended[first] - _ns(requests["first_word_at_s"])[done]
    weight = np.zeros(len(diffs) + 1, dtype=np.int64)  # diff k is a gap of every reply first <= k < last
    np.add.at(weight, first, 1)
    np.add.at(weight, last, -1)
    weight = np.cumsum(weight[:-1])
    values = np.concatenate([diffs[weight > 0], first_gap])
    counts = np.concatenate([weight[weight > 0], np.ones(len(first_gap), dtype=np.int64)])
    if not counts.sum():
        return []
    order = np.argsort(values, kind="stable")
    cum = np.concatenate([[0], np.cumsum(counts[order])])
    at = np.searchsorted(values[order], np.round(GAP_GRID_MS * 1e6) + 1, side="right")
    return np.round(cum[at] / cum[-1] * 100, 3).tolist()


def _limit_ns(x: float) -> int:
    """A limit in whole ns, rounded half up as the verdicts round it."""
    return math.floor(x + 0.5)


def late_bits(requests: pd.DataFrame, slo) -> np.ndarray:
    """Which limits each reply broke (LATE_* bits; 0 for on time), as the verdicts count them."""
    first = _ns(requests["first_word_s"])
    finished = requests["finished_at_s"].notna().to_numpy()
    n = requests["n_reply_words"].to_numpy()
    total = _ns(requests["finished_at_s"]) - _ns(requests["first_word_at_s"])
    mean_limit, first_limit = _limit_ns(slo.mean_gap_ms * 1e6), _limit_ns(slo.first_word_s * 1e9)
    bits = np.where((first < 0) | (first > first_limit + 1), LATE_FIRST_WORD, 0)
    bits |= np.where(finished & (n > 1) & (total > (n - 1) * (mean_limit + 1)), LATE_MEAN_GAP, 0)
    freezes = requests["n_freezes"].to_numpy(dtype=float, na_value=0)
    bits |= np.where(freezes > 0, FROZE, 0)
    bits |= np.where(~finished, UNFINISHED, 0)
    return bits


def _iterations_in(iterations: pd.DataFrame, n_gpus: int, lo_ns: int, hi_ns: int) -> list[dict]:
    """Per GPU, the iterations overlapping [lo_ns, hi_ns): the first one's number, then each
    one's start after the previous end (the first: after lo_ns), duration, prompt tokens read
    and replies written."""
    out = []
    for g in range(n_gpus):
        rows = iterations[iterations["gpu"] == g]
        start, end = _ns(rows["started_at_s"]), _ns(rows["ended_at_s"])
        keep = (start < hi_ns) & (end > lo_ns)
        start, end = start[keep], end[keep]
        prev = np.concatenate([[lo_ns], end[:-1]])
        out.append({
            "first": int(rows["iteration"].to_numpy()[keep][0]) if keep.any() else 0,
            "wait": (start - prev).tolist(),
            "dur": (end - start).tolist(),
            "tok": rows["n_prompt_tokens_read"].to_numpy()[keep].tolist(),
            "rep": rows["n_replies_written"].to_numpy()[keep].tolist(),
        })
    return out


def page_data(result, reference=None, span_s: tuple[float, float] | None = None) -> dict:
    """Everything the page shows, as a JSON-ready dict (see the module docstring)."""
    names = [str(n) for n in result.summary["arrangement"]]
    lo_s, hi_s = default_span_s(result) if span_s is None else span_s
    if not hi_s > lo_s:
        raise InputError(f"page span: got {lo_s:g} to {hi_s:g} s, expected an end after the start")
    lo_ns, hi_ns = round(lo_s * NS), round(hi_s * NS)
    all_requests = result.requests
    first = all_requests[all_requests["arrangement"] == names[0]] if names else all_requests.iloc[:0]
    ids = first["request_id"].to_numpy()
    arrived = _ns(first["arrived_at_s"])
    slo = result.scenario.slo
    arrangements = []
    for name in names:
        req = all_requests[all_requests["arrangement"] == name].reset_index(drop=True)
        if not np.array_equal(req["request_id"].to_numpy(), ids):
            raise ValueError(f"{name}: measured requests differ from {names[0]}'s")
        it = result.iterations[result.iterations["arrangement"] == name].reset_index(drop=True)
        roles = list(result.records[name].gpu_roles)
        jit = join_iterations(req, it)
        first_at = _ns(req["first_word_at_s"])
        summary = result.summary[result.summary["arrangement"] == name].iloc[0]
        arrangements.append({
            "name": name,
            "kind": result.records[name].kind,
            "roles": roles,
            "summary": {k: _clean(v) for k, v in summary.items() if k != "arrangement"},
            "requests": {
                "rg": _nullable(req["reading_gpu"]),
                "read": _since(_ns(req["read_started_at_s"]), arrived),
                "first": _since(first_at, arrived),
                "wg": _nullable(req["writing_gpu"]),
                "join": _since(_ns(req["joined_at_s"]), first_at),
                "fin": _since(_ns(req["finished_at_s"]), arrived),
                "maxgap": _nullable(np.round(req["max_gap_ms"] * 1e6)),
                "nfz": _nullable(req["n_freezes"]),
                "late": late_bits(req, slo).tolist(),
                "jit": jit.tolist(),
            },
            "iterations": _iterations_in(it, len(roles), lo_ns, hi_ns),
            "gaps": gap_shares(req, it, jit),
        })
    w = result.scenario.workload
    return {
        "version": FORMAT_VERSION,
        "scenario": {
            "name": result.scenario.name,
            "seed": int(result.seed),
            "rate_per_s": getattr(w, "rate_per_s", None),
            "measured_s": list(measured_span_s(result)),
            "slo": {"first_word_s": slo.first_word_s, "mean_gap_ms": slo.mean_gap_ms, "freeze_ms": slo.freeze_ms},
        },
        "span_ns": [lo_ns, hi_ns],
        "reference": {str(k): float(v) for k, v in reference.items()} if reference else None,
        "gap_grid_ms": GAP_GRID_MS.tolist(),
        "requests": {
            "id": np.diff(ids, prepend=0).tolist(),
            "arrived": np.diff(arrived, prepend=0).tolist(),
            "prompt": first["n_prompt_tokens"].tolist(),
            "words": first["n_reply_words"].tolist(),
        },
        "arrangements": arrangements,
    }
