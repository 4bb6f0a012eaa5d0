"""Where prompts and replies go (M3, D1-D3): pure choices over a handful of GPUs.

Each side (reading, writing) keeps its GPUs in the order of their last assignment there
(`Side.order`; a GPU joining a side, E12, is never assigned there). Among equally good GPUs the
one whose most recent assignment is oldest wins; GPUs never assigned come first, lowest number
first (D2). Breaking ties by GPU number alone would pile prompts onto GPU 0, because queues are
empty most of the time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, overload

if TYPE_CHECKING:
    from .batch import Batch
    from .memory import Memory
    from .prompts import PromptQueue

class Routable(Protocol):
    number: int
    queue: PromptQueue  # D1: its `queued_tokens`, prompt tokens not yet read, less those being read now
    batch: Batch  # its `n_replies`, replies in progress on it (model/batch.py)
    n_shipping: int  # replies whose KV cache is shipping to it
    n_local: int  # E6: local prompts routed to it whose reading has not finished
    memory: Memory  # E4: its KV memory (model/memory.py)
    paged: Any  # E9: its model/paged_kv.PagedKv, else None (Any: as model/gpu.py's `Gpu.paged`)


G = TypeVar("G", bound=Routable)


class Side(Generic[G]):
    """One side's candidates (`gpus`, by number) and its candidates in the order D2 breaks
    ties in (`order`): those never assigned here first (the first `n_fresh`, by number), then the others, oldest
    assignment first. A GPU assigned goes to the end, so among equally good candidates the first in `order` wins
    and the choices compare only loads (ties are the common case: queues are empty most of the time)."""

    __slots__ = ("gpus", "n_assignments", "order", "n_fresh")

    def __init__(self, gpus: Sequence[G]):
        self.gpus = tuple(gpus)
        self.n_assignments = 0  # E13 `round_robin`'s count (on its side, the only choice)
        self.order = list(self.gpus)
        self.n_fresh = len(self.gpus)

    def _assign(self, gpu: G) -> G:
        order = self.order
        if self.n_fresh and order.index(gpu) < self.n_fresh:
            self.n_fresh -= 1
        order.remove(gpu)
        order.append(gpu)
        return gpu

    def leave(self, gpu: G) -> None:
        """E12: `gpu` leaves this side (model/roles.py): no more work is routed to it here."""
        self.gpus = tuple(g for g in self.gpus if g is not gpu)
        if self.order.index(gpu) < self.n_fresh:
            self.n_fresh -= 1
        self.order.remove(gpu)

    def join(self, gpu: G) -> None:
        """E12: `gpu` joins this side, never assigned here (D2)."""
        self.gpus = tuple(sorted((*self.gpus, gpu), key=lambda g: g.number))
        i = 0
        while i < self.n_fresh and self.order[i].number < gpu.number:
            i += 1
        self.order.insert(i, gpu)
        self.n_fresh += 1

    def least_queued(self) -> G:
        """The reading GPU with the least work queued (M3, D1, D2)."""
        gpus = iter(self.order)  # (a plain loop: 3x faster than min() with a key for a few GPUs)
        best = next(gpus)
        least = best.queue.queued_tokens
        for g in gpus:
            q = g.queue.queued_tokens
            if q < least:
                best, least = g, q
        if self.n_fresh:
            return self._assign(best)
        order = self.order  # (`_assign`, inline: once per arrival)
        order.remove(best)
        order.append(best)
        return best

    def round_robin(self) -> G:
        """E13 `round_robin`: the k-th prompt routed on this side goes to instance k mod n."""
        k = self.n_assignments
        self.n_assignments = k + 1
        return self._assign(self.gpus[k % len(self.gpus)])

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
        order = self.order
        return self._assign(min((self.gpus[i], self.gpus[i + 1 + k]), key=lambda g: (g.queue.queued_tokens, order.index(g))))

    def prefix_aware(self, hits: Sequence[int], cap: int) -> G:
        """E13 `prefix_aware`: among the instances whose work queued is at most the least work
        queued plus `cap`, the one with the longest cached prefix (`hits`, by position), ties
        by less work queued, then D2."""
        least = min(g.queue.queued_tokens for g in self.gpus)
        candidates = [(g, h) for g, h in zip(self.gpus, hits) if g.queue.queued_tokens <= least + cap]
        order = self.order
        best = min(candidates, key=lambda gh: (-gh[1], gh[0].queue.queued_tokens, order.index(gh[0])))
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
        for g in self.order:  # (D2's order: the first of equal loads wins; a plain loop: min() with a key costs 3x)
            if need is not None and (g.memory.capacity - g.memory.used < need  # type: ignore[operator]  # (E4e: every GPU has a capacity)
                                     or (away and g.paged.n_away)):
                continue
            load = g.batch.n_replies + g.n_shipping + g.n_local
            if best is None or load < least:
                best, least = g, load
        if best is None or self.n_fresh:
            return None if best is None else self._assign(best)
        order = self.order  # (`_assign`, inline: once per request on a split)
        order.remove(best)
        order.append(best)
        return best
