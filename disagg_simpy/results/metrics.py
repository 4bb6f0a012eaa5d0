"""Verdicts and figures from records (M7, D6-D8), with numpy only: no word is an object.

A reply of n words has n-1 gaps; the first includes a split reply's ship. Limits are compared
with 1 ns of slack (D8). Pooled gap percentiles weight each gap between two iterations of a GPU
by the number of measured replies that saw it, which equals numpy's percentile over every gap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..model.records import ArrangementRecords
from ..scenario.schema import Slo
from ..units import NS_PER_MS, NS_PER_S, SLACK_NS, nearest_ns
from .columns import FIGURE_COLUMNS, OPTION_COLUMNS, PREFIX_COLUMNS

__all__ = ["SLACK_NS", "LimitsNs", "ReplyGaps", "reply_gaps", "summary_row", "option_figures", "weighted_percentile"]
#: A limit that is off (null): no wait or gap reaches it (every time fits MAX_TIME_S, far below),
#: so every comparison with it says "within"; sums with it still fit int64.
OFF_NS = 2**62


@dataclass(frozen=True)
class LimitsNs:
    """The per-request limits in ns (OFF_NS when off); `inclusive`: TPOT counts the first word
    (end-to-end / words) instead of (last word - word 1) / (words - 1)."""

    first_word: int
    mean_gap: int
    freeze: int
    e2e: int = OFF_NS
    delay: int = OFF_NS
    inclusive: bool = False

    @classmethod
    def from_slo(cls, slo: Slo) -> LimitsNs:
        r = lambda x, unit: OFF_NS if x is None else int(nearest_ns(x * unit))  # noqa: E731
        return cls(r(slo.first_word_s, NS_PER_S), r(slo.mean_gap_ms, NS_PER_MS), r(slo.freeze_ms, NS_PER_MS),
                   r(slo.e2e_s, NS_PER_S), r(slo.delay_s, NS_PER_S), slo.tpot == "inclusive")


@dataclass(frozen=True)
class ReplyGaps:
    """Per measured request (rows of `records.requests`, in request order)."""

    rows: np.ndarray
    finished: np.ndarray  # bool
    first_word_ns: np.ndarray  # wait from arrival to word 1 (-1 if none)
    mean_gap_ns: np.ndarray  # float, NaN for one-word or unfinished replies
    max_gap_ns: np.ndarray  # int, -1 for one-word or unfinished replies
    n_freezes: np.ndarray  # int, -1 if unfinished
    on_time: np.ndarray  # bool
    late_first_word: np.ndarray
    late_mean_gap: np.ndarray
    froze: np.ndarray
    gap_values_ns: np.ndarray  # distinct pooled gaps of finished replies ...
    gap_counts: np.ndarray  # ... and how many times each occurs
    e2e_ns: np.ndarray | None = None  # arrival to last word (-1 if unfinished)
    delay_ns: np.ndarray | None = None  # arrival to the start of its first read (-1 if never)
    late_e2e: np.ndarray | None = None  # (all False when the limit is off)
    late_delay: np.ndarray | None = None
    n_words: np.ndarray | None = None  # words of each reply


def reply_gaps(rec: ArrangementRecords, limits: LimitsNs) -> ReplyGaps:
    r = rec.requests
    rows = np.flatnonzero(r["measured"])
    finished = r["finished_at_ns"][rows] >= 0
    first_at = r["first_word_at_ns"][rows]
    first_wait = np.where(first_at >= 0, first_at - r["arrived_at_ns"][rows], -1)
    n = r["n_reply_words"][rows]
    multi = finished & (n >= 2)
    m_rows = rows[multi]
    m_n = n[multi]
    m_first_at = first_at[multi]
    lead_gap, lo, hi, extra, group = _stretch_gaps(rec, m_rows)
    diffs = rec.writes.gaps

    # a stretch's gaps after its lead gap are diffs[lo : hi] (on consecutive writing iterations)
    has_more = hi > lo
    rest_max = np.zeros(len(lo), dtype=np.int64)
    if has_more.any():
        rest_max[has_more] = _range_max(diffs, lo[has_more], hi[has_more])
    over = np.concatenate([[0], np.cumsum(diffs > limits.freeze + SLACK_NS)])
    freeze = limits.freeze + SLACK_NS
    m_max = _per_reply(np.maximum(np.maximum(lead_gap, rest_max), extra), group, len(m_rows), np.maximum)
    m_freezes = _per_reply((lead_gap > freeze).astype(np.int64) + (extra > freeze) + over[hi] - over[lo],
                           group, len(m_rows), np.add)
    m_total = r["finished_at_ns"][m_rows] - m_first_at
    if limits.mean_gap == OFF_NS:  # (the product would overflow)
        m_late_mean = np.zeros(len(m_rows), dtype=bool)
    else:
        m_late_mean = m_total > (m_n - 1) * (limits.mean_gap + SLACK_NS)
    e2e = np.where(finished, r["finished_at_ns"][rows] - r["arrived_at_ns"][rows], -1)
    read_at = r["read_started_at_ns"][rows]
    delay = np.where(read_at >= 0, read_at - r["arrived_at_ns"][rows], -1)

    mean_gap = np.full(len(rows), np.nan)
    mean_gap[multi] = m_total / (m_n - 1)
    max_gap = np.full(len(rows), -1, dtype=np.int64)
    max_gap[multi] = m_max
    n_freezes = np.where(finished, 0, -1).astype(np.int64)
    n_freezes[multi] = m_freezes
    late_mean = ~finished.copy()
    late_mean[multi] = m_late_mean
    if limits.inclusive and limits.mean_gap != OFF_NS:  # TPOT with the first word: end-to-end / words
        late_mean = ~finished | (e2e > n * (limits.mean_gap + SLACK_NS))
    late_e2e = (~finished | (e2e > limits.e2e + SLACK_NS)) & (limits.e2e != OFF_NS)
    late_delay = ((delay < 0) | (delay > limits.delay + SLACK_NS)) & (limits.delay != OFF_NS)
    late_first = (first_at < 0) | (first_wait > limits.first_word + SLACK_NS)
    froze = ~finished | (n_freezes > 0)
    # a limit that is off calls nothing late (an unfinished reply is still not on time)
    late_first &= limits.first_word != OFF_NS
    late_mean &= limits.mean_gap != OFF_NS
    froze &= limits.freeze != OFF_NS
    on_time = finished & ~late_first & ~late_mean & ~froze & ~late_e2e & ~late_delay

    # pooled gaps: diff k is seen by every stretch with lo <= k < hi
    weight = np.zeros(len(diffs) + 1, dtype=np.int64)
    np.add.at(weight, lo, 1)
    np.add.at(weight, hi, -1)
    weight = np.cumsum(weight[:-1])
    own = np.concatenate([lead_gap[lead_gap >= 0], extra[extra >= 0]])
    values = np.concatenate([diffs[weight > 0], own])
    counts = np.concatenate([weight[weight > 0], np.ones(len(own), dtype=np.int64)])
    if rec.speculative is not None:  # E16: words after the first of an iteration come 0 ns after the one before
        if shared := int((m_n - 1).sum() - counts.sum()):  # (each gap counted above: a word's after its iteration's)
            values, counts = np.append(values, 0), np.append(counts, shared)
    values, inverse = np.unique(values, return_inverse=True)
    counts = np.bincount(inverse, weights=counts, minlength=len(values)).astype(np.int64)
    return ReplyGaps(
        rows, finished, first_wait, mean_gap, max_gap, n_freezes, on_time,
        late_first, late_mean, froze, values, counts, e2e, delay, late_e2e, late_delay, n,
    )


def _stretch_gaps(rec: ArrangementRecords, rows: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """The gaps of the stretches of requests `rows` (finished, two words or more): each
    stretch's lead gap (the word before its first iteration word to that word; -1 if it has
    none), the range lo:hi of `writes.gaps` it saw after it, the gap before a lead word a stretch
    wrote itself after an earlier stretch (a moving reply; -1 if none), and each stretch's reply
    (an index into `rows`; None when every reply has one stretch)."""
    st, w = rec.stretches, rec.writes
    s = st.of_requests(rows)
    lo, n = st.first[s], st.n[s]
    hi = lo + np.maximum(n - 1, 0)
    lead_at = st.lead_at[s]
    lead_gap = np.full(len(s), -1, np.int64)
    has = n > 0
    if has.any():
        lead_gap[has] = w.ended[lo[has]] - lead_at[has]
    extra = np.full(len(s), -1, np.int64)
    if st.one_each:
        return lead_gap, lo, hi, extra, None
    counts = st.by_request[rows + 1] - st.by_request[rows]
    group = np.repeat(np.arange(len(rows)), counts)
    later = np.flatnonzero(st.lead_written[s] & (st.first_word[s] > 2) & (np.arange(len(s)) > 0))
    later = later[group[later - 1] == group[later]]
    prev = later - 1
    prev_end = np.where(n[prev] > 0, w.ended[np.maximum(lo[prev] + n[prev] - 1, 0)], lead_at[prev])
    extra[later] = lead_at[later] - prev_end
    return lead_gap, lo, hi, extra, group


def preemption_gaps(rec: ArrangementRecords, gaps: ReplyGaps, limit: int
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """E9: the gaps over `limit` before a re-read's word (from the reply's last word before its
    preemption), of the finished measured replies: (request id, writing GPU, the re-read word's
    time ns, gap ns); none without a stretch log."""
    none = np.zeros(0, np.int64)
    if rec.stretches.one_each:
        return none, none, none, none
    r = rec.requests
    rows = gaps.rows[gaps.finished & (r["n_reply_words"][gaps.rows] >= 2)]
    _, _, _, extra, _ = _stretch_gaps(rec, rows)
    st = rec.stretches
    s = st.of_requests(rows)[extra > limit]
    return st.request[s], st.gpu[s], st.lead_at[s], extra[extra > limit]


def preempted_between(rec: ArrangementRecords, request: np.ndarray, since: np.ndarray, until: np.ndarray) -> np.ndarray:
    """E9: whether each `request` (request id) was preempted at a time in [since, until] (ns): a
    preemption comes at the start of an iteration, which may be the instant of its last word."""
    out = np.zeros(len(request), bool)
    log = rec.preemptions
    if log is None or not len(log["at_ns"]):
        return out
    order = np.lexsort((log["at_ns"], log["request_id"]))
    ids, at = log["request_id"][order], log["at_ns"][order]
    lo, hi = np.searchsorted(ids, request), np.searchsorted(ids, request, side="right")
    for m in range(int((hi - lo).max(initial=0))):  # each reply's m-th preemption (at most max_preemptions + 1)
        has = lo + m < hi
        times = at[np.minimum(lo + m, len(at) - 1)]
        out |= has & (times >= since) & (times <= until)
    return out


def _per_reply(values: np.ndarray, group: np.ndarray | None, n: int, ufunc) -> np.ndarray:
    """Per reply, `ufunc` (np.add, np.maximum) over its stretches' `values`."""
    if group is None:
        return values
    out = np.zeros(n, values.dtype) if ufunc is np.add else np.full(n, -1, values.dtype)
    ufunc.at(out, group, values)
    return out


def _range_max(values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """max(values[lo[i]:hi[i]]) for each i (every range non-empty), in time linear in the
    total length of the ranges.

    `reduceat` also reduces the stretch between one range's end and the next range's start;
    taking the ranges by falling end makes each such stretch start after its end, which
    `reduceat` answers in one step instead of scanning it.
    """
    order = np.argsort(-hi, kind="stable")
    bounds = np.column_stack([lo[order], hi[order]]).ravel()
    out = np.empty(len(lo), dtype=values.dtype)
    out[order] = np.maximum.reduceat(values, bounds)[::2]
    return out


def weighted_percentile(values: np.ndarray, counts: np.ndarray, q: float) -> float:
    """numpy's default (linear) percentile of `values` repeated `counts` times."""
    total = int(counts.sum())
    if total == 0:
        return float("nan")
    h = (total - 1) * (np.float64(q) / 100)
    below = int(np.floor(h))
    cum = np.cumsum(counts)
    a = float(values[np.searchsorted(cum, below, side="right")])
    b = float(values[np.searchsorted(cum, min(below + 1, total - 1), side="right")])
    t = h - below
    if math.isinf(b) and t > 0:  # (an interpolation that touches +inf is +inf)
        return b
    diff = b - a
    return b - diff * (1 - t) if t >= 0.5 else a + diff * t


#: The model's figures and the options' in a summary row (the registry's, `columns.py`).
SUMMARY_COLUMNS = FIGURE_COLUMNS


def summary_row(rec: ArrangementRecords, gaps: ReplyGaps) -> dict:
    """One arrangement's figures (`FIGURE_COLUMNS` of `summary.csv`; `breakdown.summary_figures`
    adds the rest)."""
    r = rec.requests
    n = len(gaps.rows)
    pct = lambda mask: 100.0 * float(mask.sum()) / n if n else float("nan")  # noqa: E731
    fin = gaps.finished
    waits = gaps.first_word_ns[fin] / NS_PER_S
    means = gaps.mean_gap_ns[fin & ~np.isnan(gaps.mean_gap_ns)] / 1e6
    measured_end = r["finished_at_ns"][gaps.rows]
    if "dropped_at_ns" in r:  # E9: a dropped request ends there
        measured_end = np.maximum(measured_end, r["dropped_at_ns"][gaps.rows])
    span_ns = rec.stopped_at_ns if rec.capped else int(measured_end.max()) if n else 0
    it = rec.iterations
    roles = np.asarray(rec.gpu_roles)
    busy = np.clip(it["ended_at_ns"], 0, span_ns) - np.clip(it["started_at_ns"], 0, span_ns)

    def of_role(role: str) -> np.ndarray:
        return ((roles == role) | (roles == "both"))[it["gpu"]]  # (GPU g's role is gpu_roles[g])

    def iterating_pct(role: str) -> float:
        """Share of the span the role's GPUs spend in iterations: a GPU iterates whenever one
        reply is in progress, so this is not headroom."""
        n_gpus = int(np.count_nonzero((roles == role) | (roles == "both")))
        if not n_gpus or span_ns <= 0:
            return float("nan")
        return 100.0 * float(busy[of_role(role)].sum()) / (n_gpus * span_ns)

    ended = it["ended_at_ns"] <= span_ns

    def per_iteration(role: str, column: str) -> float:
        """The mean of `column` over the role's iterations that ended in the span: how full
        its iterations are, which is what shows headroom."""
        values = it[column][of_role(role) & ended]
        return float(values.mean()) if len(values) else float("nan")

    n_words = int(it["n_replies_written"][ended].sum())
    n_words += int(((r["first_word_at_ns"] >= 0) & (r["first_word_at_ns"] <= span_ns)).sum())
    return {
        "arrangement": rec.name,
        "n_requests": n,
        "n_unfinished": rec.n_unfinished,
        "on_time_pct": pct(gaps.on_time),
        "late_first_word_pct": pct(gaps.late_first_word),
        "late_mean_gap_pct": pct(gaps.late_mean_gap),
        "froze_pct": pct(gaps.froze),
        "first_word_p50_s": float(np.percentile(waits, 50)) if len(waits) else float("nan"),
        "first_word_p90_s": float(np.percentile(waits, 90)) if len(waits) else float("nan"),
        "median_mean_gap_ms": float(np.median(means)) if len(means) else float("nan"),
        "longest_gap_ms": float(gaps.gap_values_ns.max()) / 1e6 if len(gaps.gap_values_ns) else float("nan"),
        "p99_gap_ms": weighted_percentile(gaps.gap_values_ns, gaps.gap_counts, 99) / 1e6,
        "reading_iterating_pct": iterating_pct("reads"),
        "writing_iterating_pct": iterating_pct("writes"),
        "replies_per_writing_iteration": per_iteration("writes", "n_replies_written"),
        "prompt_tokens_per_reading_iteration": per_iteration("reads", "n_prompt_tokens_read"),
        "words_per_s": n_words / (span_ns / NS_PER_S) if span_ns > 0 else float("nan"),
        **option_figures(rec, gaps),
    }


def paged_figures(rec: ArrangementRecords, gaps: ReplyGaps) -> dict:
    """E9's figures (`PAGED_COLUMNS`): preemptions of measured requests, and those dropped; empty
    for an arrangement that is not paged."""
    r = rec.requests
    if "n_preemptions" not in r:
        return {"n_preemptions": None, "n_dropped": None}
    return {"n_preemptions": int(r["n_preemptions"][gaps.rows].sum()),
            "n_dropped": int((r["dropped_at_ns"][gaps.rows] >= 0).sum())}


def option_figures(rec: ArrangementRecords, gaps: ReplyGaps) -> dict:
    """E4, E5 figures (NaN when the option is off): the most KV cache any GPU of a side held, as a
    share of its capacity; the shares of measured requests that waited for a writing GPU's memory
    (E4e) and for the link (E5): a wait above 0, or still waiting when the run stopped."""
    nan = float("nan")
    out = dict.fromkeys(OPTION_COLUMNS, nan)
    roles = np.asarray(rec.gpu_roles)
    if rec.kv_capacity_tokens is not None and rec.kv_peak_tokens is not None:  # (both set with E4)
        for side, role in (("reading", "reads"), ("writing", "writes")):
            gpus = (roles == role) | (roles == "both")
            out[f"kv_peak_{side}_pct"] = float((100.0 * rec.kv_peak_tokens[gpus] / rec.kv_capacity_tokens[gpus]).max())
    r = {k: rec.requests[k][gaps.rows] for k in ("first_word_at_ns", "handoff_at_ns", "ship_started_at_ns",
                                                "n_reply_words", "reading_gpu")}
    n = len(gaps.rows)
    stop = rec.stopped_at_ns

    def waited(since: np.ndarray, until: np.ndarray) -> float:
        if not n:
            return nan
        pending = (since >= 0) & (until < 0) & (since < stop)
        return 100.0 * float(((until > since) & (since >= 0) | pending).sum()) / n

    read_on = roles[np.maximum(r["reading_gpu"], 0)] if len(roles) else np.zeros(0, str)
    shipped = (r["n_reply_words"] > 1) & (read_on == "reads")  # not one-word replies nor local prompts (E6)
    if rec.kv_capacity_tokens is not None and rec.is_split:
        out["handoff_waited_pct"] = waited(np.where(shipped, r["first_word_at_ns"], -1), r["handoff_at_ns"])
    if rec.is_split and rec.kv_link != "independent":
        out["link_waited_pct"] = waited(r["handoff_at_ns"], r["ship_started_at_ns"])
    return out


def prefix_figures(rec: ArrangementRecords, gaps: ReplyGaps, saved_ms_per_token: float) -> dict:
    """E13 (`PREFIX_COLUMNS`): over the measured requests whose reading began, cached tokens over
    prompt tokens (%), the cached tokens, the reading time they saved (`saved_ms_per_token`
    each), and the hit share of each reading instance."""
    assert rec.cached_tokens is not None  # (recorded whenever caching is on)
    r = rec.requests
    rows = gaps.rows[r["read_started_at_ns"][gaps.rows] >= 0]
    cached, prompt, gpu = rec.cached_tokens[rows], r["n_prompt_tokens"][rows], r["reading_gpu"][rows]
    total = int(cached.sum())
    by_instance = []
    for g, role in enumerate(rec.gpu_roles):
        if role != "writes":
            mine = gpu == g
            p = int(prompt[mine].sum())
            by_instance.append(f"{g}:{100.0 * int(cached[mine].sum()) / p:.1f}" if p else f"{g}:")
    return dict(zip(PREFIX_COLUMNS, (100.0 * total / int(prompt.sum()) if len(rows) else float("nan"), total,
                                     total * saved_ms_per_token / 1e3, " ".join(by_instance))))


#: Columns that judge one limit: left empty when that limit is off (null), and left out of tables.
LIMIT_COLUMNS = {
    "first_word_s": ("late_first_word_pct", "late_first_word_only_pct", "slo_first_word_s"),
    "mean_gap_ms": ("late_mean_gap_pct", "late_mean_gap_only_pct", "slo_mean_gap_ms"),
    "freeze_ms": ("froze_pct", "late_froze_only_pct", "n_freezes", "freezes_by_long_prompt_pct", "frozen_s",
                  "slo_longest_gap_ms"),
}
def off_columns(slo: Slo) -> set[str]:
    """The columns of the limits that are off."""
    return {c for key, cols in LIMIT_COLUMNS.items() if getattr(slo, key) is None for c in cols}


def blank_off(row: dict, slo: Slo) -> dict:
    """`row` with the columns of limits that are off emptied (NaN)."""
    off = off_columns(slo)
    return {k: (float("nan") if k in off else v) for k, v in row.items()}


def linear_percentile(values: np.ndarray, q: float) -> float:
    """numpy's default (linear) percentile, where values may be +inf (a reply that never got
    there): an interpolation that touches an inf is inf. NaN for no values."""
    v = np.sort(np.asarray(values, dtype=np.float64))
    if not len(v):
        return float("nan")
    h = (len(v) - 1) * (q / 100)
    lo = int(np.floor(h))
    t = h - lo
    if t == 0:
        return float(v[lo])
    a, b = float(v[lo]), float(v[lo + 1])
    return float("inf") if math.isinf(b) else a + (b - a) * t
