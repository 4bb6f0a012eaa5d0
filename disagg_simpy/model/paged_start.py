"""E9 on a GPU that mixes reads and writes (no E10): its start of an iteration, built once per run
(model/option_starts.py's `starter` chooses it), so what the run keeps fixed (its seat limit, its
block schedule, its capacity, its durations) is looked up once, not at each start.

A start seats replies (E8), gives the seated replies their due blocks, preempting when one is not
free (E9c), swaps replies back in if it preempted nothing (E9f), then takes prompts (D4, E8, E9b:
`kv_take.paged_take`); docs/rules.md#e9. A start with no block due and nothing to take costs a few
look-ups. With E10, model/paged_unmixed.py builds the start instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .kv_take import paged_take
from .repeats import cut_all

Start = Callable[[int, int, Any], tuple[int, Any, int, int]]  # (now, index, host) -> replies, reads, tokens, duration


def starter(gpu: Any, reading_ns: Callable[[int, int, int, int, Any], int], writing_ns: Callable[[int, int], int]) -> Start:
    """`gpu`'s start of an iteration under E9 for its whole run (in place of `Gpu._options_start`):
    (replies written, prompts taken, tokens, duration; -1 when it has nothing to do after preempting,
    E9d). `reading_ns(now, index, n_replies, n_tokens, taken)` and `writing_ns(n_replies, index)` are
    the durations of an iteration that reads and of one that only writes (model/option_starts.py:
    the cost object's durations, model/costs.py)."""
    kv = gpu.paged
    waiting, queue, seats, seat = gpu.waiting, gpu.seat_queue, gpu.seats, kv.seat
    blocks, phases, pending, block, capacity = kv.blocks, kv.phases, kv.pending, kv.block, gpu.kv_capacity
    log = gpu.kv_used_tokens.append
    swap = kv.swap  # (E9f: only under swap are replies swapped out, and back in, and KV moved)

    def start(now: int, index: int, host: Any) -> tuple[int, Any, int, int]:
        if seats is not None:  # E8: the replies waiting for a seat take the free seats in the order they joined
            n = gpu.n_seated
            if queue and n < seats:
                while queue and n < seats:
                    n += 1
                    seat(queue.popleft(), index)
                gpu.n_seated = n
        if kv.dirty:  # (what the last start's preemptions or swaps set, reset)
            kv.blocked, kv.moved_tokens, kv.queue_at, kv.dirty = False, 0, -1, False
        due = blocks.due(index) if pending else phases[index % block]  # (model/kv_blocks.py)
        if due:
            used = gpu.kv_used + len(due) * block
            if used <= capacity:  # (room for all: no order to keep; no repeat to cut)
                gpu.kv_used = used
                if used > gpu.kv_peak:
                    gpu.kv_peak = used
            else:
                kv._short(due, index, now)
        if swap and kv.swapped and not kv.blocked:
            kv.swap_in(index)
        if kv.dirty:
            if kv.blocked or kv.moved_tokens:
                cut_all(host, True)  # (E4e: memory freed, or a reply back, at a start)
            if kv.dropped:
                host.requests_dropped(kv.dropped, now)
                kv.dropped = []
        n_replies = gpu.n_seated if seats is not None else gpu.n_replies
        taken: Any  # (a list of (prompt, tokens), or () when none is read)
        if waiting and ((head := waiting[0]).unread_tokens < head.read_size or not (kv.blocked or kv.swapped) and (
                head.read_size <= kv.top - gpu.kv_used)):  # (`PagedKv.can_take`, inline: its blocks plus one free)
            taken, n_tokens = paged_take(kv, now, n_replies)
        else:
            taken, n_tokens = (), 0
        if not n_replies and not taken and kv.blocked:
            kv.blocked = False  # E9d: it preempted every reply and has nothing begun: it admits as usual
            if kv.swapped:
                kv.swap_in(index)
                n_replies = gpu.n_seated if seats is not None else gpu.n_replies
            if waiting:
                taken, n_tokens = paged_take(kv, now, n_replies)
            if not n_replies and not taken:
                gpu.n_started = index  # (no iteration: the GPU waits for a join or freed memory)
                return 0, (), 0, -1
        log(gpu.kv_used)
        duration = reading_ns(now, index, n_replies, n_tokens, taken) if taken else writing_ns(n_replies, index)
        if swap and kv.moved_tokens:
            return n_replies, taken, n_tokens, duration + kv.swap_ns(kv.moved_tokens)  # E9f: swapped KV, rounded on its own
        return n_replies, taken, n_tokens, duration
    return start
