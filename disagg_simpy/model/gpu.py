"""A GPU: a SimPy process running iterations (M1, M2, M4, M5, D4, D9).

One iteration writes one word for every reply in progress on the GPU and may read prompt
tokens. Its replies and prompts are fixed when it starts. Words are not events: a reply that
joins when the GPU has started `j` iterations gets its words 2..n at the ends of iterations
j .. j+n-2, so the GPU only needs to know, per iteration, which replies leave after it.
"""

from __future__ import annotations

from array import array
from collections import deque
from typing import Protocol

import simpy

from .phases import PHASE_END, PHASE_START, Slot, fire
from .request import Request


class IterationCost(Protocol):
    def iteration_ns(self, n_replies: int, n_tokens: int) -> int: ...


class Host(Protocol):
    """What a GPU needs from the arrangement it runs in (the engine), called at the end of an
    iteration (D5 step 1)."""

    cost: IterationCost

    def replies_finished(self, requests: list[Request], now: int) -> None: ...

    def prompts_read(self, gpu: Gpu, requests: list[Request], now: int) -> None: ...

    def more_may_arrive_now(self, now: int) -> bool: ...

class Gpu:
    """State of one GPU; `run` is its SimPy process."""

    def __init__(self, number: int, reads: bool, writes: bool, chunk_tokens: int | None):
        self.number = number
        self.reads = reads
        self.writes = writes
        self.chunk_tokens = chunk_tokens
        self.waiting: deque[Request] = deque()  # prompts routed here, not fully read (front may be partly read)
        self.queued_tokens = 0  # D1
        self.n_replies = 0  # replies that get a word from the next iteration
        self.n_shipping = 0  # replies whose KV cache is shipping here (writing GPUs of a split)
        self.leaving: dict[int, list[Request]] = {}  # iteration index -> replies whose last word ends it
        self.last_assignment = -1
        self.n_started = 0
        self.wake: simpy.Event | None = None  # pending while idle
        # Records: one entry per iteration, one per (iteration, prompt) read. Flat int64
        # arrays, not lists: 8 bytes a value, and nothing for the garbage collector to scan.
        self.started_at_ns = array("q")
        self.ended_at_ns = array("q")
        self.n_replies_written = array("q")
        self.n_prompt_tokens_read = array("q")
        self.reads_log = array("q")  # iteration, request id, tokens; iteration, ...

    @property
    def role(self) -> str:
        return "both" if self.reads and self.writes else ("reads" if self.reads else "writes")

    def has_work(self) -> bool:
        return self.n_replies > 0 or bool(self.waiting)

    def add_prompt(self, request: Request) -> None:
        self.waiting.append(request)
        self.queued_tokens += request.n_prompt_tokens
        self._wake()

    def add_reply(self, request: Request, now: int) -> None:
        """A reply joins: it gets a word from every iteration starting now or later (M2, M4)."""
        request.joined_at_ns = now
        request.join_iteration = self.n_started
        self.n_replies += 1
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
        """The prompt tokens this iteration reads (D4), and how many; they stop counting as
        queued (D1)."""
        if self.chunk_tokens is None:
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

    def run(self, env: simpy.Environment, host: Host):
        cost = host.cost
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
