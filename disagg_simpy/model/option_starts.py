"""What a GPU does under the options, chosen once per run, not per iteration: its start of an
iteration (`starter`: the planner's, model/planner.py, or E9's), its repeats (`repeat_kinds`),
their bound (`bounds`) and its bookkeeping of replies leaving (`releaser`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import paged_repeats
from .plain_repeats import PlainRepeat
from .planner import Start, planner
from .repeats import Repeat
from .request import Request
from .unmixed import WritingRepeat, writing_bound


def starter(gpu: Any) -> Start:
    """`gpu`'s start of an iteration under the options for its whole run: (replies written,
    prompt tokens taken, how many, duration): the planner's composition (model/planner.py)."""
    return planner(gpu)


def repeat_kinds(gpu: Any, options: bool, fused: bool = True) -> tuple[type[PlainRepeat], type[PlainRepeat]]:
    """The repeat a GPU runs (model/repeats.py) for iterations that read prompt tokens, and for
    those that only write: `PlainRepeat` unless its iterations need `Repeat`'s work (E4's or E9's
    log at each start, E2/E3/E7's growing durations: E3 grows any batch with replies, E2 and E7 a
    reading one) or E10's count of writing iterations (`unmixed.WritingRepeat`, when no other; with E9,
    `paged_repeats.WritingRepeat`, which also takes the blocks due).
    `PlainRepeat` takes a cut repeat's next iteration ahead (`Gpu.start_ahead`); `Repeat` does not.
    Not `fused` (`Gpu.fused`), E10's writing repeats are `Repeat`'s, the generic path."""
    cost = gpu.cost
    if not options:
        return PlainRepeat, PlainRepeat
    if gpu.paged is not None and gpu.mixed:  # (E9 without E10: model/paged_repeats.py)
        return paged_repeats.kinds(gpu)
    if gpu.paged is not None and not cost.writing_grows:  # E9 with E10, no E3 (model/paged_repeats.py)
        return Repeat, paged_repeats.WritingRepeat
    if gpu.kv_capacity is not None or gpu.paged is not None:
        return Repeat, Repeat
    reading = Repeat if cost.reading_grows else PlainRepeat
    writing = Repeat if cost.writing_grows or not (gpu.mixed or fused) else PlainRepeat if gpu.mixed else WritingRepeat
    return reading, writing


def releaser(gpu: Any) -> Callable[[list[Request]], None] | None:
    """What replies whose last word was just written leave of the options' bookkeeping: `Gpu._release`'s
    work (E3, E4, E8, E9, E10; E12 may switch E3's context on), E8/E10's seats alone, or nothing (None)."""
    if gpu.paged is not None:
        paged_release: Callable[[list[Request]], None] = gpu.paged.release
        return paged_release
    if gpu.track_context or gpu.kv_capacity is not None or gpu.changes_role:
        release: Callable[[list[Request]], None] = gpu._release
        return release
    if not gpu.queue_replies:
        return None

    def release_seats(leaving: list[Request]) -> None:
        gpu.n_seated -= len(leaving)
    return release_seats


def bounds(gpu: Any) -> Callable[[Any, int, Any, int, int], int] | None:
    """How the options bound a repeat (`Gpu.steady_iterations`): E9's blocks (`paged_repeats.bound`;
    with E10, `paged_repeats.writing_bound`), E10's last writing iterations (`unmixed.writing_bound`), or nothing (None)."""
    if gpu.paged is not None:
        return paged_repeats.bound(gpu.paged) if gpu.mixed else paged_repeats.writing_bound  # (model/paged_repeats.py)
    return None if gpu.mixed else writing_bound
