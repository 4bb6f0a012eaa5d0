"""E10: prompt-only iterations (`mixed_iterations: false` on a colocated arrangement).

An iteration either reads prompts or writes words, never both, as vLLM did before chunked
prefill: when it starts, if the GPU has a waiting prompt it can take (D4; E4d's memory and E8's
token budget, as for an iteration that writes nothing) it reads prompts and writes no word;
otherwise it writes a word for each reply in progress (E8: each seated one) and reads nothing.
Replies wait in the GPU's seat queue for the next writing iteration, so a reply's words still
end consecutive *writing* iterations, counted by `Gpu.n_writes` (the records' word view,
model/words.py, numbers the same iterations).
"""

from __future__ import annotations

import heapq

from .gpu_state import GpuState, Reads


def write_started(gpu: GpuState, key: int, index: int) -> None:
    """Iteration `index` is the GPU's writing iteration `key` (E10): count it, and the replies whose
    last word it writes leave at its end (their leaving list moves from the writing key to `index`)."""
    gpu.n_writes = key + 1
    leaving = gpu.leaving_by_write.pop(key, None)
    if leaving:
        gpu.leaving[index] = leaving
        heapq.heappush(gpu.leaving_order, index)


def writing_bound(gpu: GpuState, index: int, taken: Reads, n_replies: int, n: int) -> int:
    """The options' bound (`option_starts.bounds`) under E10 without E9: a repeat of writing iterations runs up to the
    first writing iteration that a reply leaves after: the top of the heap `Gpu.write_order` (every key
    seated by `Gpu._seat`), once the keys already written (popped by `write_started`) are dropped from it;
    not a scan of every key."""
    by_write = gpu.leaving_by_write
    if n_replies and by_write:
        order = gpu.write_order
        while order[0] not in by_write:
            heapq.heappop(order)
        last = order[0] - gpu.n_writes + 2
        if last < n:
            return last if last > 1 else 1
    return n
