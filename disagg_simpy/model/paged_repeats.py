"""Repeats (model/repeats.py) on a GPU with paged KV (E9). One that mixes reads and writes (no E10):
`PagedRepeat`, for a repeat whose iterations do not grow (no E2/E3/E7 step), does at the starts
inside it only E9's work (their due blocks, the KV memory held logged after them), and `bound` is
the options' bound for such a GPU. With E10: `writing_bound` and `WritingRepeat` (below). Chosen once per run (model/option_starts.py's
`repeat_kinds` and `bounds`), they do what `Repeat` and the general bound did there, without testing
for E4, E10 or growing durations at each repeat: a repeat's fixed cost is most of what it saves
on the few iterations it often holds (benchmarks/ab.py --opcodes; records: tests/model, the
reference model and fast-forward on/off)."""

from __future__ import annotations

from collections.abc import Callable
from heapq import heappop, heappush
from typing import Any

from .phases import PHASE_END, PHASE_START, Environment, take_over
from .plain_repeats import PlainRepeat, Reads
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


def writing_bound(gpu: Any, index: int, taken: Any, n_replies: int, n: int) -> int:
    """The options' bound (`option_starts.bounds`) under E9 and E10: a repeat of writing iterations runs up to the first writing
    iteration that a reply leaves after (as `unmixed.writing_bound` finds it: the keys `PagedKv.seat` gives, in the
    heap `Gpu.write_order`, a preempted reply's left there until popped), and while every due block is free
    (`BlockSchedule.run_free` from its key, `Gpu.n_writes - 1`, when not free at a glance); prompt-only iterations give no block. After a
    start that preempted or swapped, one iteration alone."""
    paged = gpu.paged
    if paged.blocked or paged.moved_tokens:
        return 1
    if n_replies:
        key = gpu.n_writes - 1
        if by_write := gpu.leaving_by_write:
            order = gpu.write_order
            while order[0] not in by_write:
                heappop(order)
            if order[0] - key < n:
                n = order[0] - key + 1
                if n < 2:
                    return 1
        block = paged.block  # (each reply takes at most a block every `block` starts: counted start by start only near capacity)
        if n_replies * block * -(-(n - 1) // block) > gpu.kv_capacity - gpu.kv_used:
            bounded: int = paged.blocks.run_free(gpu.kv_capacity - gpu.kv_used, key, n)
            return bounded
    return n


class WritingRepeat(PlainRepeat):
    """A repeat of E9-with-E10 writing iterations of one duration (`option_starts.repeat_kinds` picks it
    when E3 is off; else `repeats.Repeat`): `PlainRepeat` plus what `repeats.Repeat` does for them, the
    blocks due at their starts (`BlockSchedule.grow` from key `key - 1`, the first's writing iteration,
    with E4's log, for the starts before any moment someone looks) and E10's count of writing
    iterations (`Gpu.n_writes`: `key` while it runs); and a prompt routed here (`Gpu.add_prompt`,
    `cut(ahead=True)`) leaves it running if no start of it could read, or takes the next iteration
    ahead if that one reads. Both exact, because while it runs its GPU's KV memory held only grows:
    each start takes its due blocks, all free (`writing_bound`: no preemption, so nothing swapped out
    either), no reply leaves before its last iteration ends, and on a colocated GPU (E10 is colocated
    only) nothing else frees memory or swaps in (swap-ins, at starts, need memory that was not free at
    its first start and is less free since).
    - It waits (`_waits`): the head prompt is not begun and cannot be admitted at the next start
      (a reply swapped out, or its blocks plus one not free once the starts so far take theirs): it
      cannot at any later start either (`PagedKv.can_take`: memory only grows, the head stays the
      head, D4), so every start of the repeat writes as planned; the prompt waits, as one by one.
    - Ahead (`_ahead`): cut mid-iteration, the head can be read at the running iteration's end, and
      nothing else can reach the GPU up to that end (`Engine.quiet_until`: no arrival): its state
      then is its state now with the blocks due at the starts so far taken (that end finishes no
      reply, reads nothing, preempts nothing; no other GPU's end reaches a colocated GPU), so that
      start, prompt first (E10a), is taken now as of that end, as `PlainRepeat.cut` takes it. A run
      stopped before that start forgets it (`flush`: `PlainRepeat.flush`'s first start, and the KV
      memory its admissions took, held and peak)."""

    __slots__ = ("key", "n_kv_logged", "peak")

    def __init__(self, gpu: Any, env: Any, started: int, index: int, duration: int, n_replies: int,
                 head: Any, n_tokens: int, n: int):
        self.key = gpu.n_writes  # the second iteration's writing iteration
        self.n_kv_logged = 1  # starts whose blocks are taken and KV memory logged (the first's at its start)
        PlainRepeat.__init__(self, gpu, env, started, index, duration, n_replies, head, n_tokens, n)

    def sync_kv(self, now: int) -> None:
        """`repeats.Repeat.sync_kv`: the blocks due at the starts before `now`."""
        self._log_kv(max(1, min(self.n, 1 + (now - self.started - 1) // self.duration)))

    def _log_kv(self, n_started: int) -> None:
        """The blocks due at the starts from the last grown up to the first `n_started`, each start's KV
        memory logged after them (`repeats.Repeat._grow`)."""
        if n_started > self.n_kv_logged:
            gpu: Any = self.gpu
            gpu.paged.blocks.grow(gpu, self.key - 1 + self.n_kv_logged, n_started - self.n_kv_logged, gpu.kv_used_tokens)
            self.n_kv_logged = n_started

    def cut(self, ahead: bool = False) -> None:
        """`repeats.Repeat.cut` for these iterations; cut `ahead` (a prompt routed here), nothing if no
        start of it could read the head (`_waits`), else, mid-iteration, the next iteration taken now
        (`_ahead`) (class docstring)."""
        if not self.open:
            return
        gpu: Any = self.gpu
        d, now = self.duration, self.env.now
        ran, into = divmod(now - self.started, d)  # iterations ended by now; ns into the next
        if ran >= self.n:  # the last end is now, later in step 1 (from a GPU numbered lower)
            self.open = False
            gpu.n_started = self.index + self.n
            self._log_kv(self.n)
            return
        at_end = into == 0 and ran >= 1
        if ahead and self._waits(ran if at_end else ran + 1):
            return  # (still open: it runs as planned)
        self.open = False
        if at_end:
            self.record(ran)
            self._log_kv(ran)
            gpu.n_started = self.index + ran
            gpu.n_writes = self.key + ran - 1
            self.n = 0
            self.slot = take_over(self.slot, 0, PHASE_START + gpu.number)
            return
        gpu.n_started = self.index + ran + 1
        self._log_kv(ran + 1)  # (the blocks due at the starts so far, before the caller changes the memory held)
        if ran + 1 < self.n:
            self.n = ran + 1
            end = self.started + (ran + 1) * d
            if ahead and (after := self._ahead(end)) is not None:
                self.after = after
                gpu.n_writes = self.key + ran  # (the running iteration's writing iteration and one: no `finish`)
                gpu.n_started += 1
                end += after[2]
            self.slot = take_over(self.slot, end - now, PHASE_END + gpu.number)

    def _waits(self, n_started: int) -> bool:
        """Whether the head prompt can be read at none of the repeat's starts after its first `n_started`
        (their blocks taken now): not begun, and not admitted (`PagedKv.can_take`) (class docstring)."""
        self._log_kv(n_started)
        gpu: Any = self.gpu
        kv, head = gpu.paged, gpu.waiting[0]
        return head.unread_tokens == head.read_size and (bool(kv.swapped) or head.read_size > kv.top - gpu.kv_used)

    def _ahead(self, at: int) -> tuple[Reads, int, int] | None:
        """The iteration starting at `at`, the running one's end, which reads (not `_waits`), taken now if
        nothing can reach the GPU by then (class docstring): its reads, tokens, duration; else None."""
        gpu: Any = self.gpu
        if not gpu.host.quiet_until(at):
            return None
        self.peak = gpu.kv_used, gpu.kv_peak
        _, taken, n_tokens, duration = gpu._start(at, gpu.n_started, gpu.host)
        return taken, n_tokens, duration

    def finish(self) -> int:
        """`PlainRepeat.finish`; the blocks due at its starts, and its last iteration's writing iteration,
        the replies leaving after it (`unmixed.write_started`, inline)."""
        gpu: Any = self.gpu
        n, index = self.n, self.index
        self.record(n - 1)
        if n > self.n_kv_logged:  # (`_log_kv`, inline)
            gpu.paged.blocks.grow(gpu, self.key - 1 + self.n_kv_logged, n - self.n_kv_logged, gpu.kv_used_tokens)
            self.n_kv_logged = n
        gpu.n_started = index + n
        key = gpu.n_writes = self.key + n - 1  # (`unmixed.write_started`, inline)
        if out := gpu.leaving_by_write.pop(key - 1, None):
            gpu.leaving[index + n - 1] = out
            heappush(gpu.leaving_order, index + n - 1)
        return self.duration

    def flush(self, stopped_at_ns: int) -> None:
        """`PlainRepeat.flush`; an iteration taken ahead that had not started by the stop leaves the
        KV memory held, and its peak, as they were (what its prompts' admission took)."""
        if self.after is not None and self.n and stopped_at_ns < self.started + self.n * self.duration:
            gpu: Any = self.gpu
            gpu.kv_used, gpu.kv_peak = self.peak
        super().flush(stopped_at_ns)
