"""Where prompts and replies go (M3, D1-D3): pure choices over a handful of GPUs.

Each side (reading, writing) keeps its own count of assignments. Among equally good GPUs the
one whose most recent assignment is oldest wins; GPUs never assigned come first, lowest number
first (D2). Breaking ties by GPU number alone would pile prompts onto GPU 0, because queues are
empty most of the time.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, overload

if TYPE_CHECKING:
    from .batch import Batch
    from .memory import Memory
    from .prompts import PromptQueue

# min() keeps the first of equal keys and each side lists its GPUs by number, so these keys
# also break the last tie (never-assigned GPUs) by lowest number (D2).
_READING_KEY = attrgetter("queue.queued_tokens", "last_assignment")


class Routable(Protocol):
    number: int
    queue: PromptQueue  # D1: its `queued_tokens`, prompt tokens not yet read, less those being read now
    batch: Batch  # its `n_replies`, replies in progress on it (model/batch.py)
    n_shipping: int  # replies whose KV cache is shipping to it
    n_local: int  # E6: local prompts routed to it whose reading has not finished
    memory: Memory  # E4: its KV memory (model/memory.py)
    last_assignment: int  # -1 if never assigned

    def assigned(self, n: int) -> None: ...  # it was given its side's assignment n
    paged: Any  # E9: its model/paged_kv.PagedKv, else None (Any: as model/gpu.py's `Gpu.paged`)


G = TypeVar("G", bound=Routable)


class Side(Generic[G]):
    """One side's candidates and its assignment counter."""

    __slots__ = ("gpus", "n_assignments")

    def __init__(self, gpus: Sequence[G]):
        self.gpus = tuple(gpus)
        self.n_assignments = 0

    def _assign(self, gpu: G) -> G:
        gpu.assigned(self.n_assignments)
        self.n_assignments += 1
        return gpu

    def least_queued(self) -> G:
        """The reading GPU with the least work queued (M3, D1, D2)."""
        gpus = iter(self.gpus)  # (a plain loop: 3x faster than min() with a key for a few GPUs)
        best = next(gpus)
        least = best.queue.queued_tokens
        for g in gpus:
            q = g.queue.queued_tokens
            if q < least or (q == least and g.last_assignment < best.last_assignment):
                best, least = g, q
        best.assigned(self.n_assignments)  # (`_assign`, inline: once per arrival)
        self.n_assignments += 1
        return best

    def round_robin(self) -> G:
        """E13 `round_robin`: the k-th prompt routed on this side goes to instance k mod n."""
        return self._assign(self.gpus[self.n_assignments % len(self.gpus)])

    def power_of_two(self, u: float) -> G:
        """E13 `power_of_two`: the pair (i, j), i < j, numbered in lexicographic order, whose
        number is floor(u x n(n-1)/2), then the one with less work queued (ties by D2)."""
        n = len(self.gpus)
        if n == 1:
            return self._assign(self.gpus[0])
        k = int(u * (n * (n - 1) // 2))
        i = 0
        while k >= n - 1 - i:
            k -= n - 1 - i
            i += 1
        return self._assign(min((self.gpus[i], self.gpus[i + 1 + k]), key=_READING_KEY))

    def prefix_aware(self, hits: Sequence[int], cap: int) -> G:
        """E13 `prefix_aware`: among the instances whose work queued is at most the least work
        queued plus `cap`, the one with the longest cached prefix (`hits`, by position), ties
        by less work queued, then D2."""
        least = min(g.queue.queued_tokens for g in self.gpus)
        candidates = [(g, h) for g, h in zip(self.gpus, hits) if g.queue.queued_tokens <= least + cap]
        best = min(candidates, key=lambda gh: (-gh[1], gh[0].queue.queued_tokens, gh[0].last_assignment))
        return self._assign(best[0])

    @overload
    def fewest_replies(self) -> G: ...
    @overload
    def fewest_replies(self, need: int | None, away: bool = False) -> G | None: ...

    def fewest_replies(self, need: int | None = None, away: bool = False) -> G | None:
        """The writing GPU with the fewest replies, counting those shipping to it and, under E6,
        local prompts not yet read (M3, D3, D2). With `need` (E4e): only among the GPUs whose
        free KV memory holds that many tokens; None if none does. With `away` (E9): only among
        those with no preempted reply away (being read again, or swapped out)."""
        best: G | None = None
        least = 0
        for g in self.gpus:  # (a plain loop: min() with a key costs 3x for a few GPUs)
            if need is not None and (g.memory.capacity - g.memory.used < need  # type: ignore[operator]  # (E4e: every GPU has a capacity)
                                     or (away and g.paged.n_away)):
                continue
            load = g.batch.n_replies + g.n_shipping + g.n_local
            if best is None or load < least or (load == least and g.last_assignment < best.last_assignment):
                best, least = g, load
        return None if best is None else self._assign(best)
