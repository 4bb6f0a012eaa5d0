"""What froze each reply: one row per freeze (a gap over the freeze limit), with its cause.

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

Everything is numpy over gaps: freezes are found among the GPUs' iteration gaps and paired with
the replies that saw them by binary search. Only the blamed-prompt lists are built in Python,
once per distinct iteration that froze a reply (a few per second of a run at most).
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

#: the columns of `freezes.csv`
FREEZE_COLUMNS = (
    "arrangement",
    "seed",
    "request_id",
    "gap_started_at_s",
    "gap_s",
    "writing_gpu",
    "cause",
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


def reply_spans(rec: ArrangementRecords, gaps: ReplyGaps) -> Spans:
    r = rec.requests
    rows = gaps.rows[gaps.finished & (r["n_reply_words"][gaps.rows] >= 2)]
    first_row, _ = rec.word_rows(rows)
    return Spans(
        rows,
        first_row,
        r["n_reply_words"][rows],
        r["first_word_at_ns"][rows],
        r["joined_at_ns"][rows],
        r["reading_gpu"][rows] != r["writing_gpu"][rows],
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
    """One arrangement's freezes, by request then time; times in int64 ns. What is blamed is
    kept once per distinct list (a freezing iteration freezes every reply on its GPU)."""

    request_id: np.ndarray
    started_at_ns: np.ndarray  # the word before the gap
    gap_ns: np.ndarray
    writing_gpu: np.ndarray
    cause: np.ndarray  # index into CAUSES
    blamed: np.ndarray  # index into the blamed lists below; -1 if nothing is blamed
    blamed_ids: list[str]  # "881;902": the prompts read in the gap (a ship: its own), most tokens first
    blamed_tokens: list[str]  # "7400;6900": their tokens read in the gap (a ship: the whole prompt)
    blamed_first: np.ndarray  # the first id of each list

    def __len__(self) -> int:
        return len(self.request_id)


def freeze_blame(rec: ArrangementRecords, gaps: ReplyGaps, limits: LimitsNs) -> FreezeBlame:
    """Every freeze of the finished measured replies (their `n_freezes`, summed) and its cause.

    Freezes are counted in the millions when a writing GPU is overloaded, so each is a few
    array elements: the iteration gaps that freeze are found once (`frozen`), and each
    freeze row is an index into them, or a reply's first gap."""
    s = reply_spans(rec, gaps)
    diffs = iteration_gaps(rec)
    ended = rec.iterations["ended_at_ns"]
    read_tokens = rec.iterations["n_prompt_tokens_read"]
    limit = limits.freeze + SLACK_NS

    # gaps 2..n-1 of reply m are diffs[first_row : first_row + n - 2]: its later freezes are
    # frozen[lo[m]:hi[m]]; its first gap runs from word 1 to the end of iteration first_row
    frozen = np.flatnonzero(diffs > limit)
    lo = np.searchsorted(frozen, s.first_row)
    hi = np.searchsorted(frozen, s.first_row + s.n_words - 2)
    first_gap = ended[s.first_row] - s.first_at if len(s.rows) else np.zeros(0, np.int64)
    has_first = first_gap > limit
    # rows by reply, then time: a reply's first-gap freeze, then its later ones (frozen[j])
    count = hi - lo + has_first
    offset = np.cumsum(count) - count
    reply = np.repeat(np.arange(len(s.rows), dtype=np.int32), count)
    j = np.arange(len(reply)) - np.repeat(offset - lo + has_first, count)
    first = offset[has_first]  # rows of first-gap freezes (their j is meaningless)
    m = np.flatnonzero(has_first)  # ... and their replies

    # what each distinct freezing iteration read: blamed lists by iteration row
    reads_f = read_tokens[frozen + 1] > 0 if len(frozen) else np.zeros(0, bool)
    reads_m = ~s.split[m] & (read_tokens[s.first_row[m]] > 0)
    read_rows = np.unique(np.concatenate([frozen[reads_f] + 1, s.first_row[m][reads_m]]))
    ids, tokens, firsts = _reads_by_iteration(rec, read_rows)

    by_frozen = np.full(len(frozen) + 1, -1, np.int32)  # [-1]: a placeholder for first gaps
    by_frozen[:-1][reads_f] = np.searchsorted(read_rows, frozen[reads_f] + 1)
    cause_f = np.append(np.where(reads_f, PROMPT_READ, MANY_REPLIES), MANY_REPLIES).astype(np.int8)
    pick = j
    pick[first] = len(frozen)
    start = np.append(ended[frozen], 0)[pick]
    gap = np.append(diffs[frozen], 0)[pick]
    cause = cause_f[pick]
    blamed = by_frozen[pick]

    # first gaps: colocated, like any other iteration; split, the ship or the wait to join
    start[first], gap[first] = s.first_at[m], first_gap[m]
    code_m = np.full(len(m), -1, np.int32)
    code_m[reads_m] = np.searchsorted(read_rows, s.first_row[m][reads_m])
    cause_m = np.where(reads_m, PROMPT_READ, MANY_REPLIES)
    ship = s.joined_at[m] - s.first_at[m]
    # E8: an iteration of its writing GPU started after it joined, before the one writing word 2
    prev = s.first_row[m] - 1
    seat_wait = (prev >= rec.gpu_offsets[rec.requests["writing_gpu"][s.rows[m]]]) & (
        rec.iterations["started_at_ns"][np.maximum(prev, 0)] >= s.joined_at[m])
    own = s.split[m] & ~seat_wait & (ship >= first_gap[m] - ship)
    cause_m[s.split[m]] = JOIN_WAIT
    cause_m[own] = KV_SHIP
    code_m[own] = len(ids) + np.arange(int(own.sum()))
    cause_m[seat_wait], code_m[seat_wait] = BATCH_FULL, -1
    own_id = s.rows[m[own]]
    prompts = rec.requests["n_prompt_tokens"]
    ids += [str(x) for x in own_id.tolist()]
    tokens += [str(x) for x in prompts[own_id].tolist()]
    cause[first], blamed[first] = cause_m, code_m

    return FreezeBlame(
        request_id=rec.requests["request_id"][s.rows][reply],
        started_at_ns=start,
        gap_ns=gap,
        writing_gpu=rec.requests["writing_gpu"][s.rows][reply],
        cause=cause,
        blamed=blamed,
        blamed_ids=ids,
        blamed_tokens=tokens,
        blamed_first=np.concatenate([np.asarray(firsts, np.int64), own_id]),
    )


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
    own = s.split[m] & (ship >= first_gap[m] - ship)
    blamed_longest = np.where(s.split[m], np.where(own, prompts[s.rows[m]], 0), longest[s.first_row[m]])
    n_over += int((blamed_longest > n_long).sum())
    return {"n_freezes": n, "freezes_by_long_prompt_pct": 100.0 * n_over / n}


def top_prompts(blame: FreezeBlame, prompts: np.ndarray, k: int = 3) -> list[tuple[int, int, int]]:
    """The `k` prompts blamed first in the most freezes: (request id, prompt tokens, freezes),
    the most freezes first, ties by request id. `prompts` is `records.requests["n_prompt_tokens"]`."""
    per_list = np.bincount(blame.blamed[blame.blamed >= 0], minlength=len(blame.blamed_ids))
    if not per_list.sum():
        return []
    ids = np.unique(blame.blamed_first)
    counts = np.bincount(np.searchsorted(ids, blame.blamed_first), weights=per_list, minlength=len(ids)).astype(np.int64)
    order = np.lexsort((ids, -counts))[:k]
    return [(int(ids[i]), int(prompts[ids[i]]), int(counts[i])) for i in order if counts[i]]


def freezes_frame(name: str, seed: int, blame: FreezeBlame) -> pd.DataFrame:
    """One row per freeze (the `freezes.csv` columns); empty blame cells when nothing is blamed."""
    return pd.DataFrame(
        {
            "arrangement": pd.Categorical.from_codes(np.zeros(len(blame), np.int8), categories=[name]),
            "seed": np.full(len(blame), seed, dtype=np.int64),
            "request_id": blame.request_id,
            "gap_started_at_s": blame.started_at_ns / NS_PER_S,
            "gap_s": blame.gap_ns / NS_PER_S,
            "writing_gpu": blame.writing_gpu.astype(np.int32),  # (not int64: pandas would copy it into one block with the others)
            "cause": pd.Categorical.from_codes(blame.cause, categories=list(CAUSES)),
            "blamed_request_ids": _labels(blame.blamed, blame.blamed_ids),
            "blamed_prompt_tokens": _labels(blame.blamed, blame.blamed_tokens),
        },
        columns=list(FREEZE_COLUMNS),
    )


def _labels(codes: np.ndarray, texts: list[str]) -> pd.Categorical:
    """`texts[code]` for each code (empty for -1), as a categorical: each text is made once."""
    categories, inverse = np.unique(np.asarray(texts, dtype=object), return_inverse=True) if texts else ([], [])
    remap = np.append(np.asarray(inverse, np.int64), -1)  # code -1 stays -1
    return pd.Categorical.from_codes(remap[codes], categories=list(categories))
