"""A GPU's batch, the batch part of its state (docs/architecture.md, "Owned parts"): the replies in
progress, E8's seats and the replies waiting for one, the order they leave in (a reply's last word
ends a known iteration, M2, M4), E3's context sum, E10's count of writing iterations and E16's draws.

Words are not events: a reply that joins when the GPU has started `j` iterations gets its words 2..n
at the ends of iterations j .. j+n-2, so the batch only needs to know, per iteration, which replies
leave after it (`leaving`, its keys in the heap `leaving_order`; E10: per writing iteration,
`leaving_by_write` and `write_order`). Only this module writes a `Batch`: the GPU, the planner's
seating, `Repeat` and E9 (model/paged_kv.py, kv_blocks.py) call its methods."""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..workload.speculative import IterationCounts
    from .costs import ContextSteps
    from .request import Request


class Batch:
    """Who a GPU writes: `n_replies` in progress, of them `n_seated` in E8's `seats` (the others wait in
    `seat_queue`, `queue_replies`), and when each leaves."""

    __slots__ = ("n_replies", "seats", "seat_queue", "n_seated", "mixed", "n_writes", "queue_replies", "context_base",
                 "track_context", "leaving", "leaving_order", "leaving_by_write", "write_order", "writing_iterations",
                 "context_steps", "room", "seater")

    def __init__(self, seats: int | None, mixed: bool, track_context: bool):
        self.n_replies = 0  # replies that get a word from the next iteration
        self.seats = seats  # E8: at most this many written per iteration (the first joined), the others wait
        self.seat_queue: deque[Request] = deque()
        self.n_seated = 0
        self.mixed = mixed  # E10: False, an iteration reads prompts or writes words, never both
        self.n_writes = 0  # E10: writing iterations started
        self.queue_replies = seats is not None or not mixed  # (E8, E10: replies wait in `seat_queue`)
        self.context_base = 0  # E3: sum over replies in progress of n_prompt + 1 - join_iteration
        self.track_context = track_context
        self.leaving: dict[int, list[Request]] = {}  # iteration index -> replies whose last word ends it
        self.leaving_order: list[int] = []  # the keys of `leaving`, a heap: the next finish first
        self.leaving_by_write: dict[int, list[Request]] = {}  # E10: writing iteration -> replies leaving after it
        self.write_order: list[int] = []  # E10: its keys, a heap (with keys already written: `first_leaving_write`)
        # E16 (the engine's, `speculate`): per request id, the writing iterations of its words 2..n (where its
        # last word falls: an iteration's batch and cost do not depend on them, so repeats stay exact); with E3, its
        # context's uneven growth
        self.writing_iterations: IterationCounts | None = None
        self.context_steps: ContextSteps | None = None
        self.room = 1 << 62 if seats is None else seats  # (E10 alone: no seat limit)
        self.seater: Callable[..., None] = self.seat  # how a waiting reply is seated (`use_seater`: E9's)

    def speculate(self, writing_iterations: IterationCounts | None, context_steps: ContextSteps | None) -> None:
        """E16's draws, set before the run."""
        self.writing_iterations, self.context_steps = writing_iterations, context_steps

    @property
    def uneven_context(self) -> bool:
        """E3's context sum grows by more than a token a reply from one iteration to the next (E16's accepted words,
        R86): the GPU's durations grow unevenly, so its iterations run one by one, not as repeats."""
        return self.context_steps is not None and self.track_context

    def context_due(self) -> Callable[[int], int] | None:
        """What a mixing GPU's iteration `index` adds to E3's context sum as it starts: its replies' words past one an
        iteration written before it (E16, R86); None: nothing ever (E10 adds it by writing iteration: `write_started`)."""
        return self.context_steps.due if self.context_steps is not None and self.mixed else None

    def set_track_context(self, on: bool) -> None:
        """E12: a GPU that changes role counts E3's context as its new side's cost does."""
        self.track_context = on

    # -- joins and seats ------------------------------------------------------------------------
    def join(self, request: Request, index: int) -> None:
        """A reply joins (M2, M4): seated at iteration `index`, or (E8, E10) waiting for a seat. (With no seat limit
        the GPU calls `seat(request, index, None, True)` itself: a call fewer at each join.)"""
        self.n_replies += 1
        if not self.queue_replies:
            self.seat(request, index)
        else:
            self.seat_queue.append(request)

    def seat(self, request: Request, index: int, key: int | None = None, joins: bool = False) -> None:
        """The reply gets words 2..n from iterations index, index + 1, ... (E10: writing iterations key, key + 1, ...);
        `joins`: it joins now, seated at once (no seat limit: `join`)."""
        if joins:
            self.n_replies += 1
        request.seated(index)
        if key is None:
            key, by_key, order = index, self.leaving, self.leaving_order
        else:
            by_key, order = self.leaving_by_write, self.write_order
        if self.track_context:
            self.context_base += request.n_prompt_tokens + 1 - key
            if self.context_steps is not None:  # E16
                self.context_steps.seat(request.request_id, request.n_reply_words, key)
        its = self.writing_iterations  # E16: one or more words an iteration, drawn (workload/speculative.py)
        last = key + request.n_reply_words - 2 if its is None else key + its[request.request_id] - 1
        leaving = by_key.get(last)
        if leaving is None:
            by_key[last] = [request]  # (E10's writing-iteration keys move to `leaving` when due)
            heapq.heappush(order, last)
        else:
            leaving.append(request)

    def use_seater(self, seat: Callable[..., None]) -> None:
        """E9: waiting replies are seated by `seat` (`PagedKv.seat_reply`), not `Batch.seat`; set before the run."""
        self.seater = seat

    def seated(self, index: int, key: int) -> int:
        """E8, E10: the replies iteration `index` (E10: writing iteration `key`) writes: those seated, the waiting ones
        first taking the free seats, in the order they joined, each seated by `seater` (the planner's seating: one call
        a start, the count read here when no reply waits)."""
        n = self.n_seated
        queue = self.seat_queue
        if queue and n < self.room:
            room, seat = self.room, self.seater
            while queue and n < room:
                if self.mixed:
                    seat(queue.popleft(), index)
                else:
                    seat(queue.popleft(), index, key)
                n += 1
            self.n_seated = n
        return n

    def leave(self, index: int) -> list[Request] | None:
        """Iteration `index` ended: the replies whose last word it wrote leave (None: none)."""
        leaving = self.leaving.pop(index, None)
        if leaving:
            heapq.heappop(self.leaving_order)
            self.n_replies -= len(leaving)
        return leaving

    def release(self, leaving: list[Request]) -> None:
        """Replies whose last word was just written leave the options' bookkeeping of the batch (E3, E8, E10, E16)."""
        if self.queue_replies:
            self.n_seated -= len(leaving)
        if self.track_context:
            w = self.n_writes + 1  # E10: a reply of n words leaving now was seated at writing iteration w - n
            mixed, its = self.mixed, self.writing_iterations  # (E16: w - 1 - its writing iterations)
            self.context_base -= sum(r.n_prompt_tokens + 1 - (r.join_iteration if mixed else w - (
                r.n_reply_words if its is None else its[r.request_id] + 1)) for r in leaving)
            if self.context_steps is not None:  # E16: and the accepted words' context added
                self.context_base -= self.context_steps.leave(leaving)

    def seats_freed(self, n: int) -> None:
        """`n` seated replies left (E8)."""
        self.n_seated -= n

    def add_context(self, tokens: int) -> None:
        """E3: the context sum changes by `tokens` (E16's accepted words; E9's seats and leaves)."""
        self.context_base += tokens

    # -- E10's writing iterations -----------------------------------------------------------------
    def write_started(self, key: int, index: int) -> None:
        """Iteration `index` is the GPU's writing iteration `key` (E10): count it, and the replies whose
        last word it writes leave at its end (their leaving list moves from the writing key to `index`); E3 with E16:
        its replies' context grows by the words their earlier writing iterations accepted (R86)."""
        self.n_writes = key + 1
        if self.context_steps is not None:
            self.context_base += self.context_steps.due(key)
        leaving = self.leaving_by_write.pop(key, None)
        if leaving:
            self.leaving[index] = leaving
            heapq.heappush(self.leaving_order, index)

    def count_writes(self, n: int) -> None:
        """E10: `n` writing iterations have started (a repeat cut, model/repeats.py)."""
        self.n_writes = n

    def first_leaving_write(self) -> int:
        """E10, with a reply leaving after some writing iteration (`leaving_by_write` not empty): the first such
        writing iteration, the top of the heap `write_order` once the keys already written (popped by
        `write_started`, or a preempted reply's, E9) are dropped from it; not a scan of every key."""
        order, by_write = self.write_order, self.leaving_by_write
        while order[0] not in by_write:
            heapq.heappop(order)
        return order[0]

    # -- E9: replies that join, wait, leave their seat early -------------------------------------
    def add_replies(self, n: int) -> None:
        """E9: `n` more (or fewer: preempted) replies in progress."""
        self.n_replies += n

    def wait_for_seat(self, request: Request) -> None:
        """E8, E10 (E9: a reply that joins or is swapped back in): it waits for a seat, after those waiting."""
        self.seat_queue.append(request)

    def take_seat(self) -> None:
        """E9: a reply swapped back in takes a free seat at once."""
        self.n_seated += 1

    def leaves_after(self, last: int, request: Request) -> None:
        """E9 (`PagedKv.seat_reply`): the seated reply's last word is that of iteration `last` (E10: writing iteration)."""
        by_key, order = (self.leaving, self.leaving_order) if self.mixed else (self.leaving_by_write, self.write_order)
        leaving = by_key.get(last)
        if leaving is None:
            by_key[last] = [request]
            heapq.heappush(order, last)  # (E10: `first_leaving_write`)
        else:
            leaving.append(request)

    def unwait(self, request: Request) -> None:
        """E9: a reply waiting for a seat leaves the seat queue (preempted)."""
        self.seat_queue.remove(request)

    def unseat(self, request: Request, last: int) -> None:
        """E9: a seated reply leaves its seat before its last word (preempted): out of the leaving order at key
        `last` (its last word's), and its E3 context (`seat_base`) out of the sum."""
        by_key = self.leaving if self.mixed else self.leaving_by_write
        leaving = by_key[last]
        leaving.remove(request)
        if not leaving:
            del by_key[last]
            if self.mixed:
                self.leaving_order.remove(last)  # (rare: a preemption)
                heapq.heapify(self.leaving_order)
        if self.track_context:
            self.context_base -= request.seat_base
            self.forget_steps((request,))
        if self.queue_replies:
            self.n_seated -= 1

    def follow_plan(self, request_id: int, key: int, starts: list[int]) -> None:
        """E3 with E9's word plans (`BlockSchedule.plan_seater`, R108): a reply seated at key `key`, its iterations
        beginning at the words `starts`: its context grows by each one's words (`ContextSteps.follow`)."""
        if self.context_steps is not None:
            self.context_steps.follow(request_id, key, starts)

    def forget_steps(self, leaving: tuple[Request, ...] | list[Request]) -> None:
        """E3 with a plan's uneven steps: replies leaving (finished or preempted) take back what they added (R108)."""
        if self.context_steps is not None:
            self.context_base -= self.context_steps.leave(leaving)
