"""E9's rarer paths (model/paged_kv.py keeps the common ones): a preemption, a swap back in, and
the end of a re-read (docs/rules.md#e9). `PagedKv` has them as methods (`_preempt`, `swap_in`,
`reread`). Their `kv` is that `PagedKv` (typed Any: model/paged_kv.py imports this module)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .records import iteration_end, last_write_end

if TYPE_CHECKING:
    from .request import Request


def preempt(kv: Any, r: Request, index: int, now: int) -> None:
    """Preempt reply `r` at the start of iteration `index`: free its KV; drop it past its limit;
    else queue it to be read again (recompute) or swap it out."""
    gpu = kv.gpu
    kv.blocked = kv.dirty = True
    kv.preemptions.extend((r.request_id, now))
    del kv.running[r]
    gpu.batch.add_replies(-1)
    seat = r.seat_index
    if seat >= 0:
        words = r.seat_word + index - seat - 1  # words it has
        r.kv_blocks = kv.blocks.held_at(r, index)
        kv.blocks.leave(r)
        unseat(kv, r)
    else:
        words = r.seat_word - 1
        gpu.batch.unwait(r)
    if r.stretches is None:
        r.stretches = [[r.join_iteration, 2, -1, r.first_word_at_ns, 1]]
    last = r.stretches[-1]
    last[2] = words - last[1] + 1
    if last[2] == 0 and not last[4]:
        r.stretches.pop()  # (a swapped reply preempted again before a word: one stretch still to come)
        last_at = last[3]
    else:
        last_at = (iteration_end(gpu.log, seat + last[2] - 1) if gpu.batch.mixed else last_write_end(gpu.log)) if last[2] else last[3]
    held = r.kv_blocks * kv.block
    gpu.memory.give_back(held)
    r.n_preemptions += 1
    r.seat_word = words + 1
    if r.n_preemptions > kv.max_preemptions:  # dropped, never retried forever
        r.kv_blocks = 0
        r.dropped_at_ns = now
        kv.dropped.append(r)
        return
    r.stretches.append([-1, words + 1, -1, last_at, 0])
    kv.n_away += 1
    gpu.local_routed(1)  # still one of this GPU's replies for D3 (reading R54)
    # an iteration's victims (preempted most recent first) queue in the order they joined,
    # behind those preempted before (and, to be read again, behind begun prompts)
    if kv.swap:
        kv.moved_tokens += held
        if kv.queue_at < 0:
            kv.queue_at = len(kv.swapped)
        kv.swapped.insert(kv.queue_at, r)
        return
    r.kv_blocks = 0
    r.read_size = r.unread_tokens = r.n_prompt_tokens + words  # the re-read ends with word words + 1
    r.returning = True
    waiting = gpu.queue.waiting
    if kv.queue_at < 0:
        at = 0
        for w in waiting:
            if w.unread_tokens < w.read_size or w.returning:
                at += 1
            else:
                break
        kv.queue_at = at
    gpu.queue.requeue(kv.queue_at, r)


def unseat(kv: Any, r: Request) -> None:
    """Seated reply `r` leaves its seat before its last word (preempted)."""
    kv.gpu.batch.unseat(r, r.seat_index + r.n_reply_words - r.seat_word)
    r.seat_index = -1


def swap_in(kv: Any, index: int, key: int | None = None) -> None:
    """Swapped replies come back in the order they went out while their blocks plus one fit;
    each takes at once the block its next word needs (E10: `key`, the writing iteration's)."""
    gpu = kv.gpu
    block = kv.block
    while kv.swapped:
        r = kv.swapped[0]
        if (r.kv_blocks + 1) * block > gpu.memory.capacity - gpu.memory.used:
            return
        kv.swapped.popleft()
        kv.moved_tokens += r.kv_blocks * block
        kv.dirty = True
        need = max(r.kv_blocks, -(-(r.n_prompt_tokens + r.seat_word - 1) // block))
        gpu.reserve(need * block)
        r.kv_blocks = need
        kv.n_away -= 1
        gpu.local_routed(-1)
        kv._join(r)
        if not gpu.batch.queue_replies:
            kv.seat(r, index, None, True)
        elif gpu.batch.seats is None or gpu.batch.n_seated < gpu.batch.seats:
            gpu.batch.take_seat()
            kv.seat(r, index, key, True)
        else:
            gpu.batch.wait_for_seat(r)


def reread(kv: Any, finished: list[Request], index: int, now: int, host: Any) -> list[Request]:
    """Prompts whose last token was just read: re-reads give their next word now and rejoin
    (or finish); the others (first reads) are returned for the host."""
    if not kv.n_away:
        return finished  # (no reply away: none is a re-read)
    first = []
    for r in finished:
        if not r.returning:
            first.append(r)
            continue
        r.returning = False
        kv.n_away -= 1
        kv.gpu.local_routed(-1)
        stretches = r.stretches
        assert stretches is not None  # (a re-read was preempted: its stretches are logged)
        stretches[-1] = [-1, r.seat_word + 1, -1, now, 1]  # its word seat_word, read
        if r.seat_word == r.n_reply_words:
            stretches[-1][2] = 0
            kv.gpu.memory.give_back(r.kv_blocks * kv.block)
            host.replies_finished([r], now)
        else:
            r.seat_word += 1
            kv.add_reply(r, now)
    return first
