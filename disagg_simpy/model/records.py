"""What a run leaves behind: plain numpy arrays, one set per arrangement.

The model fills flat arrays during the run and hands them to `collect`, which turns them into
one set of numpy arrays (this module knows nothing of the engine). Word times
are not stored: words 2..n of a reply are the ends of the iterations `join_iteration ..
join_iteration + n - 2` of its writing GPU, derived on demand (`word_times`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from operator import attrgetter
from typing import Any, Protocol

import numpy as np

REQUEST_FIELDS = (
    "request_id",
    "arrived_at_ns",
    "n_prompt_tokens",
    "n_reply_words",
    "reading_gpu",
    "read_started_at_ns",
    "first_word_at_ns",
    "writing_gpu",
    "joined_at_ns",
    "join_iteration",
    "finished_at_ns",
    "handoff_at_ns",  # writing GPU chosen, ship requested (E4e; the read's end without E4)
    "ship_started_at_ns",  # the ship left (E5; the request above without E5)
)


class GpuLog(Protocol):
    """What `collect` reads of a GPU: its role and its flat int64 logs (array('q'))."""

    @property
    def role(self) -> str: ...

    started_at_ns: Any
    ended_at_ns: Any
    n_replies_written: Any
    n_prompt_tokens_read: Any
    reads_log: Any  # iteration, request id, tokens; iteration, ...
    kv_used_tokens: Any  # E4: tokens held once each iteration's own reservations are made
    kv_used: int  # E4: tokens held now
    kv_peak: int  # E4: the most held at any moment


@dataclass
class ArrangementRecords:
    """Records of one arrangement's run. Times are int64 ns; -1 means "never"."""

    name: str
    kind: str
    gpu_roles: tuple[str, ...]  # "reads", "writes" or "both", by GPU number
    requests: dict[str, np.ndarray]  # REQUEST_FIELDS + "measured", every request that arrived
    # gpu, iteration, started_at_ns, ended_at_ns, n_replies_written, n_prompt_tokens_read (+ kv_used_tokens, E4)
    iterations: dict[str, np.ndarray]
    gpu_offsets: np.ndarray  # GPU g's iterations are rows gpu_offsets[g]:gpu_offsets[g+1]
    reads: dict[str, np.ndarray]  # gpu, iteration, request_id, n_tokens
    stopped_at_ns: int
    cap_ns: int
    n_events: int  # SimPy events the run scheduled (a structural cost measure)
    kv_capacity_tokens: np.ndarray | None = None  # E4, by GPU (instance); None: no limit (no KV figures)
    kv_link: str | None = None  # E5 on a split ("independent" = the explainer's rules); None: colocated
    kv_peak_tokens: np.ndarray | None = None  # E4: per GPU, the most KV cache held at any moment
    kv_held_at_stop: np.ndarray | None = None  # E4: per GPU, tokens still reserved when the run stopped
    cached_tokens: np.ndarray | None = None  # E11: per request, prompt tokens found cached; None: no cache

    @property
    def is_split(self) -> bool:
        """Whether prompts were read on other GPUs than their replies were written on (the engine
        records a split's `kv_link`, and none for any other arrangement)."""
        return self.kv_link is not None

    @property
    def n_unfinished(self) -> int:
        r = self.requests
        return int((r["measured"] & (r["finished_at_ns"] < 0)).sum())

    @property
    def capped(self) -> bool:
        """The safety cap ended the run before every measured reply finished (D6)."""
        return self.n_unfinished > 0

    @classmethod
    def collect(cls, *, name: str, kind: str, gpus: Sequence[GpuLog], arrived: Sequence,
                stopped_at_ns: int, cap_ns: int, n_events: int, kv_capacity_tokens: Sequence[int] | None = None,
                kv_link: str | None = None, cached_tokens: Sequence[int] | None = None) -> ArrangementRecords:
        """The records of a finished run: `arrived` holds each request that arrived (objects
        with the REQUEST_FIELDS and `measured`), in arrival order."""
        table = _int_table(map(attrgetter(*REQUEST_FIELDS), arrived), len(arrived), len(REQUEST_FIELDS))
        requests = dict(zip(REQUEST_FIELDS, table.T.copy()))
        requests["measured"] = np.fromiter((r.measured for r in arrived), bool, len(arrived))
        counts = [len(g.ended_at_ns) for g in gpus]
        iterations = {
            "gpu": np.repeat(np.arange(len(gpus), dtype=np.int64), counts),
            "iteration": np.concatenate([np.arange(c, dtype=np.int64) for c in counts]),
        }
        fields = ["started_at_ns", "ended_at_ns", "n_replies_written", "n_prompt_tokens_read"]
        kv = kv_capacity_tokens is not None
        for f in fields + ["kv_used_tokens"] * kv:  # (kv_used_tokens is logged at the start: cut to the ends)
            iterations[f] = np.concatenate([np.frombuffer(getattr(g, f), dtype=np.int64)[:n] for g, n in zip(gpus, counts)])
        logs = [np.frombuffer(g.reads_log, dtype=np.int64).reshape(-1, 3) for g in gpus]
        reads_table = np.concatenate(logs)
        reads = {
            "gpu": np.repeat(np.arange(len(gpus), dtype=np.int64), [len(x) for x in logs]),
            "iteration": reads_table[:, 0],
            "request_id": reads_table[:, 1],
            "n_tokens": reads_table[:, 2],
        }
        return cls(
            name=name,
            kind=kind,
            gpu_roles=tuple(g.role for g in gpus),
            requests=requests,
            iterations=iterations,
            gpu_offsets=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
            reads=reads,
            stopped_at_ns=stopped_at_ns,
            cap_ns=cap_ns,
            n_events=n_events,
            kv_capacity_tokens=np.array(kv_capacity_tokens, dtype=np.int64) if kv else None,
            kv_link=kv_link,
            kv_peak_tokens=np.array([g.kv_peak for g in gpus], dtype=np.int64) if kv else None,
            kv_held_at_stop=np.array([g.kv_used for g in gpus], dtype=np.int64) if kv else None,
            cached_tokens=None if cached_tokens is None else np.array(cached_tokens, dtype=np.int64),
        )

    def word_rows(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For requests `rows` (indices into `requests`): global iteration row of word 2 and
        how many of words 2..n were written before the run stopped."""
        r = self.requests
        gpu = r["writing_gpu"][rows]
        # a split reply has its writing GPU from word 1 on, but joins it only when its ship
        # ends: until then (a run capped mid-ship) it has no words 2..n
        has_writer = (gpu >= 0) & (r["join_iteration"][rows] >= 0)
        first = np.where(has_writer, self.gpu_offsets[np.maximum(gpu, 0)] + r["join_iteration"][rows], 0)
        end = np.where(has_writer, self.gpu_offsets[np.maximum(gpu, 0) + 1], 0)
        wanted = np.where(has_writer, r["n_reply_words"][rows] - 1, 0)
        written = np.clip(np.minimum(wanted, end - first), 0, None)
        return first, written

    def word_times(
        self, rows: np.ndarray, ns_per_unit: float | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every written word of requests `rows`: (request id, word number from 1, time).

        Times are int64 ns, or float64 `ns / ns_per_unit` if that is given (1e9: seconds).
        Request ids are int32 and word numbers int16 when they fit (else int64, int32). The
        result is built a block of requests at a time, so the temporaries stay small beside it.
        """
        r = self.requests
        first, written = self.word_rows(rows)  # global iteration row of word 2
        first_at = r["first_word_at_ns"][rows]
        per_request = written + (first_at >= 0)  # a reply with words 2.. always has word 1
        ends = np.cumsum(per_request)
        total = int(ends[-1]) if len(ends) else 0
        ids = r["request_id"][rows]
        id_type = np.int32 if not len(ids) or ids.max() < 2**31 else np.int64
        n_max = int(r["n_reply_words"].max()) if len(r["n_reply_words"]) else 0
        word_type = np.int16 if n_max < 2**15 else np.int32
        ended = self.iterations["ended_at_ns"]
        if ns_per_unit is not None:
            ended, first_at = ended / ns_per_unit, first_at / ns_per_unit
        request_id = np.empty(total, id_type)
        word = np.empty(total, word_type)
        at = np.empty(total, ended.dtype)

        # blocks of requests holding about WORDS_PER_BLOCK words each
        cuts = np.searchsorted(ends, np.arange(WORDS_PER_BLOCK, total, WORDS_PER_BLOCK), side="right")
        bounds = np.concatenate([[0], cuts, [len(ends)]])
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            if lo == hi:
                continue
            n = per_request[lo:hi]
            out = slice(int(ends[lo] - n[0]), int(ends[hi - 1]))
            starts = np.cumsum(n) - n  # block offset of each request's word 1
            offset = np.arange(out.stop - out.start) - np.repeat(starts, n)  # word number - 1
            request_id[out] = np.repeat(ids[lo:hi], n)
            word[out] = offset + 1
            # word k >= 2 is the end of global iteration row first + k - 2; word 1 is set below
            row = np.repeat(first[lo:hi] - 1, n) + offset
            at[out] = ended[np.clip(row, 0, len(ended) - 1)]  # (rows of word 1 are clipped)
            has_words = n > 0
            at[out][starts[has_words]] = first_at[lo:hi][has_words]
        return request_id, word, at


#: words built per block by `ArrangementRecords.word_times` (bounds its temporaries)
WORDS_PER_BLOCK = 1 << 20


def _int_table(rows, n_rows: int, n_columns: int) -> np.ndarray:
    """An (n_rows, n_columns) int64 array from an iterable of equal-length tuples."""
    flat = np.fromiter(chain.from_iterable(rows), np.int64, n_rows * n_columns)
    return flat.reshape(n_rows, n_columns)
