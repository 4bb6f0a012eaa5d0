"""Fast-forward: iterations of one GPU that repeat unchanged, run as ONE SimPy timeout (a
*repeat*; not the *stretches* of model/words.py, which are runs of one reply's words).

A GPU whose batch does not change runs the same iteration again and again: the same replies
written, the same prompt tokens read (none, or one chunk of the prompt at the head of its
queue), so the same duration `d`, rounded once (D10). `Gpu.steady_iterations` says how many
such iterations can run from a start before a change known in advance (a reply's last word, a
prompt's last chunk); the GPU then waits for the end of the last one with one timeout, and its
records are written in bulk as the one-by-one loop would have written them: iteration j of the
repeat starts at `started + j * d` and ends at `started + (j + 1) * d`, exact integer sums.

Only the repeat's last iteration may change anything at its end (finishes, first words): the
GPU handles that end as it handles any. The ends before it change nothing but the records, so
nothing else needs to see them when they happen, with two exceptions, both kept exact here:
- something reaches the GPU during the repeat (D5 step 2: an arrival routed to it, a ship that
  ends, freed memory) and would change its next iteration: `cut` ends the repeat at the right
  boundary. Arriving exactly at an iteration end, it joins the iteration that starts at that
  instant, in D5 step 3, as the one-by-one loop starts it (that loop puts off its start to step 3
  whenever an arrival or a ship end is due at the instant); arriving inside an iteration, it
  waits for that iteration's end, where the GPU continues as usual;
- while it reads chunks, the router reads its queued tokens (D1) at each arrival: `sync`
  takes the chunks of the iterations that have started by then (starts at the arrival's own
  instant come in step 3, after it).
A run that stops during a repeat records the iterations that ended by the stop (`flush`).
A ship under way to a writing GPU ends at a time known since it started (its heap
`Gpu.ships_due`, model/kv_link.py): `steady_iterations` ends a repeat with the iteration that
ship ends in, or at whose end it ends, so the repeat is not started only to be cut (a cut costs
a second timeout). Exact, as any shorter repeat is: the repeat's last end is handled as any
iteration end, one by one; a ship that ends inside that last iteration finds nothing left to cut
(`cut` counts its starts, and the reply joins the next iteration, as it would have), and one that
ends exactly at its end comes after it in the instant (D5) and before the next start, which
`Engine.more_may_arrive_now` puts off to step 3.
ONE class, `Repeat`, runs every repeat, with the options on or off: it knows time (when its
iterations start and end, constant or growing, and how many have by a moment) and the head
prompt's chunks it reads; what the policies do at its starts is applied k starts at once by
`Gpu.repeat_work` (`repeat_work` below: E4's log, E9's blocks), and each policy's bound says how
many identical iterations may follow (`Gpu.steady_iterations`, model/option_starts.py's `bounds`).

Under the options (the bound `model/option_starts.py`'s `bounds` picks): E10's writing iterations repeat up to the first that a
reply leaves after (its last *writing* iteration), the key moved to `Batch.leaving` at that
start as `unmixed_start` moves it; E9's block boundaries inside a repeat change no batch, only
the KV memory held, so a repeat runs through them as long as every due block is free (a
preemption is the first change), and applies them, with E4's log at each start, for the starts
before any moment someone looks (`sync`, `cut`, `finish`, `flush`). E2, E3 and E7 make
iterations of one batch differ in length, each by the same amount before rounding (E3: each
reply's context grows by a token a word; E2, E7: each chunk of the head prompt re-reads, and
attends to, one chunk more than the one before): the repeat's durations are then computed
together, each rounded once (D10), and its ends are their running sums (`ends`; plain ints:
numpy costs more than it saves on the few tens of iterations a repeat holds).

E14's and E15's terms are the same in every iteration of a repeat, so repeats run under them.
Each is a function of two numbers of the iteration alone: the prompt tokens it reads (E14: one
`prompt_iteration_ms`, less the per-token cost of its first `free_prompt_tokens`) and those plus
the replies it writes (E15: `per_token_tile_ms` x ceil((tokens + replies) / `token_tile`); E2's
re-read and E13's cached tokens are not rows, R73). Those two numbers are what a repeat holds
fixed, and `record` writes them, unchanged, for each of its iterations:
- replies: `steady_iterations` ends a repeat at the first iteration after which a reply leaves
  (a last word; E10: a last writing iteration, the options' bound), and anything that adds one (a
  join, E8's seats, which free only when a reply leaves) cuts it (`cut`); E9 preempts only at a
  start whose due blocks are not all free, which the options' bound keeps out of a repeat;
- tokens: reading, every iteration of a repeat reads one full chunk (`chunk_tokens`) of the
  head prompt, and the repeat ends by its last full chunk (`steady_iterations`:
  an iteration that reads whole prompts, more than one prompt, or less than a chunk, E8's budget
  below it, starts no repeat); reading none, none (what would let it read cuts it: a prompt
  routed to it, memory freed).
So a repeat of constant durations has both terms in its `duration`, computed for its first
iteration as for every one. One of growing durations (E2, E3, E7 beside E14/E15) adds them once
to the first iteration's sum (`CostNs.ends`: `CostNs.total_full` with the first iteration's replies
and chunk, which are every iteration's), and its growth (`CostNs.step`) holds only the terms that grow:
E3's context, E2's re-read tokens and E7's pairs, which count the KV cache attended to, not rows.
E17's expert term, like E15's, is a function of the iteration's tokens and replies alone
(`per_expert_ms` x min(experts, top-k x (tokens + replies))), so it is the same in every iteration
of a repeat and repeats run under it too. E16 (speculative decoding) runs repeats as R88 says (one by
one with E3, or with E9: docs/rules.md).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable
from typing import Any, Protocol

from .gpu_state import GpuState, Reads
from .phases import PHASE_END, PHASE_START, Environment, Slot, again, take_over
from .records import GpuLog
from .request import Request

Work = Callable[["Repeat", int, int], None]  # (repeat, first start, k starts): the policies' work at k starts at once


class Gpu(GpuState, Protocol):
    """What a repeat reads and writes of its GPU (model/gpu.py's `Gpu`, which imports this module):
    the policies' view (model/gpu_state.py) and its records."""

    tick: Slot  # its event to reuse (`Gpu.run`)
    repeat_work: Work | None
    log: GpuLog  # the GPU's records (model/records.py)

    def start_ahead(self, at: int, n_replies: int) -> tuple[Reads, int, int] | None: ...


class Repeat:
    """`n` iterations of `gpu` from iteration `index` (started at `started`), `duration` ns each, or
    growing (`ends`: E2, E3, E7), writing `n_replies` replies and reading `n_tokens` tokens of `head`
    (None: reading none) each. It knows time: when its iterations start and end, how many have
    by a moment; what its starts do beyond that is the policies' (`Gpu.repeat_work`, applied k
    starts at once: `_apply`), and E10's count of writing iterations (`key`)."""

    __slots__ = ("gpu", "env", "started", "index", "duration", "n_replies", "head", "n_tokens", "n", "n_taken", "open",
                 "slot", "after", "ends", "key", "n_applied", "peak")

    def __init__(self, gpu: Gpu, env: Environment, started: int, index: int, duration: int, n_replies: int,
                 head: Request | None, n_tokens: int, n: int):
        self.gpu = gpu
        self.env = env
        self.started = started
        self.index = index
        self.duration = duration
        self.n_replies = n_replies
        self.head = head
        self.n_tokens = n_tokens
        self.n_taken = 1  # iterations whose tokens are taken (the first's at its start)
        self.n_applied = 1  # starts whose policies' work is done (the first's at its start)
        self.open = True  # not cut yet
        self.after: tuple[Reads, int, int] | None = None  # see `cut`
        self.key = -1 if gpu.batch.mixed or not n_replies else gpu.batch.n_writes  # E10: the second iteration's writing iteration
        self.ends: list[int] | None = None
        last = n * duration
        # E2, E3, E7: how much each iteration costs more than the one before, before rounding (over the cost's
        # denominator): each reply's context grows by one token (E3); each chunk of the head re-reads one chunk
        # more (E2), and its tokens attend to one chunk more (E7)
        if gpu.cost.writing_grows if head is None else gpu.cost.reading_grows:
            cost = gpu.cost
            step = cost.step(n_replies, n_tokens if head is not None else 0)
            if step:
                n = min(n, 64)  # (a shorter repeat is as exact: the GPU goes on from its last end)
                key = index if gpu.batch.mixed else gpu.batch.n_writes - 1  # (its words' iteration)
                chunk = n_tokens if head is not None else 0
                ends = self.ends = cost.ends(duration, step, n, n_replies, chunk,
                                             head.read_size - head.unread_tokens - chunk if head is not None else 0,
                                             cost.context(gpu.batch.context_base, key, n_replies))
                assert ends[0] == duration, (ends[0], duration)  # (the first as the GPU computed it)
                last = ends[n - 1]
        self.n = n  # iterations the repeat runs; 0 once cut at an iteration end (all recorded then)
        self.slot = again(gpu.tick, last, PHASE_END + gpu.number)  # the GPU's process waits on it

    def _end(self, j: int) -> int:
        """When iteration j of the repeat ends, after its start (0 for j = -1)."""
        if j < 0:
            return 0
        return (j + 1) * self.duration if self.ends is None else self.ends[j]

    def _ended_by(self, t: int) -> int:
        """How many of the repeat's iterations end by `t` after its start."""
        return t // self.duration if self.ends is None else bisect_right(self.ends, t)

    def sync(self, now: int) -> None:
        """Take the chunks of the iterations started by `now` (a start at `now` itself comes in
        D5 step 3, after everything that arrives at `now`)."""
        if self.head is not None:  # (the router calls this at every arrival: inline, no min/max calls)
            if self.ends is None:
                d = self.duration
                started = (now - self.started + d - 1) // d
                if started > self.n:
                    started = self.n
            else:
                started = min(self.n, 1 + bisect_right(self.ends, now - self.started - 1))
            if started > self.n_taken:  # (`_take`, inline: the head's chunks, a call fewer at arrivals)
                self.gpu.queue.take_chunks(self.head, (started - self.n_taken) * self.n_tokens)
                self.n_taken = started

    def sync_kv(self, now: int) -> None:
        """E9: the policies' work at the starts before `now` (the blocks due then), for the handoff
        (E4e) to read the KV memory held now."""
        self._apply(max(1, min(self.n, 1 + self._ended_by(now - self.started - 1))))

    def _take(self, n_iterations: int) -> None:
        if n_iterations > 0 and self.head is not None:
            self.gpu.queue.take_chunks(self.head, n_iterations * self.n_tokens)  # (its last chunk leaves the queue, D4)
            self.n_taken += n_iterations

    def _apply(self, n_started: int) -> None:
        """The policies' work at the starts of the first `n_started` iterations, those not done yet at
        once (`Gpu.repeat_work`: E4's log of the KV memory held, E9's due blocks)."""
        if n_started > self.n_applied:
            work = self.gpu.repeat_work
            if work is not None:
                work(self, self.n_applied, n_started - self.n_applied)
            self.n_applied = n_started

    def cut(self, ahead: bool = False) -> None:
        """Something reaches the GPU now (D5 step 2) that changes its next iteration: end the
        repeat with the iteration running now, or, exactly at an iteration end, there, the
        next iteration starting in step 3 of this instant.

        `ahead` (a prompt routed here, already queued): under E9 with E10 nothing if no start of
        the repeat could read it (`PagedKv.head_waits`: its memory held only grows); else, if
        nothing else can reach the GPU before the running iteration ends, the next iteration,
        which reads it, is known now: it is taken now, as of its start (`Gpu.start_ahead`), and
        the GPU waits for ITS end (`after`: its reads, tokens and duration): one wake-up fewer."""
        if not self.open:
            return
        gpu, now = self.gpu, self.env.now
        if self.ends is None:
            ran, into = divmod(now - self.started, self.duration)  # iterations ended by now; ns into the next
        else:
            ran = self._ended_by(now - self.started)
            into = now - self.started - self._end(ran - 1)
        work = gpu.repeat_work is not None  # (the policies' work at its starts, `_apply`: none with every option off)
        if ran >= self.n:  # the last end is now, later in step 1 (from a GPU numbered lower)
            self.open = False
            gpu.count_started(self.index + self.n)
            if work:
                self._apply(self.n)
            return
        at_end = into == 0 and ran >= 1
        if ahead and self.key >= 0 and self.ends is None and gpu.paged is not None:  # E9 with E10
            self._apply(ran if at_end else ran + 1)  # (the blocks due at the starts so far)
            if gpu.paged.head_waits():
                return  # (still open: it runs as planned)
        self.open = False
        if at_end:
            self._take(ran - self.n_taken)
            self.record(ran)
            if work:
                self._apply(ran)
            gpu.count_started(self.index + ran)
            if self.key >= 0:  # E10: writing iterations started
                gpu.batch.count_writes(self.key + ran - 1)
            self.n = 0
            self.slot = take_over(self.slot, 0, PHASE_START + gpu.number)
            return
        gpu.count_started(self.index + ran + 1)
        if work:
            self._apply(ran + 1)  # (E9: blocks due at the starts so far, before the caller changes the memory held)
        if ran + 1 < self.n:
            self.n = ran + 1
            end = self.started + ((ran + 1) * self.duration if self.ends is None else self.ends[ran])  # (`_end(ran)`, inline)
            if ahead and self.ends is None:
                self.peak = gpu.memory.used, gpu.memory.peak
                if (after := gpu.start_ahead(end, self.n_replies)) is not None:
                    self.after = after
                    if self.key >= 0:  # E10: the running iteration's writing iteration and one (no `finish`)
                        gpu.batch.count_writes(self.key + ran)
                    end += after[2]
            self.slot = take_over(self.slot, end - now, PHASE_END + gpu.number)

    def finish(self) -> int:
        """The repeat's last iteration ends now: take every chunk, record all iterations but
        that last one (the GPU records it, and handles its end, as any other, and counts the
        repeat's starts: `Gpu.run`); its duration."""
        gpu, n, head = self.gpu, self.n, self.head
        if head is not None:
            self._take(n - self.n_taken)
        if n > 1:  # (`record`, inline: a call fewer at every repeat's end)
            gpu.log.iterations(self.started, self.duration, self.ends, self.index, n - 1, self.n_replies, self.n_tokens,
                               -1 if head is None else head.request_id)
        if n > self.n_applied and (work := gpu.repeat_work) is not None:  # (`_apply`, inline)
            work(self, self.n_applied, n - self.n_applied)
            self.n_applied = n
        if self.key >= 0:  # E10: the last iteration's writing iteration; replies leaving after it
            gpu.batch.write_started(self.key + n - 2, self.index + n - 1)
        ends = self.ends  # (its last duration: `_end(n - 1) - _end(n - 2)`, inline)
        return self.duration if ends is None else ends[n - 1] - (ends[n - 2] if n > 1 else 0)

    def flush(self, stopped_at_ns: int) -> None:
        """The run stopped during the repeat: record the iterations that ended by the stop (and
        forget the start of an `after` iteration that never started: its first start, and the KV
        memory its admission took, held and peak, E9)."""
        if self.n:
            ended = min(self.n, self._ended_by(stopped_at_ns - self.started))
            assert ended < self.n or self.after is not None  # (else the last end came before any stop)
            start = self.started + self._end(self.n - 1)
            if self.after is not None and stopped_at_ns < start:
                self.gpu.memory.restore(*self.peak)
                for r, _ in self.after[0]:
                    if r.read_started_at_ns == start:
                        r.forget_read_start()
            self.record(ended)
            self._apply(min(self.n, ended + 1))  # (every start by the stop: a start at the stop came in D5 step 3)

    def record(self, count: int) -> None:
        """Records of the repeat's first `count` iterations: one run (model/records.py's `GpuLog`)."""
        if count <= 0:
            return
        self.gpu.log.iterations(self.started, self.duration, self.ends, self.index, count, self.n_replies, self.n_tokens,
                         -1 if self.head is None else self.head.request_id)


def repeat_work(gpu: Gpu) -> Work | None:
    """The policies' work at k starts of a repeat at once, chosen once per run (`Gpu.repeat_work`):
    E4's log of the KV memory held (unchanged while a repeat runs: a reservation or a release cuts
    it first); E9's due blocks (`BlockSchedule.grow`, from the repeat's first key: its iteration, or
    under E10 its writing iteration; a prompt-only repeat gives none), each start's memory logged
    after them; or nothing (None)."""
    log = gpu.log
    if gpu.paged is not None:
        blocks = gpu.paged.due_blocks
        mixed = gpu.batch.mixed

        def grow(repeat: Repeat, first: int, k: int) -> None:
            if mixed:
                blocks.grow(gpu, repeat.index + first, k, log)
            elif repeat.key >= 0:
                blocks.grow(gpu, repeat.key - 1 + first, k, log)
            else:  # (E10's prompt-only iterations give no block)
                log.kv_repeated(gpu.memory.used, k)
        return grow
    if gpu.memory.capacity is not None:
        def held(repeat: Repeat, first: int, k: int) -> None:
            log.kv_repeated(gpu.memory.used, k)
        return held
    return None


def cut_all(host: Any) -> None:  # (host: the engine, whose module imports this one: Any)
    """E9 on a split: a start changed what the handoff queue (E4e) may use (freed KV memory, a
    preemption; a reply back, a swap-in): every repeat ends with the iteration running now, so
    that its end serves the queue as one by one (the queue is served after every iteration end)."""
    if getattr(host, "handoff", None):
        for g in host.gpus:
            if g.repeat is not None:
                g.repeat.cut()
