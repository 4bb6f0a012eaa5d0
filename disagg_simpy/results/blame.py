"""What froze the replies: one row per freezing iteration (a gap over the freeze limit), with
its cause and how many replies it froze; `reply_freezes` pairs each reply with the rows it saw.

Where a reply's gaps come from (M2, M4, D8): word 1 ends an iteration of the reading GPU; words
2..n end iterations J..J+n-2 of the writing GPU, which iterates without pause while the reply is
in progress. So gap k (word k to k+1, k >= 2) is exactly the length of iteration J+k-1, and a
colocated reply's first gap is the length of iteration J. A split reply's first gap is its KV
ship, then the wait from landing to the end of iteration J (the iteration in progress when it
landed, if any, and then its own).

Causes, in `CAUSES`:
- `prompt_read`: the iteration spanning the gap read prompt tokens; the blamed prompts are those
  it read, the most tokens first (ties by request id).
- `kv_ship`: a split reply's first gap, whose ship is at least as long as the rest of the gap;
  the blamed prompt is the reply's own (its KV cache shipped).
- `join_wait`: a split reply's first gap, the wait to join and write longer than the ship.
- `many_replies`: the iteration read no prompt and was long from the replies it wrote alone
  (0.4 ms each: about 600 replies on one GPU); nothing else is blamed.
- `batch_full`: a reply's first gap in which it waited for a seat (E8: an iteration of its
  writing GPU started after it joined without writing it); nothing is blamed.

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
from .metrics import SLACK_NS, LimitsNs, ReplyGaps

CAUSES = ("prompt_read", "kv_ship", "join_wait", "many_replies", "batch_full")
PROMPT_READ, KV_SHIP, JOIN_WAIT, MANY_REPLIES, BATCH_FULL = range(len(CAUSES))

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
    """The finished measured replies of two or more words (the only ones with gaps), in
    request order: where their words are."""

    rows: np.ndarray  # rows of `records.requests` (= request ids)
    first_row: np.ndarray  # global iteration row of word 2 (iteration J of the writing GPU)
    n_words: np.ndarray
    first_at: np.ndarray  # word 1, ns
    joined_at: np.ndarray  # ns (= first_at when colocated)
    split: np.ndarray  # bool: read on another GPU than the one writing
    seat_wait: np.ndarray  # bool: waited for a seat before word 2 (E8)

    @property
    def own_first(self) -> np.ndarray:
        """Whose first gap is not one iteration of the writing GPU: a ship and a wait to join
        (split), or a wait for a seat (E8)."""
        return self.split | self.seat_wait


def reply_spans(rec: ArrangementRecords, gaps: ReplyGaps) -> Spans:
    r = rec.requests
    rows = gaps.rows[gaps.finished & (r["n_reply_words"][gaps.rows] >= 2)]
    first_row, _ = rec.word_rows(rows)
    joined = r["joined_at_ns"][rows]
    # E8: an iteration of its writing GPU started after it joined, before the one writing word 2
    prev = first_row - 1
    seat_wait = (prev >= rec.gpu_offsets[r["writing_gpu"][rows]]) & (
        rec.iterations["started_at_ns"][np.maximum(prev, 0)] >= joined) if len(rows) else np.zeros(0, bool)
    return Spans(
        rows,
        first_row,
        r["n_reply_words"][rows],
        r["first_word_at_ns"][rows],
        joined,
        r["reading_gpu"][rows] != r["writing_gpu"][rows],
        seat_wait,
    )


def iteration_gaps(rec: ArrangementRecords) -> np.ndarray:
    """diffs[k] = ended[k+1] - ended[k] within a GPU (0 at a GPU's last iteration): the gap
    between words ending global iteration rows k and k+1."""
    ended = rec.iterations["ended_at_ns"]
    diffs = np.diff(ended, append=ended[-1:] if len(ended) else ended)
    if len(diffs):
        diffs[rec.gpu_offsets[1:] - 1] = 0
    return diffs


@dataclass(frozen=True)
class FreezeBlame:
    """One arrangement's freezes, one row per freezing iteration of a GPU (and one per split
    reply whose first gap froze: its ship, or its wait to join), by the iteration that ends the
    gap; times in int64 ns. `n_replies` is how many finished measured replies the row froze:
    a freezing iteration freezes every reply in progress on its GPU, so the rows stay as many
    as the iterations however many replies wait (their sum is the summary's `n_freezes`)."""

    end_row: np.ndarray  # global iteration row whose end closes the gap (word 2 for a first gap)
    started_at_ns: np.ndarray  # the word before the gap
    gap_ns: np.ndarray
    gpu: np.ndarray
    iteration: np.ndarray  # the GPU's iteration number of `end_row`
    cause: np.ndarray  # index into CAUSES
    n_replies: np.ndarray
    own_request: np.ndarray  # a split (or seat-waiting, E8) first gap's reply (request id); -1 on iteration rows
    blamed: np.ndarray  # index into the blamed lists below; -1 if nothing is blamed
    blamed_ids: list[str]  # "881;902": the prompts read in the gap (a ship: its own), most tokens first
    blamed_tokens: list[str]  # "7400;6900": their tokens read in the gap (a ship: the whole prompt)
    blamed_first: np.ndarray  # the first id of each list

    def __len__(self) -> int:
        return len(self.end_row)


def _first_gaps(rec: ArrangementRecords, s: Spans, limit: int) -> tuple[np.ndarray, np.ndarray]:
    """Each reply's first gap (word 1 to the end of iteration `first_row`), and whether it froze."""
    ended = rec.iterations["ended_at_ns"]
    first_gap = ended[s.first_row] - s.first_at if len(s.rows) else np.zeros(0, np.int64)
    return first_gap, first_gap > limit


def freeze_blame(rec: ArrangementRecords, gaps: ReplyGaps, limits: LimitsNs) -> FreezeBlame:
    """Every freeze of the finished measured replies and its cause, one row per freezing
    iteration (a colocated reply's first gap is the iteration that ends it, like its later
    gaps) plus one per split reply, or reply that waited for a seat (E8), whose first gap froze."""
    s = reply_spans(rec, gaps)
    diffs = iteration_gaps(rec)
    ended = rec.iterations["ended_at_ns"]
    read_tokens = rec.iterations["n_prompt_tokens_read"]
    limit = limits.freeze + SLACK_NS

    # the iteration ending at row e spans the gap diffs[e - 1]; reply m sees the ends
    # first_row+1 .. first_row+n-2 (and first_row itself when colocated: word 1 ended row first_row-1)
    ends = np.flatnonzero(diffs > limit) + 1
    starts = np.sort(s.first_row + s.own_first)
    stops = np.sort(s.first_row + s.n_words - 2)
    weight = np.searchsorted(starts, ends, side="right") - np.searchsorted(stops, ends, side="left")
    ends, weight = ends[weight > 0], weight[weight > 0]
    reads = read_tokens[ends] > 0
    ids, tokens, firsts = _reads_by_iteration(rec, ends[reads])
    blamed = np.full(len(ends), -1, np.int32)
    blamed[reads] = np.arange(int(reads.sum()))

    # split replies whose first gap froze: the ship, or the wait to join; and (E8) replies whose
    # first gap froze while waiting for a seat
    first_gap, has_first = _first_gaps(rec, s, limit)
    m = np.flatnonzero(has_first & s.own_first)
    ship = s.joined_at[m] - s.first_at[m]
    seat = s.seat_wait[m]
    own = ~seat & (ship >= first_gap[m] - ship)
    own_id = s.rows[m[own]]
    code_m = np.full(len(m), -1, np.int32)
    code_m[own] = len(ids) + np.arange(len(own_id))
    prompts = rec.requests["n_prompt_tokens"]
    ids += [str(x) for x in own_id.tolist()]
    tokens += [str(x) for x in prompts[own_id].tolist()]

    end_row = np.concatenate([ends, s.first_row[m]])
    order = np.argsort(end_row, kind="stable")  # a split first gap ends before its later gaps
    gpu = np.searchsorted(rec.gpu_offsets, end_row, side="right") - 1
    return FreezeBlame(
        end_row=end_row[order],
        started_at_ns=np.concatenate([ended[ends - 1], s.first_at[m]])[order],
        gap_ns=np.concatenate([diffs[ends - 1], first_gap[m]])[order],
        gpu=gpu[order].astype(np.int32),
        iteration=(end_row - rec.gpu_offsets[gpu])[order],
        cause=np.concatenate([np.where(reads, PROMPT_READ, MANY_REPLIES),
                              np.where(seat, BATCH_FULL, np.where(own, KV_SHIP, JOIN_WAIT))]).astype(np.int8)[order],
        n_replies=np.concatenate([weight, np.ones(len(m), np.int64)])[order],
        own_request=np.concatenate([np.full(len(ends), -1, np.int64), s.rows[m]])[order],
        blamed=np.concatenate([blamed, code_m])[order],
        blamed_ids=ids,
        blamed_tokens=tokens,
        blamed_first=np.concatenate([np.asarray(firsts, np.int64), own_id]),
    )


def reply_freezes(rec: ArrangementRecords, gaps: ReplyGaps, blame: FreezeBlame,
                  request_ids: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Which rows of `blame` froze which reply: (request id, blame row), by request then time,
    one pair per freeze (the `n_freezes` of requests.csv, summed), for the finished measured
    replies among `request_ids` (default: all of them)."""
    s = reply_spans(rec, gaps)
    if request_ids is not None:
        keep = np.isin(s.rows, request_ids)
        s = Spans(*(getattr(s, f)[keep] for f in ("rows", "first_row", "n_words", "first_at", "joined_at", "split",
                                                   "seat_wait")))
    on_iterations = blame.own_request < 0
    it_rows = np.flatnonzero(on_iterations)
    lo = np.searchsorted(blame.end_row[it_rows], s.first_row + s.own_first)
    hi = np.searchsorted(blame.end_row[it_rows], s.first_row + s.n_words - 2, side="right")
    own_rows = np.flatnonzero(~on_iterations)
    own_rows = own_rows[np.argsort(blame.own_request[own_rows], kind="stable")]
    own_at = np.searchsorted(blame.own_request[own_rows], s.rows) if len(own_rows) else np.zeros(len(s.rows), np.int64)
    has_own = np.zeros(len(s.rows), bool)
    if len(own_rows):
        has_own = blame.own_request[own_rows][np.minimum(own_at, len(own_rows) - 1)] == s.rows
    count = hi - lo + has_own
    offset = np.cumsum(count) - count
    reply = np.repeat(np.arange(len(s.rows)), count)
    j = np.arange(len(reply)) - np.repeat(offset - lo + has_own, count)  # into it_rows
    first = offset[has_own]  # a split reply's own first-gap row comes first (its j is meaningless)
    later = np.ones(len(reply), bool)
    later[first] = False
    rows = np.empty(len(reply), np.int64)
    rows[later] = it_rows[j[later]]
    rows[first] = own_rows[own_at[has_own]]
    return rec.requests["request_id"][s.rows][reply], rows


def _reads_by_iteration(rec: ArrangementRecords, rows: np.ndarray) -> tuple[list, list, list]:
    """For each global iteration row in `rows`, the prompts it read: "id;id", "tokens;tokens"
    (the most tokens first, ties by request id), and the first id."""
    reads = rec.reads
    read_row = rec.gpu_offsets[reads["gpu"]] + reads["iteration"]
    order = np.lexsort((reads["request_id"], -reads["n_tokens"], read_row))
    read_row, rid, n = read_row[order], reads["request_id"][order].tolist(), reads["n_tokens"][order].tolist()
    lo, hi = np.searchsorted(read_row, rows), np.searchsorted(read_row, rows, side="right")
    ids, tokens, firsts = [], [], []
    for a, b in zip(lo.tolist(), hi.tolist()):
        ids.append(LIST_SEPARATOR.join(map(str, rid[a:b])))
        tokens.append(LIST_SEPARATOR.join(map(str, n[a:b])))
        firsts.append(rid[a])
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
    diffs = iteration_gaps(rec)
    ended = rec.iterations["ended_at_ns"]
    limit = limits.freeze + SLACK_NS
    frozen = np.flatnonzero(diffs > limit)
    # replies in progress across gap k: first_row <= k < first_row + n - 2
    starts, stops = np.sort(s.first_row), np.sort(s.first_row + s.n_words - 2)
    weight = np.searchsorted(starts, frozen, side="right") - np.searchsorted(stops, frozen, side="right")
    first_gap = ended[s.first_row] - s.first_at if len(s.rows) else np.zeros(0, np.int64)
    m = np.flatnonzero(first_gap > limit)
    n = int(weight.sum()) + len(m)
    if not n or n_long is None:
        return {"n_freezes": n, "freezes_by_long_prompt_pct": float("nan")}
    # the longest whole prompt each iteration read, and each first-gap freeze's blamed prompt
    prompts = rec.requests["n_prompt_tokens"]
    longest = np.zeros(len(ended), np.int64)
    r = rec.reads
    np.maximum.at(longest, rec.gpu_offsets[r["gpu"]] + r["iteration"], prompts[r["request_id"]])
    n_over = int(weight[longest[frozen + 1] > n_long].sum()) if len(frozen) else 0
    ship = s.joined_at[m] - s.first_at[m]
    own = s.split[m] & ~s.seat_wait[m] & (ship >= first_gap[m] - ship)
    blamed_longest = np.where(s.own_first[m], np.where(own, prompts[s.rows[m]], 0), longest[s.first_row[m]])
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
