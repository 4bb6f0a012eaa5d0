"""Cost figures (M1, M4; E1-E3, E7, E13, E14, E15): a scenario's `cost` and an arrangement's own
(`cost`, `reading_cost`, `writing_cost`, E1)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_serializer, model_validator

from .base import CostMs, _Strict
from .limits import MAX_COST_MS, MAX_COUNT, MIN_ITERATION_MS

Tokens = Annotated[int, Field(ge=0, le=MAX_COUNT)]
E14_KEYS = ("prompt_iteration_ms", "free_prompt_tokens")  # unsaturated reading; None is 0
E15_KEYS = ("token_tile", "per_token_tile_ms")  # token tiles; None is off
TileTokens = Annotated[int, Field(ge=1, le=MAX_COUNT)]


def check_tiles(block):
    """E15: a `per_token_tile_ms` above 0 only beside `token_tile` in the same block (reading R75)."""
    if block.per_token_tile_ms and block.token_tile is None:
        raise ValueError(f"@per_token_tile_ms: got {block.per_token_tile_ms} without token_tile, expected "
                         "token_tile (tokens a tile) in the same cost block (E15)")
    return block


class Cost(_Strict):
    """Iteration cost (M1) and KV ship time (M4), in milliseconds."""

    iteration_ms: Annotated[float, Field(ge=MIN_ITERATION_MS, le=MAX_COST_MS)] = 12.0
    per_reply_ms: CostMs = 0.4
    per_prompt_token_ms: CostMs = 0.05
    kv_ship_ms_per_token: CostMs = 0.01
    per_reread_token_ms: CostMs = 0.0  # E2
    per_context_token_ms: CostMs = 0.0  # E3
    per_attention_pair_ms: CostMs = 0.0  # E7
    per_cached_token_ms: CostMs | None = None  # E13: None is 0 (and leaves dumps as before E13)
    prompt_iteration_ms: CostMs | None = None  # E14: None is 0 (and leaves dumps as before E14)
    free_prompt_tokens: Tokens | None = None  # E14
    token_tile: TileTokens | None = None  # E15: tokens a tile; None is off
    per_token_tile_ms: CostMs | None = None  # E15: None is 0 (and leaves dumps as before E15)
    preset: str | None = None  # filled in by scenario/presets.py

    _dump = model_serializer(mode="wrap")(lambda self, handler: _without_none(
        handler(self), "preset", "per_cached_token_ms", *E14_KEYS, *E15_KEYS))
    _tiles = model_validator(mode="after")(check_tiles)


def _without_none(dumped: dict, *keys: str) -> dict:
    """A dump without the optional keys left unset (so files without presets dump as before)."""
    return {k: v for k, v in dumped.items() if not (k in keys and v is None)}


class SideCost(_Strict):
    """E1: an arrangement's own cost figures for its GPUs (or one side's); unset ones are the
    scenario's `cost`."""

    iteration_ms: Annotated[float, Field(ge=MIN_ITERATION_MS, le=MAX_COST_MS)] | None = None
    per_reply_ms: CostMs | None = None
    per_prompt_token_ms: CostMs | None = None
    per_reread_token_ms: CostMs | None = None
    per_context_token_ms: CostMs | None = None
    per_attention_pair_ms: CostMs | None = None  # E7
    per_cached_token_ms: CostMs | None = None  # E13
    prompt_iteration_ms: CostMs | None = None  # E14
    free_prompt_tokens: Tokens | None = None  # E14
    token_tile: TileTokens | None = None  # E15
    per_token_tile_ms: CostMs | None = None  # E15
    preset: str | None = None

    _tiles = model_validator(mode="after")(check_tiles)

    def over(self, base: Cost) -> Cost:
        """`base` with this mapping's figures in place of its own."""
        return base.model_copy(update=self.model_dump(exclude_none=True, exclude={"preset"}))
