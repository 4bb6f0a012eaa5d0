"""What the iteration's policies read and write of a GPU (model/gpu.py's `Gpu`), as a Protocol, so
that mypy sees the policies' work (model/planner.py, option_starts.py, unmixed.py, kv_take.py,
option_paths.py, kv_blocks.py) without those modules importing model/gpu.py, which imports them."""

from __future__ import annotations

from collections.abc import Callable, Sequence, Sized
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .batch import Batch
    from .costs import CostNs
    from .memory import Memory
    from .prefix_cache import PrefixCache
    from .prompts import PromptQueue
    from .records import GpuLog
    from .request import Request


Reads = Sequence[tuple["Request", int]]  # the prompt tokens an iteration reads: (request, tokens), ... (() for none)


class StartHost(Protocol):
    """What a start asks of the arrangement it runs in (the engine, model/gpu.py's `Host`)."""

    def requests_dropped(self, requests: list[Request], now: int) -> None: ...


class ReplyHost(Protocol):
    """What E9's re-read asks of the arrangement (the engine): a reply whose re-read gave its last word finished."""

    def replies_finished(self, requests: list[Request], now: int) -> None: ...


class BlockPlan(Protocol):
    """E9's due blocks as a repeat sees them (model/kv_blocks.py's `BlockSchedule`)."""

    @property
    def plan(self) -> object | None: ...  # replies' own plans of words an iteration, if any (`kv_blocks.WordPlan`)

    def run_free(self, free: int, key: int, n: int) -> int: ...

    def grow(self, gpu: GpuState, key: int, n: int, log: GpuLog) -> None: ...


class Paging(Protocol):
    """E9's memory policy of a GPU as the rest of the model sees it (model/paged_kv.py's `PagedKv`, which only that
    module writes). A Protocol, as that module imports, through model/kv_blocks.py and model/repeats.py, this one."""

    block: int  # tokens a block
    limit: int  # the GPU's KV capacity, tokens
    top: int  # a prompt of R tokens may be admitted iff R <= top - tokens held
    blocked: bool  # this start preempted: it admits nothing new (E9d)
    dirty: bool  # this start preempted, swapped or dropped (reset by the next)
    moved_tokens: int  # tokens this start swapped out or in (E9f)
    n_away: int  # replies preempted and not back yet
    seat_reply: Callable[..., None]  # seat_reply(r, index, key=None, started=False)
    join_reply: Callable[[Request, int], None]
    release_kv: Callable[[list[Request]], None]
    has_paged_work: Callable[[], bool]

    @property
    def gpu(self) -> GpuState: ...

    @property
    def swapped(self) -> Sized: ...  # replies swapped out (E9f)

    @property
    def preemptions(self) -> Sized: ...  # (request id, ns) of each preemption, flat

    @property
    def due_blocks(self) -> BlockPlan: ...

    def held(self, r: Request) -> int: ...

    def admit(self, r: Request, free: int) -> int: ...

    def head_waits(self) -> bool: ...

    def reset(self) -> None: ...

    def start_blocks(self, now: int, index: int, key: int, host: StartHost, n_written: int) -> int: ...

    def reopen(self, index: int, key: int | None) -> int: ...

    def with_swap(self, duration: int) -> int: ...

    def reread(self, finished: list[Request], index: int, now: int, host: ReplyHost) -> list[Request]: ...


class GpuState(Protocol):
    """A GPU's state as its policies see it: its parts, each owned by one module (docs/architecture.md, "Owned
    parts"): its queue (D4), its batch (E3, E8, E10), its memory (E4, E9) and its records (E4's memory log)."""

    number: int
    cost: CostNs
    # the queue (D1, D4)
    queue: PromptQueue  # its prompts (model/prompts.py)
    max_tokens: int | None  # E8's token budget
    max_requests: int | None  # E8 per side (R90): prompts a reading iteration reads
    prefix: PrefixCache | None  # E13
    changes_role: bool  # E12: its chunk and cost may change
    batch: Batch  # who it writes (model/batch.py)
    n_started: int
    # the memory (E4, model/memory.py; E9's `PagedKv`, model/paged_kv.py)
    memory: Memory
    paged: Paging | None
    log: GpuLog  # its records (model/records.py): E4's memory log at each start

    def _take_with_options(self, n_written: int) -> list[tuple[Request, int]]: ...

    def _duration(self, now: int, index: int, n_replies: int, n_tokens: int, taken: Sequence[tuple[Request, int]]
                  ) -> int: ...

    def _release(self, leaving: list[Request]) -> None: ...

    def reserve(self, tokens: int) -> None: ...

    def count_started(self, n: int) -> None: ...
