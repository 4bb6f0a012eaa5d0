"""Where a reply's words are: the one view of the records that every consumer reads (results'
gaps, freezes and time parts; the page; the plots' word times).

Words are never stored. Word 1 of a reply ends the iteration that finishes reading its prompt;
its later words end *writing iterations* of its writing GPU: iterations that write a word of at
least one reply (`n_replies_written > 0`). `WriteView` numbers each GPU's writing iterations in
order ("write positions", global over the GPUs as iteration rows are). A reply in progress on a
GPU gets a word from every writing iteration of that GPU, so its words there are consecutive in
this view even when iterations that write nothing (E10's prompt-only iterations) run between
them: a *stretch* (`Stretches`): the reply, its GPU, the write position and number of its first
word written by an iteration, how many such words, and the word just before them (its time,
and whether the stretch wrote it: word 1, by its read).

Every reply of the rules so far has one stretch, derived from `requests` (`writing_gpu`,
`join_iteration`, `first_word_at_ns`): nothing per reply is stored beyond them. A model that
moves a reply (a preempted reply resumed later, perhaps on another GPU) hands `collect` an
explicit stretch log instead (`STRETCH_LOG_FIELDS`, any number of stretches per reply).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: an explicit stretch log's columns (`ArrangementRecords.stretch_log`), one row per stretch:
#: request id, GPU, the GPU's iteration index writing the stretch's first word (-1: none ran),
#: that word's number, words the stretch's writing iterations write (as planned; the run's end
#: cuts them), the time of the word before them (-1: never), and whether the stretch wrote that
#: word itself (a read's word: 1 if so)
STRETCH_LOG_FIELDS = ("request_id", "gpu", "join_iteration", "first_word", "n_words", "lead_at_ns", "lead_written")


@dataclass(frozen=True)
class WriteView:
    """Each GPU's writing iterations, in order: position p is global iteration row `rows[p]`."""

    rows: np.ndarray  # int64, ascending (by GPU, then iteration)
    offsets: np.ndarray  # GPU g's writing iterations are positions offsets[g]:offsets[g+1]
    before: np.ndarray  # before[row]: writing iterations before global row `row` (len: rows + 1)
    started: np.ndarray  # int64 ns, by position
    ended: np.ndarray  # int64 ns, by position
    gaps: np.ndarray  # gaps[p] = ended[p+1] - ended[p] on one GPU; 0 at a GPU's last position

    @classmethod
    def of(cls, iterations: dict[str, np.ndarray], gpu_offsets: np.ndarray) -> WriteView:
        writes = iterations["n_replies_written"] > 0
        rows = np.flatnonzero(writes)
        before = np.zeros(len(writes) + 1, np.int64)
        np.cumsum(writes, out=before[1:])
        ended = iterations["ended_at_ns"][rows]
        offsets = before[gpu_offsets]
        gaps = np.diff(ended, append=ended[-1:] if len(ended) else ended)
        if len(gaps):
            last = offsets[1:] - 1
            gaps[last[last >= 0]] = 0  # never a gap across GPUs
        return cls(rows, offsets, before, iterations["started_at_ns"][rows], ended, gaps)

    def gpu_of(self, positions: np.ndarray) -> np.ndarray:
        """The GPU of each write position."""
        return np.searchsorted(self.offsets, positions, side="right") - 1


@dataclass(frozen=True)
class Stretches:
    """Every stretch of words, by request (rows of `requests`) then word number. Stretch s has
    the word numbered `first_word[s] - 1` at `lead_at[s]` (its own if `lead_written[s]`), then
    words `first_word[s] ..` at the ends of write positions `first[s] .. first[s] + n[s] - 1`."""

    request: np.ndarray  # row of `requests` (= request id)
    gpu: np.ndarray  # writing GPU, -1 if none
    first: np.ndarray  # write position of word `first_word` (meaningful when n > 0)
    n: np.ndarray  # words written by writing iterations before the run stopped
    first_word: np.ndarray
    lead_at: np.ndarray  # ns, -1: never
    lead_written: np.ndarray  # bool
    by_request: np.ndarray  # request r's stretches are by_request[r]:by_request[r+1]
    one_each: bool  # stretch r is request r's only one (every rule but a moving reply)

    @classmethod
    def derived(cls, requests: dict[str, np.ndarray], gpu_offsets: np.ndarray, view: WriteView) -> Stretches:
        """One stretch per request from `requests`: words 2..n follow word 1 (the rules so far)."""
        r = requests
        lead = r["first_word_at_ns"]
        first, n = _placed(r["writing_gpu"], r["join_iteration"], r["n_reply_words"] - 1, gpu_offsets, view)
        count = len(lead)
        return cls(np.arange(count, dtype=np.int64), r["writing_gpu"], first, n, np.full(count, 2, np.int64),
                   lead, lead >= 0, np.arange(count + 1, dtype=np.int64), True)

    @classmethod
    def logged(cls, log: dict[str, np.ndarray], n_requests: int, gpu_offsets: np.ndarray,
               view: WriteView) -> Stretches:
        """The stretches a model logged (`STRETCH_LOG_FIELDS`), in any order."""
        c = in_order(log)
        first, n = _placed(c["gpu"], c["join_iteration"], c["n_words"], gpu_offsets, view)
        by_request = np.searchsorted(c["request_id"], np.arange(n_requests + 1))
        return cls(c["request_id"], c["gpu"], first, n, c["first_word"], c["lead_at_ns"],
                   c["lead_written"].astype(bool), by_request, False)

    def of_requests(self, rows: np.ndarray) -> np.ndarray:
        """The stretches of requests `rows`, in that order (each request's by word number)."""
        rows = np.asarray(rows, np.int64)
        if self.one_each:
            return rows
        lo, hi = self.by_request[rows], self.by_request[rows + 1]
        count = hi - lo
        return np.repeat(lo - np.cumsum(count) + count, count) + np.arange(int(count.sum()))

    @property
    def last(self) -> np.ndarray:
        """Write position of each stretch's last word written by an iteration (first - 1 if none)."""
        last: np.ndarray = self.first + self.n - 1
        return last


def in_order(log: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A stretch log's rows by request, then first word (int64): the order of `Stretches.logged`."""
    order = np.lexsort((log["first_word"], log["request_id"]))
    return {k: np.asarray(v, np.int64)[order] for k, v in log.items()}


def grouped_word_times(st: Stretches, view: WriteView, rows: np.ndarray, ordinals: np.ndarray, planned: np.ndarray,
                       request_ids: np.ndarray, n_max: int, ns_per_unit: float | None
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`ArrangementRecords.word_times` when a writing iteration may write several words of a reply:
    stretch s (`st.n[s]` iterations ran) plans `planned[s]` words from `st.first_word[s]`, and `ordinals`
    (stretch by stretch, word by word) gives the iteration of the stretch writing each. Per stretch of
    requests `rows`: its word before (if its own: word 1, a re-read's), then its words whose iteration ran."""
    s = st.of_requests(rows)
    plan_at = np.concatenate([[0], np.cumsum(planned)])[s]  # each stretch's first word in `ordinals`
    lead = st.lead_at[s]
    has_lead = st.lead_written[s] & (lead >= 0)
    ran = st.n[s]
    later = np.where(ran > 0, planned[s], 0)
    into = np.arange(int(later.sum())) - np.repeat(np.cumsum(later) - later, later)  # words into its stretch
    ordinal = ordinals[np.repeat(plan_at, later) + into]
    keep = ordinal < np.repeat(ran, later)
    per = has_lead + np.bincount(np.repeat(np.arange(len(s)), later)[keep], minlength=len(s))
    total = int(per.sum())
    ids = request_ids[st.request[s]]
    id_type = np.int32 if not len(ids) or ids.max() < 2**31 else np.int64
    ended = view.ended if ns_per_unit is None else view.ended / ns_per_unit
    lead_at = lead if ns_per_unit is None else lead / ns_per_unit
    # each stretch: its word before (if its own), then its words that ran, in word order
    request_id = np.repeat(ids, per).astype(id_type)
    word = np.empty(total, np.int16 if n_max < 2**15 else np.int32)
    at = np.empty(total, ended.dtype)
    lead_out = (np.cumsum(per) - per)[has_lead]
    word[lead_out] = st.first_word[s][has_lead] - 1
    at[lead_out] = lead_at[has_lead]
    rest = np.ones(total, bool)
    rest[lead_out] = False
    word[rest] = (into + np.repeat(st.first_word[s], later))[keep]
    at[rest] = ended[(np.repeat(st.first[s], later) + ordinal)[keep]] if len(ended) else 0
    return request_id, word, at


def grouped_counts(st: Stretches, ordinals: np.ndarray, planned: np.ndarray) -> np.ndarray:
    """With `grouped_word_times`' plans: the words each iteration that ran writes, stretch by stretch
    (`st.n[s]` for stretch s, in `st`'s order)."""
    iteration_at = np.concatenate([[0], np.cumsum(st.n)])  # each stretch's first iteration in the result
    which = np.repeat(np.arange(len(st.n)), planned)
    keep = ordinals < st.n[which]
    return np.bincount((iteration_at[which] + ordinals)[keep], minlength=int(iteration_at[-1]))


def _placed(gpu: np.ndarray, join: np.ndarray, wanted: np.ndarray, gpu_offsets: np.ndarray, view: WriteView
            ) -> tuple[np.ndarray, np.ndarray]:
    """Write position of the iteration `join` of GPU `gpu` (its first word), and how many of
    `wanted` words the GPU's writing iterations wrote from there before the run stopped. A reply
    not yet on a GPU (`join` -1: shipping, or waiting for a seat or a writing iteration) has none."""
    placed = (gpu >= 0) & (join >= 0)
    g = np.maximum(gpu, 0)
    row = np.minimum(gpu_offsets[g] + np.maximum(join, 0), gpu_offsets[g + 1])  # (an iteration not yet run: the end)
    first = np.where(placed, view.before[row], 0)
    end = np.where(placed, view.offsets[g + 1], 0)
    n = np.clip(np.minimum(np.where(placed, wanted, 0), end - first), 0, None)
    return first, n
