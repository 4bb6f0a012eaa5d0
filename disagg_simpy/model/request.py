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
                 "kv_blocks", "kv_due", "kv_order", "seat_index", "seat_word", "seat_base", "stretches", "returning")

    # E9 (paged KV): set by paged_kv.prepare when the arrangement has it
    kv_blocks: int  # KV blocks it holds on the GPU it is on (seated: held at its seat, kv_blocks.held_at)
    kv_due: int  # seated: the key of its first due block (then every kv_block_tokens keys; -1: none)
    kv_order: int  # its place in its GPU's join order
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
