"""E9 with E10: paged KV memory with preemption (model/paged_kv.py) on a GPU whose iterations
read prompts or write words, never both (model/unmixed.py); docs/rules.md, readings R61-R67.

The choice between E10a and E10b is made first, with E9's admission open (nothing is preempted
yet): if the GPU can take a waiting prompt (E9b: its blocks plus one free, no reply swapped out;
re-reads wait first, E9e), the iteration reads prompts and gives no block to a reply, preempts
nothing and swaps nothing in. Otherwise it writes: it seats replies (E8), gives their due
blocks, preempting when none is free (E9c), swaps replies back in if it preempted nothing
(E9f), and reads nothing; if it preempted every reply it would write, it is chosen again with
admission open (E9d). E9's block schedule and last words are kept in *writing* iterations
(`Gpu.n_writes`, as model/unmixed.py keeps last words), so a reply's blocks fall due at its
words, not at prompt-only iterations; `join_iteration` and the stretches name real iterations.

`starter` builds this start once per run (model/option_starts.py chooses it, with the durations
of the terms that are on); `writing_bound` bounds its repeats (model/repeats.py), and
`WritingRepeat` runs its writing ones when their durations do not grow (no E3).
"""

from __future__ import annotations

from collections.abc import Callable
from heapq import heappop, heappush
from typing import Any

from .kv_take import paged_take
from .phases import PHASE_END, PHASE_START, take_over
from .plain_repeats import PlainRepeat, Reads

Start = Callable[[int, int, Any], tuple[int, Any, int, int]]  # (now, index, host) -> replies, reads, tokens, duration


def starter(gpu: Any, reading_ns: Callable[[int, int, int, int, Any], int], writing_ns: Callable[[int, int], int]) -> Start:
    """`gpu`'s start of an iteration under E9 and E10 for its whole run (it replaces `Gpu._options_start`):
    (replies written, prompts taken, tokens, duration; -1 when it has nothing to do after preempting, E9d).
    `reading_ns(now, index, 0, n_tokens, taken)` and `writing_ns(n_replies, key)` are the durations of an
    iteration that reads and of one that writes (model/option_starts.py: the cost object's durations, model/costs.py)."""
    kv = gpu.paged
    waiting, queue, room = gpu.waiting, gpu.seat_queue, 1 << 62 if gpu.seats is None else gpu.seats
    blocks, phases, block, capacity, seat = kv.blocks, kv.phases, kv.block, gpu.kv_capacity, kv.seat
    by_write, leaving, leaving_order, log = gpu.leaving_by_write, gpu.leaving, gpu.leaving_order, gpu.kv_used_tokens.append
    chunk, limit = gpu.chunk_tokens, gpu.max_tokens  # a prompt-only iteration's chunk (E8: at most its token budget)
    chunk = 1 << 62 if chunk is None else chunk if limit is None or limit >= chunk else limit or 1 << 62

    def start(now: int, index: int, host: Any) -> tuple[int, Any, int, int]:
        if kv.dirty:  # (what the last start's preemptions or swaps set, reset: `paged_start.starter`)
            kv.blocked, kv.moved_tokens, kv.queue_at, kv.dirty = False, 0, -1, False
        if waiting:  # E10a, E9b (R61): a begun head, or one admitted (`PagedKv.can_take`, inline), is read first
            head = waiting[0]
            if (unread := head.unread_tokens) > chunk and unread < head.read_size:  # a begun head fills the chunk alone
                head.unread_tokens = unread - chunk  # (`paged_take`'s first pass, inline: most chunks)
                gpu.queued_tokens -= chunk
                taken = [(head, chunk)]
                log(gpu.kv_used)
                return 0, taken, chunk, reading_ns(now, index, 0, chunk, taken)
            if unread < head.read_size or not kv.swapped and head.read_size <= kv.top - gpu.kv_used:
                taken, n_tokens = paged_take(kv, now, 0)
                log(gpu.kv_used)
                return 0, taken, n_tokens, reading_ns(now, index, 0, n_tokens, taken)
        # E10b: seats, blocks, preemptions, swap-ins (R62, R63), at writing iteration `key`
        key, n = gpu.n_writes, gpu.n_seated
        if queue and n < room:
            while queue and n < room:
                n += 1
                seat(queue.popleft(), index, key)
            gpu.n_seated = n
        due = blocks.due(key) if kv.pending else phases[key % block]  # (as `paged_start.starter`)
        if due:
            used = gpu.kv_used + len(due) * block
            if used <= capacity:  # (room for all: no order to keep)
                gpu.kv_used = used
                if used > gpu.kv_peak:
                    gpu.kv_peak = used
            else:
                kv._short(due, key, now)
                n = gpu.n_seated
        if kv.swapped and not kv.blocked:
            kv.swap_in(index, key)
            n = gpu.n_seated
        if kv.dropped:
            host.requests_dropped(kv.dropped, now)
            kv.dropped = []
        if not n and kv.blocked:  # E9d: every reply preempted; chosen again, admission open (R64)
            kv.blocked = False
            if kv.swapped:
                kv.swap_in(index, key)
                n = gpu.n_seated
            if not n:
                taken, n_tokens = paged_take(kv, now, 0) if waiting else ([], 0)
                if not taken:
                    gpu.n_started = index  # (no iteration: the GPU waits for a join or freed memory)
                    return 0, [], 0, -1
                log(gpu.kv_used)
                d = reading_ns(now, index, 0, n_tokens, taken)
                return 0, taken, n_tokens, d + kv.swap_ns(kv.moved_tokens) if kv.moved_tokens else d
        if n:  # its writing iteration `key`: the replies whose last word it writes leave at its end (`write_started`)
            gpu.n_writes = key + 1
            if out := by_write.pop(key, None):
                leaving[index] = out
                heappush(leaving_order, index)
        log(gpu.kv_used)
        d = writing_ns(n, key)
        if kv.moved_tokens:
            return n, (), 0, d + kv.swap_ns(kv.moved_tokens)  # E9f: swapped out and in, rounded on its own
        return n, (), 0, d
    return start


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
