"""Repeats (model/repeats.py) on a GPU with paged KV (E9) that mixes reads and writes (no E10):
`PagedRepeat`, for a repeat whose iterations do not grow (no E2/E3/E7 step), does at the starts
inside it only E9's work (their due blocks, the KV memory held logged after them), and `bound` is
the options' bound for such a GPU. Chosen once per run (model/option_starts.py's
`repeat_kinds` and `bounds`), they do what `Repeat` and the general bound did there, without testing
for E4, E10 or growing durations at each repeat: a repeat's fixed cost is most of what it saves
on the few iterations it often holds (benchmarks/ab.py --opcodes; records: tests/model, the
reference model and fast-forward on/off)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .phases import Environment
from .plain_repeats import PlainRepeat
from .repeats import Repeat, RepeatingGpu
from .request import Request


class PagedRepeat(Repeat):
    """`Repeat` on a GPU with paged KV that mixes reads and writes, its durations all `duration`:
    the blocks due at the starts inside it taken, key by key (its keys are its iterations), as
    `Repeat._grow` takes them (`bound` made sure they are free)."""

    __slots__ = ()

    def __init__(self, gpu: RepeatingGpu, env: Environment, started: int, index: int, duration: int, n_replies: int,
                 head: Request | None, n_tokens: int, n: int):
        # `Repeat.__init__`'s case without its tests of E4, E10 or a growth (`kv` and `grows_at`, which only
        # `Repeat`'s own methods read, are not set)
        PlainRepeat.__init__(self, gpu, env, started, index, duration, n_replies, head, n_tokens, n)
        self.paged = gpu.paged
        self.n_kv_logged = 1
        self.key = -1  # (no E10)
        self.ends = None  # (no growth; `Repeat` makes it a slot)

    def finish(self) -> int:
        """`Repeat.finish`: take every chunk, record all iterations but the last, take the blocks due at
        the starts not grown yet (the repeat is done with: `n_kv_logged` is not updated)."""
        gpu, n = self.gpu, self.n
        if self.head is not None:
            self._take(n - self.n_taken)
        self.record(n - 1)
        if n > self.n_kv_logged:
            self.paged.blocks.grow(gpu, self.index + self.n_kv_logged, n - self.n_kv_logged, gpu.kv_used_tokens)
        gpu.n_started = self.index + n
        return self.duration

    def _log_kv(self, n_started: int) -> None:
        """`Repeat._log_kv` with E9 on a GPU that mixes: the blocks due at the starts up to the first `n_started`."""
        if n_started > self.n_kv_logged:
            gpu = self.gpu
            self.paged.blocks.grow(gpu, self.index + self.n_kv_logged, n_started - self.n_kv_logged, gpu.kv_used_tokens)
            self.n_kv_logged = n_started



def kinds(gpu: Any) -> tuple[type[PlainRepeat], type[PlainRepeat]]:
    """`option_starts.repeat_kinds` for a GPU with paged KV that mixes: `PagedRepeat` unless the
    iterations grow (E3 any batch with replies; E2 and E7 a reading one), where `Repeat` computes them."""
    cost = gpu.cost
    reading: type[PlainRepeat] = Repeat if cost.reading_grows else PagedRepeat
    return reading, Repeat if cost.writing_grows else PagedRepeat


def bound(kv: Any) -> Callable[[Any, int, Any, int, int], int]:
    """The options' bound (`option_starts.bounds`) for the GPU of `kv` (its model/paged_kv.PagedKv) that mixes reads and
    writes (its keys are its iterations): how many of the `n` iterations from `index` run before one
    whose due blocks are not all free; one after a start that preempted or swapped."""
    gpu, block, blocks, capacity = kv.gpu, kv.block, kv.blocks, kv.gpu.kv_capacity

    def paged_bound(_: Any, index: int, taken: Any, n_replies: int, n: int) -> int:
        if kv.dirty and (kv.blocked or kv.moved_tokens):
            return 1  # E9: a start that preempted admits nothing, the next may; a swap's time is its own
        free = capacity - gpu.kv_used
        if n_replies * block * -(-(n - 1) // block) <= free:  # (each reply at most one block every `block` starts)
            return n
        bounded: int = blocks.run_free(free, index, n)
        return bounded
    return paged_bound
