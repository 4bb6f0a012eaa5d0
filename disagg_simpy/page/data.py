"""The page's data: a compact JSON-ready dict built from a RunResult's frames only.

Times are whole nanoseconds (the model's clock, so every number is exact) and delta-encoded:
arrivals from the previous arrival, a request's other times from its arrival or first word,
an iteration's start from the previous iteration's end on its GPU. "Never" is -1.

Word times are not stored: word 1 is the first word, words 2..n of a reply are the ends of the
writing iterations `jw .. jw + n - 2` of its writing GPU (`jw`: the reply's word 2 among the
GPU's iterations that write words, counted from 0; `wfirst` per GPU: how many such iterations
precede the first one held), so the page derives them from the iterations it holds
(model/words.py: an iteration that only reads prompts writes no word). Iterations are
kept only inside `span` (by default the measured window, at most MAX_SPAN_S long), and so are
the requests: those that arrive before its end and are still in progress at its start in some
arrangement (for the default scenario, every measured request). The table and the charts cover
every measured request: the summary rows, and the shares of first-word waits and of gaps at
fixed grids.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..errors import InputError
from ..results.columns import PAGE_COLUMNS, SHARE
from ..units import NS_PER_S

FORMAT_VERSION = 1
#: Longest stretch of iterations the page embeds by default (a one-hour run stays small).
MAX_SPAN_S = 60.0
#: Late-reason bits: which limit a reply broke.
LATE_FIRST_WORD, LATE_MEAN_GAP, FROZE, UNFINISHED = 1, 2, 4, 8
#: Gap distribution: shares at these gaps (ms), log-spaced from 1 ms to 100 s.
GAP_GRID_MS = np.round(np.logspace(0, 5, 126), 4)
#: First-word waits: shares at these waits (s), log-spaced from 1 ms to 1000 s.
FIRST_WORD_GRID_S = np.round(np.logspace(-3, 3, 151), 7)


def _ns(seconds) -> np.ndarray:
    """Frame seconds back to the model's whole nanoseconds; -1 where empty."""
    s = np.asarray(seconds, dtype=float)
    return np.where(np.isnan(s), -1, np.round(np.nan_to_num(s) * NS_PER_S)).astype(np.int64)


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


def default_span_s(result) -> tuple[float, float]:
    """The measured window, at most MAX_SPAN_S long; for a trace measured whole (no measure_s),
    until the last iteration of any arrangement (also at most MAX_SPAN_S)."""
    lo, hi = result.measured_span_s
    if result.scenario.workload.measure_s is None:
        ended = result.iterations["ended_at_s"]
        hi = max(hi, float(ended.max()) if len(ended) else hi)
    return lo, min(max(hi, lo + 1e-9), lo + MAX_SPAN_S)


def gap_shares(values_ns: np.ndarray, counts: np.ndarray) -> list[float]:
    """Share (%) of the gaps between consecutive words of the finished replies of one
    arrangement at most each GAP_GRID_MS value, from the run's pooled gaps (distinct values in
    ns, ascending, and how often each occurs; a reply's first gap includes its KV cache ship;
    a gap equal to a limit + 1 ns still counts as within it, D8)."""
    if not counts.sum():
        return []
    cum = np.concatenate([[0], np.cumsum(counts)])
    at = np.searchsorted(values_ns, np.round(GAP_GRID_MS * 1e6) + 1, side="right")
    return np.round(cum[at] / cum[-1] * 100, 3).tolist()


def first_word_shares(requests: pd.DataFrame) -> list[float]:
    """Share (%) of the measured requests of one arrangement whose first word came at most each
    FIRST_WORD_GRID_S value after arrival (D8: with 1 ns of slack); none ever: never counted."""
    waits = _ns(requests["first_word_s"])
    waits = np.sort(waits[waits >= 0])
    if not len(requests):
        return []
    at = np.searchsorted(waits, np.round(FIRST_WORD_GRID_S * NS_PER_S) + 1, side="right")
    return np.round(at / len(requests) * 100, 3).tolist()


def in_span(requests: pd.DataFrame, lo_ns: int, hi_ns: int) -> np.ndarray:
    """Rows of one arrangement's requests that arrive before `hi_ns` and are unfinished at `lo_ns`."""
    fin = _ns(requests["finished_at_s"])
    return (_ns(requests["arrived_at_s"]) < hi_ns) & ((fin < 0) | (fin >= lo_ns))


def late_bits(gaps) -> np.ndarray:
    """Which limits each measured reply broke (LATE_* bits; 0 for on time), from the run's own
    verdicts (`RunResult.gaps`): an unfinished reply is UNFINISHED, not also slow or frozen."""
    finished = gaps.finished
    bits = np.where(gaps.late_first_word, LATE_FIRST_WORD, 0)
    bits |= np.where(gaps.late_mean_gap & finished, LATE_MEAN_GAP, 0)
    bits |= np.where(gaps.froze & finished, FROZE, 0)
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
        writes = rows["n_replies_written"].to_numpy() > 0
        out.append({
            "first": int(rows["iteration"].to_numpy()[keep][0]) if keep.any() else 0,
            "wfirst": int(writes[:int(np.argmax(keep))].sum()) if keep.any() else 0,
            "wait": (start - prev).tolist(),
            "dur": (end - start).tolist(),
            "tok": rows["n_prompt_tokens_read"].to_numpy()[keep].tolist(),
            "rep": rows["n_replies_written"].to_numpy()[keep].tolist(),
        })
    return out


def _word2_positions(rec, rows: np.ndarray) -> np.ndarray:
    """Per request of `rows`: its word 2 among its writing GPU's writing iterations (from 0),
    -1 if none ran (its first stretch of words, model/words.py)."""
    st, w = rec.stretches, rec.writes
    s = np.minimum(st.by_request[rows], max(len(st.n) - 1, 0))
    has = (st.by_request[rows + 1] > st.by_request[rows]) & (st.gpu[s] >= 0) & (st.n[s] > 0)
    return np.where(has, st.first[s] - w.offsets[np.maximum(st.gpu[s], 0)], -1)


def over_seeds(by_seed: pd.DataFrame, name: str) -> dict:
    """An arrangement's summary over several seeds (`by_seed`: summary rows with `seed`): each
    figure's mean, its 95% interval (results/intervals.py) and the seeds' own figures, as the
    table shows them."""
    from ..results.intervals import SHARE, interval

    rows = by_seed[by_seed["arrangement"] == name]
    means, spans, each = {}, {}, {}
    for column in rows.columns:
        if column in ("arrangement", "seed") or not pd.api.types.is_numeric_dtype(rows[column]):
            continue
        i = interval(rows[column], SHARE if column.endswith("_pct") and column != "on_time_vs_best_pct" else None)
        means[column] = _clean(i.mean)
        spans[column] = None if math.isnan(i.low) else [_clean(i.low), _clean(i.high)]
        each[column] = [_clean(v) for v in rows[column]]
    return {"means": means, "interval": spans, "by_seed": each}


def page_columns() -> list[dict]:
    """The table's columns, from the registry (`results/columns.py`): key, label, meaning, and
    digits ("share": one decimal below 10, none above)."""
    return [{"key": c.name, "label": c.label, "meaning": c.meaning,
             "digits": "share" if c.page_digits == SHARE else c.page_digits} for c in PAGE_COLUMNS]


def page_data(result, reference=None, span_s: tuple[float, float] | None = None,
              by_seed: pd.DataFrame | None = None) -> dict:
    """Everything the page shows, as a JSON-ready dict (see the module docstring). With `by_seed`
    (every seed's summary rows, `result` being the run the player shows), the table has each
    figure's mean over seeds with its interval and each seed's figure."""
    names = [str(n) for n in result.summary["arrangement"]]
    lo_s, hi_s = default_span_s(result) if span_s is None else span_s
    if not hi_s > lo_s:
        raise InputError(f"page span: got {lo_s:g} to {hi_s:g} s, expected an end after the start")
    lo_ns, hi_ns = round(lo_s * NS_PER_S), round(hi_s * NS_PER_S)
    all_requests = result.requests
    frames = {n: all_requests[all_requests["arrangement"] == n].reset_index(drop=True) for n in names}
    keep = np.zeros(len(frames[names[0]]) if names else 0, dtype=bool)
    for name, req in frames.items():
        if not np.array_equal(req["request_id"].to_numpy(), frames[names[0]]["request_id"].to_numpy()):
            raise ValueError(f"{name}: measured requests differ from {names[0]}'s")
        keep |= in_span(req, lo_ns, hi_ns)
    first = frames[names[0]][keep] if names else all_requests.iloc[:0]
    ids = first["request_id"].to_numpy()
    arrived = _ns(first["arrived_at_s"])
    slo = result.scenario.slo
    described = {a.name: a for a in result.scenario.arrangements}
    arrangements = []
    for name in names:
        everyone = frames[name]
        req = everyone[keep].reset_index(drop=True)
        it = result.iterations[result.iterations["arrangement"] == name].reset_index(drop=True)
        roles = list(result.records[name].gpu_roles)
        gaps = result.gaps[name]
        jw = _word2_positions(result.records[name], gaps.rows[keep])
        first_at = _ns(req["first_word_at_s"])
        summary = result.summary[result.summary["arrangement"] == name].iloc[0]
        arrangements.append({
            "name": name,
            "kind": result.records[name].kind,
            "description": described[name].description,
            "is_split": described[name].is_split,
            "lanes": [described[name].instance_name(g) for g in range(len(roles))],
            "unit": described[name].unit,
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
                "late": late_bits(gaps)[keep].tolist(),
                "jw": jw.tolist(),
            },
            "iterations": _iterations_in(it, len(roles), lo_ns, hi_ns),
            "gaps": gap_shares(gaps.gap_values_ns, gaps.gap_counts),
            "first_words": first_word_shares(everyone),
            **(over_seeds(by_seed, name) if by_seed is not None else {}),
        })
    w = result.scenario.workload
    return {
        "version": FORMAT_VERSION,
        "scenario": {
            "name": result.scenario.name,
            "seed": int(result.seed),
            "seed_why": result.chosen,
            "seeds": sorted(int(s) for s in by_seed["seed"].unique()) if by_seed is not None else [int(result.seed)],
            "rate_per_s": getattr(w, "rate_per_s", None),
            "measured_s": list(result.measured_span_s),
            "slo": {"first_word_s": slo.first_word_s, "mean_gap_ms": slo.mean_gap_ms, "freeze_ms": slo.freeze_ms},
        },
        "span_ns": [lo_ns, hi_ns],
        "reference": {str(k): float(v) for k, v in reference.items()} if reference else None,
        "columns": page_columns(),
        "gap_grid_ms": GAP_GRID_MS.tolist(),
        "first_word_grid_s": FIRST_WORD_GRID_S.tolist(),
        "requests": {
            "id": np.diff(ids, prepend=0).tolist(),
            "arrived": np.diff(arrived, prepend=0).tolist(),
            "prompt": first["n_prompt_tokens"].tolist(),
            "words": first["n_reply_words"].tolist(),
        },
        "arrangements": arrangements,
    }
