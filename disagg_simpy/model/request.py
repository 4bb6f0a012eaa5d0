"""A request's state during a run, and the fields its record keeps (times in ns; -1 = never)."""

from __future__ import annotations

from .records import REQUEST_FIELDS


class Request:
    """A request's state and its record (times in ns; -1 = never)."""

    __slots__ = (*REQUEST_FIELDS, "measured", "unread_tokens", "blocks", "cached_tokens")

    def __init__(self, request_id: int, arrived_at_ns: int, n_prompt: int, n_words: int, measured: bool):
        self.request_id = request_id
        self.arrived_at_ns = arrived_at_ns
        self.n_prompt_tokens = n_prompt
        self.n_reply_words = n_words
        self.measured = measured
        self.unread_tokens = n_prompt
        self.reading_gpu = -1
        self.read_started_at_ns = -1
        self.first_word_at_ns = -1
        self.writing_gpu = -1
        self.joined_at_ns = -1
        self.join_iteration = -1
        self.finished_at_ns = -1
        self.handoff_at_ns = -1
        self.ship_started_at_ns = -1
        self.blocks: tuple[int, ...] = ()  # E13: its prompt's cache block ids
        self.cached_tokens = 0  # E13: prompt tokens found cached when its reading began
