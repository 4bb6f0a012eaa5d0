"""What a run leaves behind: plain numpy arrays, one set per arrangement.

The model fills flat arrays during the run and hands them to `collect`, which turns them into
one set of numpy arrays (this module knows nothing of the engine). A GPU logs its iterations as
RUNS, not one by one: a run is one or more back-to-back iterations of one batch (a repeat,
model/repeats.py, or a single iteration), one row for all of them, expanded here with numpy
(`GpuLog`): a repeat's records cost one row however many iterations it holds. Word times
are not stored: words 2..n of a reply end consecutive *writing* iterations of its writing GPU
from `join_iteration` on, derived on demand through one view (`writes`, `stretches`: model/words.py)
that every consumer reads.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import chain
from operator import attrgetter
from typing import Protocol

import numpy as np

from ..workload.speculative import stretch_iterations, writing_iterations
from .words import STRETCH_LOG_FIELDS, Stretches, WriteView, grouped_counts, grouped_word_times, in_order

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


class GpuLog:
    """A GPU's records, the log part of its state (docs/architecture.md, "Owned parts"): flat int64
    logs (array('q')) that only this module writes; the GPU and its repeats call its methods.

    One row per run of back-to-back iterations: when its first started, how long each took
    (`runs_duration` >= 0), or, for growing durations (E2, E3, E7), -1 - the offset in `runs_ends`
    of its iterations' ends after that start; the index after its last iteration (iterations are
    numbered from 0, each run going on from the one before); replies written and prompt tokens
    read by each of its iterations."""

    __slots__ = ("runs_start", "runs_duration", "runs_stop", "runs_replies", "runs_tokens", "runs_ends", "reads_log",
                 "kv_used_tokens")

    def __init__(self) -> None:
        self.runs_start = array("q")
        self.runs_duration = array("q")
        self.runs_stop = array("q")
        self.runs_replies = array("q")
        self.runs_tokens = array("q")
        self.runs_ends = array("q")  # E2, E3, E7: the ends after each growing run's start, run after run
        self.reads_log = array("q")  # iteration, request id, tokens; iteration, ...
        self.kv_used_tokens = array("q")  # E4: tokens held once each iteration's own reservations are made

    def writers(self) -> tuple[Callable[[int], None], Callable[[int], None], Callable[[int], None], Callable[[int], None],
                               Callable[[int], None], Callable[[list[int]], None]]:
        """The writers of a run of one iteration (its start, duration, stop, replies, tokens) and of its reads
        ([iteration, request id, tokens], a list: half extend's cost with a tuple), handed out by this part to the
        GPU's loop, the hottest path, which calls them at each iteration end: one method call more there costs
        2-3% of a run's Python opcodes (`benchmarks/ab.py --opcodes`). This module still chooses what they write."""
        return (self.runs_start.append, self.runs_duration.append, self.runs_stop.append, self.runs_replies.append,
                self.runs_tokens.append, self.reads_log.fromlist)

    def iterations(self, started: int, duration: int, ends: list[int] | None, index: int, count: int, n_replies: int,
            n_tokens: int, head: int) -> None:
        """A repeat's first `count` iterations from `index` as one run (model/repeats.py): `duration` each,
        or growing (`ends`, E2, E3, E7); each reading `n_tokens` of prompt `head` (-1: none)."""
        self.runs_start.append(started)
        if ends is None:
            self.runs_duration.append(duration)
        else:  # (E2, E3, E7: its ends after its start)
            self.runs_duration.append(-1 - len(self.runs_ends))
            self.runs_ends.fromlist(ends[:count])
        self.runs_stop.append(index + count)
        self.runs_replies.append(n_replies)
        self.runs_tokens.append(n_tokens)
        if head >= 0:  # iteration, request id, tokens; ...
            log = [0, head, n_tokens] * count  # (a list: 25% under an array built the same way)
            log[0::3] = range(index, index + count)
            self.reads_log.fromlist(log)

    def kv_writer(self) -> Callable[[int], None]:
        """E4: the writer of a start's KV memory held, once its reservations are made: the log's own, handed out
        to the planner's start (model/planner.py), called at every start under E4 and E9 (as `writers`)."""
        return self.kv_used_tokens.append

    def kv_each(self, held: list[int]) -> None:
        """E4 (E9): starts of a repeat, each with the tokens it holds."""
        self.kv_used_tokens.fromlist(held)

    def kv_repeated(self, used: int, k: int) -> None:
        """E4: `k` starts of a repeat, each holding `used` tokens."""
        self.kv_used_tokens.extend(array("q", (used,)) * k)


class Held(Protocol):
    """E4: what `collect` reads of a GPU's KV memory (model/memory.py's `Memory`)."""

    @property
    def used(self) -> int: ...

    @property
    def peak(self) -> int: ...


class Arrived(Protocol):
    """What `collect` reads of a request that arrived (model/request.py's `Request`): the REQUEST_FIELDS, read by
    name (`attrgetter`), and whether it is measured; E9 also its `n_preemptions` and `dropped_at_ns`."""

    @property
    def measured(self) -> bool: ...


class Recorded(Protocol):
    """What `collect` reads of a GPU: its role, its records and its KV memory's peak and tokens held (E4)."""

    @property
    def role(self) -> str: ...

    @property
    def log(self) -> GpuLog: ...

    @property
    def memory(self) -> Held: ...


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
    # E9 (paged KV): gpu, request_id, at_ns of every preemption, in time order per GPU; None when off.
    # With it, `requests` also has n_preemptions and dropped_at_ns (-1: not dropped)
    preemptions: dict[str, np.ndarray] | None = None
    # a model that moves replies logs their stretches (STRETCH_LOG_FIELDS); None: one each, from `requests`
    stretch_log: dict[str, np.ndarray] | None = None
    switches: dict[str, list[int | str]] | None = None  # E12: every move (model/roles.py SWITCH_FIELDS); None: static roles
    cached_tokens: np.ndarray | None = None  # E13: per request, prompt tokens found cached; None: no cache
    # E16: (draft tokens, acceptance, each request's key): a reply's words 2..n fall on its writing iterations by
    # its draws (workload/speculative.py), one or more each; a stretch's `n` counts iterations; None: one word each
    speculative: tuple[int, float, np.ndarray] | None = None

    @property
    def is_split(self) -> bool:
        """Whether prompts were read on other GPUs than their replies were written on (the engine
        records a split's `kv_link`, and none for any other arrangement)."""
        return self.kv_link is not None

    @property
    def n_unfinished(self) -> int:
        """Measured requests the run stopped before they finished (a dropped one, E9, is not one)."""
        r = self.requests
        left = r["measured"] & (r["finished_at_ns"] < 0)
        if "dropped_at_ns" in r:
            left &= r["dropped_at_ns"] < 0
        return int(left.sum())

    @property
    def capped(self) -> bool:
        """The safety cap ended the run before every measured reply finished (D6)."""
        return self.n_unfinished > 0

    @classmethod
    def collect(cls, *, name: str, kind: str, gpus: Sequence[Recorded], arrived: Sequence[Arrived],
                stopped_at_ns: int, cap_ns: int, n_events: int, kv_capacity_tokens: Sequence[int] | None = None,
                kv_link: str | None = None, stretch_log: np.ndarray | None = None,
                preemption_logs: Sequence[array[int]] | None = None, cached_tokens: Sequence[int] | None = None,
                speculative: tuple[int, float, np.ndarray] | None = None, start_roles: tuple[str, ...] | None = None,
                switches: dict[str, list[int | str]] | None = None) -> ArrangementRecords:
        """The records of a finished run: `arrived` holds each request that arrived (objects
        with the REQUEST_FIELDS and `measured`), in arrival order; `stretch_log`, if the model
        moved replies, an int64 table with one row of STRETCH_LOG_FIELDS per stretch; E12: the
        GPUs' roles at the start (`start_roles`, else their roles now) and every move (`switches`)."""
        table = _int_table(map(attrgetter(*REQUEST_FIELDS), arrived), len(arrived), len(REQUEST_FIELDS))
        requests = dict(zip(REQUEST_FIELDS, table.T.copy()))
        requests["measured"] = np.fromiter((r.measured for r in arrived), bool, len(arrived))
        preemptions = None
        if preemption_logs is not None:  # E9: one flat (request id, ns) log per GPU
            for f in ("n_preemptions", "dropped_at_ns"):
                requests[f] = np.fromiter(map(attrgetter(f), arrived), np.int64, len(arrived))
            pairs = [np.frombuffer(log, dtype=np.int64).reshape(-1, 2) for log in preemption_logs]
            table = np.concatenate(pairs) if pairs else np.zeros((0, 2), np.int64)
            preemptions = {"gpu": np.repeat(np.arange(len(pairs), dtype=np.int64), [len(p) for p in pairs]),
                           "request_id": table[:, 0].copy(), "at_ns": table[:, 1].copy()}
        roles, kv_peak, kv_held = [g.role for g in gpus], [g.memory.peak for g in gpus], [g.memory.used for g in gpus]
        gpu_logs = [g.log for g in gpus]  # (`GpuLog`)
        counts = [n_recorded(g) for g in gpu_logs]
        iterations = {
            "gpu": np.repeat(np.arange(len(gpu_logs), dtype=np.int64), counts),
            "iteration": np.concatenate([np.arange(c, dtype=np.int64) for c in counts]),
        }
        fields = ["started_at_ns", "ended_at_ns", "n_replies_written", "n_prompt_tokens_read"]
        expanded = [_iterations(g) for g in gpu_logs]
        for i, f in enumerate(fields):
            iterations[f] = np.concatenate([e[i] for e in expanded])
        kv = kv_capacity_tokens is not None
        if kv:  # (kv_used_tokens is logged at the start: cut to the ends)
            iterations["kv_used_tokens"] = np.concatenate([np.frombuffer(g.kv_used_tokens, dtype=np.int64)[:n]
                                                           for g, n in zip(gpu_logs, counts)])
        logs = [np.frombuffer(g.reads_log, dtype=np.int64).reshape(-1, 3) for g in gpu_logs]
        reads_table = np.concatenate(logs)
        reads = {
            "gpu": np.repeat(np.arange(len(gpu_logs), dtype=np.int64), [len(x) for x in logs]),
            "iteration": reads_table[:, 0],
            "request_id": reads_table[:, 1],
            "n_tokens": reads_table[:, 2],
        }
        return cls(
            name=name,
            kind=kind,
            gpu_roles=tuple(roles) if start_roles is None else start_roles,
            requests=requests,
            iterations=iterations,
            gpu_offsets=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
            reads=reads,
            stopped_at_ns=stopped_at_ns,
            cap_ns=cap_ns,
            n_events=n_events,
            kv_capacity_tokens=np.array(kv_capacity_tokens, dtype=np.int64) if kv else None,
            kv_link=kv_link,
            kv_peak_tokens=np.array(kv_peak, dtype=np.int64) if kv else None,
            kv_held_at_stop=np.array(kv_held, dtype=np.int64) if kv else None,
            preemptions=preemptions,
            stretch_log=None if stretch_log is None else dict(zip(STRETCH_LOG_FIELDS, stretch_log.T.copy())),
            cached_tokens=None if cached_tokens is None else np.array(cached_tokens, dtype=np.int64),
            speculative=speculative,
            switches=switches,
        )

    @cached_property
    def writes(self) -> WriteView:
        """Each GPU's writing iterations, in order (model/words.py)."""
        return WriteView.of(self.iterations, self.gpu_offsets)

    @cached_property
    def stretches(self) -> Stretches:
        """Every reply's stretches of words on the writing iterations (model/words.py)."""
        if self.speculative is not None:  # E16: a stretch of n iterations (writing n or more words)
            if self.stretch_log is None:
                requests = {**self.requests, "n_reply_words": self._speculative_words[0] + 1}
                return Stretches.derived(requests, self.gpu_offsets, self.writes)
            log = {**in_order(self.stretch_log), "n_words": self._speculative_words[0]}
            return Stretches.logged(log, len(self.requests["request_id"]), self.gpu_offsets, self.writes)
        if self.stretch_log is None:
            return Stretches.derived(self.requests, self.gpu_offsets, self.writes)
        return Stretches.logged(self.stretch_log, len(self.requests["request_id"]), self.gpu_offsets, self.writes)

    @cached_property
    def _speculative_words(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """E16: per stretch (one a request, or the logged ones by request and word), the writing iterations
        its words take and, word by word, the one of them (from 0) that writes it, each stretch's words
        restarting its reply's plan (docs/rules.md#r104); and each stretch's words as planned."""
        tokens, acceptance, keys = self.speculative  # type: ignore[misc]  # (E16 on)
        if self.stretch_log is None:
            n_words = self.requests["n_reply_words"]
            return (*writing_iterations(keys, n_words, tokens, acceptance), np.maximum(n_words - 1, 0))
        log = in_order(self.stretch_log)
        planned = np.maximum(log["n_words"], 0)
        return (*stretch_iterations(keys[log["request_id"]], log["first_word"], planned, tokens, acceptance), planned)

    def word_times(
        self, rows: np.ndarray, ns_per_unit: float | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every written word of requests `rows`: (request id, word number from 1, time).

        Times are int64 ns, or float64 `ns / ns_per_unit` if that is given (1e9: seconds).
        Request ids are int32 and word numbers int16 when they fit (else int64, int32). The
        result is built a block of stretches at a time, so the temporaries stay small beside it.
        """
        r = self.requests
        st = self.stretches
        if self.speculative is not None:
            return self._speculative_word_times(np.asarray(rows, np.int64), ns_per_unit)
        s = st.of_requests(rows)
        first, written, first_word = st.first[s], st.n[s], st.first_word[s]
        lead_at = st.lead_at[s]
        own = st.lead_written[s] & (lead_at >= 0)  # the stretch wrote the word before `first_word`
        per_stretch = written + own
        ends = np.cumsum(per_stretch)
        total = int(ends[-1]) if len(ends) else 0
        ids = r["request_id"][st.request[s]]
        id_type = np.int32 if not len(ids) or ids.max() < 2**31 else np.int64
        n_max = int(r["n_reply_words"].max()) if len(r["n_reply_words"]) else 0
        word_type = np.int16 if n_max < 2**15 else np.int32
        ended = self.writes.ended
        if ns_per_unit is not None:
            ended, lead_at = ended / ns_per_unit, lead_at / ns_per_unit
        request_id = np.empty(total, id_type)
        word = np.empty(total, word_type)
        at = np.empty(total, ended.dtype)

        # blocks of stretches holding about WORDS_PER_BLOCK words each
        cuts = np.searchsorted(ends, np.arange(WORDS_PER_BLOCK, total, WORDS_PER_BLOCK), side="right")
        bounds = np.concatenate([[0], cuts, [len(ends)]])
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            if lo == hi:
                continue
            n = per_stretch[lo:hi]
            out = slice(int(ends[lo] - n[0]), int(ends[hi - 1]))
            starts = np.cumsum(n) - n  # block offset of each stretch's first word
            offset = np.arange(out.stop - out.start) - np.repeat(starts, n)  # words into the stretch
            own_b = own[lo:hi]
            request_id[out] = np.repeat(ids[lo:hi], n)
            # the stretch's own lead word is word first_word - 1, then one word per write position
            word[out] = offset + np.repeat(first_word[lo:hi] - own_b, n)
            row = np.repeat(first[lo:hi] - own_b, n) + offset
            at[out] = ended[np.clip(row, 0, max(len(ended) - 1, 0))] if len(ended) else 0  # (lead words set below)
            has_lead = own_b & (n > 0)
            at[out][starts[has_lead]] = lead_at[lo:hi][has_lead]
        return request_id, word, at


    @cached_property
    def iteration_words(self) -> np.ndarray | None:
        """E16: the words each writing iteration that ran wrote of each stretch, stretch by stretch
        (`stretches.n[s]` for stretch s, in `stretches`' order); None without E16 (one word each)."""
        if self.speculative is None:
            return None
        _, ordinals, planned = self._speculative_words
        return grouped_counts(self.stretches, ordinals, planned)

    def _speculative_word_times(self, rows: np.ndarray, ns_per_unit: float | None
                                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`word_times` under E16: each stretch's word before it (if its own: word 1, a re-read's), then
        each word at the end of the writing iteration of its stretch that writes it (several words of one
        share its end), for the iterations that ran before the run stopped (model/words.py)."""
        _, ordinals, planned = self._speculative_words
        n_words = self.requests["n_reply_words"]
        n_max = int(n_words.max()) if len(n_words) else 0
        return grouped_word_times(self.stretches, self.writes, rows, ordinals, planned, self.requests["request_id"],
                                  n_max, ns_per_unit)


def n_recorded(g: GpuLog) -> int:
    """How many of the GPU's iterations are recorded so far."""
    return g.runs_stop[-1] if g.runs_stop else 0


def iteration_end(g: GpuLog, i: int) -> int:
    """When the GPU's recorded iteration `i` ended (ns)."""
    k = bisect.bisect_right(g.runs_stop, i)
    j = i - (g.runs_stop[k - 1] if k else 0)  # (its place in its run)
    d = g.runs_duration[k]
    end: int = g.runs_start[k] + ((j + 1) * d if d >= 0 else g.runs_ends[-1 - d + j])
    return end


def last_write_end(g: GpuLog) -> int:
    """The end (ns) of the GPU's last iteration that wrote words: under E10 a seated reply's last
    word before a preemption (prompt-only iterations may follow it)."""
    k = len(g.runs_replies) - 1
    while not g.runs_replies[k]:
        k -= 1
    return iteration_end(g, g.runs_stop[k] - 1)


def _iterations(g: GpuLog) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The GPU's runs expanded to one row per iteration: started_at_ns, ended_at_ns,
    n_replies_written, n_prompt_tokens_read (`GpuLog`)."""
    stop = np.frombuffer(g.runs_stop, dtype=np.int64)
    counts = np.diff(stop, prepend=0)
    j = np.arange(int(stop[-1]) if len(stop) else 0, dtype=np.int64) - np.repeat(stop - counts, counts)
    start = np.repeat(np.frombuffer(g.runs_start, dtype=np.int64), counts)
    d = np.repeat(np.frombuffer(g.runs_duration, dtype=np.int64), counts)
    ended = start + (j + 1) * d
    grows = d < 0
    if grows.any():  # (E2, E3, E7)
        ended[grows] = start[grows] + np.frombuffer(g.runs_ends, dtype=np.int64)[j[grows] - 1 - d[grows]]
    started = start  # (the first of each run; each later one starts at the end before it)
    later = np.flatnonzero(j)
    started[later] = ended[later - 1]
    return (started, ended, np.repeat(np.frombuffer(g.runs_replies, dtype=np.int64), counts),
            np.repeat(np.frombuffer(g.runs_tokens, dtype=np.int64), counts))


#: words built per block by `ArrangementRecords.word_times` (bounds its temporaries)
WORDS_PER_BLOCK = 1 << 20


def _int_table(rows: Iterable[tuple[int, ...]], n_rows: int, n_columns: int) -> np.ndarray:
    """An (n_rows, n_columns) int64 array from an iterable of equal-length tuples."""
    flat = np.fromiter(chain.from_iterable(rows), np.int64, n_rows * n_columns)
    return flat.reshape(n_rows, n_columns)
