"""D4's choice of prompts under the options (E4d, E8, E13; E9's admission), `Gpu._take_with_options`:
kept out of model/gpu.py (near its size limit) so E9's work on it stays in its own module."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .request import Request


def take_with_options(gpu: Any, n_written: int) -> list[tuple[Request, int]]:
    """D4 under the options, in arrival order, no prompt overtaking another:
    - E4d: a prompt whose reading has not begun is taken only if its reservation fits the free tokens (less what
      prompts taken before it reserved); chunked, a prompt is considered only if the budget reaches it;
    - E8: the iteration's tokens are at most `max_tokens - n_written`; chunked, each iteration reads at most
      min(chunk_tokens, that room); reading whole prompts, the head is read whole if it fits the room, else it
      waits, unless it is larger than the whole budget (or begun so), when it is read in pieces of the room;
    - E13: a prompt not begun reads after its longest cached prefix (fixed and pinned if taken)."""
    waiting = gpu.waiting
    capacity, limit, paged = gpu.kv_capacity, gpu.max_tokens, gpu.paged
    free = 0 if capacity is None else capacity - gpu.kv_used
    budget = gpu.chunk_tokens  # tokens left to read this iteration when chunked
    room = None if limit is None else limit - n_written  # E8, whole prompts
    if budget is not None and room is not None:
        budget, room = min(budget, room), None
    taken = []
    prefix = gpu.prefix
    while waiting:
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
            need = gpu.kv_need(r) if paged is None else paged.admit(r, free)  # (E9: -1 if it must wait)
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
        gpu.reserve(capacity - free - gpu.kv_used)
    return taken
