"""Prefix caching (E13): an instance keeps the KV of prompt blocks it has read, least recently
used out first, so a prompt that begins like an earlier one reads only the rest (docs/rules.md).

A request carries its prompt's block ids (`Requests.block_ids`, from a trace's `hash_ids` or
drawn prefixes): block j holds tokens j*B .. (j+1)*B - 1 and its id names the whole prompt up to
there, so two prompts share a block only if they share everything before it. The cache is a plain
ordered dict (oldest first), a pin count per block, and no SimPy: it changes only when a read
begins (pins) and when a read ends (unpins, inserts, evicts), at known points of D5's instant.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .request import Request


class CacheBlockIds:
    """Each request's ids of blocks of `block` tokens, sliced from the workload's ids of blocks of
    `unit` tokens (a trace's 512; `block` divides it) when it arrives (`of`), not built for every
    request up front: a session's turn resends every earlier turn, so its requests' ids grow
    quadratically in turns, and as Python ints they cost about six times numpy's 8 bytes. Sub-block s
    of unit block u is u * (unit // block) + s, so every sub-block keeps its unit's meaning (the prefix
    up to it). A request holds them as numpy ids until its read ends (`PrefixCache.reads_ended`);
the cache makes Python ints of the few it looks at (`tolist`)."""

    __slots__ = ("ids", "starts", "k", "sub")

    def __init__(self, block_ids: np.ndarray, starts: np.ndarray, unit: int, block: int):
        self.ids = block_ids
        self.starts: list[int] = starts.tolist()
        self.k = unit // block
        self.sub = np.arange(self.k, dtype=np.int64)

    def of(self, i: int) -> np.ndarray:
        """Request `i`'s ids: a view of the workload's (8 bytes an id), or its sub-blocks'."""
        ids = self.ids[self.starts[i]:self.starts[i + 1]]
        return (ids[:, None] * self.k + self.sub).ravel() if self.k > 1 else ids


class PrefixCache:
    """One instance's cache of `capacity_blocks` blocks of `block_tokens` each (E13)."""

    __slots__ = ("block_tokens", "capacity_blocks", "lru", "pins", "n_hit_tokens")

    def __init__(self, capacity_tokens: int, block_tokens: int):
        self.block_tokens = block_tokens
        self.capacity_blocks = capacity_tokens // block_tokens
        self.lru: OrderedDict[int, None] = OrderedDict()  # cached block ids, least recently used first
        self.pins: dict[int, int] = {}  # block id -> reads in progress that hit it
        self.n_hit_tokens = 0

    def hit_blocks(self, ids: np.ndarray, n_prompt: int) -> int:
        """How many leading blocks of a prompt are cached now. At most (n_prompt - 1) // B blocks
        count: the last prompt token is always read (its word 1 needs it), as vLLM does."""
        lru = self.lru
        n = 0
        for block in ids[: (n_prompt - 1) // self.block_tokens].tolist():
            if block not in lru:
                break
            n += 1
        return n

    def hit_tokens(self, request: Request) -> int:
        """Tokens of a request's longest cached prefix now (whole blocks, `hit_blocks`)."""
        return self.hit_blocks(request.blocks, request.n_prompt_tokens) * self.block_tokens

    def begin_read(self, request: Request, hit: int) -> None:
        """An iteration takes a prompt whose reading begins: its first `hit` tokens are cached."""
        request.cache_hit(hit)
        self.begin(request.blocks, hit // self.block_tokens)

    def reads_ended(self, requests: Iterable[Request]) -> None:
        """Reads that ended at one iteration's end, in the order it took them (`end`)."""
        for r in requests:
            self.end(r.blocks, r.cached_tokens // self.block_tokens, r.n_prompt_tokens)
            r.drop_blocks()  # (no longer needed: a run keeps every request, so it keeps no ids)

    def begin(self, ids: np.ndarray, n_blocks: int) -> None:
        """A read begins with its first `n_blocks` blocks cached: pin them until it ends."""
        pins = self.pins
        for block in ids[:n_blocks].tolist():
            pins[block] = pins.get(block, 0) + 1

    def end(self, ids: np.ndarray, n_hit: int, n_prompt: int) -> None:
        """A read ends: unpin its hit blocks, then cache its full blocks (the partial last one
        never): those not cached take a place each, in prefix order, the least recently used
        unpinned block that is not one of them leaving when the cache is full (none such: this
        block and those after it stay out). Then all its cached blocks become the most recently
        used, its first block most recent of all (so a prompt's tail leaves before its head); blocks
        after one that found no place are left as they are."""
        pins = self.pins
        for block in ids[:n_hit].tolist():
            left = pins[block] - 1
            if left:
                pins[block] = left
            else:
                del pins[block]
        full = ids[: n_prompt // self.block_tokens].tolist()
        lru = self.lru
        mine = set(full)
        kept = []
        for block in full:
            if block not in lru:
                if len(lru) >= self.capacity_blocks and not self._evict(mine):
                    break
                lru[block] = None
            kept.append(block)
        for block in reversed(kept):  # tail first: the head ends most recent
            lru.move_to_end(block)

    def _evict(self, keep: set[int]) -> bool:
        """Drop the least recently used block neither pinned nor in `keep`; False if none."""
        pins = self.pins
        for block in self.lru:
            if block not in pins and block not in keep:
                del self.lru[block]
                return True
        return False
