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
from .metrics import SLACK_NS, LimitsNs, ReplyGaps, blank_off, criterion_figures, prefix_figures, summary_row

TIME_PARTS = ("queued", "reading", "shipping", "joining", "writing")

#: breakdown columns of `summary.csv` (the registry's `why_late` family, less the freezes')
LATE_COLUMNS = tuple(c for c in WHY_LATE_COLUMNS if c not in FREEZE_SUMMARY_COLUMNS)


def summary_figures(scenario, arrangement, rec: ArrangementRecords, gaps: ReplyGaps, limits: LimitsNs) -> dict:
    """One arrangement's whole summary row (a run's, or a sweep point's): the model's figures,
    the options' and why late, checked against the registry's `SUMMARY_COLUMNS`."""
    row = summary_row(rec, gaps) | why_late_row(scenario, arrangement, rec, gaps, limits)
    row = blank_off(checked(row, SUMMARY_COLUMNS, "summary row"), scenario.slo)  # a limit that is off: empty
    if scenario.slo.criterion == "percentiles":
        row |= criterion_figures(gaps, scenario.slo)
    if scenario.prefix_cache_tokens is not None:  # E13
        reading = arrangement.side_costs(scenario.cost)[0]
        row |= prefix_figures(rec, gaps, reading.per_prompt_token_ms - (reading.per_cached_token_ms or 0.0))
    return row


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
    """Shares (%) of measured requests late on exactly one limit, by limit, and on several."""
    flags = np.stack([gaps.late_first_word, gaps.late_mean_gap, gaps.froze]).astype(np.int64)
    n_broken = flags.sum(axis=0)
    counts = [int(((n_broken == 1) & (f == 1)).sum()) for f in flags] + [int((n_broken > 1).sum())]
    n = len(gaps.rows)
    return {c: 100.0 * k / n if n else float("nan") for c, k in zip(LATE_COLUMNS, counts)}
