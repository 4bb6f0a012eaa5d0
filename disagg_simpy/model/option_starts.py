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
from .option_paths import duration, take
from .plain_repeats import PlainRepeat
from .repeats import Repeat
from .unmixed import WritingRepeat, unmixed_start, writing_bound

Start = Callable[[int, int, Any], tuple[int, Any, int, int]]  # (now, index, host) -> replies, reads, tokens, duration


def starter(gpu: Any) -> Start:
    """`gpu`'s start of an iteration under the options for its whole run: (replies written,
    prompt tokens taken, how many, duration), as `Gpu._options_start` returns them."""
    if gpu.paged is not None:  # E9 (refused with E12 and E13, E9i): model/paged_start.py, with E10 model/paged_unmixed.py
        return (paged_start.starter if gpu.mixed else paged_unmixed.starter)(gpu, _reading_ns(gpu), _writing_ns(gpu))
    if gpu.kv_capacity is not None or gpu.prefix is not None or gpu.changes_role:
        return gpu._options_start  # (E4, E13, and E12, whose moves change a GPU's cost and chunks: the general path)
    take = _take(gpu)
    writing_ns, reading_ns = _writing_ns(gpu), _reading_ns(gpu)
    seats, queue, seat, waiting = gpu.seats, gpu.seat_queue, gpu._seat, gpu.waiting

    if not gpu.mixed:  # E10: model/unmixed.py's `unmixed_start`, without E4's log, `write_started` inline
        limit, chunk = gpu.max_tokens, gpu.chunk_tokens  # (prompts first: the room is E8's whole budget, `_take`)
        take_first = gpu._take_prompt_tokens if limit is None or chunk is not None and limit >= chunk else (
            take if chunk is None else lambda now: take(now, 0))
        by_write, leaving, leaving_order, room = gpu.leaving_by_write, gpu.leaving, gpu.leaving_order, seats or 1 << 62
        cost = gpu.cost  # a writing iteration's M1 in whole ns inline when no E3 or E15 term is on (`_writing_ns`)
        whole = not (gpu.track_context or cost.per_token_tile) and cost.denominator == 1
        it, reply = cost.iteration, cost.per_reply

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
            return n, (), 0, it + reply * n if whole else writing_ns(n, key)
        return start_unmixed

    if seats is None and gpu.max_tokens is None:  # (no E8: D4's plain tokens)
        take_tokens = gpu._take_prompt_tokens
        if _attention_alone(cost := gpu.cost):  # (`_reading_ns`'s `plain_attention`, inline)
            it, reply, token, pair, den = cost.iteration, cost.per_reply, cost.per_prompt_token, cost.per_attention_pair, cost.denominator

            def attention_start(now: int, index: int, host: Any) -> tuple[int, Any, int, int]:
                n = gpu.n_replies
                if not waiting:
                    return n, (), 0, writing_ns(n, index)
                taken, n_tokens = take_tokens(now)
                n_pairs = 0
                for r, c in taken:  # (`plain_attention`)
                    n_pairs += c * (r.read_size - r.unread_tokens - c) + c * (c + 1) // 2
                total = it + reply * n + token * n_tokens + pair * n_pairs
                return n, taken, n_tokens, total if den == 1 else (2 * total + den) // (2 * den)
            return attention_start

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
    if gpu.paged is not None and not cost.per_context_token:  # E9 with E10, no E3 (model/paged_unmixed.py)
        return Repeat, paged_unmixed.WritingRepeat
    if gpu.kv_capacity is not None or gpu.paged is not None:
        return Repeat, Repeat
    reading = Repeat if cost.per_context_token or cost.per_reread_token or cost.per_attention_pair else PlainRepeat
    writing = Repeat if cost.per_context_token else PlainRepeat if gpu.mixed else WritingRepeat
    return reading, writing


def releaser(gpu: Any) -> Callable[[list], None] | None:
    """What replies whose last word was just written leave of the options' bookkeeping: `Gpu._release`'s
    work (E3, E4, E8, E9, E10; E12 may switch E3's context on), E8/E10's seats alone, or nothing (None)."""
    if gpu.track_context or gpu.kv_capacity is not None or gpu.paged is not None or gpu.changes_role:
        return gpu._release
    if not gpu.queue_replies:
        return None

    def release_seats(leaving: list) -> None:
        gpu.n_seated -= len(leaving)
    return release_seats


def bounds(gpu: Any) -> Callable[[Any, int, Any, int, int], int] | None:
    """How the options bound a repeat (`Gpu.steady_iterations`): E9's blocks (`paged_repeats.bound`;
    with E10, `paged_unmixed.writing_bound`), E10's last writing iterations (`unmixed.writing_bound`), or nothing (None)."""
    if gpu.paged is not None:
        return paged_repeats.bound(gpu.paged) if gpu.mixed else paged_unmixed.writing_bound  # (model/paged_repeats.py)
    return None if gpu.mixed else writing_bound


def options_start(gpu: Any, now: int, index: int, host: Any) -> tuple[int, list, int, int]:
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
    take_tokens, limit, chunk, waiting = gpu._take_prompt_tokens, gpu.max_tokens, gpu.chunk_tokens, gpu.waiting
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


def _writing_ns(gpu: Any) -> Callable[[int, int], int]:
    """The duration of an iteration that writes `n` replies and reads nothing, `key` counting its
    words (E10: writing iterations): of the options' terms only E3's context (`duration`)."""
    cost = gpu.cost
    if gpu.track_context:  # E3: prompt + word - 1, summed over its replies
        return lambda n, key: cost.iteration_ns_full(n, 0, 0, gpu.context_base + key * n) if n else cost.iteration_ns(0, 0)
    if cost.per_token_tile:  # (E15: its tiles)
        return lambda n, key: cost.iteration_ns(n, 0)
    it, reply, den = cost.iteration, cost.per_reply, cost.denominator
    if den == 1:  # (whole ns: nothing to round)
        return lambda n, key: it + reply * n
    return lambda n, key: (2 * (it + reply * n) + den) // (2 * den)  # D10, halves up


def _reading_ns(gpu: Any) -> Callable[[int, int, int, int, Any], int]:
    """The duration of an iteration that reads `taken` (`n_tokens` tokens) and writes `n_replies`
    replies: M1 (E14, E15) alone, M1 with E7's attention pairs alone, or `duration`'s terms."""
    cost = gpu.cost
    plain = not (cost.prompt_iteration or cost.free_prompt_tokens or cost.per_token_tile)  # (no E14, E15 term)
    it, reply, token, pair, den = cost.iteration, cost.per_reply, cost.per_prompt_token, cost.per_attention_pair, cost.denominator
    if not cost.extra_terms:
        if plain and den == 1:  # (M1 in whole ns, inline)
            return lambda now, index, n_replies, n_tokens, taken: it + reply * n_replies + token * n_tokens
        return lambda now, index, n_replies, n_tokens, taken: cost.iteration_ns(n_replies, n_tokens)
    if cost.per_reread_token or cost.per_context_token or cost.per_cached_token:  # (E2, E3, E13)
        return lambda now, index, n_replies, n_tokens, taken: duration(gpu, now, index, n_replies, n_tokens, taken)
    full = cost.iteration_ns_full
    if not _attention_alone(cost):  # (E14, E15: their terms too)
        def attention(now: int, index: int, n_replies: int, n_tokens: int, taken: Any) -> int:
            return full(n_replies, n_tokens, 0, 0, _pairs(taken))
        return attention

    def plain_attention(now: int, index: int, n_replies: int, n_tokens: int, taken: Any) -> int:
        n_pairs = 0
        for r, n in taken:  # E7: each token read attends to those of its prompt before it and itself (`_pairs`, inline)
            n_pairs += n * (r.read_size - r.unread_tokens - n) + n * (n + 1) // 2
        total = it + reply * n_replies + token * n_tokens + pair * n_pairs  # M1 + E7, rounded once (D10, halves up)
        return total if den == 1 else (2 * total + den) // (2 * den)
    return plain_attention


def _attention_alone(cost: Any) -> bool:
    """Whether E7's attention pairs are the only term of the options' or E14/E15's on (E2, E3 and E13 off)."""
    return bool(cost.per_attention_pair) and not (cost.per_reread_token or cost.per_context_token or cost.per_cached_token
                                                  or cost.prompt_iteration or cost.free_prompt_tokens or cost.per_token_tile)


def _pairs(taken: Any) -> int:
    """E7: the attention pairs of an iteration's reads, each token read attending to the tokens of
    its prompt before it (read by earlier iterations) and to itself."""
    return sum(n * (r.read_size - r.unread_tokens - n) + n * (n + 1) // 2 for r, n in taken)
