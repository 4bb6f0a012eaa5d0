"""A GPU: a SimPy process running iterations (M1, M2, M4, M5, D4, D9; E1-E4, E6).

One iteration writes one word for every reply in progress on the GPU and may read prompt
tokens. Its replies and prompts are fixed when it starts. Words are not events: a reply that
joins when the GPU has started `j` iterations gets its words 2..n at the ends of iterations
j .. j+n-2, so the GPU only needs to know, per iteration, which replies leave after it.

KV memory (E4) is a plain counter per GPU, not a SimPy `Container`: a reservation is taken
whole by the iteration that starts a prompt's reading (or by the handoff, E4e), only if it fits
at that moment, and the first prompt that does not fit blocks those behind it. That is a check
at a known point of the instant (D5), not a process waiting in a queue; a Container's get/put
events would run at SimPy's own priorities and could not keep D5's order.
"""

from __future__ import annotations

from array import array
from collections import deque
from typing import Protocol

import simpy

from .costs import CostNs
from .phases import PHASE_END, PHASE_START, Environment, Slot, fire
from .request import Request


class Host(Protocol):
    """What a GPU needs from the arrangement it runs in (the engine), called at the end of an
    iteration (D5 step 1)."""

    def replies_finished(self, requests: list[Request], now: int) -> None: ...

    def prompts_read(self, gpu: Gpu, requests: list[Request], now: int) -> None: ...

    def iteration_ended(self, now: int) -> None: ...

    def more_may_arrive_now(self, now: int) -> bool: ...


class Gpu:
    """State of one GPU; `run` is its SimPy process."""

    def __init__(self, number: int, reads: bool, writes: bool, chunk_tokens: int | None, cost: CostNs,
                 kv_capacity: int | None = None, reserve_reply: bool = True):
        self.number = number
        self.reads = reads
        self.writes = writes
        self.chunk_tokens = chunk_tokens
        self.cost = cost  # this GPU's side's figures (E1)
        self.waiting: deque[Request] = deque()  # prompts routed here, not fully read (front may be partly read)
        self.queued_tokens = 0  # D1
        self.n_replies = 0  # replies that get a word from the next iteration
        self.n_shipping = 0  # replies whose KV cache is shipping here (writing GPUs of a split)
        self.n_local = 0  # E6: local prompts routed here whose reading has not finished
        self.context_base = 0  # E3: sum over replies in progress of n_prompt + 1 - join_iteration
        self.track_context = cost.per_context_token != 0
        self.leaving: dict[int, list[Request]] = {}  # iteration index -> replies whose last word ends it
        self.last_assignment = -1
        self.n_started = 0
        self.wake: simpy.Event | None = None  # pending while idle
        # E4: tokens of KV cache held; a prompt reserves n_prompt (+ n_reply if `reserve_reply`)
        self.kv_capacity = kv_capacity  # None: no limit
        self.reserve_reply = reserve_reply
        self.kv_used = 0
        self.kv_peak = 0
        self.serves_handoff = False  # E4e: the engine serves its handoff queue after each iteration end
        self.always_defer = False  # start only in D5 step 3, even when nothing more can arrive
        # Records: one entry per iteration, one per (iteration, prompt) read. Flat int64
        # arrays, not lists: 8 bytes a value, and nothing for the garbage collector to scan.
        self.started_at_ns = array("q")
        self.ended_at_ns = array("q")
        self.n_replies_written = array("q")
        self.n_prompt_tokens_read = array("q")
        self.kv_used_tokens = array("q")  # E4 only
        self.reads_log = array("q")  # iteration, request id, tokens; iteration, ...
        if kv_capacity is None:
            self.has_work = self._has_work_page  # type: ignore[method-assign]  # bound per GPU, for speed

    @property
    def role(self) -> str:
        return "both" if self.reads and self.writes else ("reads" if self.reads else "writes")

    def has_work(self) -> bool:
        """A reply in progress, or a waiting prompt it can take (E4d: the head fits, or is partly read)."""
        if self.n_replies > 0 or not self.waiting:
            return self.n_replies > 0
        if self.kv_capacity is None:
            return True
        head = self.waiting[0]
        return head.unread_tokens < head.n_prompt_tokens or self.kv_need(head) <= self.kv_capacity - self.kv_used

    def _has_work_page(self) -> bool:
        """`has_work` without a memory limit (the page's model), bound per GPU for speed."""
        return self.n_replies > 0 or bool(self.waiting)

    def kv_need(self, request: Request) -> int:
        """Tokens a prompt read here reserves (E4a, b, E6)."""
        return request.n_prompt_tokens + (request.n_reply_words if self.reserve_reply else 0)

    def reserve(self, tokens: int) -> None:
        self.kv_used += tokens
        if self.kv_used > self.kv_peak:
            self.kv_peak = self.kv_used

    def free(self, tokens: int) -> None:
        """Free KV memory from outside an iteration end (a ship end, D5 step 2): an idle GPU
        looks again in step 3 (E4d)."""
        self.kv_used -= tokens
        self._wake()

    def add_prompt(self, request: Request) -> None:
        self.waiting.append(request)
        self.queued_tokens += request.n_prompt_tokens
        self._wake()

    def add_reply(self, request: Request, now: int) -> None:
        """A reply joins: it gets a word from every iteration starting now or later (M2, M4)."""
        request.joined_at_ns = now
        request.join_iteration = self.n_started
        self.n_replies += 1
        if self.track_context:
            self.context_base += request.n_prompt_tokens + 1 - self.n_started
        last = self.n_started + request.n_reply_words - 2
        leaving = self.leaving.get(last)
        if leaving is None:
            self.leaving[last] = [request]
        else:
            leaving.append(request)
        self._wake()

    def _wake(self) -> None:
        if self.wake is not None:
            fire(self.wake, PHASE_START + self.number)
            self.wake = None

    def _take_prompt_tokens(self, now: int) -> tuple[list[tuple[Request, int]], int]:
        """The prompt tokens this iteration reads (D4), and how many. They stop counting as
        queued (D1)."""
        if self.kv_capacity is not None:
            taken = self._take_within_memory()
        elif self.chunk_tokens is None:
            taken = [(r, r.unread_tokens) for r in self.waiting]
            self.waiting.clear()
        else:
            taken, budget = [], self.chunk_tokens
            while self.waiting and budget:
                r = self.waiting[0]
                n = min(r.unread_tokens, budget)
                taken.append((r, n))
                budget -= n
                if n == r.unread_tokens:
                    self.waiting.popleft()
                else:
                    break
        n_tokens = 0
        for r, n in taken:
            if r.unread_tokens == r.n_prompt_tokens:
                r.read_started_at_ns = now
            r.unread_tokens -= n
            n_tokens += n
        self.queued_tokens -= n_tokens
        return taken, n_tokens

    def _take_within_memory(self) -> list[tuple[Request, int]]:
        """D4 under E4d: a prompt whose reading has not begun is taken only if its reservation
        fits the free tokens (less what prompts taken before it reserved); the first that does
        not fit stops the taking. Chunked, a prompt is considered only if the budget reaches it."""
        waiting = self.waiting
        capacity = self.kv_capacity
        assert capacity is not None  # (taken so only under E4)
        free = capacity - self.kv_used
        taken = []
        budget = self.chunk_tokens
        while waiting and budget != 0:
            r = waiting[0]
            if r.unread_tokens == r.n_prompt_tokens:  # not begun: reserve now, or stop
                need = self.kv_need(r)
                if need > free:
                    break
                free -= need
            n = r.unread_tokens if budget is None else min(r.unread_tokens, budget)
            taken.append((r, n))
            if budget is not None:
                budget -= n
            if n == r.unread_tokens:
                waiting.popleft()
            else:
                break
        self.reserve(capacity - free - self.kv_used)
        return taken

    def run(self, env: Environment, host: Host):
        """The GPU's SimPy process: the page's loop when no option touches this GPU (the loop of
        M1-M5, D1-D10 alone, for speed), else the loop with the options (E2-E4). Both give the
        same times with the options at neutral values (tests/test_extension_properties.py)."""
        plain = not (self.cost.extra_terms or self.kv_capacity is not None or self.serves_handoff
                     or self.always_defer)
        return self._run_page(env, host) if plain else self._run_options(env, host)

    def _run_page(self, env: Environment, host: Host):
        cost = self.cost
        end_priority = PHASE_END + self.number
        start_priority = PHASE_START + self.number
        # the records, appended once per iteration
        record_start = self.started_at_ns.append
        record_end = self.ended_at_ns.append
        record_replies = self.n_replies_written.append
        record_tokens = self.n_prompt_tokens_read.append
        while True:
            if not self.has_work():
                self.wake = env.event()
                yield self.wake
            started = env.now
            index = self.n_started
            self.n_started = index + 1
            n_replies = self.n_replies
            taken, n_tokens = self._take_prompt_tokens(started) if self.waiting else ((), 0)
            yield Slot(env, cost.iteration_ns(n_replies, n_tokens), end_priority)

            now = env.now
            record_start(started)
            record_end(now)
            record_replies(n_replies)
            record_tokens(n_tokens)
            leaving = self.leaving.pop(index, None)
            if leaving:
                self.n_replies -= len(leaving)
                host.replies_finished(leaving, now)
            if taken:
                finished_reading = []
                for r, n in taken:
                    self.reads_log.extend((index, r.request_id, n))
                    if r.unread_tokens == 0:
                        finished_reading.append(r)
                if finished_reading:
                    host.prompts_read(self, finished_reading, now)
            if self.has_work() and host.more_may_arrive_now(now):
                yield Slot(env, 0, start_priority)

    def _run_options(self, env: Environment, host: Host):
        cost = self.cost
        extra_terms = cost.extra_terms
        kv = self.kv_capacity is not None
        serves_handoff, always_defer = self.serves_handoff, self.always_defer  # set before the run
        end_priority = PHASE_END + self.number
        start_priority = PHASE_START + self.number
        # the records, appended once per iteration
        record_start = self.started_at_ns.append
        record_end = self.ended_at_ns.append
        record_replies = self.n_replies_written.append
        record_tokens = self.n_prompt_tokens_read.append
        while True:
            if not self.has_work():
                self.wake = env.event()
                yield self.wake
                while kv and not self.has_work():  # E4: freed memory may still not fit the head
                    self.wake = env.event()
                    yield self.wake
            started = env.now
            index = self.n_started
            self.n_started = index + 1
            n_replies = self.n_replies
            taken, n_tokens = self._take_prompt_tokens(started) if self.waiting else ((), 0)
            if kv:
                kv_used = self.kv_used
            if extra_terms:
                # E2: tokens of these prompts that earlier iterations read
                n_reread = sum(r.n_prompt_tokens - r.unread_tokens - n for r, n in taken)
                n_context = self.context_base + index * n_replies  # E3: prompt + word - 1, summed
                duration = cost.iteration_ns_full(n_replies, n_tokens, n_reread, n_context)
            else:
                duration = cost.iteration_ns(n_replies, n_tokens)
            yield Slot(env, duration, end_priority)

            now = env.now
            record_start(started)
            record_end(now)
            record_replies(n_replies)
            record_tokens(n_tokens)
            if kv:
                self.kv_used_tokens.append(kv_used)
            leaving = self.leaving.pop(index, None)
            if leaving:
                self.n_replies -= len(leaving)
                if self.track_context:
                    self.context_base -= sum(r.n_prompt_tokens + 1 - r.join_iteration for r in leaving)
                if kv:
                    self.kv_used -= sum(r.n_prompt_tokens + r.n_reply_words for r in leaving)  # E4a, c
                host.replies_finished(leaving, now)
            if taken:
                finished_reading = []
                for r, n in taken:
                    self.reads_log.extend((index, r.request_id, n))
                    if r.unread_tokens == 0:
                        finished_reading.append(r)
                        if kv and r.n_reply_words == 1:
                            self.kv_used -= self.kv_need(r)  # a one-word reply ends with its read
                if finished_reading:
                    host.prompts_read(self, finished_reading, now)
            if serves_handoff:
                host.iteration_ended(now)
            if self.has_work() and (always_defer or host.more_may_arrive_now(now)):
                yield Slot(env, 0, start_priority)
