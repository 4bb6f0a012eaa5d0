"""A GPU's prompt queue, the queue part of its state (D1, D4): the prompts routed to it and D4's plain take."""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .request import Request


class PromptQueue:
    """A GPU's prompt queue, the queue part of its state (docs/architecture.md, "Owned parts"): the prompts routed
    to it and not fully read (the front may be partly read), their tokens still queued (D1), and the chunk it reads
    them in (None: whole), and E8's token budget of an iteration (`max_tokens`, None: none). Only this module writes
    it: the GPU, its repeats, the options' choices of prompts (model/kv_take.py) and E9 call its methods."""

    __slots__ = ("waiting", "queued_tokens", "chunk_tokens", "max_tokens")

    def __init__(self, chunk_tokens: int | None, max_tokens: int | None = None):
        self.waiting: deque[Request] = deque()
        self.queued_tokens = 0  # D1
        self.chunk_tokens = chunk_tokens
        self.max_tokens = max_tokens

    def add(self, request: Request) -> None:
        """A prompt is routed here (D5 step 2)."""
        self.waiting.append(request)
        self.queued_tokens += request.n_prompt_tokens

    def requeue(self, at: int, request: Request) -> None:
        """E9: a preempted reply queues at place `at` to be read again (its `read_size` tokens)."""
        self.waiting.insert(at, request)
        self.queued_tokens += request.read_size

    def take_chunks(self, head: Request, tokens: int) -> None:
        """A repeat's iterations read `tokens` more of the head prompt, in chunks (model/repeats.py); its last leaves the queue."""
        head.read_more(tokens)
        self.queued_tokens -= tokens
        if head.unread_tokens == 0:
            self.waiting.popleft()

    def pop(self) -> None:
        """The head prompt is taken whole or to its end (the options' choices, model/kv_take.py); its tokens are counted there."""
        self.waiting.popleft()

    def count_taken(self, n_tokens: int) -> None:
        """`n_tokens` queued tokens are read by the iteration starting now (E9's `paged_take`, model/kv_take.py)."""
        self.queued_tokens -= n_tokens

    def set_chunk(self, chunk_tokens: int | None) -> None:
        """E12: a GPU that changes role reads in its new side's chunks."""
        self.chunk_tokens = chunk_tokens

    def take_whole(self, now: int, n_written: int) -> tuple[list[tuple[Request, int]], int]:
        """E8, whole prompts (`take_with_options` with no KV limit and no prefix cache): the head is read whole if it
        fits the room `max_tokens - n_written`, else it waits, unless larger than the whole budget (or begun), when it
        is read in pieces of the room. (The planner's admission itself: model/planner.py.)"""
        waiting, limit = self.waiting, self.max_tokens
        assert limit is not None  # (only under E8's budget)
        taken, room = [], limit - n_written
        while waiting:
            r = waiting[0]
            n = r.unread_tokens
            if n > room:
                if room == 0 or n == r.read_size and n <= limit:
                    break
                n = room
            taken.append((r, n))
            room -= n
            if n < r.unread_tokens:
                break
            waiting.popleft()
        return self.take(now, taken)

    def take(self, now: int, taken: list[tuple[Request, int]] | None = None, budget: int | None = None
             ) -> tuple[list[tuple[Request, int]], int]:
        """The prompt tokens an iteration starting now reads (D4; `taken` if the options chose them; chunked, up to `budget`
        if given, E8), and how many. They stop counting as queued (D1)."""
        if taken is not None:
            pass
        elif self.chunk_tokens is None:
            taken = []
            for r in self.waiting:  # (a loop: a comprehension's own frame costs more for 1-4 prompts)
                taken.append((r, r.unread_tokens))
            self.waiting.clear()
        else:
            taken, budget = [], self.chunk_tokens if budget is None else budget
            if self.waiting and (r := self.waiting[0]).unread_tokens > budget and r.unread_tokens != r.read_size:
                r.read_more(budget)  # (a begun head fills the chunk alone: most chunks)
                self.queued_tokens -= budget
                return [(r, budget)], budget
            waiting = self.waiting
            while waiting and budget:
                r = waiting[0]
                n = unread if (unread := r.unread_tokens) < budget else budget  # (no min(): a call)
                taken.append((r, n))
                budget -= n
                if n == unread:
                    waiting.popleft()
                else:
                    break
        n_tokens = n_cached = 0
        for r, n in taken:
            if r.unread_tokens == r.read_size == r.n_prompt_tokens:  # (E9: a re-read keeps its first start)
                n_cached += r.begin_read(now, n)  # E13: its cached prefix is not read
            else:
                r.read_more(n)
            n_tokens += n
        self.queued_tokens -= n_tokens + n_cached
        return taken, n_tokens
