"""What froze the replies: one row per freezing iteration (a gap over the freeze limit; E10: per
gap, which prompt-only iterations may lengthen), with
its cause and how many replies it froze; `reply_freezes` pairs each reply with the rows it saw.

Where a reply's gaps come from (M2, M4, D8): word 1 ends an iteration of the reading GPU; words
2..n end consecutive *writing* iterations of the writing GPU (those that write words: the view
`records.writes`, model/words.py), one per writing iteration while the reply is in progress. So
gap k (word k to k+1, k >= 2) is the time from one writing iteration's end to the next's: one
iteration's length, or with E10 also the prompt-only iterations between them. A reply's first
gap is from word 1 to the end of its first writing iteration: shared with the replies in
progress when word 1 ended the writing iteration before (a mixed iteration), else its own (read
alone, or by an E10 prompt-only iteration; grouped with the replies of the same instants). A split
reply's first gap is its KV ship, then the wait from landing to the end of its first writing
iteration.

Causes, in `CAUSES`:
- `prompt_read`: the iterations spanning the gap read prompt tokens (E10: a prompt-only
  iteration between two writing ones); the blamed prompts are those they read, the most tokens
  first (ties by request id).
- `kv_ship`: a split reply's first gap, whose ship is at least as long as the rest of the gap;
  the blamed prompt is the reply's own (its KV cache shipped).
- `join_wait`: a split reply's first gap, the wait to join and write longer than the ship.
- `many_replies`: the iterations of the gap read no prompt and were long from the replies they wrote alone
  (0.4 ms each: about 600 replies on one GPU); nothing else is blamed.
- `batch_full`: a reply's first gap in which it waited for a seat (E8: an iteration of its
  writing GPU started after it joined without writing it); nothing is blamed.
- `preempted`: a gap across a reply's preemption (E9): from its last word before it to the word
  its re-read gives (recompute), or to its first word after it came back (swap); nothing is blamed.

Everything is numpy over gaps: freezes are found among the GPUs' iteration gaps and counted
against the replies in progress by binary search. An overloaded writing GPU freezes every reply
at every iteration (millions of freezes an hour), so `freezes.csv` has a row per freezing
iteration, not per freeze. Only the blamed-prompt lists are built in Python, once per freezing
iteration that read a prompt (a few per second of a run at most).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..model.costs import CostNs
from ..model.records import ArrangementRecords
from ..scenario.schema import Scenario
from ..units import NS_PER_S
from .metrics import SLACK_NS, LimitsNs, ReplyGaps, _range_max, preempted_between, preemption_gaps

CAUSES = ("prompt_read", "kv_ship", "join_wait", "many_replies", "batch_full", "preempted")
PROMPT_READ, KV_SHIP, JOIN_WAIT, MANY_REPLIES, BATCH_FULL, PREEMPTED = range(len(CAUSES))

#: the columns of `freezes.csv`: one row per freezing iteration (and per split reply, or reply that waited for a seat, whose
#: first gap froze), with how many measured replies it froze
FREEZE_COLUMNS = (
    "arrangement",
    "seed",
    "gpu",
    "iteration",
    "gap_started_at_s",
    "gap_s",
    "cause",
    "n_replies_frozen",
    "blamed_request_ids",
    "blamed_prompt_tokens",
)

#: the freeze columns of `summary.csv`
FREEZE_SUMMARY_COLUMNS = ("n_freezes", "freezes_by_long_prompt_pct")

#: separates the ids (and token counts) of several blamed prompts in one cell
LIST_SEPARATOR = ";"


@dataclass(frozen=True)
class Spans:
    """The stretches of words (model/words.py) of the finished measured replies of two or more
    words (the only ones with gaps) that have words written by iterations, by request: where
    their words are, as write positions (`records.writes`)."""

    rows: np.ndarray  # rows of `records.requests` (= request ids), one per stretch
    first: np.ndarray  # write position of the stretch's first word written by an iteration (word 2 ...)
    last: np.ndarray  # write position of its last word
    lead_at: np.ndarray  # the word before `first` (word 1), ns
    joined_at: np.ndarray  # ns (= lead_at when colocated)
    split: np.ndarray  # bool: read on another GPU than the one writing
    seat_wait: np.ndarray  # bool: waited for a seat before word 2 (E8)
    shared: np.ndarray  # bool: its lead word ends the writing iteration before `first` (a shared gap)
    resumed: np.ndarray  # bool: back after a preemption with its KV (E9 swap): its first gap spans it

    @property
    def own_first(self) -> np.ndarray:
        """Whose first gap is not one iteration of the writing GPU: a ship and a wait to join
        (split), a wait for a seat (E8), or a preemption (E9)."""
        return self.split | self.seat_wait | self.resumed

    def subset(self, keep: np.ndarray) -> Spans:
        return Spans(*(getattr(self, f)[keep] for f in self.__dataclass_fields__))


def reply_spans(rec: ArrangementRecords, gaps: ReplyGaps) -> Spans:
    r = rec.requests
    rows = gaps.rows[gaps.finished & (r["n_reply_words"][gaps.rows] >= 2)]
    st, w = rec.stretches, rec.writes
    s = st.of_requests(rows)
    s = s[st.n[s] > 0]
    req, first, gpu, lead_at = st.request[s], st.first[s], st.gpu[s], st.lead_at[s]
    joined = r["joined_at_ns"][req]
    prev = first - 1
    has_prev = (prev >= w.offsets[gpu]) if len(s) else np.zeros(0, bool)
    prev = np.maximum(prev, 0)
    first_stretch = st.first_word[s] == 2
    split = first_stretch & (r["reading_gpu"][req] != gpu)
    # E8: a writing iteration of its GPU started after it joined, before the one writing word 2
    seat_wait = first_stretch & has_prev & (w.started[prev] >= joined) if len(s) else np.zeros(0, bool)
    # E9: back after a preemption with its KV (swapped in): its lead word came before the preemption
    resumed = preempted_between(rec, req, lead_at, w.ended[first] if len(s) else lead_at) & ~st.lead_written[s]
    shared = ~split & ~seat_wait & ~resumed & has_prev & (w.ended[prev] == lead_at) if len(s) else np.zeros(0, bool)
    return Spans(req, first, first + st.n[s] - 1, lead_at, joined, split, seat_wait, shared, resumed)


def iteration_gaps(rec: ArrangementRecords) -> np.ndarray:
    """diffs[p] = the gap between words ending write positions p and p+1 on one GPU (0 at a
    GPU's last): `records.writes.gaps`."""
    return rec.writes.gaps


@dataclass(frozen=True)
class FreezeBlame:
    """One arrangement's freezes, one row per gap over the limit that the replies in progress on
    a writing GPU shared (from one writing iteration's end to the next's), one per group of
    colocated replies whose first gap froze from the same word-1 instant to the same writing
    iteration (E10: a prompt-only iteration in between; the same as the first row kind without
    it), and one per split reply whose first gap froze (its ship, or its wait to join), by the
    iteration that ends the gap; times in int64 ns. `n_replies` is how many finished measured
    replies the row froze: a freezing iteration freezes every reply in progress on its GPU, so
    the rows stay as many as the iterations however many replies wait (their sum is the
    summary's `n_freezes`)."""

    end_row: np.ndarray  # global iteration row whose end closes the gap (word 2 for a first gap)
    end_pos: np.ndarray  # its write position (`records.writes`)
    started_at_ns: np.ndarray  # the word before the gap
    gap_ns: np.ndarray
    gpu: np.ndarray
    iteration: np.ndarray  # the GPU's iteration number of `end_row`
    cause: np.ndarray  # index into CAUSES
    n_replies: np.ndarray
    own_request: np.ndarray  # a split (or seat-waiting, E8, or preempted, E9) gap's reply (request id); -1 on the others
    shared: np.ndarray  # bool: a gap every reply in progress across it saw (the rest: first gaps)
    between: np.ndarray  # bool: a gap before a re-read's word, between two stretches of a reply (E9)
    lead_row: np.ndarray  # per stretch of `reply_spans`: the row of its first gap if not a shared one, else -1
    blamed: np.ndarray  # index into the blamed lists below; -1 if nothing is blamed
    blamed_ids: list[str]  # "881;902": the prompts read in the gap (a ship: its own), most tokens first
    blamed_tokens: list[str]  # "7400;6900": their tokens read in the gap (a ship: the whole prompt)
    blamed_first: np.ndarray  # the first id of each list

    def __len__(self) -> int:
        return len(self.end_row)


def _lead_rows(rec: ArrangementRecords, gpu: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The global iteration row of GPU `gpu` that ended last at or before `at` (a word 1)."""
    ended, offsets = rec.iterations["ended_at_ns"], rec.gpu_offsets
    out = np.empty(len(at), np.int64)
    for g in np.unique(gpu).tolist():
        on = gpu == g
        out[on] = offsets[g] + np.searchsorted(ended[offsets[g]:offsets[g + 1]], at[on], side="right") - 1
    return out


def freeze_blame(rec: ArrangementRecords, gaps: ReplyGaps, limits: LimitsNs) -> FreezeBlame:
    """Every freeze of the finished measured replies and its cause (see `FreezeBlame`). The
    cause of a gap from one writing iteration's end to another's is what the iterations in it
    did: read prompt tokens (`prompt_read`, blaming the prompts they read) or not (`many_replies`)."""
    s = reply_spans(rec, gaps)
    w = rec.writes
    diffs = w.gaps
    limit = limits.freeze + SLACK_NS

    # shared gaps: the gap ending write position e is diffs[e - 1]; a stretch sees the ends
    # first+1 .. last (and first itself when its word 1 ended the writing iteration before)
    ends = np.flatnonzero(diffs > limit) + 1
    starts = np.sort(s.first + ~s.shared)
    stops = np.sort(s.last)
    weight = np.searchsorted(starts, ends, side="right") - np.searchsorted(stops, ends, side="left")
    ends, weight = ends[weight > 0], weight[weight > 0]

    # first gaps that are not shared: split replies (ship, or wait to join), E8 seat waits, and
    # colocated ones from a word 1 that did not end the writing iteration before (grouped)
    first_gap = w.ended[s.first] - s.lead_at if len(s.rows) else np.zeros(0, np.int64)
    froze = first_gap > limit
    grouped = np.flatnonzero(froze & ~s.shared & ~s.own_first)
    keys = np.unique(np.column_stack([s.first[grouped], s.lead_at[grouped]]), axis=0, return_inverse=True,
                     return_counts=True) if len(grouped) else (np.zeros((0, 2), np.int64), np.zeros(0, np.int64),
                                                                np.zeros(0, np.int64))
    g_key, g_inverse, g_count = keys
    g_pos, g_at = g_key[:, 0], g_key[:, 1]
    m = np.flatnonzero(froze & s.own_first)

    # the iteration rows of each gap: (from, to]
    to_rows = np.concatenate([w.rows[ends], w.rows[g_pos]])
    from_rows = np.concatenate([w.rows[ends - 1], _lead_rows(rec, w.gpu_of(g_pos), g_at)])
    tokens = np.concatenate([[0], np.cumsum(rec.iterations["n_prompt_tokens_read"])])
    reads = tokens[to_rows + 1] - tokens[from_rows + 1] > 0
    ids, tokens_read, firsts = _reads_in(rec, from_rows[reads], to_rows[reads])
    blamed = np.full(len(to_rows), -1, np.int32)
    blamed[reads] = np.arange(int(reads.sum()))

    ship = s.joined_at[m] - s.lead_at[m]
    seat = s.seat_wait[m]
    resumed = s.resumed[m]
    own = ~seat & ~resumed & (ship >= first_gap[m] - ship)
    own_id = s.rows[m[own]]
    code_m = np.full(len(m), -1, np.int32)
    code_m[own] = len(ids) + np.arange(len(own_id))
    prompts = rec.requests["n_prompt_tokens"]
    ids += [str(x) for x in own_id.tolist()]
    tokens_read += [str(x) for x in prompts[own_id].tolist()]

    b_req, b_gpu, b_at, b_gap = preemption_gaps(rec, gaps, limit)  # E9: before a re-read's word
    b_row, b_started = _lead_rows(rec, b_gpu, b_at), b_at - b_gap
    n_shared, n_grouped = len(ends), len(g_pos)
    end_pos = np.concatenate([ends, g_pos, s.first[m], w.before[b_row]])
    end_row = np.concatenate([w.rows[end_pos[:len(end_pos) - len(b_row)]], b_row])
    order = np.argsort(end_row, kind="stable")  # a first gap ends before its later gaps
    gpu = np.searchsorted(rec.gpu_offsets, end_row, side="right") - 1
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    lead_row = np.full(len(s.rows), -1, np.int64)
    lead_row[grouped] = rank[n_shared + g_inverse.ravel()]
    lead_row[m] = rank[n_shared + n_grouped + np.arange(len(m))]
    return FreezeBlame(
        end_row=end_row[order],
        end_pos=end_pos[order],
        started_at_ns=np.concatenate([w.ended[ends - 1], g_at, s.lead_at[m], b_started])[order],
        gap_ns=np.concatenate([diffs[ends - 1], g_at * 0 + w.ended[g_pos] - g_at, first_gap[m], b_gap])[order],
        gpu=gpu[order].astype(np.int32),
        iteration=(end_row - rec.gpu_offsets[gpu])[order],
        cause=np.concatenate([np.where(reads, PROMPT_READ, MANY_REPLIES),
                              np.where(resumed, PREEMPTED, np.where(seat, BATCH_FULL, np.where(own, KV_SHIP, JOIN_WAIT))),
                              np.full(len(b_row), PREEMPTED)]).astype(np.int8)[order],
        n_replies=np.concatenate([weight, g_count, np.ones(len(m) + len(b_row), np.int64)])[order],
        own_request=np.concatenate([np.full(n_shared + n_grouped, -1, np.int64), s.rows[m], b_req])[order],
        shared=(np.arange(len(order)) < n_shared)[order],
        between=(np.arange(len(order)) >= len(order) - len(b_row))[order],
        lead_row=lead_row,
        blamed=np.concatenate([blamed, code_m, np.full(len(b_row), -1, np.int32)])[order],
        blamed_ids=ids,
        blamed_tokens=tokens_read,
        blamed_first=np.concatenate([np.asarray(firsts, np.int64), own_id]),
    )


def reply_freezes(rec: ArrangementRecords, gaps: ReplyGaps, blame: FreezeBlame,
                  request_ids: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Which rows of `blame` froze which reply: (request id, blame row), by request then time,
    one pair per freeze (the `n_freezes` of requests.csv, summed), for the finished measured
    replies among `request_ids` (default: all of them)."""
    s = reply_spans(rec, gaps)
    lead_row = blame.lead_row
    if request_ids is not None:
        keep = np.isin(s.rows, request_ids)
        s, lead_row = s.subset(keep), lead_row[keep]
    shared_rows = np.flatnonzero(blame.shared)
    at = blame.end_pos[shared_rows]
    lo = np.searchsorted(at, s.first + ~s.shared)
    hi = np.searchsorted(at, s.last, side="right")
    has_own = lead_row >= 0
    count = hi - lo + has_own
    offset = np.cumsum(count) - count
    reply = np.repeat(np.arange(len(s.rows)), count)
    j = np.arange(len(reply)) - np.repeat(offset - lo + has_own, count)  # into shared_rows
    first = offset[has_own]  # a stretch's own first-gap row comes first (its j is meaningless)
    later = np.ones(len(reply), bool)
    later[first] = False
    rows = np.empty(len(reply), np.int64)
    rows[later] = shared_rows[j[later]]
    rows[first] = lead_row[has_own]
    ids = rec.requests["request_id"][s.rows][reply]
    between = np.flatnonzero(blame.between)  # E9: gaps before a re-read's word, one row each
    if len(between):
        between = between[np.isin(blame.own_request[between], s.rows)]
        ids, rows = np.concatenate([ids, blame.own_request[between]]), np.concatenate([rows, between])
        order = np.lexsort((rows, ids))
        ids, rows = ids[order], rows[order]
    return ids, rows


def _reads_in(rec: ArrangementRecords, from_rows: np.ndarray, to_rows: np.ndarray) -> tuple[list, list, list]:
    """For each range of global iteration rows (from, to], the prompts its iterations read:
    "id;id", "tokens;tokens" (tokens summed per prompt, the most tokens first, ties by request
    id), and the first id."""
    reads = rec.reads
    read_row = rec.gpu_offsets[reads["gpu"]] + reads["iteration"]
    order = np.lexsort((reads["request_id"], -reads["n_tokens"], read_row))
    read_row, rid, n = read_row[order], reads["request_id"][order].tolist(), reads["n_tokens"][order].tolist()
    lo, hi = np.searchsorted(read_row, from_rows, side="right"), np.searchsorted(read_row, to_rows, side="right")
    one = (to_rows - from_rows == 1).tolist()
    ids, tokens, firsts = [], [], []
    for a, b, single in zip(lo.tolist(), hi.tolist(), one):
        if single:  # one iteration (every gap without E10): its reads are in order already
            pairs = list(zip(rid[a:b], n[a:b]))
        else:
            summed: dict[int, int] = {}
            for i, k in zip(rid[a:b], n[a:b]):
                summed[i] = summed.get(i, 0) + k
            pairs = sorted(summed.items(), key=lambda kv: (-kv[1], kv[0]))
        ids.append(LIST_SEPARATOR.join(str(i) for i, _ in pairs))
        tokens.append(LIST_SEPARATOR.join(str(k) for _, k in pairs))
        firsts.append(pairs[0][0])
    return ids, tokens, firsts


def long_prompt_tokens(scenario: Scenario, arrangement, limits: LimitsNs) -> int | None:
    """N: the most tokens a prompt may have and still be read, whole, in an iteration writing no
    reply on `arrangement`'s reading GPUs, without a freeze (4,760 at the default costs). A
    prompt over N tokens read whole freezes every reply on its GPU by itself. None if no prompt
    could (no cost per token)."""
    reading, _ = arrangement.side_costs(scenario.cost)
    cost = CostNs.from_cost(reading, scenario.cost.kv_ship_ms_per_token)
    limit = limits.freeze + SLACK_NS
    if cost.per_prompt_token == 0:
        return None
    if cost.iteration_ns(0, 0) > limit:
        return 0
    lo, hi = 0, 1  # iteration_ns(0, lo) <= limit < iteration_ns(0, hi)
    while cost.iteration_ns(0, hi) <= limit:
        lo, hi = hi, 2 * hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if cost.iteration_ns(0, mid) <= limit else (lo, mid)
    return lo


def freeze_summary(rec: ArrangementRecords, gaps: ReplyGaps, limits: LimitsNs, n_long: int | None) -> dict:
    """`n_freezes`, and `freezes_by_long_prompt_pct`: the share of freezes blamed on a prompt
    over `n_long` tokens (a long prompt read, or a long prompt's own ship). Counted per freezing
    iteration, weighted by the replies it froze, without a row per freeze (sweeps run many)."""
    s = reply_spans(rec, gaps)
    w = rec.writes
    diffs = w.gaps
    limit = limits.freeze + SLACK_NS
    frozen = np.flatnonzero(diffs > limit)
    # stretches in progress across gap k (write positions k to k+1): first <= k < last
    starts, stops = np.sort(s.first), np.sort(s.last)
    weight = np.searchsorted(starts, frozen, side="right") - np.searchsorted(stops, frozen, side="right")
    first_gap = w.ended[s.first] - s.lead_at if len(s.rows) else np.zeros(0, np.int64)
    m = np.flatnonzero(first_gap > limit)
    n = int(weight.sum()) + len(m) + len(preemption_gaps(rec, gaps, limit)[0])  # (E9: never a long prompt's)
    if not n or n_long is None:
        return {"n_freezes": n, "freezes_by_long_prompt_pct": float("nan")}
    # the longest whole prompt the iterations of each gap read, and each first-gap freeze's blamed prompt
    prompts = rec.requests["n_prompt_tokens"]
    longest = np.zeros(len(rec.iterations["ended_at_ns"]) + 1, np.int64)  # (+1: a range may end at the last row)
    r = rec.reads
    np.maximum.at(longest, rec.gpu_offsets[r["gpu"]] + r["iteration"], prompts[r["request_id"]])
    n_over = 0
    if len(frozen):
        in_gap = _range_max(longest, w.rows[frozen] + 1, w.rows[frozen + 1] + 1)
        n_over = int(weight[in_gap > n_long].sum())
    ship = s.joined_at[m] - s.lead_at[m]
    own = s.split[m] & ~s.seat_wait[m] & (ship >= first_gap[m] - ship)
    to_rows = w.rows[s.first[m]]
    read = ~s.own_first[m]
    first_longest = np.zeros(len(m), np.int64)
    if read.any():
        from_rows = _lead_rows(rec, w.gpu_of(s.first[m][read]), s.lead_at[m][read])
        first_longest[read] = _range_max(longest, from_rows + 1, to_rows[read] + 1)
    blamed_longest = np.where(s.own_first[m], np.where(own, prompts[s.rows[m]], 0), first_longest)
    n_over += int((blamed_longest > n_long).sum())
    return {"n_freezes": n, "freezes_by_long_prompt_pct": 100.0 * n_over / n}


def cause_counts(blame: FreezeBlame) -> np.ndarray:
    """Freezes of replies by cause (`CAUSES` order): each row counted once per reply it froze."""
    return np.bincount(blame.cause, weights=blame.n_replies, minlength=len(CAUSES)).astype(np.int64)


def top_prompts(blame: FreezeBlame, prompts: np.ndarray, k: int = 3) -> list[tuple[int, int, int]]:
    """The `k` prompts blamed first in the most freezes of replies: (request id, prompt tokens,
    freezes), the most freezes first, ties by request id. `prompts` is
    `records.requests["n_prompt_tokens"]`."""
    has = blame.blamed >= 0
    per_list = np.bincount(blame.blamed[has], weights=blame.n_replies[has], minlength=len(blame.blamed_ids))
    if not per_list.sum():
        return []
    ids = np.unique(blame.blamed_first)
    counts = np.bincount(np.searchsorted(ids, blame.blamed_first), weights=per_list, minlength=len(ids)).astype(np.int64)
    order = np.lexsort((ids, -counts))[:k]
    return [(int(ids[i]), int(prompts[ids[i]]), int(counts[i])) for i in order if counts[i]]


def freezes_frame(name: str, seed: int, blame: FreezeBlame) -> pd.DataFrame:
    """One row per freezing iteration (the `freezes.csv` columns); empty blame cells when
    nothing is blamed."""
    return pd.DataFrame(
        {
            "arrangement": pd.Categorical.from_codes(np.zeros(len(blame), np.int8), categories=[name]),
            "seed": np.full(len(blame), seed, dtype=np.int64),
            "gpu": blame.gpu,
            "iteration": blame.iteration,
            "gap_started_at_s": blame.started_at_ns / NS_PER_S,
            "gap_s": blame.gap_ns / NS_PER_S,
            "cause": pd.Categorical.from_codes(blame.cause, categories=list(CAUSES)),
            "n_replies_frozen": blame.n_replies.astype(np.int64),
            "blamed_request_ids": _labels(blame.blamed, blame.blamed_ids),
            "blamed_prompt_tokens": _labels(blame.blamed, blame.blamed_tokens),
        },
        columns=list(FREEZE_COLUMNS),
    )


def _labels(codes: np.ndarray, texts: list[str]) -> pd.Categorical:
    """`texts[code]` for each code (empty for -1), as a categorical: each text is made once."""
    categories: np.ndarray | list[str] = []
    inverse: np.ndarray | list[int] = []
    if texts:
        categories, inverse = np.unique(np.asarray(texts, dtype=object), return_inverse=True)
    remap = np.append(np.asarray(inverse, np.int64), -1)  # code -1 stays -1
    return pd.Categorical.from_codes(remap[codes], categories=list(categories))
