"""An iteration's reads under the options (E4, E8, E10, E13), without the general path's work
for the options that are off: most iterations of a run with E7, E8 or E10 on have no KV limit
to check (E4) and no prefix cache (E13). What it returns is what the general path returns
(tests/model: the reference model, to the ns); the duration is the cost object's (model/costs.py)."""

from __future__ import annotations

from .gpu_state import GpuState
from .request import Request


def take(gpu: GpuState, now: int, n_written: int) -> tuple[list[tuple[Request, int]], int]:  # (gpu: model/gpu.py's, which imports this)
    """The prompt tokens an iteration starting now reads under the options, writing `n_written`
    replies, and how many (D4; E4d, E8, E13 as `Gpu._take_with_options` chooses them). With no
    KV limit and no prefix cache, and unless it reads whole prompts under a token budget, that
    choice is D4's plain one, chunked up to min(chunk_tokens, max_batch_tokens - n_written)."""
    if not gpu.queue.waiting:
        return [], 0
    chunk, limit = gpu.queue.chunk_tokens, gpu.max_tokens
    if gpu.memory.capacity is None and gpu.prefix is None and gpu.max_requests is None and (chunk is not None or limit is None):
        if limit is not None and chunk is not None and limit - n_written < chunk:
            if limit == n_written:
                return [], 0
            taken: tuple[list[tuple[Request, int]], int] = gpu.queue.take(now, None, limit - n_written)
            return taken
        taken = gpu.queue.take(now)
        return taken
    taken = gpu.queue.take(now, gpu._take_with_options(n_written))
    return taken
