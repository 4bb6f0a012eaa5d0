"""D4's choice of prompts under the options (E4d, E8, E13; E9's admission), `Gpu._take_with_options`, from the
GPU's prompt queue (model/prompts.py's `PromptQueue`, whose methods it calls), kept out of model/gpu.py."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from .gpu_state import GpuState, Paging
    from .request import Request


def take_with_options(gpu: GpuState, n_written: int) -> list[tuple[Request, int]]:
    """D4 under the options, in arrival order, no prompt overtaking another:
    - E4d: a prompt whose reading has not begun is taken only if its reservation fits the free tokens (less what
      prompts taken before it reserved); chunked, a prompt is considered only if the budget reaches it;
    - E8: the iteration's tokens are at most `max_tokens - n_written`; chunked, each iteration reads at most
      min(chunk_tokens, that room); reading whole prompts, the head is read whole if it fits the room, else it
      waits, unless it is larger than the whole budget (or begun so), when it is read in pieces of the room;
      E8 per side (R90): at most `max_requests` prompts (whole or a piece each);
    - E13: a prompt not begun reads after its longest cached prefix (fixed and pinned if taken)."""
    waiting, pop = gpu.queue.waiting, gpu.queue.pop
    capacity, limit, paged = gpu.memory.capacity, gpu.max_tokens, gpu.paged
    free = 0 if capacity is None else capacity - gpu.memory.used
    budget = gpu.queue.chunk_tokens  # tokens left to read this iteration when chunked
    room = None if limit is None else limit - n_written  # E8, whole prompts
    if budget is not None and room is not None:
        budget, room = min(budget, room), None
    taken: list[tuple[Request, int]] = []
    prefix, cap = gpu.prefix, gpu.max_requests or -1  # (-1: no cap on prompts, R90)
    while waiting and len(taken) != cap:
        r = waiting[0]
        n = r.unread_tokens
        n -= (hit := prefix.hit_tokens(r) if prefix is not None and n == r.n_prompt_tokens else 0)  # E13: not begun
        if budget is not None:
            if budget == 0:
                break
            n = min(n, budget)
        elif room is not None and n > room:
            if room == 0 or (r.unread_tokens == r.read_size and limit is not None and n <= limit):
                break  # a whole prompt waits for room
            n = room
        if capacity is not None and r.unread_tokens == r.read_size:  # not begun: reserve now, or stop
            need = gpu.memory.need(r) if paged is None else paged.admit(r, free)  # (E9: -1 if it must wait)
            if need < 0 or need > free:
                break
            free -= need
        if prefix is not None and r.unread_tokens == r.n_prompt_tokens:
            prefix.begin_read(r, hit)
        taken.append((r, n))
        if budget is not None:
            budget -= n
        elif room is not None:
            room -= n
        if n == r.unread_tokens - hit:
            pop()
        else:
            break
    if capacity is not None:
        gpu.reserve(capacity - free - gpu.memory.used)
    return taken


def paged_admission(kv: Paging) -> Callable[[int, int], tuple[Sequence[tuple[Request, int]], int]]:
    """E9's admission policy (model/planner.py's `Admit`) for the GPU of `kv` (its model/paged_kv.PagedKv):
    `paged_take` when the head prompt is begun, or may be admitted (`PagedKv.can_take`, inline: no
    reply swapped out, nothing preempted at this start, its blocks plus one free); else nothing,
    without a call (most starts under load). (`kv` typed by its Protocol, model/gpu_state.py's `Paging`: the
    class would close the circle paged_kv -> gpu -> planner -> kv_take.)"""
    waiting, gpu = kv.gpu.queue.waiting, kv.gpu

    def admit(now: int, n_written: int) -> tuple[Sequence[tuple[Request, int]], int]:
        head = waiting[0]
        if head.unread_tokens < head.read_size or not (kv.blocked or kv.swapped) and (
                head.read_size <= kv.top - gpu.memory.used):
            return paged_take(kv, now, n_written)
        return (), 0
    return admit


def paged_take(kv: Paging, now: int, n_written: int) -> tuple[list[tuple[Request, int]], int]:  # (kv: PagedKv, by its Protocol)
    """E9: `take_with_options` then `PromptQueue.take` in one pass (the same choice, the same
    state after): prompts in arrival order, a prompt not begun admitted (`PagedKv.admit`: its
    blocks plus one free, i.e. its tokens at most `PagedKv.top` less those held, no reply swapped
    out, nothing preempted at this start) or else D4 stops there; E8's budget as
    `take_with_options` keeps it (chunked, it only makes the chunk min(chunk_tokens, the room), so one
    branch reads chunks with or without it). With a prefix cache (E13), those two."""
    gpu = kv.gpu
    if gpu.prefix is not None:
        both: tuple[list[tuple[Request, int]], int] = gpu.queue.take(now, gpu._take_with_options(n_written))
        return both
    waiting, pop, block, used = gpu.queue.waiting, gpu.queue.pop, kv.block, gpu.memory.used
    budget, limit, cap = gpu.queue.chunk_tokens, gpu.max_tokens, gpu.max_requests or -1  # (cap -1: none, R90)
    taken: list[tuple[Request, int]] = []
    n_tokens = 0
    r = waiting[0]
    if budget is not None:  # chunks of `budget` tokens (E8: of min(chunk_tokens, max_batch_tokens - replies written))
        if limit is not None and limit - n_written < budget:
            budget = limit - n_written
            if not budget:
                return taken, 0  # (no room: nothing read)
        while True:
            unread = r.unread_tokens
            n = unread if unread < budget else budget
            if unread == r.read_size:  # not begun: admitted now, or D4 stops
                if kv.blocked or kv.swapped or unread > kv.top - used:
                    break
                used += r.admitted(block, now, n)
            else:
                r.read_more(n)
            taken.append((r, n))
            n_tokens += n
            if n < unread:
                break
            pop()
            budget -= n
            if not (waiting and budget) or len(taken) == cap:
                break
            r = waiting[0]
    elif limit is None:  # whole prompts, each read whole
        top = kv.top if not (kv.blocked or kv.swapped) else -1  # (-1: no prompt is admitted)
        while True:
            unread = r.unread_tokens
            if unread == r.read_size:  # not begun: admitted now, or D4 stops
                if unread > top - used:
                    break
                used += r.admitted(block, now, unread)
            else:
                r.read_more(unread)
            taken.append((r, unread))
            n_tokens += unread
            pop()
            if not waiting or len(taken) == cap:
                break
            r = waiting[0]
    else:  # E8's token budget, whole prompts (as `take_with_options`)
        room = limit - n_written
        while True:
            n = unread = r.unread_tokens
            if n > room:
                if room == 0 or (unread == r.read_size and n <= limit):
                    break  # a whole prompt waits for room
                n = room
            if unread == r.read_size:
                if kv.blocked or kv.swapped or unread > kv.top - used:
                    break
                used += r.admitted(block, now, n)
            else:
                r.read_more(n)
            taken.append((r, n))
            n_tokens += n
            if n < unread:
                break
            pop()
            if not waiting or len(taken) == cap:
                break
            room -= n
            r = waiting[0]
    gpu.queue.count_taken(n_tokens)
    if used != gpu.memory.used:  # (`Gpu.reserve`; no repeat runs at a start)
        gpu.memory.hold(used - gpu.memory.used)
    return taken, n_tokens
