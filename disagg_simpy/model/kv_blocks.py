"""E9's block schedule, kept per iteration rather than per reply (model/paged_kv.py keeps the rest),
and the bounds it gives a repeat (`bound`; with E10 `writing_bound`): how many iterations run
before one whose due blocks are not all free.

While seated, a reply gets one word per iteration (E10: per writing iteration; either way its
*key*), so it needs its next block at a fixed phase: from its first due key `kv_due` (the key of
the first word whose token its blocks do not hold) on, at every `block`-th key, up to its last
word. A reply is in `phases[kv_due % block]` from its seat until it leaves or is preempted: no
key before `kv_due` that is still to start has that phase, as its first due block is less than
`block` keys away (E9f: a reply swapped in, seated later, `block` away from its seat: then it waits
in `pending[kv_due]` until that key starts; `seater` puts a reply in one or the other).
A key whose due blocks are all free then costs one
look-up, `len(phases[key % block])` blocks, whatever the replies' lengths; only when memory runs
short are the due replies taken one by one, in the order they joined (E9c).

A reply stays in its phase past its last due key L: its last word's key `last` has L <= last
< L + block, and it leaves at the end of `last`, before key L + block starts, so it is never
counted at a key it is not due at. Its `kv_blocks` are the blocks it held when seated; while
seated it holds max(kv_blocks, blocks for its prompt and its words so far) (`held_at`), written
back to `kv_blocks` when it leaves its seat (preempted: model/paged_kv.py).

With a `WordPlan` (a rule that writes a reply several words an iteration, handed in by the engine:
docs/rules.md#r103-#r107) a reply's blocks fall due by its own plan instead: `plan_seater` puts, when it
is seated, each of its next iterations' blocks in `steps`, with how many it takes then.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .batch import Batch
    from .gpu_state import GpuState, Paging, Reads
    from .records import GpuLog
    from .request import Request


class WordPlan(Protocol):
    """Replies written several words an iteration by a plan of their own (R103-R104): `lookahead`, the tokens
    a written reply's blocks hold past its words; `starts(request_id, first)`, the first word of each writing
    iteration that writes its words from word `first` (which begins one) to its last."""

    @property
    def lookahead(self) -> int: ...

    def starts(self, request_id: int, first: int) -> list[int]: ...


class BlockSchedule:
    """The due blocks of one GPU's seated replies (E9), by key."""

    __slots__ = ("block_tokens", "pending", "phases", "plan", "lookahead", "steps", "plans")

    def __init__(self, block: int, plan: WordPlan | None = None):
        self.block_tokens = block
        self.pending: dict[int, list[Request]] = {}  # key -> replies whose first due block is then
        self.phases: list[dict[Request, None]] = [{} for _ in range(block)]  # key % block -> replies due then
        # with a plan (R103): a seated reply's iterations follow it, so its blocks fall due at keys of its own,
        # all put in `steps` when it is seated, each with the blocks it takes then
        self.plan = plan
        self.lookahead = 0 if plan is None else plan.lookahead  # (the tokens each written reply's blocks hold past its words)
        self.steps: dict[int, dict[Request, int]] = {}  # (plan) key -> replies due blocks then -> how many
        self.plans: dict[Request, tuple[int, list[int], list[int]]] = {}  # (plan) seated reply -> (its seat's key, the
        # first word of each of its iterations from it, the blocks it holds once each has started)

    def seater(self, batch: Batch) -> Callable[..., None]:
        """`PagedKv.seat_reply` for the GPU of `batch`, what it reads bound once (it runs at every join
        and seat): the reply takes its seat, its first due key into its phase (or waiting for it)."""
        block, phases, wait = self.block_tokens, self.phases, self.wait
        track_context, add_context, leaves_after = batch.track_context, batch.add_context, batch.leaves_after

        def seat(r: Request, index: int, key: int | None = None, started: bool = False) -> None:
            """The reply gets words seat_word.. from iterations index, index + 1, ... (E8 seat or join;
            E10: from writing iterations key, key + 1, ..., the keys of its block and last-word schedule;
            `started`: a swap-in, once that iteration has taken its due blocks)."""
            at = index if key is None else key
            f, n = r.seat_word, r.n_reply_words
            base = r.n_prompt_tokens + f - 1 - at if track_context else 0  # (E3)
            # its first due key: that of the first word its blocks do not hold
            due_word = r.kv_blocks * block - r.n_prompt_tokens + 2  # (word w needs prompt + w - 1 tokens)
            if due_word > n:
                due = -1
            elif (ahead := due_word - f) <= 0:
                due = at
                phases[at % block][r] = None
            else:
                due = at + ahead
                if ahead < block + started:  # (no key still to start before it has its phase)
                    phases[due % block][r] = None
                else:
                    wait(r, due)
            r.paged_seat(index, at, base, due)
            if track_context:
                add_context(base)
            leaves_after(at + n - f, r)  # (E10: a writing iteration, `writing_bound`)
        return seat

    def plan_seater(self, batch: Batch) -> Callable[..., None]:
        """`PagedKv.seat_reply` when a reply's iterations follow a plan (R103, R104): its iterations from its
        seat (`WordPlan.starts`, the seat's first word beginning the first), each needing blocks for the
        prompt, the words before its first and the plan's lookahead; those it lacks fall due then."""
        block, steps, plans, k, leaves_after = self.block_tokens, self.steps, self.plans, self.lookahead, batch.leaves_after
        assert self.plan is not None
        starts_of = self.plan.starts

        def seat(r: Request, index: int, key: int | None = None, started: bool = False) -> None:
            at = index if key is None else key
            starts = starts_of(r.request_id, r.seat_word)
            held, prompt, first = r.kv_blocks, r.n_prompt_tokens, -1
            holds = []
            for j, word in enumerate(starts):
                need = -(-(prompt + word - 1 + k) // block)
                if need > held:
                    due = steps.get(at + j)
                    if due is None:
                        steps[at + j] = {r: need - held}
                    else:
                        due[r] = need - held
                    if first < 0:
                        first = at + j
                    held = need
                holds.append(held)
            plans[r] = (at, starts, holds)
            r.paged_seat(index, at, 0, first)  # (no E3 context term with a plan: refused, R107)
            leaves_after(at + len(starts) - 1, r)
        return seat

    def finished(self, r: Request) -> int:
        """(Plan) reply `r` wrote its last word: the blocks it held (its plan forgotten)."""
        _, _, holds = self.plans.pop(r)
        return holds[-1]

    def last_key(self, r: Request) -> int:
        """The key of seated reply `r`'s last word (one word a key; with a plan, by its plan)."""
        if self.plan is None:
            return r.seat_index + r.n_reply_words - r.seat_word
        at, starts, _ = self.plans[r]
        return at + len(starts) - 1

    def words_at(self, r: Request, key: int) -> int:
        """The words seated reply `r` has when key `key` starts (one an iteration; with a plan, by its plan)."""
        if self.plan is None:
            return r.seat_word + key - r.seat_index - 1
        at, starts, _ = self.plans[r]
        return starts[key - at] - 1

    def left(self, r: Request, at: int) -> None:
        """Reply `r`, in the phase of key `at` (its first due key), wrote its last word."""
        del self.phases[at % self.block_tokens][r]

    def wait(self, r: Request, at: int) -> None:
        """Reply `r`, seated (`seater` works out its first due key `at` = `r.kv_due`
        as below), has a key with its phase still to start before `at` (E9f: a swap-in seated late):
        it waits in `pending` until `at` starts."""
        if (due := self.pending.get(at)) is None:
            self.pending[at] = [r]
        else:
            due.append(r)

    def due_at(self, key: int) -> dict[Request, None] | dict[Request, int]:
        """Key `key` starts: the replies due a block now (those waiting for it join their phase; with a plan,
        the replies due blocks then, each with how many)."""
        if self.plan is not None:
            return self.steps.pop(key, {})
        phase = self.phases[key % self.block_tokens]
        if self.pending and (first := self.pending.pop(key, None)):
            for r in first:
                phase[r] = None
        return phase

    def unschedule(self, r: Request) -> None:
        """Reply `r` leaves its seat (preempted, or gone after its last word)."""
        if self.plan is not None:  # (plan) its steps still to come
            del self.plans[r]
            for step in [d for d in self.steps.values() if r in d]:
                del step[r]
            for key in [k for k, d in self.steps.items() if not d]:
                del self.steps[key]
            r.set_due(-1)
            return
        at = r.kv_due
        if at < 0:
            return
        phase = self.phases[at % self.block_tokens]
        if r in phase:
            del phase[r]
        else:  # (waiting for its first due key, model docstring)
            due = self.pending[at]
            due.remove(r)
            if not due:
                del self.pending[at]
        r.set_due(-1)

    def held_at(self, r: Request, key: int) -> int:
        """The blocks seated reply `r` holds when key `key` starts, before its block then, if due:
        those for its prompt and the words of the keys before (word w needs prompt + w - 1 tokens)."""
        if self.plan is not None:  # (plan) once its iterations before `key` started
            at, _, holds = self.plans[r]
            return holds[key - at - 1] if key > at else r.kv_blocks
        tokens = r.n_prompt_tokens + r.seat_word + key - r.seat_index - 2
        return max(r.kv_blocks, -(-tokens // self.block_tokens))

    def run_free(self, free: int, key: int, n: int) -> int:
        """How many of `n` keys from `key` (started already) start before one whose due blocks are
        not all free, taking `free` tokens free now (no reply leaves before the `n`-th key). A plain
        loop over the keys it passes: it stops at the first that does not fit, so it costs what the
        repeat it bounds costs to grow (`grow`), and touches only those keys' phases."""
        block, phases, pending = self.block_tokens, self.phases, self.pending
        free //= block  # (blocks free: each due reply takes a whole block)
        if not pending:
            for k in range(key + 1, key + n):
                free -= len(phases[k % block])
                if free < 0:
                    return k - key
            return n
        joined: dict[int, int] = {}  # phase -> replies that joined it at the keys passed
        for k in range(key + 1, key + n):
            phase = k % block
            first = pending.get(k)
            if first:
                joined[phase] = joined.get(phase, 0) + len(first)
            free -= len(phases[phase]) + joined.get(phase, 0)
            if free < 0:
                return k - key
        return n

    def grow(self, gpu: GpuState, key: int, n: int, log: GpuLog) -> None:
        """Keys `key` .. `key + n - 1` start (a repeat's, `run_free` made sure their blocks are
        free): each takes its due blocks, and the KV memory held after them is logged."""
        used = was = gpu.memory.used
        block, phases, pending = self.block_tokens, self.phases, self.pending
        held: list[int] = []
        append = held.append
        if not pending:  # (most repeats: each key only looks its phase up)
            for k in range(key, key + n):  # (a plain loop: n is ~5 keys, where C iterator chains cost more)
                used += len(phases[k % block]) * block
                append(used)
        else:
            for k in range(key, key + n):
                phase = phases[k % block]
                if first := pending.pop(k, None):
                    for r in first:
                        phase[r] = None
                used += len(phase) * block
                append(used)
        log.kv_each(held)
        gpu.memory.hold(used - was)


def bound(kv: Paging) -> Callable[[GpuState, int, Reads, int, int], int]:
    """The options' bound (`option_starts.bounds`, a repeat's bound) for the GPU of `kv` (its model/paged_kv.PagedKv) that mixes reads and
    writes (its keys are its iterations): how many of the `n` iterations from `index` run before one
    whose due blocks are not all free; one after a start that preempted or swapped."""
    gpu, block, blocks, capacity = kv.gpu, kv.block, kv.due_blocks, kv.limit
    if blocks.plan is not None:
        return one_by_one  # each reply's blocks fall due by its own plan (R107)

    def paged_bound(_: GpuState, index: int, taken: Reads, n_replies: int, n: int) -> int:
        if kv.dirty and (kv.blocked or kv.moved_tokens):
            return 1  # E9: a start that preempted admits nothing, the next may; a swap's time is its own
        free = capacity - gpu.memory.used
        if n_replies * block * -(-(n - 1) // block) <= free:  # (each reply at most one block every `block` starts)
            return n
        bounded: int = blocks.run_free(free, index, n)
        return bounded
    return paged_bound


def writing_bound(gpu: GpuState, index: int, taken: Reads, n_replies: int, n: int) -> int:
    """The options' bound (`option_starts.bounds`) under E9 and E10: a repeat of writing iterations runs up to the first writing
    iteration that a reply leaves after (as `unmixed.writing_bound` finds it: the keys `PagedKv.seat_reply` gives, in the
    heap `Batch.write_order`, a preempted reply's left there until popped: `Batch.first_leaving_write`), and while every
    due block is free (`BlockSchedule.run_free` from its key, `Batch.n_writes - 1`, when not free at a glance);
    prompt-only iterations give no block. After a
    start that preempted or swapped, one iteration alone."""
    paged = gpu.paged
    assert paged is not None  # (chosen under E9: `option_starts.bounds`)
    if paged.blocked or paged.moved_tokens or paged.due_blocks.plan is not None:
        return 1  # (with a plan, each reply's blocks fall due by its own: R107)
    if n_replies:
        key = gpu.batch.n_writes - 1
        if gpu.batch.leaving_by_write:
            first = gpu.batch.first_leaving_write()
            if first - key < n:
                n = first - key + 1
                if n < 2:
                    return 1
        block = paged.block  # (each reply takes at most a block every `block` starts: counted start by start only near capacity)
        if n_replies * block * -(-(n - 1) // block) > paged.limit - gpu.memory.used:
            bounded: int = paged.due_blocks.run_free(paged.limit - gpu.memory.used, key, n)
            return bounded
    return n


def one_by_one(gpu: GpuState, index: int, taken: Reads, n_replies: int, n: int) -> int:
    """E9 with a `WordPlan`: a repeat's bound of one (its iterations run one by one, R107)."""
    return 1
