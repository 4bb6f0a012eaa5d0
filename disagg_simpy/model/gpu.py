"""A GPU: a SimPy process running iterations (M1, M2, M4, M5, D4, D9; E1-E4, E6-E8, E10).

One iteration writes one word for every reply in progress on the GPU and may read prompt tokens. Its replies and
prompts are fixed when it starts. Words are not events: a reply that joins when the GPU has started `j` iterations
gets its words 2..n at the ends of iterations j .. j+n-2, so the GPU only needs to know, per iteration, which replies
leave after it.

Its state is in parts, each written only by the module that owns it (docs/architecture.md, "Owned parts"): its KV
memory (`memory`, model/memory.py), its records (`log`, model/records.py's `GpuLog`) and what this module owns
(its identity, role and run); other modules change them by calling their methods."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Generator, Sequence
from typing import Any, Protocol

import simpy

from .batch import Batch
from .costs import CostNs
from .gpu_state import Paging, Reads
from .kv_take import take_with_options
from .memory import Memory
from .option_starts import Bound, bounds, releaser, starter
from .phases import PHASE_END, PHASE_START, Environment, Slot, again, fire
from .planner import Start
from .prefix_cache import PrefixCache
from .prompts import PromptQueue
from .records import GpuLog
from .repeats import Repeat, Work, repeat_work
from .request import Request


class Host(Protocol):
    """What a GPU needs from the arrangement it runs in (the engine), called at the end of an
    iteration (D5 step 1)."""

    def replies_finished(self, requests: list[Request], now: int) -> None: ...

    def prompts_read(self, gpu: Gpu, requests: list[Request], now: int) -> None: ...

    def iteration_ended(self, now: int) -> None: ...

    def more_may_arrive_now(self, now: int, gpu: Gpu) -> bool: ...

    def quiet_until(self, at: int) -> bool: ...

    def gpu_drained(self, gpu: Gpu, now: int) -> None: ...

    def requests_dropped(self, requests: list[Request], now: int) -> None: ...


class Gpu:
    """State of one GPU; `run` is its SimPy process."""

    paged: Any = None  # E9: its model/paged_kv.PagedKv (a `Paging`), else None (Any: the engine's reads need no None test)
    fast_forward = True  # run unchanged iterations as one repeat (model/repeats.py); tests switch it off
    fused = True  # the kept fusion (docs/architecture.md): with every option off the inline start below (a share of a
    # run in docs/performance.md); tests switch it off for the generic path (the planner's start)
    repeat_work: Work | None = None  # set by `run`: the options' work at a repeat's starts (`repeats.repeat_work`)
    _start: Start | None = None  # under the options, its start of an iteration, chosen by `run` (model/option_starts.py)
    tick: Slot  # set by `run`: its event to reuse (`phases.again`)
    _m1: Callable[[int, int], int]  # set by `run`: its cost with every option off (`CostNs.iteration_fn`)

    def __init__(self, number: int, reads: bool, writes: bool, chunk_tokens: int | None, cost: CostNs,
                 kv_capacity: int | None = None, reserve_reply: bool = True, max_replies: int | None = None,
                 max_tokens: int | None = None, mixed: bool = True, max_requests: int | None = None):
        self.number = number
        self.reads = reads
        self.writes = writes
        self.cost = cost  # this GPU's side's figures (E1)
        self.queue = PromptQueue(chunk_tokens, max_tokens)  # prompts routed here, not fully read; tokens queued (D1) (model/prompts.py)
        self.n_shipping = 0  # replies whose KV cache is shipping here (writing GPUs of a split)
        self.ships_due: list[int] = []  # the ends of those ships under way, a heap (model/kv_link.py): repeats end by the first
        self.n_local = 0  # E6: local prompts routed here whose reading has not finished
        self.repeat: Repeat | None = None  # iterations run as one timeout (model/repeats.py)
        self.n_started = 0
        self.wake: simpy.Event | None = None  # pending while idle
        self.host: Host | None = None  # set by `run`
        self.options = False  # set by `run`: whether any option is on (E2-E4, E7, E8, E12)
        self.ahead = True  # set by `run`: whether a cut repeat may take its next iteration ahead (`start_ahead`)
        self.bound: Bound | None = None  # set by `run`: how the options bound a repeat (E9, E10: `option_starts.bounds`)
        self.memory = Memory(kv_capacity, reserve_reply)  # E4: tokens of KV cache held (model/memory.py)
        self.prefix: PrefixCache | None = None  # E13: this instance's prefix cache (set by the engine)
        self.serves_handoff = False  # E4e: the engine serves its handoff queue after each iteration end
        self.always_defer = False  # start only in D5 step 3, even when nothing more can arrive
        self.changes_role = False  # E12: its role may change (model/roles.py)
        self.draining = False  # E12: leaving its side; tells the host at each iteration end
        # E8: at most min(max_replies, max_tokens // a reply's tokens) replies written per iteration (the batch's seats;
        # `CostNs.tokens_per_reply`, R84); their tokens + prompt tokens read <= `max_tokens`
        self.max_tokens = max_tokens
        self.max_requests = max_requests  # E8 per side (R89): prompts read per iteration (a reading instance)
        limits = [x for x in (max_replies, None if max_tokens is None else max_tokens // cost.tokens_per_reply) if x is not None]
        self.batch = Batch(min(limits) if limits else None, mixed, cost.writing_grows)  # replies in progress (model/batch.py)
        # Records: one row per run of back-to-back iterations of one batch, one per (iteration, prompt) read
        # (model/records.py's `GpuLog`: flat int64 arrays, not lists: 8 bytes a value, nothing for the garbage collector to scan)
        self.log = GpuLog()

    @property
    def role(self) -> str:
        return "both" if self.reads and self.writes else ("reads" if self.reads else "writes")

    def has_work(self) -> bool:
        """A reply in progress, or a waiting prompt it can take (E4d: the head fits, or is partly read)."""
        if self.batch.n_replies > 0 or not self.queue.waiting:
            return self.batch.n_replies > 0
        if self.memory.capacity is None:
            return True
        head = self.queue.waiting[0]
        return head.unread_tokens < head.read_size or self.memory.need(head) <= self.memory.capacity - self.memory.used

    def _has_work_unlimited(self) -> Callable[[], bool]:
        """`has_work` without a memory limit (the explainer's rules), what it reads bound once, chosen by `run` for speed."""
        batch, waiting = self.batch, self.queue.waiting
        return lambda: batch.n_replies > 0 or bool(waiting)

    def reserve(self, tokens: int) -> None:
        """Hold `tokens` more KV memory (E4), at a start or (E4e: the handoff) maybe mid-repeat: that cuts it."""
        if self.repeat is not None:
            self.repeat.cut()
        self.memory.hold(tokens)

    def free(self, tokens: int) -> None:
        """Free KV memory from outside an iteration end (a ship end, D5 step 2): an idle GPU looks again in step 3 (E4d)."""
        if self.repeat is not None:
            self.repeat.cut()
        self.memory.give_back(tokens)
        self._wake()

    # -- what other modules tell the GPU (its own state is written here only) ----------------------
    def set_up(self, serves_handoff: bool, always_defer: bool, prefix: PrefixCache | None = None) -> None:
        """The engine's settings before the run: E4e's handoff, D5 step 3 starts, E13's cache."""
        self.serves_handoff, self.always_defer, self.prefix = serves_handoff, always_defer, prefix

    def use_paging(self, paged: Paging) -> None:
        """E9: its memory policy (model/paged_kv.py's `PagedKv`), set before the run."""
        self.paged = paged

    def may_change_role(self) -> None:
        """E12: its role may change (model/roles.py): it starts only in D5 step 3."""
        self.changes_role = self.always_defer = True

    def drain(self, on: bool) -> None:
        """E12: it leaves its side (True: tell the host at each iteration end) or is drained (False)."""
        self.draining = on

    def serve(self, reading: bool, cost: CostNs, chunk_tokens: int | None) -> None:
        """E12: it joins its new side, reading or writing, with that side's cost and chunk (never assigned there, D2:
        model/router.py's `Side.join`)."""
        self.reads, self.writes, self.cost = reading, not reading, cost
        self.queue.set_chunk(chunk_tokens)
        self.memory.set_reserve_reply(not reading)
        self.batch.set_track_context(cost.writing_grows)

    def local_routed(self, n: int) -> None:
        """E6: `n` more (or fewer) local prompts (or preempted replies, E9) counted here for D3."""
        self.n_local += n

    def ship_coming(self, n: int) -> None:
        """`n` more replies whose KV cache ships here (M4; E5: waiting for its link)."""
        self.n_shipping += n

    def ship_due(self, end: int, n: int = 0) -> None:
        """A ship under way here ends at `end` (model/kv_link.py): its repeats end by the first; `n` more replies whose KV
        cache ships here (`ship_coming`: 1 if counted as it leaves, the explainer's rules)."""
        self.n_shipping += n
        heapq.heappush(self.ships_due, end)

    def count_started(self, n: int) -> None:
        """It has started `n` iterations: a repeat's (model/repeats.py), or a start that undid itself (E9d, the planner)."""
        self.n_started = n

    def add_prompt(self, request: Request) -> None:
        """A prompt is routed here (D5 step 2): a GPU writing only, in a repeat, reads it from the next iteration end on
        (a repeat reading chunks takes it after the head, unchanged)."""
        self.queue.add(request)
        if self.repeat is not None and self.repeat.head is None:
            self.repeat.cut(ahead=True)
        if self.wake is not None:
            self._wake()

    def add_reply(self, request: Request, now: int, shipped: bool = False) -> None:
        """A reply joins (its own record of it by the caller: `Request.stays`, `Request.joins`): it gets a word from every
        iteration starting now or later (M2, M4), or, with a seat limit (E8), waits for a seat in the order replies joined
        (E9: `PagedKv.join_reply`). `shipped`: its KV cache's ship here just ended, the first under way here (the ships
        that end now end first: model/kv_link.py), counted off in the same call."""
        if shipped:
            self.n_shipping -= 1
            heapq.heappop(self.ships_due)
        if self.paged is not None:
            self.paged.join_reply(request, now)
            return
        if self.repeat is not None:
            self.repeat.cut()  # (first: the reply's join iteration is the next to start)
        if self.batch.queue_replies:  # E8, E10: it may wait for a seat
            self.batch.join(request, self.n_started)
        else:
            self.batch.seat(request, self.n_started, None, True)  # (`Batch.join`'s seat, one call)
        if self.wake is not None:
            self._wake()

    def _wake(self) -> None:
        """An idle GPU looks for work in D5 step 3 (its callers test `wake` first: a busy GPU, no call)."""
        if self.wake is not None:
            fire(self.wake, PHASE_START + self.number)
            self.wake = None

    _take_with_options = take_with_options  # (model/prompts.py)

    def run(self, env: Environment, host: Host) -> Generator[simpy.Event, Any, None]:
        """The GPU's SimPy process: one loop for the explainer's rules (M1-M5, D4, D5, D9) and the options (E2-E4, E7,
        E8).

        The options' work is chosen once per run: `start` (model/option_starts.py: None with every option off, when
        the loop takes D4's tokens and M1's cost inline), `release` (their bookkeeping of replies leaving) and
        `end_hooks` (E4e, E5, E12 at an iteration end), each tested once per iteration (benchmarks/ab.py --opcodes)."""
        cost = self.cost
        extra_terms = cost.extra_terms  # E2, E3, E7
        kv = self.memory.capacity is not None  # E4
        serves_handoff, always_defer = self.serves_handoff, self.always_defer  # set before the run
        batch = self.batch
        options = extra_terms or kv or serves_handoff or always_defer or batch.seats is not None or (
            self.max_tokens is not None) or self.max_requests is not None or self.changes_role or self.prefix is not None or not batch.mixed
        # repeats, but not with role changes (E12) or prefix caches (E13); others bound or cut them (repeats.py; E14's and E15's terms
        # are the same in every iteration of a repeat: its docstring). A NEW option that changes a batch, or a per-iteration log,
        # between a GPU's own starts and ends must do one or the other (docs)
        fast = self.fast_forward and not (self.changes_role or self.prefix is not None or batch.uneven_context)
        context_due = batch.context_due()  # (E3: the context a start adds beyond a token a reply, if it ever does)
        iteration_ns = self._m1 = cost.iteration_fn()  # M1 (E14, E15) as a plain function, chosen once (model/costs.py)
        self.host, self.options = host, options
        start = self._start = starter(self) if options or not self.fused else None  # (chosen once: model/option_starts.py)
        release = releaser(self)  # (None: no bookkeeping of replies leaving)
        end_hooks = serves_handoff or always_defer or self.changes_role  # (E4e, E5, E12: the options' iteration end)
        # a cut repeat may take its next iteration ahead (`start_ahead`) unless E4 (but E9 with E10: `Repeat.cut`), E4e, E5, E12, E13
        self.ahead = not (end_hooks or self.prefix is not None) and (not kv or (self.paged is not None and not batch.mixed))
        self.repeat_work = repeat_work(self) if options else None
        self.bound = bounds(self)
        has_work = self._has_work_unlimited() if self.memory.capacity is None else self.has_work if self.paged is None else (
            self.paged.has_paged_work)  # (chosen once: it runs at every iteration end)
        kv_need = self.memory.need if self.paged is None else self.paged.held  # (E9: what a request frees)
        give_back = self.memory.give_back
        end_priority = PHASE_END + self.number
        start_priority = PHASE_START + self.number
        waiting, take = self.queue.waiting, self.queue.take  # D4 (model/prompts.py)
        leaving_at, leave = batch.leaving, batch.leave  # replies whose last word an iteration writes (model/batch.py)
        # the records, a run of one iteration at each end: the log's own writers (model/records.py's `GpuLog.writers`)
        record_start, record_duration, record_stop, record_replies, record_tokens, log_read = self.log.writers()
        tick = self.tick = Slot(env, None, 0)  # its one event to reuse (`again`): iteration ends, a repeat's (not cut)
        taken: Sequence[tuple[Request, int]]  # () when nothing is read: no list to build
        while True:
            if not has_work():
                self.wake = env.event()
                yield self.wake
                while kv and not has_work():  # E4: freed memory may still not fit the head
                    self.wake = env.event()
                    yield self.wake
            started = env.now
            index = self.n_started
            self.n_started = index + 1
            if context_due is not None:  # E3: the context of the words written past one an iteration before this one
                batch.add_context(context_due(index))
            if start is not None:
                n_replies, taken, n_tokens, duration = start(started, index, host)
                if duration < 0:  # E9: every reply preempted, nothing it can take: no iteration (index undone)
                    continue
            else:
                n_replies = batch.n_replies
                taken, n_tokens = take(started) if waiting else ((), 0)
                duration = iteration_ns(n_replies, n_tokens)
            if fast and duration and (n := self.steady_iterations(index, taken, n_replies, started, duration)) > 1:
                repeat = self.repeat = Repeat(self, env, started, index, duration, n_replies, taken[0][0] if taken else None,
                                              n_tokens, n)
                yield repeat.slot  # (or the slot `repeat.cut` put in its place: the old one stays queued, no longer reused)
                tick = self.tick = repeat.slot
                self.repeat = None
                if not repeat.n:
                    continue  # cut at an iteration end: the next iteration starts now (D5 step 3)
                if repeat.after is None:
                    duration = repeat.finish()  # (its last iteration's)
                    index += repeat.n - 1  # its last iteration ends now
                    self.n_started = index + 1  # (its starts, counted here: a call fewer than `count_started`)
                else:  # cut, and the iteration after it ends now
                    repeat.record(repeat.n)
                    taken, n_tokens, duration = repeat.after
                    if not batch.mixed:  # E10: it reads the prompt that cut a writing repeat, writing none (`start_ahead`)
                        n_replies = 0
                    index += repeat.n
                now = env.now
                started = now - duration
            else:
                yield again(tick, duration, end_priority)
                now = started + duration
            record_start(started)
            record_duration(duration)
            record_stop(index + 1)
            record_replies(n_replies)
            record_tokens(n_tokens)
            if index in leaving_at and (leaving := leave(index)):  # (a read first: most iterations none leaves)
                if release is not None:
                    release(leaving)
                host.replies_finished(leaving, now)
            if taken:
                finished_reading = []
                for r, n in taken:
                    log_read([index, r.request_id, n])
                    if r.unread_tokens == 0:
                        finished_reading.append(r)
                if finished_reading:
                    if kv:  # E4: a one-word reply ends with its read
                        for r in finished_reading:
                            if r.n_reply_words == 1:
                                give_back(kv_need(r))
                    host.prompts_read(self, finished_reading, now)
            if end_hooks:
                if serves_handoff:
                    host.iteration_ended(now)
                if self.draining:  # E12
                    host.gpu_drained(self, now)
                if has_work() and (always_defer or host.more_may_arrive_now(now, self)):
                    yield again(tick, 0, start_priority)
            elif host.more_may_arrive_now(now, self) and has_work():  # (the cheaper test first: mostly False)
                yield again(tick, 0, start_priority)

    def steady_iterations(self, index: int, taken: Sequence[tuple[Request, int]], n_replies: int = 0, started: int = 0,
                          duration: int = 0) -> int:
        """How many iterations from `index` (starting now, `taken` its reads) can run unchanged, as one repeat (model/repeats.py): up to the
        first that ends with a reply's last word, and, reading, while each reads one full chunk of the head prompt (the last of them may
        read its last token), and up to the iteration a ship under way here ends in (`ships_due`; `duration` each: a repeat whose
        durations grow, E2/E3/E7, may still be cut by it); the options bound it further (`option_starts.bounds`). Anything that changes
        the batch before a change known now cuts the repeat (`Repeat.cut`) (docs/architecture.md)."""
        if taken:  # (first: most reading starts read whole prompts, or several)
            head, tokens = taken[0]
            if len(taken) > 1 or tokens != self.queue.chunk_tokens:
                return 1
            n = 1 + head.unread_tokens // tokens
            if order := self.batch.leaving_order:
                n = min(n, order[0] - index + 1)
        else:
            n = order[0] - index + 1 if (order := self.batch.leaving_order) else 1 << 62
        if self.ships_due:  # (model/repeats.py: exact, as any shorter repeat)
            n = min(n, (self.ships_due[0] - started - 1) // duration + 1)
        return self.bound(self, index, taken, n_replies, n) if self.bound is not None and n > 1 else n

    def start_ahead(self, at: int, n_replies: int) -> tuple[Reads, int, int] | None:
        """The iteration this GPU starts at `at` (later), taken now if nothing can reach it by then (`Host.quiet_until`):
        its reads (D4), tokens, duration. Under the options (not E4 (E9 only with E10), E5, E12, E13: `self.ahead`) the start
        writes the same `n_replies` (E8: no seat frees before the cut repeat's last end), or under E10 none (it reads
        the prompt that cut a writing repeat, prompt first). (Only a repeat of constant durations takes ahead: `Repeat.cut`.)
        Taken, it counts as started."""
        host = self.host
        if not self.ahead or host is None or not host.quiet_until(at):
            return None
        if self._start is None:
            taken, n_tokens = self.queue.take(at)
            self.n_started += 1  # (it counts as started: the caller's call to `count_started` saved)
            return taken, n_tokens, self._m1(n_replies, n_tokens)
        _, reads, n_tokens, duration = self._start(at, self.n_started, host)
        self.n_started += 1
        return reads, n_tokens, duration

    def _duration(self, now: int, index: int, n_replies: int, n_tokens: int, taken: Sequence[tuple[Request, int]]) -> int:
        """An iteration's duration under the options (the general path): the cost object's, with this GPU's
        E3 context sum and its cost now (E12 may change it)."""
        return self.cost.duration(self.batch.context_base, now, index, n_replies, n_tokens, taken)

    def _release(self, leaving: list[Request]) -> None:
        """Replies whose last word was just written leave the options' bookkeeping (E3, E4a, c, E8, E10)."""
        self.batch.release(leaving)
        if self.memory.capacity is not None:
            self.memory.give_back(sum(r.n_prompt_tokens + r.n_reply_words for r in leaving))
