"""How a GPU starts an iteration under the options, chosen once per run (`starter`), not per
iteration: most runs with E7, E8 or E10 on have no KV limit (E4, E9) and no prefix cache (E13),
and for those the start is D4's plain choice of prompt tokens, E8's seats, and a duration with
only the terms that are on. The general path (`Gpu._options_start`, `option_paths.take` and
`duration`) stays for the rest; what the chosen function returns is what it returns
(tests/model: the reference model to the ns, fast-forward on/off)."""

from __future__ import annotations

from collections.abc import Callable
from heapq import heappush
from typing import Any

from . import paged_repeats, paged_start, paged_unmixed
from .costs import CostNs
from .option_paths import take
from .plain_repeats import PlainRepeat
from .repeats import Repeat
from .request import Request
from .unmixed import WritingRepeat, unmixed_start, writing_bound

Start = Callable[[int, int, Any], tuple[int, Any, int, int]]  # (now, index, host) -> replies, reads, tokens, duration


def starter(gpu: Any) -> Start:
    """`gpu`'s start of an iteration under the options for its whole run: (replies written,
    prompt tokens taken, how many, duration), as `Gpu._options_start` returns them."""
    if gpu.paged is not None:  # E9 (refused with E12 and E13, E9i): model/paged_start.py, with E10 model/paged_unmixed.py
        cost: CostNs = gpu.cost
        return (paged_start.starter if gpu.mixed else paged_unmixed.starter)(gpu, cost.reading_fn(gpu), cost.writing_fn(gpu))
    if gpu.kv_capacity is not None or gpu.prefix is not None or gpu.changes_role:
        general: Start = gpu._options_start
        return general  # (E4, E13, and E12, whose moves change a GPU's cost and chunks: the general path)
    take = _take(gpu)
    writing_ns, reading_ns = gpu.cost.writing_fn(gpu), gpu.cost.reading_fn(gpu)  # (model/costs.py)
    seats, queue, seat, waiting = gpu.seats, gpu.seat_queue, gpu._seat, gpu.waiting

    if not gpu.mixed:  # E10: model/unmixed.py's `unmixed_start`, without E4's log, `write_started` inline
        limit, chunk = gpu.max_tokens, gpu.chunk_tokens  # (prompts first: the room is E8's whole budget, `_take`)
        take_first = gpu._take_prompt_tokens if limit is None or chunk is not None and limit >= chunk else (
            take if chunk is None else lambda now: take(now, 0))
        by_write, leaving, leaving_order, room = gpu.leaving_by_write, gpu.leaving, gpu.leaving_order, seats or 1 << 62

        def start_unmixed(now: int, index: int, host: Any) -> tuple[int, Any, int, int]:
            if waiting:
                taken, n_tokens = take_first(now)
                if taken:  # prompt first: it reads, and writes no word
                    return 0, taken, n_tokens, reading_ns(now, index, 0, n_tokens, taken)
            key, n = gpu.n_writes, gpu.n_seated
            if queue and n < room:
                while queue and n < room:
                    seat(queue.popleft(), index, key)
                    n += 1
                gpu.n_seated = n
            if n:  # its writing iteration `key`: the replies whose last word it writes leave at its end
                gpu.n_writes = key + 1
                if out := by_write.pop(key, None):
                    leaving[index] = out
                    heappush(leaving_order, index)
            return n, (), 0, writing_ns(n, key)
        return start_unmixed

    if seats is None and gpu.max_tokens is None:  # (no E8: D4's plain tokens)
        take_tokens = gpu._take_prompt_tokens

        def free_start(now: int, index: int, host: Any) -> tuple[int, Any, int, int]:
            n = gpu.n_replies
            if waiting:
                taken, n_tokens = take_tokens(now)
                return n, taken, n_tokens, reading_ns(now, index, n, n_tokens, taken)
            return n, (), 0, writing_ns(n, index)
        return free_start

    def start(now: int, index: int, host: Any) -> tuple[int, Any, int, int]:
        if seats is None:
            n = gpu.n_replies
        else:  # E8: the replies waiting for a seat take the free seats in the order they joined
            n = gpu.n_seated
            if queue and n < seats:
                while queue and n < seats:
                    seat(queue.popleft(), index)
                    n += 1
                gpu.n_seated = n
        if waiting and (read := take(now, n))[0]:
            return n, read[0], read[1], reading_ns(now, index, n, read[1], read[0])
        return n, (), 0, writing_ns(n, index)
    return start


def repeat_kinds(gpu: Any, options: bool) -> tuple[type[PlainRepeat], type[PlainRepeat]]:
    """The repeat a GPU runs (model/repeats.py) for iterations that read prompt tokens, and for
    those that only write: `PlainRepeat` unless its iterations need `Repeat`'s work (E4's or E9's
    log at each start, E2/E3/E7's growing durations: E3 grows any batch with replies, E2 and E7 a
    reading one) or E10's count of writing iterations (`unmixed.WritingRepeat`, when no other; with E9,
    `paged_unmixed.WritingRepeat`, which also takes the blocks due).
    `PlainRepeat` takes a cut repeat's next iteration ahead (`Gpu.start_ahead`); `Repeat` does not."""
    cost = gpu.cost
    if not options:
        return PlainRepeat, PlainRepeat
    if gpu.paged is not None and gpu.mixed:  # (E9 without E10: model/paged_repeats.py)
        return paged_repeats.kinds(gpu)
    if gpu.paged is not None and not cost.writing_grows:  # E9 with E10, no E3 (model/paged_unmixed.py)
        return Repeat, paged_unmixed.WritingRepeat
    if gpu.kv_capacity is not None or gpu.paged is not None:
        return Repeat, Repeat
    reading = Repeat if cost.reading_grows else PlainRepeat
    writing = Repeat if cost.writing_grows else PlainRepeat if gpu.mixed else WritingRepeat
    return reading, writing


def releaser(gpu: Any) -> Callable[[list[Request]], None] | None:
    """What replies whose last word was just written leave of the options' bookkeeping: `Gpu._release`'s
    work (E3, E4, E8, E9, E10; E12 may switch E3's context on), E8/E10's seats alone, or nothing (None)."""
    if gpu.track_context or gpu.kv_capacity is not None or gpu.paged is not None or gpu.changes_role:
        release: Callable[[list[Request]], None] = gpu._release
        return release
    if not gpu.queue_replies:
        return None

    def release_seats(leaving: list[Request]) -> None:
        gpu.n_seated -= len(leaving)
    return release_seats


def bounds(gpu: Any) -> Callable[[Any, int, Any, int, int], int] | None:
    """How the options bound a repeat (`Gpu.steady_iterations`): E9's blocks (`paged_repeats.bound`;
    with E10, `paged_unmixed.writing_bound`), E10's last writing iterations (`unmixed.writing_bound`), or nothing (None)."""
    if gpu.paged is not None:
        return paged_repeats.bound(gpu.paged) if gpu.mixed else paged_unmixed.writing_bound  # (model/paged_repeats.py)
    return None if gpu.mixed else writing_bound


def options_start(gpu: Any, now: int, index: int, host: Any) -> tuple[int, list[tuple[Request, int]], int, int]:
    """`Gpu._options_start`, the general path: an iteration starting now under the options: (replies written,
    prompt tokens taken, how many, duration). Replies waiting for a seat take the free seats in the order they
    joined (E8); prompts are taken (E4d, E8); the duration has the options' terms (E2, E3, E7); the KV memory held
    is logged (E4; a run stopped mid-iteration leaves one extra entry, which `ArrangementRecords.collect` cuts)."""
    if not gpu.mixed:
        return unmixed_start(gpu, now, index)
    if gpu.seats is not None:
        queue = gpu.seat_queue
        while queue and gpu.n_seated < gpu.seats:
            gpu._seat(queue.popleft(), index)
            gpu.n_seated += 1
    n_replies = gpu.n_seated if gpu.seats is not None else gpu.n_replies
    taken, n_tokens = take(gpu, now, n_replies)
    if gpu.kv_capacity is not None:
        gpu.kv_used_tokens.append(gpu.kv_used)
    return n_replies, taken, n_tokens, gpu._duration(now, index, n_replies, n_tokens, taken)


def _take(gpu: Any) -> Callable[..., tuple[Any, int]]:
    """The prompt tokens an iteration starting now reads, writing `n_written` replies, with no KV
    limit and no prefix cache (D4, E8: `option_paths.take`'s choice, its tests once per run; `n_written` 0 if not given)."""
    take_tokens: Callable[..., tuple[Any, int]] = gpu._take_prompt_tokens
    limit, chunk, waiting = gpu.max_tokens, gpu.chunk_tokens, gpu.waiting
    if limit is None:
        return lambda now, n_written: take_tokens(now)
    if chunk is None:  # E8, whole prompts: `_take_with_options` with no KV limit and no prefix cache (kv_take.py)
        def whole(now: int, n_written: int = 0) -> tuple[Any, int]:
            taken, room = [], limit - n_written
            while waiting:
                r = waiting[0]
                n = r.unread_tokens
                if n > room:  # the head is read whole if it fits the room, else it waits, unless larger than
                    if room == 0 or n == r.read_size and n <= limit:  # the whole budget (or begun): pieces of the room
                        break
                    n = room
                taken.append((r, n))
                room -= n
                if n < r.unread_tokens:
                    break
                waiting.popleft()
            return take_tokens(now, taken)
        return whole

    def chunked(now: int, n_written: int) -> tuple[Any, int]:
        room = limit - n_written  # E8: chunks of min(chunk_tokens, max_batch_tokens - replies written)
        if room >= chunk:
            return take_tokens(now)
        return take_tokens(now, None, room) if room else ((), 0)
    return chunked
