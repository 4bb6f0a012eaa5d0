"""What a GPU does under the options, chosen once per run, not per iteration: its start of an
iteration (`starter`: the planner's, model/planner.py), its repeats' bound (`bounds`) and its
bookkeeping of replies leaving (`releaser`)."""

from __future__ import annotations

from collections.abc import Callable

from . import kv_blocks
from .gpu_state import GpuState, Reads
from .planner import Start, planner
from .request import Request
from .unmixed import writing_bound

Bound = Callable[[GpuState, int, Reads, int, int], int]  # (gpu, index, reads, replies, n) -> n: how many may follow


def starter(gpu: GpuState) -> Start:
    """`gpu`'s start of an iteration under the options for its whole run: (replies written,
    prompt tokens taken, how many, duration): the planner's composition (model/planner.py)."""
    return planner(gpu)


def releaser(gpu: GpuState) -> Callable[[list[Request]], None] | None:
    """What replies whose last word was just written leave of the options' bookkeeping: `Gpu._release`'s
    work (E3, E4, E8, E9, E10; E12 may switch E3's context on), E8/E10's seats alone, or nothing (None)."""
    if gpu.paged is not None:
        paged_release: Callable[[list[Request]], None] = gpu.paged.release_kv
        return paged_release
    if gpu.batch.track_context or gpu.memory.capacity is not None or gpu.changes_role:
        release: Callable[[list[Request]], None] = gpu._release
        return release
    if not gpu.batch.queue_replies:
        return None

    freed = gpu.batch.seats_freed

    def release_seats(leaving: list[Request]) -> None:
        freed(len(leaving))
    return release_seats


def bounds(gpu: GpuState) -> Bound | None:
    """How the options bound a repeat (`Gpu.steady_iterations`): E9's blocks (`kv_blocks.bound`;
    with E10, `kv_blocks.writing_bound`), E10's last writing iterations (`unmixed.writing_bound`), or nothing (None)."""
    if gpu.paged is not None:
        return kv_blocks.bound(gpu.paged) if gpu.batch.mixed else kv_blocks.writing_bound  # (model/kv_blocks.py)
    return None if gpu.batch.mixed else writing_bound
