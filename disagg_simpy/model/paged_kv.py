"""E9: paged KV memory with preemption (docs/rules.md#e9), one `PagedKv` per GPU.

A GPU's KV memory is counted in blocks of `block` tokens (`Gpu.kv_used` stays in tokens, always a
whole number of blocks). A prompt is admitted when its blocks plus one are free and holds its
blocks; a reply's KV grows by one token per word, so it takes its next block at the start of the
iteration whose word's token no longer fits (word w needs prompt + w - 1 tokens). Block
boundaries are known in advance (a seated reply gets one word per iteration, so one block every
`block` iterations at a fixed phase): model/kv_blocks.py keeps them per iteration, so nothing is
checked per word or per block boundary, and an iteration whose due blocks are all free takes
them in one step.

When a due block is not free, the most recently (re)joined replies in progress on the GPU (seated
or waiting for a seat, E8) are preempted until one is: `recompute` frees their KV and queues them
to be read again (prompt plus words so far) on the same GPU, the read ending with their next
word; `swap` moves their KV out (and later back in) at `swap_ns` per token, added to the
iteration that moves it. A request preempted more than `max_preemptions` times is dropped.

Words of a preempted reply fall in several stretches (model/words.py): `Request.stretches` holds
[iteration index of its first word (-1: not seated yet), first word, words (-1: open), time of
the word before, whether the stretch wrote that word (a read's)], only for replies that were
preempted; the others have one stretch, words 2..n from `join_iteration` (`stretch_log`).

`install` replaces the few `Gpu` methods E9 changes (seating, joining, `has_work`, `kv_need`),
so the GPU's loop and the option-free path are untouched.
"""

from __future__ import annotations

import heapq
from array import array
from collections import deque
from typing import TYPE_CHECKING

from .kv_blocks import BlockSchedule
from .paged_unmixed import last_write_end, unmixed_iteration
from .repeats import cut_all, cut_repeat

if TYPE_CHECKING:
    from collections.abc import Callable

    from .gpu import Gpu
    from .request import Request


def prepare(r: Request) -> None:
    """A request's E9 state, when it arrives at an arrangement with paged KV."""
    r.kv_blocks = 0
    r.kv_due = r.seat_index = -1
    r.kv_order = r.seat_base = 0
    r.seat_word = 2
    r.stretches = None
    r.returning = False


def blocks_for(tokens: int, block: int) -> int:
    """Blocks that hold `tokens` tokens."""
    return -(-tokens // block)


class PagedKv:
    """One GPU's paged KV state (E9)."""

    def __init__(self, gpu: Gpu, block: int, preemption: str, swap_ns: Callable[[int], int], max_preemptions: int):
        self.gpu = gpu
        self.block = block
        self.swap = preemption == "swap"
        self.swap_ns = swap_ns  # tokens -> ns, one way (D10)
        self.max_preemptions = max_preemptions
        self.running: dict[Request, None] = {}  # replies in progress here, in the order they (re)joined
        self.n_joins = 0
        self.blocks = BlockSchedule(block)  # the due blocks of the seated replies
        self.swapped: deque[Request] = deque()  # swapped out, to come back in this order
        self.blocked = False  # this iteration preempted: it admits nothing new (E9d)
        self.queue_at = -1  # where this iteration's victims queue (-1: none yet)
        self.moved_tokens = 0  # tokens swapped out or in by this iteration
        self.dropped: list[Request] = []  # dropped at this iteration's start (the GPU tells the host)
        self.n_away = 0  # preempted replies not back yet (re-read or swapped): no handoff comes here (E9b)
        self.log = array("q")  # request id, time (ns); ... one pair per preemption
        gpu.paged = self
        gpu.has_work = self.has_work  # type: ignore[method-assign]
        gpu.kv_need = self.held  # type: ignore[method-assign,assignment]  # what a request frees
        gpu._seat = self.seat  # type: ignore[method-assign,assignment]
        gpu.add_reply = self.add_reply  # type: ignore[method-assign,assignment]
        gpu._release = self.release  # type: ignore[method-assign]
        gpu._options_start = self.iteration  # type: ignore[method-assign]

    # -- admission (E9a, E9d) ------------------------------------------------------------------
    def held(self, r: Request) -> int:
        return r.kv_blocks * self.block

    def admit(self, r: Request, free: int) -> int:
        """Tokens a prompt (or a re-read) whose reading has not begun reserves now, or -1 if it
        must wait: its blocks plus one must be free, and no swapped reply may be waiting."""
        if self.blocked or self.swapped:
            return -1
        n = blocks_for(r.read_size, self.block)
        if (n + 1) * self.block > free:
            return -1
        r.kv_blocks = n
        return n * self.block

    def can_take(self) -> bool:
        """Whether D4 may take a waiting prompt now: the head is begun, or its blocks plus one are
        free and it may be admitted (`admit`); else `Gpu._take_with_options` would take nothing."""
        head = self.gpu.waiting[0]
        if head.unread_tokens < head.read_size:
            return True
        block = self.block
        return not (self.blocked or self.swapped) and (
            -(-head.read_size // block) + 1) * block <= self.gpu.kv_capacity - self.gpu.kv_used  # type: ignore[operator]

    def handoff_need(self, r: Request) -> int:
        """E4e under E9: the free tokens a writing GPU needs to take a shipped prompt (its blocks
        plus one); it reserves one block less."""
        return (blocks_for(r.n_prompt_tokens, self.block) + 1) * self.block

    def has_work(self) -> bool:
        """A reply in progress, a begun prompt, or a swapped reply or head prompt that fits."""
        gpu = self.gpu
        if gpu.n_replies:
            return True
        waiting = gpu.waiting
        if waiting and waiting[0].unread_tokens < waiting[0].read_size:
            return True
        free = gpu.kv_capacity - gpu.kv_used  # type: ignore[operator]
        if self.swapped:
            return (self.swapped[0].kv_blocks + 1) * self.block <= free
        return bool(waiting) and (blocks_for(waiting[0].read_size, self.block) + 1) * self.block <= free

    # -- replies ----------------------------------------------------------------------------------
    def add_reply(self, r: Request, now: int) -> None:
        """A reply joins (or, read again, rejoins) the GPU: the end of the running order."""
        gpu = self.gpu
        if r.joined_at_ns < 0:
            r.joined_at_ns = now
        cut_repeat(gpu)  # (first: the reply's join iteration is the next to start)
        self._join(r)
        if not gpu.queue_replies:
            self.seat(r, gpu.n_started)
        else:
            gpu.seat_queue.append(r)
        gpu._wake()

    def _join(self, r: Request) -> None:
        self.gpu.n_replies += 1
        self.running[r] = None
        r.kv_order = self.n_joins
        self.n_joins += 1

    def seat(self, r: Request, index: int, key: int | None = None, started: bool = False) -> None:
        """The reply gets words seat_word.. from iterations index, index + 1, ... (E8 seat or join;
        E10: from writing iterations key, key + 1, ..., the keys of its block and last-word schedule;
        `started`: a swap-in, once that iteration has taken its due blocks)."""
        gpu = self.gpu
        f = r.seat_word
        if r.join_iteration < 0:
            r.join_iteration = index
        if r.stretches is not None:
            r.stretches[-1][0] = index  # the stretch that waited for this seat
        if key is not None:
            index = key
        r.seat_index = index
        if gpu.track_context:
            r.seat_base = r.n_prompt_tokens + f - 1 - index
            gpu.context_base += r.seat_base
        last = index + r.n_reply_words - f
        self.blocks.seat(r, index, f, started)
        by_key = gpu.leaving if gpu.mixed else gpu.leaving_by_write
        leaving = by_key.get(last)
        if leaving is None:
            by_key[last] = [r]
            if gpu.mixed:
                heapq.heappush(gpu.leaving_order, last)
        else:
            leaving.append(r)

    def release(self, leaving: list[Request]) -> None:
        """Replies whose last word was just written leave (E8 seats, E3, their KV)."""
        gpu, block, phases = self.gpu, self.block, self.blocks.phases
        if gpu.queue_replies:
            gpu.n_seated -= len(leaving)
        freed = 0
        for r in leaving:
            del self.running[r]
            if gpu.track_context:
                gpu.context_base -= r.seat_base
            if r.stretches is not None:
                r.stretches[-1][2] = r.n_reply_words - r.stretches[-1][1] + 1
            if r.kv_due >= 0:  # (due blocks at its phase: gone; model/kv_blocks.py)
                del phases[r.kv_due % block][r]
            freed += max(r.kv_blocks, -(-(r.n_prompt_tokens + r.n_reply_words - 1) // block))  # (its last word's token)
        gpu.kv_used -= freed * block

    def _unseat(self, r: Request) -> None:
        gpu = self.gpu
        last = r.seat_index + r.n_reply_words - r.seat_word
        by_key = gpu.leaving if gpu.mixed else gpu.leaving_by_write
        leaving = by_key[last]
        leaving.remove(r)
        if not leaving:
            del by_key[last]
            if gpu.mixed:
                gpu.leaving_order.remove(last)  # (rare: a preemption)
                heapq.heapify(gpu.leaving_order)
        if gpu.track_context:
            gpu.context_base -= r.seat_base
        if gpu.queue_replies:
            gpu.n_seated -= 1
        r.seat_index = -1

    # -- an iteration starts (E9b-e) -------------------------------------------------------------
    def start(self, index: int, now: int, row: int | None = None) -> None:
        """Give every seated reply its due block, in the order they joined, preempting the most
        recently joined when none is free; then, if nothing was preempted, swap replies back in.
        (E10: `index` is the writing iteration's key, `row` the iteration.)"""
        gpu = self.gpu
        self.blocked = False
        self.moved_tokens = 0
        self.queue_at = -1
        blocks = self.blocks
        due = blocks.due(index) if blocks.pending else blocks.phases[index % self.block]
        if due:
            block = self.block
            used = gpu.kv_used + len(due) * block
            if used <= gpu.kv_capacity:  # type: ignore[operator]  # (room for all: no order to keep; no repeat to cut)
                gpu.kv_used = used
                if used > gpu.kv_peak:
                    gpu.kv_peak = used
            else:
                for r in sorted(due, key=_join_order):
                    if r.seat_index < 0:
                        continue  # preempted by now
                    while gpu.kv_capacity - gpu.kv_used < block:  # type: ignore[operator]
                        victim = next(reversed(self.running))
                        self._preempt(victim, index, now)
                        if victim is r:
                            break
                    else:
                        gpu.reserve(block)
        if self.swapped and not self.blocked:
            self.swap_in(index if row is None else row, None if row is None else index)

    def iteration(self, now: int, index: int, host) -> tuple[int, list[tuple[Request, int]], int, int]:
        """`Gpu._options_start` under E9 (it replaces it): E8's seats, then due blocks, preemptions
        and swap-ins; (replies written, prompts taken, tokens, duration; -1 when it has nothing to
        do after preempting, E9d). E10 on the GPU: model/paged_unmixed.py."""
        gpu = self.gpu
        if not gpu.mixed:
            return unmixed_iteration(self, now, index, host)
        if gpu.seats is not None:
            queue = gpu.seat_queue
            while queue and gpu.n_seated < gpu.seats:
                self.seat(queue.popleft(), index)
                gpu.n_seated += 1
        self.start(index, now)
        if self.blocked or self.moved_tokens:
            cut_all(host, True)  # (E4e: memory freed, or a reply back, at a start)
        if self.dropped:
            host.requests_dropped(self.dropped, now)
            self.dropped = []
        n_replies = gpu.n_seated if gpu.seats is not None else gpu.n_replies
        taken = gpu._take_with_options(n_replies) if gpu.waiting and self.can_take() else []
        if not n_replies and not taken and self.blocked:
            self.blocked = False  # E9d: it preempted every reply and has nothing begun: it admits as usual
            if self.swapped:
                self.swap_in(index)
                n_replies = gpu.n_seated if gpu.seats is not None else gpu.n_replies
            taken = gpu._take_with_options(n_replies) if gpu.waiting else []
            if not n_replies and not taken:
                gpu.n_started = index  # (no iteration: the GPU waits for a join or freed memory)
                return 0, [], 0, -1
        taken, n_tokens = gpu._take_prompt_tokens(now, taken) if taken else ([], 0)
        gpu.kv_used_tokens.append(gpu.kv_used)
        duration = gpu._duration(now, index, n_replies, n_tokens, taken)
        if self.moved_tokens:
            duration += self.swap_ns(self.moved_tokens)  # E9f: KV swapped out and in, rounded on its own
        return n_replies, taken, n_tokens, duration

    def _preempt(self, r: Request, index: int, now: int) -> None:
        """Preempt reply `r` at the start of iteration `index`: free its KV; drop it past its limit;
        else queue it to be read again (recompute) or swap it out."""
        gpu = self.gpu
        self.blocked = True
        self.log.extend((r.request_id, now))
        del self.running[r]
        gpu.n_replies -= 1
        seat = r.seat_index
        if seat >= 0:
            words = r.seat_word + index - seat - 1  # words it has
            r.kv_blocks = self.blocks.held_at(r, index)
            self.blocks.leave(r)
            self._unseat(r)
        else:
            words = r.seat_word - 1
            gpu.seat_queue.remove(r)
        if r.stretches is None:
            r.stretches = [[r.join_iteration, 2, -1, r.first_word_at_ns, 1]]
        last = r.stretches[-1]
        last[2] = words - last[1] + 1
        if last[2] == 0 and not last[4]:
            r.stretches.pop()  # (a swapped reply preempted again before a word: one stretch still to come)
            last_at = last[3]
        else:
            last_at = (gpu.ended_at_ns[seat + last[2] - 1] if gpu.mixed else last_write_end(gpu)) if last[2] else last[3]
        held = r.kv_blocks * self.block
        gpu.kv_used -= held
        r.n_preemptions += 1
        r.seat_word = words + 1
        if r.n_preemptions > self.max_preemptions:  # dropped, never retried forever
            r.kv_blocks = 0
            r.dropped_at_ns = now
            self.dropped.append(r)
            return
        r.stretches.append([-1, words + 1, -1, last_at, 0])
        self.n_away += 1
        gpu.n_local += 1  # still one of this GPU's replies for D3 (reading R54)
        # an iteration's victims (preempted most recent first) queue in the order they joined,
        # behind those preempted before (and, to be read again, behind begun prompts)
        if self.swap:
            self.moved_tokens += held
            if self.queue_at < 0:
                self.queue_at = len(self.swapped)
            self.swapped.insert(self.queue_at, r)
            return
        r.kv_blocks = 0
        r.read_size = r.unread_tokens = r.n_prompt_tokens + words  # the re-read ends with word words + 1
        r.returning = True
        waiting = gpu.waiting
        if self.queue_at < 0:
            at = 0
            for w in waiting:
                if w.unread_tokens < w.read_size or w.returning:
                    at += 1
                else:
                    break
            self.queue_at = at
        waiting.insert(self.queue_at, r)
        gpu.queued_tokens += r.read_size

    def swap_in(self, index: int, key: int | None = None) -> None:
        """Swapped replies come back in the order they went out while their blocks plus one fit;
        each takes at once the block its next word needs (E10: `key`, the writing iteration's)."""
        gpu = self.gpu
        block = self.block
        while self.swapped:
            r = self.swapped[0]
            if (r.kv_blocks + 1) * block > gpu.kv_capacity - gpu.kv_used:  # type: ignore[operator]
                return
            self.swapped.popleft()
            self.moved_tokens += r.kv_blocks * block
            need = max(r.kv_blocks, blocks_for(r.n_prompt_tokens + r.seat_word - 1, block))
            gpu.reserve(need * block)
            r.kv_blocks = need
            self.n_away -= 1
            gpu.n_local -= 1
            self._join(r)
            if not gpu.queue_replies:
                self.seat(r, index, None, True)
            elif gpu.seats is None or gpu.n_seated < gpu.seats:
                gpu.n_seated += 1
                self.seat(r, index, key, True)
            else:
                gpu.seat_queue.append(r)

    def reread(self, finished: list[Request], index: int, now: int, host) -> list[Request]:
        """Prompts whose last token was just read: re-reads give their next word now and rejoin
        (or finish); the others (first reads) are returned for the host."""
        first = []
        for r in finished:
            if not r.returning:
                first.append(r)
                continue
            r.returning = False
            self.n_away -= 1
            self.gpu.n_local -= 1
            r.stretches[-1] = [-1, r.seat_word + 1, -1, now, 1]  # type: ignore[index]  # its word seat_word, read
            if r.seat_word == r.n_reply_words:
                r.stretches[-1][2] = 0  # type: ignore[index]
                self.gpu.kv_used -= r.kv_blocks * self.block
                host.replies_finished([r], now)
            else:
                r.seat_word += 1
                self.add_reply(r, now)
        return first


def _join_order(r: Request) -> int:
    return r.kv_order


def stretch_log(arrived) -> list[tuple[int, int, int, int, int, int, int]]:
    """Every request's stretches as model/words.py's STRETCH_LOG_FIELDS rows (an open stretch
    with its planned words: the run's end cuts them)."""
    rows = []
    for r in arrived:
        gpu = r.writing_gpu
        if r.stretches is None:
            lead = r.first_word_at_ns
            rows.append((r.request_id, gpu, r.join_iteration, 2, r.n_reply_words - 1, lead, int(lead >= 0)))
            continue
        for at, first, n, lead, written in r.stretches:
            rows.append((r.request_id, gpu, at, first, r.n_reply_words - first + 1 if n < 0 else n, lead, written))
    return rows
