"""A request's state during a run, and the fields its record keeps (times in ns; -1 = never)."""

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
    stretches: list[list[int]] | None  # its stretches once preempted (paged_kv's module docstring)
    returning: bool  # queued or being read again (recompute)

    def __init__(self, request_id: int, arrived_at_ns: int, n_prompt: int, n_words: int, measured: bool):
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
        self.blocks = NO_BLOCKS  # E13: its prompt's cache block ids (until its read ends: model/prefix_cache.py)
        self.cached_tokens = 0  # E13: prompt tokens found cached when its reading began

    # paged KV's transitions (model/paged_kv.py, paged_away.py)
    def page(self) -> None:
        """E9: its state on arriving at an arrangement with paged KV (`kv_due` and `seat_base` are
        set when it takes a seat, before they are read)."""
        self.kv_blocks = 0
        self.seat_index = -1
        self.seat_word = 2
        self.stretches = None
        self.returning = False

    def hold_blocks(self, n: int) -> None:
        """E9: it holds `n` KV blocks on its GPU (admitted, swapped back in)."""
        self.kv_blocks = n

    def join_paged(self, now: int) -> None:
        """E9: it joins a GPU's replies at `now`, or (read again) rejoins them: its first join's time stays."""
        if self.joined_at_ns < 0:
            self.joined_at_ns = now

    def seated(self, index: int, key: int, base: int, due: int) -> None:
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
