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

Words of a preempted reply fall in several stretches (model/paged_away.py logs them).

A `PagedKv` is the GPU's memory policy under E9 (model/planner.py's `Paged`: its work at a start,
`start_blocks`, `reopen`, `with_swap`), and has the GPU's few E9 versions of its steps, which the
GPU calls in their place (`has_paged_work`, `held`, `seat_reply`, `join_reply`, `release_kv`): no
method of the GPU is replaced. Only this module writes a `PagedKv` (its block schedule: model/kv_blocks.py);
a request's E9 fields change through its own methods (model/request.py).
"""

from __future__ import annotations

from array import array
from collections import deque
from typing import TYPE_CHECKING

from .kv_blocks import BlockSchedule, WordPlan
from .records import iteration_end, last_write_end
from .repeats import cut_all
from .request import Request

if TYPE_CHECKING:
    from collections.abc import Callable

    from .gpu import Gpu
    from .gpu_state import ReplyHost, StartHost


prepare = Request.page  # a request's E9 state, when it arrives at an arrangement with paged KV


def blocks_for(tokens: int, block: int) -> int:
    """Blocks that hold `tokens` tokens."""
    return -(-tokens // block)


class PagedKv:
    """One GPU's paged KV state (E9)."""

    def __init__(self, gpu: Gpu, block: int, preemption: str, swap_ns: Callable[[int], int], max_preemptions: int,
                 plan: WordPlan | None = None):
        self.gpu = gpu
        self.block = block
        self.swap = preemption == "swap"
        self.swap_ns = swap_ns  # tokens -> ns, one way (D10)
        self.max_preemptions = max_preemptions
        self.running: dict[Request, None] = {}  # replies in progress here, in the order they (re)joined
        self.due_blocks = blocks = BlockSchedule(block, plan)  # the due blocks of the seated replies (by a plan, if any)
        self._phases, self._pending = blocks.phases, blocks.steps if plan else blocks.pending  # (read here, for speed)
        self.counted = plan is not None  # (plan) a due reply may take more than one block at a key
        self.lookahead = blocks.lookahead  # (plan) the tokens a written reply's blocks hold past its words (R103)
        assert gpu.memory.capacity is not None  # (E9 needs a KV capacity: scenario/paging.py)
        self.limit: int = gpu.memory.capacity
        self.top = (self.limit // block - 1) * block  # (a prompt of R tokens fits iff R <= top - kv_used)
        self.swapped: deque[Request] = deque()  # swapped out, to come back in this order
        self.blocked = False  # this iteration preempted: it admits nothing new (E9d)
        self.queue_at = -1  # where this iteration's victims queue (-1: none yet)
        self.moved_tokens = 0  # tokens swapped out or in by this iteration
        self.dirty = False  # one of the three above, or `dropped`, was set since the last start reset them
        self.dropped: list[Request] = []  # dropped at this iteration's start (the GPU tells the host)
        self.n_away = 0  # preempted replies not back yet (re-read or swapped): no handoff comes here (E9b)
        self.preemptions = array("q")  # request id, time (ns); ... one pair per preemption
        # seat_reply(r, index, key=None, started=False): built once per GPU
        self.seat_reply = blocks.seater(gpu.batch) if plan is None else blocks.plan_seater(gpu.batch)
        self.join_reply = adder(self)  # join_reply(r, now): a reply joins (or, read again, rejoins)
        self.release_kv = releaser(self)  # release_kv(leaving): replies whose last word was just written leave
        self.has_paged_work = work_test(self)  # `Gpu.has_work` under E9 (the engine gives the GPU this object: `Gpu.use_paging`)

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
        r.holds_blocks(n)
        return n * self.block

    def can_take(self) -> bool:
        """Whether D4 may take a waiting prompt now: the head is begun, or its blocks plus one are
        free and it may be admitted (`admit`); else `Gpu._take_with_options` would take nothing."""
        head = self.gpu.queue.waiting[0]
        if head.unread_tokens < head.read_size:
            return True
        block = self.block
        return not (self.blocked or self.swapped) and (
            -(-head.read_size // block) + 1) * block <= self.limit - self.gpu.memory.used

    def head_waits(self) -> bool:
        """Whether the head prompt is not begun and cannot be admitted now (`can_take`): while a repeat of
        E10's writing iterations runs, memory held only grows, so no start of it could read the head either."""
        head = self.gpu.queue.waiting[0]
        return head.unread_tokens == head.read_size and (bool(self.swapped) or head.read_size > self.top - self.gpu.memory.used)

    # -- replies ----------------------------------------------------------------------------------
    def _join(self, r: Request) -> None:
        self.gpu.batch.add_replies(1)
        self.running[r] = None

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
        due = self.due_blocks.due_at(key) if self._pending else self._phases[key % self.block]  # (model/kv_blocks.py)
        if due:
            more = (sum(due.values()) if self.counted else len(due)) * self.block  # type: ignore[arg-type]  # (plan: ints)
            if gpu.memory.used + more <= self.limit:  # (room for all: no order to keep; no repeat to cut)
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

    def _short(self, due: dict[Request, None] | dict[Request, int], index: int, now: int) -> None:
        """Key `index`'s due blocks are not all free: each due reply, in the order they joined, takes
        its block, the most recently joined preempted until one is free (E9c)."""
        gpu, block = self.gpu, self.block
        running = self.running  # (in the order they joined)
        for r in list(due) if len(due) < 2 else [r for r in running if r in due]:
            n = due.get(r) or 1  # (plan: the blocks it takes now; else one)
            taken = 0
            while taken < n and r.seat_index >= 0:  # (not preempted by now)
                if self.limit - gpu.memory.used < block:
                    victim = next(reversed(running))  # (the most recent: maybe `r` itself, with the blocks it took)
                    self.preempt(victim, index, now, taken if victim is r else 0)
                else:
                    gpu.reserve(block)
                    taken += 1

    # -- E9's rarer paths: a preemption, a swap back in, a re-read's end ---------------------------
    def preempt(self, r: Request, index: int, now: int, taken: int = 0) -> None:
        """Preempt reply `r` at the start of iteration `index` (after it took `taken` of its blocks due then,
        a plan's): free its KV; drop it past its limit; else queue it to be read again (recompute) or swap it out."""
        gpu = self.gpu
        self.blocked = self.dirty = True
        self.preemptions.extend((r.request_id, now))
        del self.running[r]
        gpu.batch.add_replies(-1)
        seat = r.seat_index
        done = index - seat  # (seated: the iterations it had from its seat)
        if seat >= 0:
            words = self.due_blocks.words_at(r, index)  # words it has
            held = self.due_blocks.held_at(r, index) + taken
            gpu.batch.unseat(r, self.due_blocks.last_key(r))
            self.due_blocks.unschedule(r)
            r.leave_seat(held)
        else:
            words = r.seat_word - 1
            gpu.batch.unwait(r)
        last = r.end_stretch(words)
        last_at = (iteration_end(gpu.log, seat + done - 1) if gpu.batch.mixed else last_write_end(gpu.log)
                   ) if last[2] else last[3]
        held = r.kv_blocks * self.block
        gpu.memory.give_back(held)
        if r.preempted(words) > self.max_preemptions:  # dropped, never retried forever
            r.drop(now)
            self.dropped.append(r)
            return
        r.go_away(words, last_at, not self.swap)
        self.n_away += 1
        gpu.local_routed(1)  # still one of this GPU's replies for D3 (reading R54)
        # an iteration's victims (preempted most recent first) queue in the order they joined,
        # behind those preempted before (and, to be read again, behind begun prompts)
        if self.swap:
            self.moved_tokens += held
            if self.queue_at < 0:
                self.queue_at = len(self.swapped)
            self.swapped.insert(self.queue_at, r)
            return
        waiting = gpu.queue.waiting
        if self.queue_at < 0:
            at = 0
            for w in waiting:
                if w.unread_tokens < w.read_size or w.returning:
                    at += 1
                else:
                    break
            self.queue_at = at
        gpu.queue.requeue(self.queue_at, r)

    def swap_in(self, index: int, key: int | None = None) -> None:
        """Swapped replies come back in the order they went out while their blocks plus one fit;
        each takes at once the block its next word needs (E10: `key`, the writing iteration's)."""
        gpu, block, batch = self.gpu, self.block, self.gpu.batch
        while self.swapped:
            r = self.swapped[0]
            if (r.kv_blocks + 1) * block > self.limit - gpu.memory.used:
                return
            self.swapped.popleft()
            self.moved_tokens += r.kv_blocks * block
            self.dirty = True
            need = max(r.kv_blocks, -(-(r.n_prompt_tokens + r.seat_word - 1 + self.lookahead) // block))  # (plan: R103)
            gpu.reserve(need * block)
            r.holds_blocks(need)
            self.n_away -= 1
            gpu.local_routed(-1)
            self._join(r)
            if not batch.queue_replies:
                self.seat_reply(r, index, None, True)
            elif batch.seats is None or batch.n_seated < batch.seats:
                batch.take_seat()
                self.seat_reply(r, index, key, True)
            else:
                batch.wait_for_seat(r)

    def reread(self, finished: list[Request], index: int, now: int, host: ReplyHost) -> list[Request]:
        """Prompts whose last token was just read: re-reads give their next word now and rejoin
        (or finish); the others (first reads) are returned for the host."""
        if not self.n_away:
            return finished  # (no reply away: none is a re-read)
        first = []
        for r in finished:
            if not r.returning:
                first.append(r)
                continue
            self.n_away -= 1
            self.gpu.local_routed(-1)
            if r.read_again(now):
                self.gpu.memory.give_back(r.kv_blocks * self.block)
                host.replies_finished([r], now)
            else:
                self.join_reply(r, now)
        return first


def work_test(kv: PagedKv) -> Callable[[], bool]:
    """`Gpu.has_work` under E9 for one GPU, what it reads bound once (it runs at every iteration end):
    a reply in progress, a begun prompt, or a swapped reply or head prompt that fits."""
    gpu, waiting, swapped, block, capacity = kv.gpu, kv.gpu.queue.waiting, kv.swapped, kv.block, kv.limit

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
    """`PagedKv.release_kv` for one GPU, what it reads bound once (it runs at every iteration end a
    reply leaves at): the replies whose last word was just written leave (E8 seats, E3, their KV)."""
    gpu, running, left, block, batch = kv.gpu, kv.running, kv.due_blocks.left, kv.block, kv.gpu.batch
    queue_replies, track_context = batch.queue_replies, batch.track_context
    finished = kv.due_blocks.finished if kv.counted else None  # (plan) the blocks it held (R103)

    def release(leaving: list[Request]) -> None:
        if queue_replies:
            batch.seats_freed(len(leaving))
        freed = context = 0
        for r in leaving:  # (mostly one)
            del running[r]
            if r.stretches is not None:
                r.close_stretch()
            if finished is not None:
                freed += finished(r)
            elif (due := r.kv_due) >= 0:  # (due blocks at its phase: gone; model/kv_blocks.py)
                left(r, due)
                freed += -(-(r.n_prompt_tokens + r.n_reply_words - 1) // block)  # (its last word's token, past its seat's)
            else:
                freed += r.kv_blocks  # (its seat's blocks held its last word)
            if track_context:
                context += r.seat_base
        if track_context:
            batch.add_context(-context)
            if finished is not None:  # (plan) and what its iterations' words added (R108)
                batch.forget_steps(leaving)
        gpu.memory.give_back(freed * block)
    return release


def adder(kv: PagedKv) -> Callable[[Request, int], None]:
    """`PagedKv.join_reply` for one GPU, what it reads bound once (it runs at every join): the reply
    joins (or, read again, rejoins) the end of the running order, seated at once or (E8, E10) queued."""
    gpu, running, seat, batch = kv.gpu, kv.running, kv.seat_reply, kv.gpu.batch
    queue_replies, add_replies, join = batch.queue_replies, batch.add_replies, batch.join

    def add_reply(r: Request, now: int) -> None:
        if gpu.repeat is not None:
            gpu.repeat.cut()  # (first: the reply's join iteration is the next to start)
        running[r] = None
        if r.joined_at_ns < 0:  # (most joins were recorded by `Request.stays` or `Request.joins`; a rejoin keeps its first)
            r.join_paged(now)
        if queue_replies:
            join(r, gpu.n_started)  # (one reply more, waiting for a seat: `Batch.join`)
        else:
            add_replies(1)
            seat(r, gpu.n_started)
        if gpu.wake is not None:
            gpu._wake()
    return add_reply
