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

Everything is numpy over gaps: freezes are found among the GPUs' iteration gaps and paired with
the replies that saw them by binary search. Only the blamed-prompt lists are built in Python,
once per distinct iteration that froze a reply (a few per second of a run at most).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..model.engine import CostNs
from ..model.records import ArrangementRecords
from ..scenario.schema import Scenario
from ..units import NS_PER_S
from .metrics import SLACK_NS, LimitsNs, ReplyGaps

CAUSES = ("prompt_read", "kv_ship", "join_wait", "many_replies")
PROMPT_READ, KV_SHIP, JOIN_WAIT, MANY_REPLIES = range(len(CAUSES))

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
    """One arrangement's freezes, by request then time; times in int64 ns."""

    request_id: np.ndarray
    started_at_ns: np.ndarray  # the word before the gap
    gap_ns: np.ndarray
    writing_gpu: np.ndarray
    cause: np.ndarray  # index into CAUSES
    blamed: np.ndarray  # index into the two lists below; -1 if nothing is blamed
    blamed_ids: list[str]  # "881;902": the prompts read in the gap (a ship: its own), most tokens first
    blamed_tokens: list[str]  # "7400;6900": their tokens read in the gap (a ship: the whole prompt)
    top_id: np.ndarray  # the first blamed request, -1 if none
    longest_prompt: np.ndarray  # the longest blamed prompt's tokens (its whole prompt), 0 if none

    def __len__(self) -> int:
        return len(self.request_id)


def freeze_blame(rec: ArrangementRecords, gaps: ReplyGaps, limits: LimitsNs) -> FreezeBlame:
    """Every freeze of the finished measured replies (their `n_freezes`, summed) and its cause."""
    s = reply_spans(rec, gaps)
    diffs = iteration_gaps(rec)
    ended = rec.iterations["ended_at_ns"]
    limit = limits.freeze + SLACK_NS

    # gaps 2..n-1 of reply m are diffs[first_row : first_row + n - 2]; the freezing ones
    frozen = np.flatnonzero(diffs > limit)
    lo = np.searchsorted(frozen, s.first_row)
    hi = np.searchsorted(frozen, s.first_row + s.n_words - 2)
    per_reply = hi - lo
    reply = np.repeat(np.arange(len(s.rows)), per_reply)
    k = frozen[np.repeat(lo - (np.cumsum(per_reply) - per_reply), per_reply) + np.arange(len(reply))]
    later = dict(reply=reply, start=ended[k], gap=diffs[k], row=k + 1, split=np.zeros(len(k), bool))

    # first gaps: word 1 to the end of iteration J
    first_gap = ended[s.first_row] - s.first_at if len(s.rows) else np.zeros(0, np.int64)
    m = np.flatnonzero(first_gap > limit)
    first = dict(reply=m, start=s.first_at[m], gap=first_gap[m], row=s.first_row[m], split=s.split[m])

    parts = [later, first]
    reply, start, gap, row, split = (np.concatenate([p[f] for p in parts]) for f in ("reply", "start", "gap", "row", "split"))
    order = np.lexsort((start, reply))
    reply, start, gap, row, split = reply[order], start[order], gap[order], row[order], split[order]

    read_here = rec.iterations["n_prompt_tokens_read"][row] > 0
    ship = s.joined_at[reply] - s.first_at[reply]
    cause = np.where(read_here, PROMPT_READ, MANY_REPLIES)
    cause = np.where(split, np.where(ship >= gap - ship, KV_SHIP, JOIN_WAIT), cause)

    # blamed prompts: each distinct freezing iteration's reads, and each shipped prompt, once
    n = len(reply)
    code = np.full(n, -1, np.int64)  # index into the blamed lists below, -1: nothing blamed
    top_id, longest = np.full(n, -1, np.int64), np.zeros(n, np.int64)
    prompts = rec.requests["n_prompt_tokens"]
    read = np.flatnonzero(cause == PROMPT_READ)
    rows, code[read] = np.unique(row[read], return_inverse=True)
    ids, tokens, firsts, longests = _reads_by_iteration(rec, rows)
    top_id[read], longest[read] = np.asarray(firsts, np.int64)[code[read]], np.asarray(longests, np.int64)[code[read]]
    own = np.flatnonzero(cause == KV_SHIP)
    own_id = s.rows[reply[own]]
    code[own] = len(ids) + np.arange(len(own))
    ids += [str(x) for x in own_id.tolist()]
    tokens += [str(x) for x in prompts[own_id].tolist()]
    top_id[own], longest[own] = own_id, prompts[own_id]

    request_id = rec.requests["request_id"][s.rows[reply]]
    writing_gpu = rec.requests["writing_gpu"][s.rows[reply]]
    return FreezeBlame(request_id, start, gap, writing_gpu, cause, code, ids, tokens, top_id, longest)


def _reads_by_iteration(rec: ArrangementRecords, rows: np.ndarray) -> tuple[list, list, list, list]:
    """For each global iteration row in `rows`, the prompts it read: "id;id", "tokens;tokens"
    (the most tokens first, ties by request id), the first id, and the longest whole prompt."""
    reads = rec.reads
    read_row = rec.gpu_offsets[reads["gpu"]] + reads["iteration"]
    order = np.lexsort((reads["request_id"], -reads["n_tokens"], read_row))
    read_row, rid, n = read_row[order], reads["request_id"][order].tolist(), reads["n_tokens"][order].tolist()
    lo, hi = np.searchsorted(read_row, rows), np.searchsorted(read_row, rows, side="right")
    prompts = rec.requests["n_prompt_tokens"]
    ids, tokens, firsts, longests = [], [], [], []
    for a, b in zip(lo.tolist(), hi.tolist()):
        ids.append(LIST_SEPARATOR.join(map(str, rid[a:b])))
        tokens.append(LIST_SEPARATOR.join(map(str, n[a:b])))
        firsts.append(rid[a])
        longests.append(int(prompts[rid[a:b]].max()))
    return ids, tokens, firsts, longests


def long_prompt_tokens(scenario: Scenario, limits: LimitsNs) -> int | None:
    """N: the most tokens a prompt may have and still be read, whole, in an iteration writing no
    reply, without a freeze (4,760 at the default costs). A prompt over N tokens read whole
    freezes every reply on its GPU by itself. None if no prompt could (no cost per token)."""
    cost = CostNs.from_scenario(scenario)
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


def freeze_summary(blame: FreezeBlame, n_long: int | None) -> dict:
    """`n_freezes`, and `freezes_by_long_prompt_pct`: the share of freezes blamed on a prompt
    over `n_long` tokens (a long prompt read, or a long prompt's own ship)."""
    n = len(blame)
    long_share = float("nan")
    if n and n_long is not None:
        long_share = 100.0 * float((blame.longest_prompt > n_long).sum()) / n
    return {"n_freezes": n, "freezes_by_long_prompt_pct": long_share}


def top_prompts(blame: FreezeBlame, prompts: np.ndarray, k: int = 3) -> list[tuple[int, int, int]]:
    """The `k` prompts blamed first in the most freezes: (request id, prompt tokens, freezes),
    the most freezes first, ties by request id. `prompts` is `records.requests["n_prompt_tokens"]`."""
    ids = blame.top_id[blame.top_id >= 0]
    if not len(ids):
        return []
    values, counts = np.unique(ids, return_counts=True)
    order = np.lexsort((values, -counts))[:k]
    return [(int(values[i]), int(prompts[values[i]]), int(counts[i])) for i in order]


def freezes_frame(name: str, seed: int, blame: FreezeBlame) -> pd.DataFrame:
    """One row per freeze (the `freezes.csv` columns); empty blame cells when nothing is blamed."""
    return pd.DataFrame(
        {
            "arrangement": name,
            "seed": np.full(len(blame), seed, dtype=np.int64),
            "request_id": blame.request_id,
            "gap_started_at_s": blame.started_at_ns / NS_PER_S,
            "gap_s": blame.gap_ns / NS_PER_S,
            "writing_gpu": blame.writing_gpu,
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
