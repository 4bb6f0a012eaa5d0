"""What the iteration's policies read and write of a GPU (model/gpu.py's `Gpu`), as a Protocol, so
that mypy sees the policies' work (model/planner.py, option_starts.py, unmixed.py, kv_take.py,
option_paths.py, kv_blocks.py) without those modules importing model/gpu.py, which imports them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

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
    # the memory (E4, model/memory.py; E9's `PagedKv`, typed Any here: it names this Protocol's GPU, model/paged_kv.py)
    memory: Memory
    paged: Any
    log: GpuLog  # its records (model/records.py): E4's memory log at each start

    def _take_with_options(self, n_written: int) -> list[tuple[Request, int]]: ...

    def _duration(self, now: int, index: int, n_replies: int, n_tokens: int, taken: Sequence[tuple[Request, int]]
                  ) -> int: ...

    def _release(self, leaving: list[Request]) -> None: ...

    def reserve(self, tokens: int) -> None: ...

    def count_started(self, n: int) -> None: ...
