"""E9 with E10: paged KV memory with preemption (model/paged_kv.py) on a GPU whose iterations
read prompts or write words, never both (model/unmixed.py); docs/rules.md, readings R61-R67.

The choice between E10a and E10b is made first, with E9's admission open (nothing is preempted
yet): if the GPU can take a waiting prompt (E9b: its blocks plus one free, no reply swapped out;
re-reads wait first, E9e), the iteration reads prompts and gives no block to a reply, preempts
nothing and swaps nothing in. Otherwise it writes: it seats replies (E8), gives their due
blocks, preempting when none is free (E9c), swaps replies back in if it preempted nothing
(E9f), and reads nothing; if it preempted every reply it would write, it is chosen again with
admission open (E9d). E9's block schedule and last words are kept in *writing* iterations
(`Gpu.n_writes`, as model/unmixed.py keeps last words), so a reply's blocks fall due at its
words, not at prompt-only iterations; `join_iteration` and the stretches name real iterations.

`starter` builds this start once per run (model/option_starts.py chooses it, with the durations
of the terms that are on); `writing_bound` bounds its repeats (model/repeats.py).
"""

from __future__ import annotations

from collections.abc import Callable
from heapq import heappop, heappush
from typing import Any

from .kv_take import paged_take
from .option_paths import duration
from .repeats import _blocks_free

Start = Callable[[int, int, Any], tuple[int, Any, int, int]]  # (now, index, host) -> replies, reads, tokens, duration


def starter(gpu: Any, reading_ns: Callable[[int, int, int, int, Any], int], writing_ns: Callable[[int, int], int]) -> Start:
    """`gpu`'s start of an iteration under E9 and E10 for its whole run (it replaces `Gpu._options_start`):
    (replies written, prompts taken, tokens, duration; -1 when it has nothing to do after preempting, E9d).
    `reading_ns(now, index, 0, n_tokens, taken)` and `writing_ns(n_replies, key)` are the durations of an
    iteration that reads and of one that writes (model/option_starts.py: `option_paths.duration`'s terms)."""
    kv = gpu.paged
    waiting, queue, room = gpu.waiting, gpu.seat_queue, 1 << 62 if gpu.seats is None else gpu.seats
    blocks, phases, block, capacity, seat = kv.blocks, kv.phases, kv.block, gpu.kv_capacity, kv.seat
    by_write, leaving, leaving_order, log = gpu.leaving_by_write, gpu.leaving, gpu.leaving_order, gpu.kv_used_tokens.append

    def start(now: int, index: int, host: Any) -> tuple[int, Any, int, int]:
        if kv.dirty:  # (what the last start's preemptions or swaps set, reset: `PagedKv.start`)
            kv.blocked, kv.moved_tokens, kv.queue_at, kv.dirty = False, 0, -1, False
        if waiting:  # E10a, E9b (R61): a begun head, or one admitted (`PagedKv.can_take`, inline), is read first
            head = waiting[0]
            if head.unread_tokens < head.read_size or not kv.swapped and head.read_size <= kv.top - gpu.kv_used:
                taken, n_tokens = paged_take(kv, now, 0)
                log(gpu.kv_used)
                return 0, taken, n_tokens, reading_ns(now, index, 0, n_tokens, taken)
        # E10b: seats, blocks, preemptions, swap-ins (R62, R63), at writing iteration `key`
        key, n = gpu.n_writes, gpu.n_seated
        if queue and n < room:
            while queue and n < room:
                n += 1
                seat(queue.popleft(), index, key)
            gpu.n_seated = n
        due = blocks.due(key) if kv.pending else phases[key % block]  # (`PagedKv.start`, inline)
        if due:
            used = gpu.kv_used + len(due) * block
            if used <= capacity:  # (room for all: no order to keep)
                gpu.kv_used = used
                if used > gpu.kv_peak:
                    gpu.kv_peak = used
            else:
                kv._short(due, key, now)
                n = gpu.n_seated
        if kv.swapped and not kv.blocked:
            kv.swap_in(index, key)
            n = gpu.n_seated
        if kv.dropped:
            host.requests_dropped(kv.dropped, now)
            kv.dropped = []
        if not n and kv.blocked:  # E9d: every reply preempted; chosen again, admission open (R64)
            kv.blocked = False
            if kv.swapped:
                kv.swap_in(index, key)
                n = gpu.n_seated
            if not n:
                taken, n_tokens = paged_take(kv, now, 0) if waiting else ([], 0)
                if not taken:
                    gpu.n_started = index  # (no iteration: the GPU waits for a join or freed memory)
                    return 0, [], 0, -1
                log(gpu.kv_used)
                d = reading_ns(now, index, 0, n_tokens, taken)
                return 0, taken, n_tokens, d + kv.swap_ns(kv.moved_tokens) if kv.moved_tokens else d
        if n:  # its writing iteration `key`: the replies whose last word it writes leave at its end (`write_started`)
            gpu.n_writes = key + 1
            if out := by_write.pop(key, None):
                leaving[index] = out
                heappush(leaving_order, index)
        log(gpu.kv_used)
        if kv.moved_tokens:
            return n, (), 0, writing_ns(n, key) + kv.swap_ns(kv.moved_tokens)  # E9f: swapped out and in, rounded on its own
        return n, (), 0, writing_ns(n, key)
    return start


def unmixed_iteration(kv: Any, now: int, index: int, host: Any) -> tuple[int, list, int, int]:
    """`PagedKv._unmixed` (`Gpu._options_start` under E9 and E10), `starter`'s start with `option_paths.duration`
    built for this one call: `Gpu.run` builds it once per run instead (model/option_starts.py)."""
    gpu = kv.gpu
    return starter(gpu, lambda now, index, n, n_tokens, taken: duration(gpu, now, index, n, n_tokens, taken),
                   lambda n, key: duration(gpu, now, key, n, 0, ()))(now, index, host)


def writing_bound(gpu: Any, index: int, taken: Any, n_replies: int, n: int) -> int:
    """`repeats.option_bound` under E9 and E10: a repeat of writing iterations runs up to the first writing
    iteration that a reply leaves after (`unmixed.first_leaving_write`: the keys `PagedKv.seat` gives, in the
    heap `Gpu.write_order`, a preempted reply's left there until popped), and while every due block is free
    (`repeats._blocks_free` from its key, `Gpu.n_writes - 1`); prompt-only iterations give no block. After a
    start that preempted or swapped, one iteration alone (`option_bound`)."""
    paged = gpu.paged
    if paged.blocked or paged.moved_tokens:
        return 1
    if n_replies:
        if by_write := gpu.leaving_by_write:
            order = gpu.write_order
            while order[0] not in by_write:
                heappop(order)
            n = min(n, max(1, order[0] - gpu.n_writes + 2))
            if n < 2:
                return n
        return _blocks_free(gpu, paged, gpu.n_writes - 1, n_replies, n)
    return n


def last_write_end(gpu: Any) -> int:
    """The end (ns) of the GPU's last iteration that wrote words: under E10 a seated reply's last
    word before a preemption (prompt-only iterations may follow it)."""
    written = gpu.n_replies_written
    i = len(written) - 1
    while not written[i]:
        i -= 1
    return gpu.ended_at_ns[i]
