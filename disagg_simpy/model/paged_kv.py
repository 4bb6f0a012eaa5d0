"""E9: paged KV memory with preemption (docs/rules.md#e9), one `PagedKv` per GPU.

A GPU's KV memory is counted in blocks of `block` tokens (`Gpu.memory.used` stays in tokens, always a
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

A `PagedKv` is the GPU's memory policy under E9 (model/planner.py's `Paged`: its work at a start,
`start_blocks`, `reopen`, `with_swap`), and has the GPU's few E9 versions of its steps, which the
GPU calls in their place (`has_work`, `held`, `seat`, `add_reply`, `release`): no method of the
GPU is replaced.
"""

from __future__ import annotations

from array import array
from collections import deque
from itertools import chain
from operator import attrgetter
from typing import TYPE_CHECKING

import numpy as np

from . import paged_away
from .kv_blocks import BlockSchedule
from .repeats import cut_all

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from .gpu import Gpu
    from .gpu_state import StartHost
    from .request import Request


def prepare(r: Request) -> None:
    """A request's E9 state, when it arrives at an arrangement with paged KV (`kv_due`, `kv_order`
    and `seat_base` are set when it joins or takes a seat, before they are read)."""
    r.kv_blocks = 0
    r.seat_index = -1
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
        self.phases, self.pending = self.blocks.phases, self.blocks.pending  # (its lists, for speed)
        assert gpu.memory.capacity is not None  # (E9 needs a KV capacity: scenario/paging.py)
        self.capacity: int = gpu.memory.capacity
        self.top = (self.capacity // block - 1) * block  # (a prompt of R tokens fits iff R <= top - kv_used)
        self.swapped: deque[Request] = deque()  # swapped out, to come back in this order
        self.blocked = False  # this iteration preempted: it admits nothing new (E9d)
        self.queue_at = -1  # where this iteration's victims queue (-1: none yet)
        self.moved_tokens = 0  # tokens swapped out or in by this iteration
        self.dirty = False  # one of the three above, or `dropped`, was set since the last start reset them
        self.dropped: list[Request] = []  # dropped at this iteration's start (the GPU tells the host)
        self.n_away = 0  # preempted replies not back yet (re-read or swapped): no handoff comes here (E9b)
        self.preemptions = array("q")  # request id, time (ns); ... one pair per preemption
        self.seat = seater(self)  # seat(r, index, key=None, started=False): built once per GPU
        self.add_reply = adder(self)  # add_reply(r, now): a reply joins (or, read again, rejoins)
        self.release = releaser(self)  # release(leaving): replies whose last word was just written leave
        self.has_work = work_test(self)  # `Gpu.has_work` under E9 (the engine gives the GPU this object: `Gpu.use_paging`)

    _preempt = paged_away.preempt
    swap_in = paged_away.swap_in
    reread = paged_away.reread

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
        head = self.gpu.queue.waiting[0]
        if head.unread_tokens < head.read_size:
            return True
        block = self.block
        return not (self.blocked or self.swapped) and (
            -(-head.read_size // block) + 1) * block <= self.capacity - self.gpu.memory.used

    def head_waits(self) -> bool:
        """Whether the head prompt is not begun and cannot be admitted now (`can_take`): while a repeat of
        E10's writing iterations runs, memory held only grows, so no start of it could read the head either."""
        head = self.gpu.queue.waiting[0]
        return head.unread_tokens == head.read_size and (bool(self.swapped) or head.read_size > self.top - self.gpu.memory.used)

    def handoff_need(self, r: Request) -> int:
        """E4e under E9: the free tokens a writing GPU needs to take a shipped prompt (its blocks
        plus one); it reserves one block less."""
        return (blocks_for(r.n_prompt_tokens, self.block) + 1) * self.block

    # -- replies ----------------------------------------------------------------------------------
    def _join(self, r: Request) -> None:
        self.gpu.batch.add_replies(1)
        self.running[r] = None
        r.kv_order = self.n_joins
        self.n_joins += 1

    # -- an iteration starts (E9b-e): the planner's memory policy (model/planner.py's `Paged`) ----------
    def reset(self) -> None:
        """What the last start's preemptions or swaps set, reset (`dirty`)."""
        self.blocked, self.moved_tokens, self.queue_at, self.dirty = False, 0, -1, False

    def start_blocks(self, now: int, index: int, key: int, host: StartHost, n_written: int) -> int:
        """Iteration `index` starts, seated (E8), its words those of key `key` (E10: its writing
        iteration; else `index`): the seated replies take the blocks due at `key`, the most recently
        joined preempted when one is not free (E9c); replies swapped out come back in if it preempted
        nothing (E9f); a split's repeats end if this changed what the handoff may use (`cut_all`),
        and the dropped requests are told to the host. The replies it writes then."""
        gpu = self.gpu
        due = self.blocks.due(key) if self.pending else self.phases[key % self.block]  # (model/kv_blocks.py)
        if due:
            more = len(due) * self.block
            if gpu.memory.used + more <= self.capacity:  # (room for all: no order to keep; no repeat to cut)
                gpu.memory.hold(more)
            else:
                self._short(due, key, now)
                n_written = gpu.batch.n_seated if gpu.batch.queue_replies else gpu.batch.n_replies
        if self.swapped and not self.blocked:  # (E9f: only under swap are replies swapped out)
            self.swap_in(index, None if gpu.batch.mixed else key)
            n_written = gpu.batch.n_seated if gpu.batch.queue_replies else gpu.batch.n_replies
        if self.dirty:
            if self.blocked or self.moved_tokens:
                cut_all(host)  # (E4e: memory freed, or a reply back, at a start)
            if self.dropped:
                host.requests_dropped(self.dropped, now)
                self.dropped = []
        return n_written

    def reopen(self, index: int, key: int | None) -> int:
        """E9d: the start preempted every reply it would write and reads nothing begun: it admits as
        usual, swapped replies first; the replies it writes then."""
        self.blocked = False
        if self.swapped:
            self.swap_in(index, key)
        gpu = self.gpu
        return gpu.batch.n_seated if gpu.batch.queue_replies else gpu.batch.n_replies

    def with_swap(self, duration: int) -> int:
        """E9f: the iteration's duration plus the time of the KV it swapped out and in, rounded on its own."""
        return duration + self.swap_ns(self.moved_tokens) if self.moved_tokens else duration

    def _short(self, due: dict[Request, None], index: int, now: int) -> None:
        """Key `index`'s due blocks are not all free: each due reply, in the order they joined, takes
        its block, the most recently joined preempted until one is free (E9c)."""
        gpu, block = self.gpu, self.block
        for r in sorted(due, key=_join_order):
            if r.seat_index < 0:
                continue  # preempted by now
            while self.capacity - gpu.memory.used < block:
                victim = next(reversed(self.running))
                self._preempt(victim, index, now)
                if victim is r:
                    break
            else:
                gpu.reserve(block)


def work_test(kv: PagedKv) -> Callable[[], bool]:
    """`Gpu.has_work` under E9 for one GPU, what it reads bound once (it runs at every iteration end):
    a reply in progress, a begun prompt, or a swapped reply or head prompt that fits."""
    gpu, waiting, swapped, block, capacity = kv.gpu, kv.gpu.queue.waiting, kv.swapped, kv.block, kv.capacity

    def has_work() -> bool:
        if gpu.batch.n_replies:
            return True
        if waiting and waiting[0].unread_tokens < waiting[0].read_size:
            return True
        free = capacity - gpu.memory.used
        if swapped:
            return (swapped[0].kv_blocks + 1) * block <= free
        return bool(waiting) and (blocks_for(waiting[0].read_size, block) + 1) * block <= free
    return has_work


def releaser(kv: PagedKv) -> Callable[[list[Request]], None]:
    """`PagedKv.release` for one GPU, what it reads bound once (it runs at every iteration end a
    reply leaves at): the replies whose last word was just written leave (E8 seats, E3, their KV)."""
    gpu, running, phases, block, batch = kv.gpu, kv.running, kv.phases, kv.block, kv.gpu.batch
    queue_replies, track_context = batch.queue_replies, batch.track_context

    def release(leaving: list[Request]) -> None:
        if queue_replies:
            batch.seats_freed(len(leaving))
        freed = context = 0
        for r in leaving:  # (mostly one)
            del running[r]
            if r.stretches is not None:
                r.stretches[-1][2] = r.n_reply_words - r.stretches[-1][1] + 1
            if (due := r.kv_due) >= 0:  # (due blocks at its phase: gone; model/kv_blocks.py)
                del phases[due % block][r]
                freed += -(-(r.n_prompt_tokens + r.n_reply_words - 1) // block)  # (its last word's token, past its seat's)
            else:
                freed += r.kv_blocks  # (its seat's blocks held its last word)
            if track_context:
                context += r.seat_base
        if track_context:
            batch.add_context(-context)
        gpu.memory.give_back(freed * block)
    return release


def adder(kv: PagedKv) -> Callable[[Request, int], None]:
    """`PagedKv.add_reply` for one GPU, what it reads bound once (it runs at every join): the reply
    joins (or, read again, rejoins) the end of the running order, seated at once or (E8, E10) queued."""
    gpu, running, seat, batch = kv.gpu, kv.running, kv.seat, kv.gpu.batch
    queue_replies, add_replies, wait_for_seat = batch.queue_replies, batch.add_replies, batch.wait_for_seat

    def add_reply(r: Request, now: int) -> None:
        if r.joined_at_ns < 0:
            r.joined_at_ns = now
        if gpu.repeat is not None:
            gpu.repeat.cut()  # (first: the reply's join iteration is the next to start)
        add_replies(1)  # (`_join`, inline)
        running[r] = None
        r.kv_order = kv.n_joins
        kv.n_joins += 1
        if queue_replies:
            wait_for_seat(r)
        else:
            seat(r, gpu.n_started)
        if gpu.wake is not None:
            gpu._wake()
    return add_reply


def seater(kv: PagedKv) -> Callable[..., None]:
    """`PagedKv.seat` for one GPU, what it reads of the GPU and its block schedule bound once (it
    runs at every join and seat)."""
    gpu, block, phases, wait = kv.gpu, kv.block, kv.phases, kv.blocks.wait
    track_context, add_context, leaves_after = gpu.batch.track_context, gpu.batch.add_context, gpu.batch.leaves_after

    def seat(r: Request, index: int, key: int | None = None, started: bool = False) -> None:
        """The reply gets words seat_word.. from iterations index, index + 1, ... (E8 seat or join;
        E10: from writing iterations key, key + 1, ..., the keys of its block and last-word schedule;
        `started`: a swap-in, once that iteration has taken its due blocks)."""
        if r.join_iteration < 0:
            r.join_iteration = index
        if r.stretches is not None:
            r.stretches[-1][0] = index  # the stretch that waited for this seat
        if key is not None:
            index = key
        r.seat_index = index
        f, n = r.seat_word, r.n_reply_words
        if track_context:
            r.seat_base = r.n_prompt_tokens + f - 1 - index
            add_context(r.seat_base)
        # its first due key (model/kv_blocks.py): that of the first word its blocks do not hold
        due_word = r.kv_blocks * block - r.n_prompt_tokens + 2  # (word w needs prompt + w - 1 tokens)
        if due_word > n:
            r.kv_due = -1
        elif (ahead := due_word - f) <= 0:
            r.kv_due = index
            phases[index % block][r] = None
        else:
            at = r.kv_due = index + ahead
            if ahead < block + started:  # (no key still to start before it has its phase)
                phases[at % block][r] = None
            else:
                wait(r, at)
        leaves_after(index + n - f, r)  # (E10: a writing iteration, model/kv_blocks.py's `writing_bound`)
    return seat


def _join_order(r: Request) -> int:
    return r.kv_order


def stretch_log(arrived: Sequence[Request]) -> np.ndarray:
    """Every request's stretches as model/words.py's STRETCH_LOG_FIELDS rows, in arrival order (an
    open stretch with its planned words: the run's end cuts them), as one int64 table. A request
    never preempted has one, words 2..n from `join_iteration`: those rows are made in bulk, in C;
    the preempted ones' rows are made in one list and put in their places by one mask."""
    n = len(arrived)
    one = np.fromiter(chain.from_iterable(map(_ONE, arrived)), np.int64, 6 * n).reshape(n, 6)
    moved = one[:, 5] > 0  # (preempted: stretches logged)
    rows = []
    if moved.any():
        counts = np.ones(n, np.int64)
        for i in np.flatnonzero(moved).tolist():
            r = arrived[i]
            stretches = r.stretches or []  # (moved: logged)
            counts[i] = len(stretches)
            rid, gpu, words = r.request_id, r.writing_gpu, r.n_reply_words
            for at, first, k, lead, written in stretches:
                rows.append((rid, gpu, at, first, words - first + 1 if k < 0 else k, lead, written))
        one = one[~moved]
    table = np.empty((len(one), 7), np.int64)
    table[:, :3] = one[:, :3]  # request id, gpu, join iteration
    table[:, 3] = 2
    table[:, 4] = one[:, 3] - 1
    table[:, 5] = one[:, 4]  # the word before: the first
    table[:, 6] = one[:, 4] >= 0
    if not rows:
        return table
    full = np.empty((len(table) + len(rows), 7), np.int64)
    in_moved = np.repeat(moved, counts)  # (each request's rows, in arrival order)
    full[in_moved] = rows
    full[~in_moved] = table
    return full


_ONE = attrgetter("request_id", "writing_gpu", "join_iteration", "n_reply_words", "first_word_at_ns", "n_preemptions")
