"""Cost figures (M1, M4; E1-E3) and the arrangements of GPUs a scenario compares (with the
options E1, E4-E6)."""

from __future__ import annotations

from typing import Annotated, Literal

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


class Colocated(_Strict):
    """Every GPU reads prompts and writes replies; replies stay where their prompt was read."""

    name: Name
    kind: Literal["colocated"]
    gpus: Gpus
    chunk_tokens: Count | None = None
    cost: SideCost | None = None  # E1
    kv_capacity_tokens: Count | None = None  # E4

    _name = field_validator("name")(_not_only_dots)

    @property
    def n_reading(self) -> int:
        return self.gpus

    def shortest_iteration_ms(self, base: Cost) -> float:
        return min(c.iteration_ms for c in self.side_costs(base))

    def side_costs(self, base: Cost) -> tuple[Cost, Cost]:
        """(reading, writing) GPUs' cost figures (E1): one GPU does both here."""
        c = self.cost.over(base) if self.cost else base
        return c, c

    def kv_ship_ms(self, base: Cost) -> float:
        return base.kv_ship_ms_per_token

    @property
    def n_gpus(self) -> int:
        return self.gpus


class Disaggregated(_Strict):
    """Reading GPUs only read prompts, writing GPUs only write replies; KV caches ship between."""

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

    def shortest_iteration_ms(self, base: Cost) -> float:
        return min(c.iteration_ms for c in self.side_costs(base))

    def side_costs(self, base: Cost) -> tuple[Cost, Cost]:
        """(reading, writing) GPUs' cost figures (E1)."""
        return (self.reading_cost.over(base) if self.reading_cost else base,
                self.writing_cost.over(base) if self.writing_cost else base)

    def kv_ship_ms(self, base: Cost) -> float:
        """The KV ship cost per token (E1: the arrangement's own, else the scenario's)."""
        return base.kv_ship_ms_per_token if self.kv_ship_ms_per_token is None else self.kv_ship_ms_per_token

    @property
    def n_reading(self) -> int:
        return self.reading_gpus

    @property
    def n_gpus(self) -> int:
        return self.reading_gpus + self.writing_gpus


Arrangement = Annotated[Colocated | Disaggregated, Field(discriminator="kind")]
