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
With every option off a GPU runs model/plain_repeats.py's `PlainRepeat`, which does only this;
under the options, `Repeat` below, which extends it, where the repeat needs its work (else
`PlainRepeat`, or E10's `unmixed.WritingRepeat`: model/option_starts.py's `repeat_kinds`).

Under the options (the bound `model/option_starts.py`'s `bounds` picks): E10's writing iterations repeat up to the first that a
reply leaves after (its last *writing* iteration), the key moved to `Gpu.leaving` at that
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
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from typing import Any, Protocol

from .phases import PHASE_END, PHASE_START, Environment, take_over
from .plain_repeats import PlainGpu, PlainRepeat
from .request import Request
from .unmixed import write_started


class RepeatingGpu(PlainGpu, Protocol):
    """What a repeat reads and writes of its GPU under the options (model/gpu.py's `Gpu`)."""

    kv_used_tokens: Any  # E4: logged at each start
    kv_capacity: int | None
    kv_used: int
    repeat: Any
    options: bool
    cost: Any  # its model/costs.CostNs
    context_base: int  # E3
    paged: Any  # E9: its model/paged_kv.PagedKv, else None
    mixed: bool  # E10: False when an iteration reads or writes, never both
    n_writes: int
    leaving: dict[int, list[Request]]
    leaving_order: list[int]
    leaving_by_write: dict[int, list[Request]]


class Repeat(PlainRepeat):
    """A repeat under the options (`Gpu.run` makes one only when an option is on): `PlainRepeat`
    plus E4's log of the KV memory held at each start, E9's blocks due at those starts, E10's
    writing iterations, and E2/E3/E7's growing durations (`ends`, the first's `duration`)."""

    __slots__ = ("kv", "n_kv_logged", "paged", "key", "ends", "grows_at")
    gpu: RepeatingGpu

    def __init__(self, gpu: RepeatingGpu, env: Environment, started: int, index: int, duration: int, n_replies: int,
                 head: Request | None, n_tokens: int, n: int):
        paged = self.paged = gpu.paged  # E9: due blocks taken at the starts inside the repeat (`_grow`)
        self.kv = gpu.kv_used if paged is None and gpu.kv_capacity is not None else None  # E4: held at every start
        self.n_kv_logged = 1  # starts whose KV memory is logged (the first's at its start; E9: and whose blocks are grown)
        mixed = gpu.mixed
        self.key = -1 if mixed or not n_replies else gpu.n_writes  # E10: the second iteration's writing iteration
        # E9: its first key in the block schedule (model/kv_blocks.py): the iteration itself, or under E10
        # (model/planner.py) its writing iteration; -1 for E10's prompt-only iterations, which give no block
        self.grows_at = -1 if paged is None else index if mixed else gpu.n_writes - 1 if n_replies else -1
        self.ends = None
        last = -1
        # E2, E3, E7: how much each iteration costs more than the one before, before rounding (over the cost's
        # denominator): each reply's context grows by one token (E3); each chunk of the head re-reads one chunk
        # more (E2), and its tokens attend to one chunk more (E7)
        cost = gpu.cost
        step = cost.step(n_replies, n_tokens if head is not None else 0)
        if step:
            n = min(n, 64)  # (a shorter repeat is as exact: the GPU goes on from its last end)
            key = index if mixed else gpu.n_writes - 1  # (its words' iteration)
            chunk = n_tokens if head is not None else 0
            ends = self.ends = cost.ends(duration, step, n, n_replies, chunk,
                                         head.read_size - head.unread_tokens - chunk if head is not None else 0,
                                         cost.context(gpu.context_base, key, n_replies))
            assert ends[0] == duration, (ends[0], duration)  # (the first as the GPU computed it)
            last = ends[n - 1]
        PlainRepeat.__init__(self, gpu, env, started, index, duration, n_replies, head, n_tokens, n, last)

    def sync(self, now: int) -> None:
        """`PlainRepeat.sync`, with growing durations (E2, E3, E7) too."""
        if self.head is not None:
            d, ends = self.duration, self.ends  # (the router calls this at every arrival: inline)
            started = max(1, min(self.n, (now - self.started + d - 1) // d)) if ends is None else min(
                self.n, 1 + bisect_right(ends, now - self.started - 1))
            if started > self.n_taken:
                self._take(started - self.n_taken)

    def sync_kv(self, now: int) -> None:
        """E9: take the blocks due at the starts before `now`, for the handoff (E4e) to read the
        KV memory held now."""
        self._log_kv(self._started_by(now))

    def _started_by(self, now: int) -> int:
        """How many of the repeat's iterations started before `now` (the first, and one after each end before it)."""
        return max(1, min(self.n, 1 + self._ended_by(now - self.started - 1)))

    def cut(self, ahead: bool = False) -> None:
        """`PlainRepeat.cut` under the options, the KV memory held logged at the starts so far
        (E4, E9) and E10's writing iterations counted; nothing is taken `ahead` (`Gpu.start_ahead`
        takes nothing under the options: the GPU goes on at the running iteration's end)."""
        if not self.open:
            return
        self.open = False
        gpu, now = self.gpu, self.env.now
        if self.ends is None:  # (`_ended_by` and `_end`, inline on the common path)
            ran, into = divmod(now - self.started, self.duration)  # iterations ended by now; ns into the next
        else:
            ran = self._ended_by(now - self.started)
            into = now - self.started - self._end(ran - 1)
        if ran >= self.n:  # the last end is now, later in step 1 (from a GPU numbered lower)
            gpu.n_started = self.index + self.n
            self._log_kv(self.n)
            return
        if into == 0 and ran >= 1:
            self._take(ran - self.n_taken)
            self.record(ran)
            self._log_kv(ran)
            gpu.n_started = self.index + ran
            if self.key >= 0:  # E10: writing iterations started
                gpu.n_writes = self.key + ran - 1
            self.n = 0
            self.slot = take_over(self.slot, 0, PHASE_START + gpu.number)
        else:
            gpu.n_started = self.index + ran + 1
            self._log_kv(ran + 1)  # (E9: blocks due at the starts so far, before the caller changes the memory held)
            if ran + 1 < self.n:
                self.n = ran + 1
                self.slot = take_over(self.slot, self.started + self._end(ran) - now, PHASE_END + gpu.number)

    def finish(self) -> int:
        """The repeat's last iteration ends now: take every chunk, record all iterations but
        that last one (the GPU records it, and handles its end, as any other); its duration."""
        gpu, n = self.gpu, self.n
        self._take(n - self.n_taken)
        self.record(n - 1)
        if self.kv is not None or self.paged is not None:
            self._log_kv(n)
        gpu.n_started = self.index + n
        if self.key >= 0:  # E10: the last iteration's writing iteration; replies leaving after it (unmixed_start)
            write_started(gpu, self.key + n - 2, self.index + n - 1)
        ends = self.ends  # (its last duration: `_end(n - 1) - _end(n - 2)`, inline)
        return self.duration if ends is None else ends[n - 1] - (ends[n - 2] if n > 1 else 0)

    def _log_kv(self, n_started: int) -> None:
        """E4: the KV memory held at the starts of the first `n_started` iterations (E9: after their due blocks)."""
        if n_started > self.n_kv_logged:
            if self.paged is not None:
                self._grow(n_started)
            elif self.kv is not None:
                self.gpu.kv_used_tokens.extend(array("q", (self.kv,)) * (n_started - self.n_kv_logged))
            self.n_kv_logged = n_started

    def _grow(self, n_started: int) -> None:
        """E9: the blocks due at the starts from the last grown up to the first `n_started` (the options' bound
        made sure they are free), each start's KV memory logged after them, as a start does (`PagedKv.start_blocks`)."""
        gpu, n = self.gpu, n_started - self.n_kv_logged
        if self.grows_at >= 0:
            self.paged.blocks.grow(gpu, self.grows_at + self.n_kv_logged, n, gpu.kv_used_tokens)
        else:  # (E10's prompt-only iterations give no block)
            gpu.kv_used_tokens.extend(array("q", (gpu.kv_used,)) * n)


def cut_repeat(gpu: Any) -> None:
    """Something reaches `gpu` now that changes its next iteration: its repeat, if any, is cut."""
    if gpu.repeat is not None:
        gpu.repeat.cut()


def cut_all(host: Any, changed: Any) -> None:
    """E9 on a split: if a start `changed` what the handoff queue (E4e) may use (freed KV memory,
    a preemption; a reply back, a swap-in), every repeat ends with the iteration running now, so
    that its end serves the queue as one by one (the queue is served after every iteration end)."""
    if changed and getattr(host, "handoff", None):
        for g in host.gpus:
            if g.repeat is not None:
                g.repeat.cut()
