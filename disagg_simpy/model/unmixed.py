"""E10: prompt-only iterations (`mixed_iterations: false` on a colocated arrangement).

An iteration either reads prompts or writes words, never both, as vLLM did before chunked
prefill: when it starts, if the GPU has a waiting prompt it can take (D4; E4d's memory and E8's
token budget, as for an iteration that writes nothing) it reads prompts and writes no word;
otherwise it writes a word for each reply in progress (E8: each seated one) and reads nothing.
Replies wait in the GPU's seat queue for the next writing iteration, so a reply's words still
end consecutive *writing* iterations, counted by `Batch.n_writes` (the records' word view,
model/words.py, numbers the same iterations).
"""

from __future__ import annotations

from .gpu_state import GpuState, Reads


def writing_bound(gpu: GpuState, index: int, taken: Reads, n_replies: int, n: int) -> int:
    """The options' bound (`option_starts.bounds`) under E10 without E9: a repeat of writing iterations runs up to the
    first writing iteration that a reply leaves after (`Batch.first_leaving_write`: the top of the heap of every
    key seated, once the keys already written are dropped from it; not a scan of every key)."""
    batch = gpu.batch
    if n_replies and batch.leaving_by_write:
        last = batch.first_leaving_write() - batch.n_writes + 2
        if last < n:
            return last if last > 1 else 1
    return n
