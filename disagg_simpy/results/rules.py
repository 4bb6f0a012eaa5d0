"""The SLO rule's own figures (docs/compare.md): per request, the shares late on end-to-end
latency and scheduling delay; under `criterion: percentiles`, the judged percentile of each
quantity whose limit is on (TTFT, TPOT, longest gap, every gap, end-to-end, delay)."""

from __future__ import annotations

import math

import numpy as np

from ..scenario.schema import Slo
from ..units import NS_PER_S, SLACK_NS
from .metrics import ReplyGaps, blank_off, linear_percentile, weighted_percentile

#: The `percentiles` criterion's figures (`criterion_figures`), by the limit each is held to.
CRITERION_COLUMNS = {"first_word_s": "slo_first_word_s", "mean_gap_ms": "slo_mean_gap_ms", "freeze_ms": "slo_longest_gap_ms",
                     "gap_ms": "slo_gap_ms", "e2e_s": "slo_e2e_s", "delay_s": "slo_delay_s"}
#: The criterion figures every percentiles run has (the others come only with their limit on).
_ALWAYS = ("first_word_s", "mean_gap_ms", "freeze_ms")
#: Per request: the shares late on the end-to-end and scheduling-delay limits (only when on).
RULE_COLUMNS = {"e2e_s": ("late_e2e_pct", "late_e2e_only_pct"), "delay_s": ("late_delay_pct", "late_delay_only_pct")}


def rule_columns(slo: Slo) -> list[str]:
    """The columns a summary row gains under `slo` beyond `SUMMARY_COLUMNS`: the per-request
    shares late on end-to-end latency or scheduling delay (when those limits are on), and the
    percentiles criterion's figures (the three of the explainer's limits always, the others when
    on), `slo_met` and `slo_ratio`."""
    out = [c for k, cols in RULE_COLUMNS.items() if getattr(slo, k) is not None for c in cols]
    if slo.criterion == "percentiles":
        out += [CRITERION_COLUMNS[k] for k in CRITERION_COLUMNS if k in _ALWAYS or getattr(slo, k) is not None]
        out += ["slo_met", "slo_ratio"]
    return out


def rule_figures(gaps: ReplyGaps, slo: Slo) -> dict:
    """`rule_columns`' values: the per-request late shares of end-to-end and delay (late on it,
    and on it alone), then `criterion_figures` under the percentiles criterion."""
    out: dict = {}
    n = len(gaps.rows)
    pct = lambda mask: 100.0 * float(mask.sum()) / n if n else float("nan")  # noqa: E731
    others = late_flags(gaps)
    for key, (late, late_only) in RULE_COLUMNS.items():
        if getattr(slo, key) is None:
            continue
        mine = gaps.late_e2e if key == "e2e_s" else gaps.late_delay
        assert mine is not None
        out[late] = pct(mine)
        out[late_only] = pct(mine & (others.sum(axis=0) == 1))
    if slo.criterion == "percentiles":
        out |= criterion_figures(gaps, slo)
    return out


def late_flags(gaps: ReplyGaps) -> np.ndarray:
    """One row per limit (first word, mean gap, freezes, end-to-end, delay): which measured
    requests are late on it (a limit that is off: none)."""
    none = np.zeros(len(gaps.rows), bool)
    return np.stack([gaps.late_first_word, gaps.late_mean_gap, gaps.froze,
                     none if gaps.late_e2e is None else gaps.late_e2e,
                     none if gaps.late_delay is None else gaps.late_delay])


def criterion_figures(gaps: ReplyGaps, slo: Slo) -> dict:
    """The `percentiles` criterion's figures of a run (docs/compare.md), each the percentile
    that judges its limit (`slo.level_of`, numpy's linear rule) of: the measured requests'
    first-word waits (s; no first word: +inf); the measured replies' mean gaps (ms; TPOT: a
    finished one-word reply has none and is left out, as TPOT leaves it out; with `tpot:
    inclusive`, end-to-end / words of every finished reply) and longest gaps (ms); every gap of
    every finished measured reply, pooled (TBT; each unfinished reply adds one +inf gap, the one
    it never ended); end-to-end latencies (s) and scheduling delays (arrival to first read, s).
    An unfinished reply (or one never read) counts as +inf. `slo_met`: each figure whose limit
    is on is within it (with D8's 1 ns slack); `slo_ratio`: the largest figure / limit (at most
    1 meets, give or take the slack). Only the figures of `rule_columns` are returned."""
    fin = gaps.finished
    q = slo.level_of
    waits = np.where(gaps.first_word_ns >= 0, gaps.first_word_ns, np.inf) / NS_PER_S
    multi = ~fin | ~np.isnan(gaps.mean_gap_ns)  # unfinished, or finished with 2+ words
    assert gaps.e2e_ns is not None and gaps.delay_ns is not None
    e2e = np.where(gaps.e2e_ns >= 0, gaps.e2e_ns, np.inf)
    if slo.tpot == "inclusive":
        words = np.asarray(gaps.n_words, dtype=np.float64)
        means = e2e / words / 1e6
    else:
        means = np.where(fin, gaps.mean_gap_ns, np.inf)[multi] / 1e6
    longest = np.where(fin, gaps.max_gap_ns.astype(np.float64), np.inf)[multi] / 1e6
    out = {"slo_first_word_s": linear_percentile(waits, q("first_word_s")),
           "slo_mean_gap_ms": linear_percentile(means, q("mean_gap_ms")),
           "slo_longest_gap_ms": linear_percentile(longest, q("freeze_ms"))}
    if slo.gap_ms is not None:
        n_open = int((~fin).sum())
        values = np.concatenate([gaps.gap_values_ns.astype(np.float64), [np.inf] * bool(n_open)])
        counts = np.concatenate([gaps.gap_counts, [n_open] * bool(n_open)]).astype(np.int64)
        out["slo_gap_ms"] = weighted_percentile(values, counts, q("gap_ms")) / 1e6
    if slo.e2e_s is not None:
        out["slo_e2e_s"] = linear_percentile(e2e / NS_PER_S, q("e2e_s"))
    if slo.delay_s is not None:
        out["slo_delay_s"] = linear_percentile(np.where(gaps.delay_ns >= 0, gaps.delay_ns, np.inf) / NS_PER_S, q("delay_s"))
    met = True
    for key, limit in slo.on.items():
        value = out[CRITERION_COLUMNS[key]]
        met &= bool(math.isnan(value) or value <= limit + SLACK[key])
    ratios = [out[CRITERION_COLUMNS[k]] / limit for k, limit in slo.on.items() if not math.isnan(out[CRITERION_COLUMNS[k]])]
    return blank_off(out, slo) | {"slo_met": met, "slo_ratio": max(ratios, default=0.0)}


#: D8's 1 ns of slack in each limit's unit.
SLACK = {"first_word_s": SLACK_NS / NS_PER_S, "mean_gap_ms": SLACK_NS / 1e6, "freeze_ms": SLACK_NS / 1e6,
         "gap_ms": SLACK_NS / 1e6, "e2e_s": SLACK_NS / NS_PER_S, "delay_s": SLACK_NS / NS_PER_S}
