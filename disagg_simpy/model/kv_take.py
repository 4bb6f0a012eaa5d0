"""D4's choice of prompts: plain (`take_prompt_tokens`, `Gpu._take_prompt_tokens`) and under the options (E4d, E8,
E13; E9's admission), `Gpu._take_with_options`: kept out of model/gpu.py (near its size limit)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from .gpu_state import GpuState
    from .request import Request


def take_prompt_tokens(gpu: GpuState, now: int, taken: list[tuple[Request, int]] | None = None, budget: int | None = None
                        ) -> tuple[list[tuple[Request, int]], int]:
    """The prompt tokens an iteration starting now reads (D4; `taken` if the options chose them; chunked, up to `budget`
    if given, E8), and how many. They stop counting as queued (D1)."""
    if taken is not None:
        pass
    elif gpu.chunk_tokens is None:
        taken = []
        for r in gpu.waiting:  # (a loop: a comprehension's own frame costs more for 1-4 prompts)
            taken.append((r, r.unread_tokens))
        gpu.waiting.clear()
    else:
        taken, budget = [], gpu.chunk_tokens if budget is None else budget
        if gpu.waiting and (r := gpu.waiting[0]).unread_tokens > budget and r.unread_tokens != r.read_size:
            r.unread_tokens -= budget  # (a begun head fills the chunk alone: most chunks)
            gpu.queued_tokens -= budget
            return [(r, budget)], budget
        while gpu.waiting and budget:
            r = gpu.waiting[0]
            n = min(r.unread_tokens, budget)
            taken.append((r, n))
            budget -= n
            if n == r.unread_tokens:
                gpu.waiting.popleft()
            else:
                break
    n_tokens = n_cached = 0
    for r, n in taken:
        if r.unread_tokens == r.read_size == r.n_prompt_tokens:  # (E9: a re-read keeps its first start)
            r.read_started_at_ns = now
            r.unread_tokens -= r.cached_tokens  # E13: its cached prefix is not read
            n_cached += r.cached_tokens
        r.unread_tokens -= n
        n_tokens += n
    gpu.queued_tokens -= n_tokens + n_cached
    return taken, n_tokens


def take_with_options(gpu: GpuState, n_written: int) -> list[tuple[Request, int]]:
    """D4 under the options, in arrival order, no prompt overtaking another:
    - E4d: a prompt whose reading has not begun is taken only if its reservation fits the free tokens (less what
      prompts taken before it reserved); chunked, a prompt is considered only if the budget reaches it;
    - E8: the iteration's tokens are at most `max_tokens - n_written`; chunked, each iteration reads at most
      min(chunk_tokens, that room); reading whole prompts, the head is read whole if it fits the room, else it
      waits, unless it is larger than the whole budget (or begun so), when it is read in pieces of the room;
      E8 per side (R90): at most `max_requests` prompts (whole or a piece each);
    - E13: a prompt not begun reads after its longest cached prefix (fixed and pinned if taken)."""
    waiting = gpu.waiting
    capacity, limit, paged = gpu.memory.capacity, gpu.max_tokens, gpu.paged
    free = 0 if capacity is None else capacity - gpu.memory.used
    budget = gpu.chunk_tokens  # tokens left to read this iteration when chunked
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
            waiting.popleft()
        else:
            break
    if capacity is not None:
        gpu.reserve(capacity - free - gpu.memory.used)
    return taken


def paged_admission(kv: Any) -> Callable[[int, int], tuple[Sequence[tuple[Request, int]], int]]:
    """E9's admission policy (model/planner.py's `Admit`) for the GPU of `kv` (its model/paged_kv.PagedKv):
    `paged_take` when the head prompt is begun, or may be admitted (`PagedKv.can_take`, inline: no
    reply swapped out, nothing preempted at this start, its blocks plus one free); else nothing,
    without a call (most starts under load). (`kv` typed Any: a type would close the circle
    paged_kv -> gpu -> planner -> kv_take.)"""
    waiting, gpu = kv.gpu.waiting, kv.gpu

    def admit(now: int, n_written: int) -> tuple[Sequence[tuple[Request, int]], int]:
        head = waiting[0]
        if head.unread_tokens < head.read_size or not (kv.blocked or kv.swapped) and (
                head.read_size <= kv.top - gpu.memory.used):
            return paged_take(kv, now, n_written)
        return (), 0
    return admit


def _admit(r: Request, unread: int, block: int, now: int) -> int:
    """A prompt not begun, admitted now (E9b): its blocks, its first start (a re-read keeps its
    own); the KV tokens it takes. Once per admitted prompt, so a call, not a copy in each branch."""
    blocks = -(-unread // block)
    r.kv_blocks = blocks
    if unread == r.n_prompt_tokens:
        r.read_started_at_ns = now
    return blocks * block


def paged_take(kv: Any, now: int, n_written: int) -> tuple[list[tuple[Request, int]], int]:  # (kv: PagedKv, Any as in paged_admission)
    """E9: `take_with_options` then `Gpu._take_prompt_tokens` in one pass (the same choice, the same
    state after): prompts in arrival order, a prompt not begun admitted (`PagedKv.admit`: its
    blocks plus one free, i.e. its tokens at most `PagedKv.top` less those held, no reply swapped
    out, nothing preempted at this start) or else D4 stops there; E8's budget as
    `take_with_options` keeps it (chunked, it only makes the chunk min(chunk_tokens, the room), so one
    branch reads chunks with or without it). With a prefix cache (E13), those two."""
    gpu = kv.gpu
    if gpu.prefix is not None:
        both: tuple[list[tuple[Request, int]], int] = gpu._take_prompt_tokens(now, gpu._take_with_options(n_written))
        return both
    waiting, block, used = gpu.waiting, kv.block, gpu.memory.used
    budget, limit, cap = gpu.chunk_tokens, gpu.max_tokens, gpu.max_requests or -1  # (cap -1: none, R90)
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
                used += _admit(r, unread, block, now)
            taken.append((r, n))
            n_tokens += n
            r.unread_tokens = unread - n
            if n < unread:
                break
            waiting.popleft()
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
                used += _admit(r, unread, block, now)
            taken.append((r, unread))
            n_tokens += unread
            r.unread_tokens = 0
            waiting.popleft()
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
                used += _admit(r, unread, block, now)
            taken.append((r, n))
            n_tokens += n
            r.unread_tokens = unread - n
            if n < unread:
                break
            waiting.popleft()
            if not waiting or len(taken) == cap:
                break
            room -= n
            r = waiting[0]
    gpu.queued_tokens -= n_tokens
    if used != gpu.memory.used:  # (`Gpu.reserve`; no repeat runs at a start)
        gpu.memory.take(used - gpu.memory.used)
    return taken, n_tokens
