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
"""

from __future__ import annotations

from typing import Any

from .unmixed import write_started


def unmixed_iteration(kv: Any, now: int, index: int, host: Any) -> tuple[int, list, int, int]:
    """`PagedKv.iteration` (kv) for iteration `index` of its GPU under E10: (replies written,
    prompts taken, tokens, duration; -1 when it has nothing to do after preempting, E9d)."""
    gpu = kv.gpu
    kv.blocked, kv.moved_tokens, kv.queue_at = False, 0, -1
    taken = gpu._take_with_options(0) if gpu.waiting and kv.can_take() else []  # E10a, E9b (R61)
    key, n_replies = index, 0
    if not taken:  # E10b: seats, blocks, preemptions, swap-ins (R62, R63)
        key = gpu.n_writes
        queue = gpu.seat_queue
        while queue and (gpu.seats is None or gpu.n_seated < gpu.seats):
            gpu.n_seated += 1
            kv.seat(queue.popleft(), index, key)
        kv.start(key, now, index)
        if kv.dropped:
            host.requests_dropped(kv.dropped, now)
            kv.dropped = []
        n_replies = gpu.n_seated
        if not n_replies and kv.blocked:  # E9d: every reply preempted; chosen again, admission open (R64)
            kv.blocked = False
            if kv.swapped:
                kv.swap_in(index, key)
                n_replies = gpu.n_seated
            if not n_replies:
                taken = gpu._take_with_options(0) if gpu.waiting else []
                if not taken:
                    gpu.n_started = index  # (no iteration: the GPU waits for a join or freed memory)
                    return 0, [], 0, -1
        if n_replies:
            write_started(gpu, key, index)
    taken, n_tokens = gpu._take_prompt_tokens(now, taken) if taken else ([], 0)
    gpu.kv_used_tokens.append(gpu.kv_used)
    duration = gpu._duration(now, key, n_replies, n_tokens, taken)
    if kv.moved_tokens:
        duration += kv.swap_ns(kv.moved_tokens)  # E9f: only writing iterations move KV
    return n_replies, taken, n_tokens, duration


def last_write_end(gpu: Any) -> int:
    """The end (ns) of the GPU's last iteration that wrote words: under E10 a seated reply's last
    word before a preemption (prompt-only iterations may follow it)."""
    written = gpu.n_replies_written
    i = len(written) - 1
    while not written[i]:
        i -= 1
    return gpu.ended_at_ns[i]
