"""The repeat of the explainer's rules, with every option off: `n` iterations of one batch, each
`duration` ns, nothing logged at their starts (model/repeats.py says what a repeat is, and why
its records are the one-by-one loop's). `repeats.Repeat` extends it for the options (E4's and
E9's logs at each start, E10's writing iterations, E2/E3/E7's growing durations); a GPU with no
option on runs this one, whose `__init__`, `cut` and `finish` do none of that work: a repeat's
fixed cost is most of what it saves on the few iterations it often holds (benchmarks/ab.py
--opcodes)."""

from __future__ import annotations

import bisect
from collections import deque
from typing import Any, Protocol

from .phases import PHASE_END, PHASE_START, Environment, Slot, again, take_over
from .request import Request

Reads = list[tuple[Request, int]]  # the prompt tokens an iteration reads: (request, tokens), ...


class PlainGpu(Protocol):
    """What a repeat reads and writes of its GPU with every option off (model/gpu.py's `Gpu`)."""

    number: int
    n_started: int
    tick: Slot  # its event to reuse (`Gpu.run`)
    queued_tokens: int
    waiting: deque[Request]
    runs_start: Any  # the GPU's records, array('q') each (model/records.py's `GpuLog`)
    runs_duration: Any
    runs_stop: Any
    runs_replies: Any
    runs_tokens: Any
    runs_ends: Any
    reads_log: Any

    def start_ahead(self, at: int, n_replies: int) -> tuple[Reads, int, int] | None: ...


class PlainRepeat:
    """`n` iterations of `gpu` from iteration `index` (started at `started`), `duration` ns each
    (`last`: when the last ends after `started`, if not `n * duration`: `repeats.Repeat`'s
    growing durations), writing `n_replies` replies and reading `n_tokens` tokens of `head`
    (None: reading none)."""

    __slots__ = ("gpu", "env", "started", "index", "duration", "n_replies", "head", "n_tokens", "n", "n_taken", "open",
                 "slot", "after")
    ends: list[int] | None = None  # E2, E3, E7: the ends after `started` (`repeats.Repeat` only)

    def __init__(self, gpu: PlainGpu, env: Environment, started: int, index: int, duration: int, n_replies: int,
                 head: Request | None, n_tokens: int, n: int, last: int = -1):
        self.gpu = gpu
        self.env = env
        self.started = started
        self.index = index
        self.duration = duration
        self.n_replies = n_replies
        self.head = head
        self.n_tokens = n_tokens
        self.n = n  # iterations the repeat runs; 0 once cut at an iteration end (all recorded then)
        self.n_taken = 1  # iterations whose tokens are taken (the first's at its start)
        self.open = True  # not cut yet
        self.after: tuple[Reads, int, int] | None = None  # see `cut`
        self.slot = again(gpu.tick, n * duration if last < 0 else last, PHASE_END + gpu.number)  # the GPU's process waits on it

    def _end(self, j: int) -> int:
        """When iteration j of the repeat ends, after its start (0 for j = -1)."""
        if j < 0:
            return 0
        return (j + 1) * self.duration if self.ends is None else self.ends[j]

    def _ended_by(self, t: int) -> int:
        """How many of the repeat's iterations end by `t` after its start."""
        return t // self.duration if self.ends is None else bisect.bisect_right(self.ends, t)

    def sync(self, now: int) -> None:
        """Take the chunks of the iterations started by `now` (a start at `now` itself comes in
        D5 step 3, after everything that arrives at `now`)."""
        if self.head is not None:  # (the router calls this at every arrival: inline, no min/max calls)
            d = self.duration
            started = (now - self.started + d - 1) // d
            if started > self.n:
                started = self.n
            if started > self.n_taken:
                self._take(started - self.n_taken)

    def _take(self, n_iterations: int) -> None:
        if n_iterations > 0 and self.head is not None:
            tokens = n_iterations * self.n_tokens
            self.head.unread_tokens -= tokens
            self.gpu.queued_tokens -= tokens
            self.n_taken += n_iterations
            if self.head.unread_tokens == 0:  # (its last chunk: it leaves the queue, D4)
                self.gpu.waiting.popleft()

    def cut(self, ahead: bool = False) -> None:
        """Something reaches the GPU now (D5 step 2) that changes its next iteration: end the
        repeat with the iteration running now, or, exactly at an iteration end, there, the
        next iteration starting in step 3 of this instant.

        `ahead` (a prompt routed here, already queued): if nothing else can reach the GPU before
        the running iteration ends, the next iteration, which reads it, is known now: it is
        taken now, as of its start (`Gpu.start_ahead`), and the GPU waits for ITS end (`after`:
        its reads, tokens and duration): one wake-up fewer."""
        if not self.open:
            return
        self.open = False
        gpu, d, now = self.gpu, self.duration, self.env.now
        ran, into = divmod(now - self.started, d)  # iterations ended by now; ns into the next
        if ran >= self.n:  # the last end is now, later in step 1 (from a GPU numbered lower)
            gpu.n_started = self.index + self.n
            return
        if into == 0 and ran >= 1:
            self._take(ran - self.n_taken)
            self.record(ran)
            gpu.n_started = self.index + ran
            self.n = 0
            self.slot = take_over(self.slot, 0, PHASE_START + gpu.number)
        else:
            gpu.n_started = self.index + ran + 1
            end = self.started + (ran + 1) * d
            if ahead and ran + 1 < self.n and (after := gpu.start_ahead(end, self.n_replies)) is not None:
                self.n, self.after = ran + 1, after
                gpu.n_started += 1
                self.slot = take_over(self.slot, end + after[2] - now, PHASE_END + gpu.number)
            elif ran + 1 < self.n:
                self.n = ran + 1
                self.slot = take_over(self.slot, end - now, PHASE_END + gpu.number)

    def finish(self) -> int:
        """The repeat's last iteration ends now: take every chunk, record all iterations but
        that last one (the GPU records it, and handles its end, as any other); its duration."""
        n = self.n
        if self.head is not None:
            self._take(n - self.n_taken)
        self.record(n - 1)
        self.gpu.n_started = self.index + n
        return self.duration

    def _log_kv(self, n_started: int) -> None:
        """E4, E9: the KV memory held at the starts of the first `n_started` iterations: none to
        log with the options off (`repeats.Repeat` logs it)."""

    def sync_kv(self, now: int) -> None:
        """E9: the blocks due at the starts before `now`: none with the options off (`repeats.Repeat`)."""

    def flush(self, stopped_at_ns: int) -> None:
        """The run stopped during the repeat: record the iterations that ended by the stop (and
        forget the start of an `after` iteration that never started)."""
        if self.n:
            ended = min(self.n, self._ended_by(stopped_at_ns - self.started))
            assert ended < self.n or self.after is not None  # (else the last end came before any stop)
            self.record(ended)
            self._log_kv(min(self.n, ended + 1))  # (every start by the stop: a start at the stop came in D5 step 3)
            start = self.started + self._end(self.n - 1)
            if self.after is not None and stopped_at_ns < start:
                for r, _ in self.after[0]:
                    if r.read_started_at_ns == start:
                        r.read_started_at_ns = -1

    def record(self, count: int) -> None:
        """Records of the repeat's first `count` iterations: one run (model/records.py's `GpuLog`)."""
        if count <= 0:
            return
        g = self.gpu
        g.runs_start.append(self.started)
        if self.ends is None:
            g.runs_duration.append(self.duration)
        else:  # (E2, E3, E7: its ends after its start)
            g.runs_duration.append(-1 - len(g.runs_ends))
            g.runs_ends.fromlist(self.ends[:count])
        g.runs_stop.append(self.index + count)
        g.runs_replies.append(self.n_replies)
        g.runs_tokens.append(self.n_tokens)
        if self.head is not None:  # iteration, request id, tokens; ...
            log = [0, self.head.request_id, self.n_tokens] * count  # (a list: 25% under an array built the same way)
            log[0::3] = range(self.index, self.index + count)
            g.reads_log.fromlist(log)
