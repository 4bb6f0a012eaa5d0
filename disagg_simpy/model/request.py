"""A request's state during a run, and the fields its record keeps (times in ns; -1 = never).

Only this module writes a `Request` (docs/architecture.md, "Owned parts"): the stages of its life call one
method per event (routed, its read begun and continued, word 1, its writing GPU chosen, its ship, its seat,
its end), each a plain store or two, as the stages wrote them before: per request, not per iteration."""

from __future__ import annotations

import numpy as np

from .records import REQUEST_FIELDS

NO_BLOCKS = np.empty(0, np.int64)  # E13: a request's cache block ids when it has none (model/prefix_cache.py)


class Request:
    """A request's state and its record (times in ns; -1 = never)."""

    __slots__ = (*REQUEST_FIELDS, "measured", "unread_tokens", "blocks", "cached_tokens", "read_size",
                 "n_preemptions", "dropped_at_ns",
                 # E9 (paged KV), set only when it is on
                 "kv_blocks", "kv_due", "seat_index", "seat_word", "seat_base", "stretches", "returning")

    # E9 (paged KV): set by paged_kv.prepare when the arrangement has it
    kv_blocks: int  # KV blocks it holds on the GPU it is on (seated: held at its seat, kv_blocks.held_at)
    kv_due: int  # seated: the key of its first due block (then every kv_block_tokens keys; -1: none)
    seat_index: int  # iteration index of its current seat (-1: not seated)
    seat_word: int  # the word its seat starts with (or, away, the word it comes back with)
    seat_base: int  # its E3 context term while seated
    stretches: list[list[int]] | None  # its stretches once preempted (paged_away's module docstring)
    returning: bool  # queued or being read again (recompute)

    def __init__(self, request_id: int, arrived_at_ns: int, n_prompt: int, n_words: int, measured: bool,
                 blocks: np.ndarray = NO_BLOCKS):
        self.request_id = request_id
        self.arrived_at_ns = arrived_at_ns
        self.n_prompt_tokens = n_prompt
        self.n_reply_words = n_words
        self.measured = measured
        self.unread_tokens = n_prompt
        self.read_size = n_prompt  # tokens of the read under way (E9: prompt + words so far for a re-read)
        self.n_preemptions = 0  # E9
        self.dropped_at_ns = -1  # E9: preempted more than max_preemptions times
        self.reading_gpu = -1
        self.read_started_at_ns = -1
        self.first_word_at_ns = -1
        self.writing_gpu = -1
        self.joined_at_ns = -1
        self.join_iteration = -1
        self.finished_at_ns = -1
        self.handoff_at_ns = -1
        self.ship_started_at_ns = -1
        self.blocks = blocks  # E13: its prompt's cache block ids (until its read ends: model/prefix_cache.py)
        self.cached_tokens = 0  # E13: prompt tokens found cached when its reading began

    # -- the events of its life (the stages that call each: docs/architecture.md, "Owned parts") ----------
    def routed(self, gpu: int) -> None:
        """It arrives and is routed to GPU `gpu`, which reads its prompt (M3, D1, E6, E13: model/engine.py)."""
        self.reading_gpu = gpu

    def begin_read(self, now: int, n: int) -> int:
        """Its reading begins now with `n` tokens, after its cached prefix (E13): that prefix's tokens
        (model/prompts.py's `PromptQueue.take`)."""
        self.read_started_at_ns = now
        cached = self.cached_tokens
        self.unread_tokens -= cached + n
        return cached

    def read_more(self, n: int) -> None:
        """An iteration (or a repeat's iterations) reads `n` more of its prompt's tokens (D4)."""
        self.unread_tokens -= n

    def forget_read_start(self) -> None:
        """The iteration that began its reading never started (the run stopped first: `Repeat.flush`)."""
        self.read_started_at_ns = -1

    def cache_hit(self, tokens: int) -> None:
        """E13: its reading begins with its first `tokens` tokens found cached (model/prefix_cache.py)."""
        self.cached_tokens = tokens

    def drop_blocks(self) -> None:
        """E13: its read ended: its prompt's block ids are no longer needed (a run keeps every request)."""
        self.blocks = NO_BLOCKS

    def admitted(self, block: int, now: int, n: int) -> int:
        """E9b: a prompt not begun is admitted now and its first `n` tokens read (`read_more`, in the same call: once
        per admission): it holds the KV blocks of `block` tokens its unread tokens fill (their tokens returned); its
        first start, unless a re-read, which keeps its own (model/kv_take.py)."""
        unread = self.unread_tokens
        blocks = self.kv_blocks = -(-unread // block)
        if unread == self.n_prompt_tokens:
            self.read_started_at_ns = now
        self.unread_tokens = unread - n
        return blocks * block

    def first_word(self, now: int) -> None:
        """Its prompt's last token was read: word 1 ends now (model/engine.py's `prompts_read`)."""
        self.first_word_at_ns = now

    def stays(self, gpu: int, now: int) -> None:
        """Its prompt's last token was read on GPU `gpu`, which writes its reply (colocated; E6's local prompts):
        word 1 ends now and the reply joins there now (one event: `first_word` and `joins`)."""
        self.first_word_at_ns = self.joined_at_ns = now
        self.writing_gpu = gpu

    def hand_over(self, gpu: int, now: int, ship_at: int = -1) -> None:
        """A split: its writing GPU `gpu` is chosen now and its ship requested (D3, E4e; model/kv_link.py); the ship
        leaves at `ship_at` if known (now with independent links; else `ship_starts`, E5)."""
        self.writing_gpu = gpu
        self.handoff_at_ns = now
        self.ship_started_at_ns = ship_at

    def holds_blocks(self, blocks: int) -> None:
        """E9: it holds `blocks` KV blocks on the GPU it is on (the handoff reserves its prompt's, E4e)."""
        self.kv_blocks = blocks

    def ship_starts(self, now: int) -> None:
        """Its KV cache's ship leaves now (M4, E5: model/kv_link.py)."""
        self.ship_started_at_ns = now

    def joins(self, now: int) -> None:
        """Its reply joins its writing GPU now, its ship ended (M2, M4: model/kv_link.py)."""
        self.joined_at_ns = now

    def seated(self, index: int) -> None:
        """It gets words 2.. from its GPU's iterations `index`, `index` + 1, ... (model/batch.py's `Batch.seat`)."""
        self.join_iteration = index

    def finish(self, now: int) -> None:
        """Its last word ends now (model/engine.py)."""
        self.finished_at_ns = now

    # paged KV's transitions (model/paged_kv.py, paged_away.py)
    def page(self) -> None:
        """E9: its state on arriving at an arrangement with paged KV (`kv_due` and `seat_base` are
        set when it takes a seat, before they are read)."""
        self.kv_blocks = 0
        self.seat_index = -1
        self.seat_word = 2
        self.stretches = None
        self.returning = False

    def join_paged(self, now: int) -> None:
        """E9: it joins a GPU's replies at `now`, or (read again) rejoins them: its first join's time stays."""
        if self.joined_at_ns < 0:
            self.joined_at_ns = now

    def paged_seat(self, index: int, key: int, base: int, due: int) -> None:
        """E9: it takes a seat at iteration `index`, its words from key `key` on (E10: writing
        iterations), its E3 context term `base`, its first due block's key `due` (-1: none)."""
        if self.join_iteration < 0:
            self.join_iteration = index
        if self.stretches is not None:
            self.stretches[-1][0] = index  # the stretch that waited for this seat
        self.seat_index, self.seat_base, self.kv_due = key, base, due

    def set_due(self, key: int) -> None:
        """E9: the key its next block falls due at (-1: none, or it left its seat)."""
        self.kv_due = key

    def leave_seat(self, blocks: int) -> None:
        """E9: preempted while seated, holding `blocks` blocks then (to be freed)."""
        self.kv_blocks = blocks
        self.seat_index = -1

    def end_stretch(self, words: int) -> list[int]:
        """E9: preempted with `words` words: its current stretch ends there (the stretches are
        logged from its first preemption on); that stretch, dropped from the log if it wrote no
        word and its lead word was not its own (a swapped reply preempted again before a word)."""
        if self.stretches is None:
            self.stretches = [[self.join_iteration, 2, -1, self.first_word_at_ns, 1]]
        last = self.stretches[-1]
        last[2] = words - last[1] + 1
        if last[2] == 0 and not last[4]:
            self.stretches.pop()
        return last

    def preempted(self, words: int) -> int:
        """E9: preempted with `words` words (it comes back with the next); its count of preemptions."""
        self.n_preemptions += 1
        self.seat_word = words + 1
        return self.n_preemptions

    def drop(self, now: int) -> None:
        """E9g: dropped at `now`, its blocks freed."""
        self.kv_blocks = 0
        self.dropped_at_ns = now

    def go_away(self, words: int, last_at: int, reread: bool) -> None:
        """E9: preempted with `words` words, the last at `last_at` (ns): its next stretch opens, to
        begin with word words + 1; `reread` (recompute): its blocks freed, queued to be read again
        (prompt and words), the read ending with that word."""
        assert self.stretches is not None  # (`end_stretch` logged them)
        self.stretches.append([-1, words + 1, -1, last_at, 0])
        if reread:
            self.kv_blocks = 0
            self.read_size = self.unread_tokens = self.n_prompt_tokens + words
            self.returning = True

    def read_again(self, now: int) -> bool:
        """E9e: its re-read ended at `now` with its word `seat_word`: whether that was its last
        (else it comes back with the next)."""
        self.returning = False
        assert self.stretches is not None  # (a re-read was preempted: its stretches are logged)
        self.stretches[-1] = [-1, self.seat_word + 1, -1, now, 1]  # its word seat_word, read
        if self.seat_word == self.n_reply_words:
            self.stretches[-1][2] = 0
            return True
        self.seat_word += 1
        return False

    def close_stretch(self) -> None:
        """E9: its last word was just written: its open stretch (logged, it was preempted) ends."""
        if self.stretches is not None:
            self.stretches[-1][2] = self.n_reply_words - self.stretches[-1][1] + 1
