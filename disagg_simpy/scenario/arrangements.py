"""Cost figures (M1, M4; E1-E3) and the arrangements of GPUs a scenario compares (with the
options E1, E4-E6 of extensions.md).

Every stage asks an arrangement the same few questions, answered here and nowhere else:
`roles` (what each GPU does, reading GPUs first), `n_gpus`, `n_instances`, `is_split`, `label`
(a short family name for legends) and `description` (one line for titles and the page). A new
kind is one class below, added to `KINDS`; loading errors, the engine, the plots, the page and
the planner follow from these answers (docs/architecture.md says which files a kind touches).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, ClassVar, Literal, Union

from pydantic import Field, field_validator, model_validator

from .base import CostMs, Count, Gpus, Name, _not_only_dots, _Strict
from .limits import MAX_COST_MS, MAX_GPUS, MIN_ITERATION_MS


class Cost(_Strict):
    """Iteration cost (M1) and KV ship time (M4), in milliseconds."""

    iteration_ms: Annotated[float, Field(ge=MIN_ITERATION_MS, le=MAX_COST_MS)] = 12.0
    per_reply_ms: CostMs = 0.4
    per_prompt_token_ms: CostMs = 0.05
    kv_ship_ms_per_token: CostMs = 0.01
    per_reread_token_ms: CostMs = 0.0  # E2
    per_context_token_ms: CostMs = 0.0  # E3


class SideCost(_Strict):
    """E1: an arrangement's own cost figures for its GPUs (or one side's); unset ones are the
    scenario's `cost`."""

    iteration_ms: Annotated[float, Field(ge=MIN_ITERATION_MS, le=MAX_COST_MS)] | None = None
    per_reply_ms: CostMs | None = None
    per_prompt_token_ms: CostMs | None = None
    per_reread_token_ms: CostMs | None = None
    per_context_token_ms: CostMs | None = None

    def over(self, base: Cost) -> Cost:
        """`base` with this mapping's figures in place of its own."""
        return base.model_copy(update=self.model_dump(exclude_none=True))


def gpu_count(n: int) -> str:
    """'1 GPU', '4 GPUs'."""
    return f"{n} GPU" if n == 1 else f"{n} GPUs"


def gpus_do(n: int, verb: str) -> str:
    """'1 GPU reads', '2 GPUs read'."""
    return f"1 GPU {verb}s" if n == 1 else f"{n} GPUs {verb}"


class _Arrangement(_Strict):
    """What every kind of arrangement answers (see the module docstring)."""

    #: Whether prompts are read on other GPUs than their replies are written on.
    is_split: ClassVar[bool] = False

    if TYPE_CHECKING:  # every kind declares these itself, in its own order (run.json keeps it)
        name: str
        kind: str
        chunk_tokens: int | None
        kv_capacity_tokens: int | None

    @property
    def roles(self) -> tuple[str, ...]:
        """'reads', 'writes' or 'both' by GPU number (a split numbers its reading GPUs first)."""
        raise NotImplementedError

    @property
    def n_gpus(self) -> int:
        """GPUs in all (what a per-GPU figure divides by)."""
        raise NotImplementedError

    @property
    def n_instances(self) -> int:
        return len(self.roles)

    @property
    def n_reading(self) -> int:
        """Instances that read prompts (every one when not split); a split numbers them first."""
        return sum(r != "writes" for r in self.roles)

    @property
    def n_reading_gpus(self) -> int:
        """GPUs that read prompts (every GPU when not split)."""
        return sum(r != "writes" for r in self.roles)

    @property
    def n_writing_gpus(self) -> int:
        """GPUs that write replies (every GPU when not split)."""
        return sum(r != "reads" for r in self.roles)

    @property
    def label(self) -> str:
        """A short family name for legends: 'same GPU', 'chunks' or 'split'."""
        raise NotImplementedError

    @property
    def description(self) -> str:
        """One line saying what the GPUs do."""
        raise NotImplementedError

    @property
    def kv_link_mode(self) -> str:
        """E5's link between reading and writing GPUs ('independent': ships never wait)."""
        return "independent"

    @property
    def local_prompt_limit(self) -> int | None:
        """E6: prompts up to this many tokens are read on their writing GPU (None: none are)."""
        return None

    def side_costs(self, base: Cost) -> tuple[Cost, Cost]:
        """(reading, writing) GPUs' cost figures (E1)."""
        raise NotImplementedError

    def kv_ship_ms(self, base: Cost) -> float:
        """The KV ship cost per token (E1: the arrangement's own, else the scenario's)."""
        return base.kv_ship_ms_per_token

    @property
    def own_ship_cost(self) -> bool:
        """Whether the arrangement sets its own `kv_ship_ms_per_token` (E1)."""
        return False

    def shortest_iteration_ms(self, base: Cost) -> float:
        return min(c.iteration_ms for c in self.side_costs(base))


class Colocated(_Arrangement):
    """Every GPU reads prompts and writes replies; replies stay where their prompt was read."""

    name: Name
    kind: Literal["colocated"]
    gpus: Gpus
    chunk_tokens: Count | None = None
    cost: SideCost | None = None  # E1
    kv_capacity_tokens: Count | None = None  # E4

    _name = field_validator("name")(_not_only_dots)

    @property
    def roles(self) -> tuple[str, ...]:
        return ("both",) * self.gpus

    @property
    def n_gpus(self) -> int:
        return self.gpus

    @property
    def label(self) -> str:
        return "chunks" if self.chunk_tokens else "same GPU"

    @property
    def description(self) -> str:
        text = f"{gpu_count(self.gpus)}, each reads prompts and writes replies"
        if self.chunk_tokens:
            text += f"; an iteration reads at most {self.chunk_tokens} prompt tokens"
        return text

    def side_costs(self, base: Cost) -> tuple[Cost, Cost]:
        """(reading, writing) GPUs' cost figures (E1): one GPU does both here."""
        c = self.cost.over(base) if self.cost else base
        return c, c


class Disaggregated(_Arrangement):
    """Reading GPUs only read prompts, writing GPUs only write replies; KV caches ship between."""

    is_split: ClassVar[bool] = True

    name: Name
    kind: Literal["disaggregated"]
    reading_gpus: Gpus
    writing_gpus: Gpus
    chunk_tokens: Count | None = None
    reading_cost: SideCost | None = None  # E1
    writing_cost: SideCost | None = None  # E1
    kv_ship_ms_per_token: CostMs | None = None  # E1
    kv_capacity_tokens: Count | None = None  # E4
    kv_link: Literal["independent", "per_reading_gpu", "per_writing_gpu", "shared"] = "independent"  # E5
    local_prompt_max_tokens: Count | None = None  # E6

    _name = field_validator("name")(_not_only_dots)

    @model_validator(mode="after")
    def _check(self) -> Disaggregated:
        if self.n_gpus > MAX_GPUS:
            raise ValueError(
                f"@writing_gpus: got {self.writing_gpus} with {self.reading_gpus} reading GPUs, "
                f"expected at most {MAX_GPUS} GPUs in all"
            )
        return self

    @property
    def roles(self) -> tuple[str, ...]:
        return ("reads",) * self.reading_gpus + ("writes",) * self.writing_gpus

    @property
    def n_gpus(self) -> int:
        return self.reading_gpus + self.writing_gpus

    @property
    def label(self) -> str:
        return "split"

    @property
    def description(self) -> str:
        return (f"{gpus_do(self.reading_gpus, 'read')} prompts, {gpus_do(self.writing_gpus, 'write')} replies; "
                "KV caches ship between them")

    @property
    def kv_link_mode(self) -> str:
        return self.kv_link

    @property
    def local_prompt_limit(self) -> int | None:
        return self.local_prompt_max_tokens

    @property
    def own_ship_cost(self) -> bool:
        return self.kv_ship_ms_per_token is not None

    def side_costs(self, base: Cost) -> tuple[Cost, Cost]:
        """(reading, writing) GPUs' cost figures (E1)."""
        return (self.reading_cost.over(base) if self.reading_cost else base,
                self.writing_cost.over(base) if self.writing_cost else base)

    def kv_ship_ms(self, base: Cost) -> float:
        """The KV ship cost per token (E1: the arrangement's own, else the scenario's)."""
        return base.kv_ship_ms_per_token if self.kv_ship_ms_per_token is None else self.kv_ship_ms_per_token


#: Every kind of arrangement, by the `kind:` a scenario writes. A new kind is a class above and
#: a line here.
KINDS: dict[str, type[_Arrangement]] = {"colocated": Colocated, "disaggregated": Disaggregated}

Arrangement = Annotated[Union[tuple(KINDS.values())], Field(discriminator="kind")]  # noqa: UP007


def side_cost_keys(kind: type[_Arrangement]) -> tuple[str, ...]:
    """The keys of a kind that hold cost mappings (E1)."""
    return tuple(k for k, f in kind.model_fields.items() if f.annotation == (SideCost | None))
