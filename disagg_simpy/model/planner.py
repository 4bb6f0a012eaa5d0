"""The iteration planner (issue 36): ONE start of an iteration under the options, composed once per
run from small policies with fixed signatures, each owning one concern:

- seating (`Seat`, E8's seats and E10's queue): `seat(index, key) -> replies written`;
- memory (`Paged`, E9: model/paged_kv.py's `PagedKv`, after seating: the due blocks, preemptions,
  swap-ins, E9d's second look; `Log`, E4 and E9: what a start logs of the KV memory held; E4's
  reservations are made by the admission, `kv_take.take_with_options`);
- prompt admission (`Admit`, D4 with E4d, E8's budget, E9b, E13): `admit(now, n_written) -> (reads, tokens)`;
- cost (`Reading`, `Writing`: model/costs.py's durations chosen once, or under E12, whose moves change
  a GPU's cost, the cost object's general duration each time; E9f's swap time added on its own).

E10 (`mixed_iterations: false`) is the same composition with the other order: a prompt it can admit
first, reading only; else the seated replies, writing only, counted in writing iterations.

With every option off the GPU's loop (model/gpu.py) takes D4's tokens and M1's cost inline instead
(a kept fusion, for speed: docs/performance.md); `Gpu.fused = False` runs this composition there too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from .gpu_state import GpuState, Reads, StartHost
from .kv_take import paged_admission
from .option_paths import take

Start = Callable[[int, int, StartHost], tuple[int, Reads, int, int]]  # (now, index, host) -> replies, reads, tokens, duration
Seat = Callable[[int, int], int]  # (index, writing key) -> replies written
Admit = Callable[[int, int], tuple[Reads, int]]  # (now, replies written) -> reads, tokens
Log = Callable[[int], None] | None  # at a start: E4's log of the memory held (`GpuLog.kv_writer`: one call, not two)
Reading = Callable[[int, int, int, int, Reads], int]  # (now, index, replies, tokens, reads) -> ns
Writing = Callable[[int, int], int]  # (replies, words' iteration) -> ns


class Paged(Protocol):
    """E9's memory work at a start (model/paged_kv.py's `PagedKv`), between seating and admission."""

    dirty: bool  # set by the last start's preemptions or swaps
    blocked: bool  # this start preempted: it admits nothing new (E9d)
    moved_tokens: int  # tokens this start swapped out or in (E9f: `with_swap` adds their time)

    def reset(self) -> None: ...

    def start_blocks(self, now: int, index: int, key: int, host: StartHost, n_written: int) -> int: ...

    def reopen(self, index: int, key: int | None) -> int: ...

    def with_swap(self, duration: int) -> int: ...


def planner(gpu: GpuState) -> Start:
    """`gpu`'s start of an iteration under the options for its whole run: its policies, composed:
    (replies written, prompt tokens taken, how many, duration; -1 when E9 preempted every reply
    and it has nothing to take, E9d: no iteration)."""
    return compose(gpu, seating(gpu), admission(gpu), memory_log(gpu), *durations(gpu), gpu.paged)


def compose(gpu: GpuState, seat: Seat, admit: Admit, log: Log, reading: Reading, writing: Writing,
            paged: Paged | None = None) -> Start:
    """The one start: seat, memory (E9), admit, log, cost, in D4's order (E10: a prompt first). (The
    policies' results are read inline where a call would do nothing: E4's log writes the memory held,
    `memory.used`; E9f's swap time is added only when the start moved KV, `paged.moved_tokens`.)"""
    waiting, memory = gpu.queue.waiting, gpu.memory

    if not gpu.batch.mixed:  # E10: a prompt it can admit first, reading only; else the seated replies
        batch = gpu.batch

        def start_unmixed(now: int, index: int, host: StartHost) -> tuple[int, Reads, int, int]:
            if paged is not None and paged.dirty:
                paged.reset()  # (what the last start's preemptions or swaps set)
            if waiting:  # (E9: admission open, nothing preempted yet, R61)
                taken, n_tokens = admit(now, 0)
                if taken:
                    if log is not None:
                        log(memory.used)
                    return 0, taken, n_tokens, reading(now, index, 0, n_tokens, taken)
            key = batch.n_writes
            n = seat(index, key)
            if paged is not None:  # E9 at writing iteration `key` (R62, R63)
                n = paged.start_blocks(now, index, key, host, n)
                if not n and paged.blocked:  # E9d: every reply preempted; chosen again, admission open (R64)
                    n = paged.reopen(index, key)
                    if not n:
                        taken, n_tokens = admit(now, 0) if waiting else ((), 0)
                        if not taken:
                            gpu.count_started(index)  # (no iteration: the GPU waits for a join or freed memory)
                            return 0, (), 0, -1
                        if log is not None:
                            log(memory.used)
                        d = reading(now, index, 0, n_tokens, taken)
                        return 0, taken, n_tokens, paged.with_swap(d) if paged.moved_tokens else d
            if n:  # its writing iteration `key`: the replies whose last word it writes leave at its end
                batch.write_started(key, index)
            if log is not None:
                log(memory.used)
            if paged is not None and paged.moved_tokens:
                return n, (), 0, paged.with_swap(writing(n, key))
            return n, (), 0, writing(n, key)
        return start_unmixed

    def start(now: int, index: int, host: StartHost) -> tuple[int, Reads, int, int]:
        n = seat(index, -1)
        if paged is not None:  # E9: the seated replies' due blocks, preemptions, swap-ins (E9b-f)
            if paged.dirty:
                paged.reset()
            n = paged.start_blocks(now, index, index, host, n)
            taken, n_tokens = admit(now, n) if waiting else ((), 0)
            if not n and not taken and paged.blocked:  # E9d: it preempted every reply and has nothing begun
                n = paged.reopen(index, None)
                if waiting:
                    taken, n_tokens = admit(now, n)
                if not n and not taken:
                    gpu.count_started(index)  # (no iteration: the GPU waits for a join or freed memory)
                    return 0, (), 0, -1
            if log is not None:
                log(memory.used)
            d = reading(now, index, n, n_tokens, taken) if taken else writing(n, index)
            return n, taken, n_tokens, paged.with_swap(d) if paged.moved_tokens else d
        if waiting:
            taken, n_tokens = admit(now, n)
            if taken:
                if log is not None:
                    log(memory.used)
                return n, taken, n_tokens, reading(now, index, n, n_tokens, taken)
        if log is not None:
            log(memory.used)
        return n, (), 0, writing(n, index)
    return start


def seating(gpu: GpuState) -> Seat:
    """Who is written (E8, E10): every reply in progress, or those seated, the waiting ones taking
    the free seats in the order they joined (E10: at writing iteration `key`)."""
    if not gpu.batch.queue_replies:
        batch = gpu.batch

        def every(index: int, key: int) -> int:  # (`key` unused: a mixing GPU keys words by iteration)
            n: int = batch.n_replies
            return n
        return every
    batch = gpu.batch
    if gpu.paged is not None:  # E9: a reply seated takes its blocks (`PagedKv.seat_reply`)
        batch.use_seater(gpu.paged.seat_reply)
    return batch.seated


def admission(gpu: GpuState) -> Admit:
    """The prompt tokens an iteration starting now reads, writing `n_written` replies (D4), each taking
    `CostNs.tokens_per_reply` of E8's budget (1; E16: 1 + its draft tokens, R84): `token_admission`'s."""
    admit = token_admission(gpu)
    per = gpu.cost.tokens_per_reply
    if per == 1 or gpu.max_tokens is None:
        return admit
    return lambda now, n_written: admit(now, n_written * per)


def token_admission(gpu: GpuState) -> Admit:
    """The prompt tokens an iteration starting now reads, `n_written` tokens of E8's budget taken by the replies it
    writes (D4): with a KV limit, a prefix cache or role changes (E4d, E13, E12: its chunk may change), the general
    choice (`option_paths.take`, also for E8's cap on prompts, R90); else D4's plain one, E8's budget looked up once."""
    if gpu.paged is not None:  # E9b (model/kv_take.py)
        return paged_admission(gpu.paged)
    if gpu.memory.capacity is not None or gpu.prefix is not None or gpu.changes_role or gpu.max_requests is not None:
        return lambda now, n_written: take(gpu, now, n_written)
    take_tokens = gpu.queue.take
    limit, chunk = gpu.max_tokens, gpu.queue.chunk_tokens
    if limit is None:
        return lambda now, n_written: take_tokens(now)
    if chunk is None:  # E8, whole prompts (model/prompts.py: the queue's own, E8's budget its `max_tokens`)
        return gpu.queue.take_whole

    def chunked(now: int, n_written: int) -> tuple[Reads, int]:
        room = limit - n_written  # E8: chunks of min(chunk_tokens, max_batch_tokens - the replies' tokens)
        if room >= chunk:
            return take_tokens(now)
        return take_tokens(now, None, room) if room else ((), 0)
    return chunked


def memory_log(gpu: GpuState) -> Log:
    """E4: each start logs the KV memory held once its reservations are made (a run stopped
    mid-iteration leaves one extra entry, which `ArrangementRecords.collect` cuts): the log's own
    writer, called with the memory held (`compose`); else nothing."""
    if gpu.memory.capacity is None:
        return None
    return gpu.log.kv_writer()


def durations(gpu: GpuState) -> tuple[Reading, Writing]:
    """An iteration's duration reading and writing only (model/costs.py's, chosen once); under role
    changes (E12), the cost object's general duration with the GPU's cost at the start."""
    if gpu.changes_role:
        def reading(now: int, index: int, n_replies: int, n_tokens: int, taken: Reads) -> int:
            d: int = gpu._duration(now, index, n_replies, n_tokens, taken)
            return d

        def writing(n_replies: int, key: int) -> int:
            d: int = gpu._duration(-1, key, n_replies, 0, ())
            return d
        return reading, writing
    return gpu.cost.reading_fn(gpu.batch), gpu.cost.writing_fn(gpu.batch)  # (E3: the batch's context sum)
