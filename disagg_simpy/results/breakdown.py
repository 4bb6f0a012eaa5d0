"""Where a request's time went, and which limit a late request broke.

Time: arrival -> read start (`queued`) -> word 1 (`reading`) -> ship end (`shipping`; 0 when
colocated) -> start of its first writing iteration (`joining`) -> last word (`writing`). The
parts are differences of the request's own integer-ns times, so they add up exactly to its time
from arrival to last word; a part whose end never happened (a run the safety cap cut short) is
-1 ("never"), as are the parts after it. A one-word reply has no ship and no writing: 0 each.
`frozen` is the part of `writing` spent in gaps over the freeze limit.

Limits: each late measured request counts once, under the one limit it broke (first word, mean
gap, freezes) or under `several`; so the four shares add up to the late share.
"""

from __future__ import annotations

import numpy as np

from ..model.records import ArrangementRecords
from ..units import NS_PER_S
from .blame import FREEZE_SUMMARY_COLUMNS, freeze_summary, iteration_gaps, long_prompt_tokens, reply_spans
from .columns import SUMMARY_COLUMNS, WHY_LATE_COLUMNS, checked
from .metrics import SLACK_NS, LimitsNs, ReplyGaps, blank_off, prefix_figures, summary_row
from .rules import late_flags, rule_figures

TIME_PARTS = ("queued", "reading", "shipping", "joining", "writing")

#: breakdown columns of `summary.csv` (the registry's `why_late` family, less the freezes')
LATE_COLUMNS = tuple(c for c in WHY_LATE_COLUMNS if c not in FREEZE_SUMMARY_COLUMNS)


def summary_figures(scenario, arrangement, rec: ArrangementRecords, gaps: ReplyGaps, limits: LimitsNs) -> dict:
    """One arrangement's whole summary row (a run's, or a sweep point's): the model's figures,
    the options' and why late, checked against the registry's `SUMMARY_COLUMNS`."""
    row = summary_row(rec, gaps) | why_late_row(scenario, arrangement, rec, gaps, limits)
    row = blank_off(checked(row, SUMMARY_COLUMNS, "summary row"), scenario.slo)  # a limit that is off: empty
    row |= rule_figures(gaps, scenario.slo)  # (the rule's own columns: end-to-end, delay, percentiles)
    if scenario.prefix_cache_tokens is not None:  # E13
        reading = arrangement.side_costs(scenario.cost)[0]
        row |= prefix_figures(rec, gaps, reading.per_prompt_token_ms - (reading.per_cached_token_ms or 0.0))
        if reading.free_prompt_tokens:  # E14: a cached token saves per_prompt_token_ms only beyond the free ones
            row["reading_saved_s"] = reading_saved_ms(rec, gaps, reading) / 1e3
    return row


def reading_saved_ms(rec: ArrangementRecords, gaps: ReplyGaps, reading) -> float:
    """E13 with E14 (reading R72): the reading time the cache saved the measured requests, each
    cached token counted as if its prompt's first iteration (the one that paid for it, R42) had
    read it after the tokens it did read: `per_prompt_token_ms` on those beyond that iteration's
    free ones, less `per_cached_token_ms` on each. An iteration's saving is shared among the
    prompts that began there in proportion to their cached tokens."""
    assert rec.cached_tokens is not None
    r, reads = rec.requests, rec.reads
    measured = np.zeros(len(r["request_id"]), bool)
    measured[gaps.rows[r["read_started_at_ns"][gaps.rows] >= 0]] = True
    row = rec.gpu_offsets[reads["gpu"]] + reads["iteration"]
    order = np.lexsort((row, reads["request_id"]))  # (E9, whose re-reads would read again, is refused with E13)
    rid, row = reads["request_id"][order], row[order]
    began = np.concatenate([[True], rid[1:] != rid[:-1]]) if len(rid) else np.zeros(0, bool)
    rid, row = rid[began], row[began]
    hit = rec.cached_tokens[rid] > 0
    return saved_ms(row[hit], rec.cached_tokens[rid[hit]], measured[rid[hit]], rec.iterations["n_prompt_tokens_read"],
                    int(reading.free_prompt_tokens), reading.per_prompt_token_ms, reading.per_cached_token_ms or 0.0)


def saved_ms(row: np.ndarray, cached: np.ndarray, measured: np.ndarray, tokens_read: np.ndarray, free: int,
             per_token_ms: float, per_cached_ms: float) -> float:
    """`reading_saved_ms` from plain arrays: per prompt with cached tokens, the iteration row that
    began its read, its cached tokens and whether it is measured; per iteration row, the prompt
    tokens it read (P). An iteration whose prompts found C cached tokens saves
    `per_token_ms` x (max(0, P + C - free) - max(0, P - free)) - `per_cached_ms` x C."""
    if not len(row):
        return 0.0
    its, at = np.unique(row, return_inverse=True)
    c = np.bincount(at, weights=cached).astype(np.int64)
    mine = np.bincount(at, weights=np.where(measured, cached, 0)).astype(np.int64)
    p = tokens_read[its].astype(np.int64)
    paid = np.maximum(p + c - free, 0) - np.maximum(p - free, 0)
    return float(per_token_ms * (paid * mine / c).sum() - per_cached_ms * mine.sum())


def why_late_row(scenario, arrangement, rec: ArrangementRecords, gaps: ReplyGaps, limits: LimitsNs) -> dict:
    """The `WHY_LATE_COLUMNS` of one arrangement's summary row (a run's, or a sweep point's)."""
    n_long = long_prompt_tokens(scenario, arrangement, limits)
    return late_breakdown(gaps) | freeze_summary(rec, gaps, limits, n_long)


def time_breakdown_ns(rec: ArrangementRecords, gaps: ReplyGaps, limits: LimitsNs) -> dict[str, np.ndarray]:
    """Per measured request (the rows of `gaps`): each part of `TIME_PARTS` and `frozen`, in
    int64 ns, -1 where it never ended."""
    r = rec.requests
    rows = gaps.rows
    n_words = r["n_reply_words"][rows]
    one_word = n_words == 1
    joined = np.where(one_word, r["first_word_at_ns"][rows], r["joined_at_ns"][rows])
    # the start of the reply's first writing iteration, if that iteration ran (not cut by the cap)
    st, w = rec.stretches, rec.writes
    first_stretch = np.minimum(st.by_request[rows], max(len(st.n) - 1, 0))  # (a reply's are in word order)
    first, written = st.first[first_stretch], st.n[first_stretch] * (st.by_request[rows + 1] > st.by_request[rows])
    ran = ~one_word & (joined >= 0) & (written > 0)
    wrote_at = np.where(one_word, joined, -1)
    wrote_at[ran] = w.started[first[ran]]
    points = [r["arrived_at_ns"][rows], r["read_started_at_ns"][rows], r["first_word_at_ns"][rows],
              joined, wrote_at, r["finished_at_ns"][rows]]
    out = {}
    for name, a, b in zip(TIME_PARTS, points[:-1], points[1:]):
        out[name] = np.where((a >= 0) & (b >= 0), b - a, -1)

    frozen = np.where(gaps.finished, 0, -1).astype(np.int64)
    s = reply_spans(rec, gaps)
    if len(s.rows):
        diffs = iteration_gaps(rec)
        limit = limits.freeze + SLACK_NS
        frozen_sum = np.concatenate([[0], np.cumsum(np.where(diffs > limit, diffs, 0))])
        later = frozen_sum[s.last] - frozen_sum[s.first]
        first_gap = w.ended[s.first] - s.lead_at
        own = w.ended[s.first] - w.started[s.first]  # the first gap's part inside writing
        per_stretch = later + np.where(first_gap > limit, own, 0)
        where = np.searchsorted(rows, s.rows)
        if st.one_each:
            frozen[where] = per_stretch
        else:  # (a moving reply: several stretches)
            np.add.at(frozen, where, per_stretch)
    out["frozen"] = frozen
    return out


def time_columns(rec: ArrangementRecords, gaps: ReplyGaps, limits: LimitsNs) -> dict[str, np.ndarray]:
    """The `requests.csv` columns `queued_s .. writing_s, frozen_s` (empty where never)."""
    parts = time_breakdown_ns(rec, gaps, limits)
    return {f"{name}_s": np.where(v >= 0, v / NS_PER_S, np.nan) for name, v in parts.items()}


def late_breakdown(gaps: ReplyGaps) -> dict[str, float]:
    """Shares (%) of measured requests late on exactly one of the explainer's limits, by limit,
    and on several (counting end-to-end and delay too: `rule_figures` has those alone)."""
    flags = late_flags(gaps).astype(np.int64)
    n_broken = flags.sum(axis=0)
    counts = [int(((n_broken == 1) & (f == 1)).sum()) for f in flags[:3]] + [int((n_broken > 1).sum())]
    n = len(gaps.rows)
    return {c: 100.0 * k / n if n else float("nan") for c, k in zip(LATE_COLUMNS, counts)}
