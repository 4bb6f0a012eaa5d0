"""Cost figures (M1, M4; E1-E3, E7, E13, E14, E15, E17): a scenario's `cost` and an arrangement's own
(`cost`, `reading_cost`, `writing_cost`, E1)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_serializer, model_validator

from .base import CostMs, Count, _Strict
from .limits import MAX_COST_MS, MAX_COUNT, MIN_ITERATION_MS

Tokens = Annotated[int, Field(ge=0, le=MAX_COUNT)]
E14_KEYS = ("prompt_iteration_ms", "free_prompt_tokens")  # unsaturated reading; None is 0
E15_KEYS = ("token_tile", "per_token_tile_ms")  # token tiles; None is off
TileTokens = Annotated[int, Field(ge=1, le=MAX_COUNT)]
E17_KEYS = ("per_expert_ms", "experts", "experts_per_token")  # experts touched (MoE); None is off
E17_EXPECT = {"per_expert_ms": f"a number of ms >= 0, up to {MAX_COST_MS:g} (E17)",
              "experts": "a whole number of experts (of a MoE layer) from 1 to 2**53 (E17)",
              "experts_per_token": "a whole number of experts a token is routed to (top-k) from 1 to 2**53 (E17)"}


def check_tiles(block):
    """E15: a `per_token_tile_ms` above 0 only beside `token_tile` in the same block (reading R75)."""
    if block.per_token_tile_ms and block.token_tile is None:
        raise ValueError(f"@per_token_tile_ms: got {block.per_token_tile_ms} without token_tile, expected "
                         "token_tile (tokens a tile) in the same cost block (E15)")
    return block


def check_experts(block):
    """E17: a `per_expert_ms` above 0 only beside `experts` and `experts_per_token` in the same
    block, and a token routed to at most `experts` of them (reading R95)."""
    if block.per_expert_ms and (block.experts is None or block.experts_per_token is None):
        missing = " and ".join(k for k in E17_KEYS[1:] if getattr(block, k) is None)
        raise ValueError(f"@per_expert_ms: got {block.per_expert_ms} without {missing}, expected experts (the "
                         "model's experts) and experts_per_token (its top-k) in the same cost block (E17)")
    if block.experts is not None and block.experts_per_token is not None and block.experts_per_token > block.experts:
        raise ValueError(f"@experts_per_token: got {block.experts_per_token} with experts: {block.experts}, expected "
                         "at most experts (a token is routed to that many of the model's experts, E17)")
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
    per_expert_ms: CostMs | None = None  # E17: None is 0 (and leaves dumps as before E17)
    experts: Count | None = None  # E17
    experts_per_token: Count | None = None  # E17
    preset: str | None = None  # filled in by scenario/presets.py

    _dump = model_serializer(mode="wrap")(lambda self, handler: _without_none(
        handler(self), "preset", "per_cached_token_ms", *E14_KEYS, *E15_KEYS, *E17_KEYS))
    _tiles = model_validator(mode="after")(check_tiles)
    _experts = model_validator(mode="after")(check_experts)


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
    per_expert_ms: CostMs | None = None  # E17
    experts: Count | None = None  # E17
    experts_per_token: Count | None = None  # E17
    preset: str | None = None

    _tiles = model_validator(mode="after")(check_tiles)
    _experts = model_validator(mode="after")(check_experts)

    def over(self, base: Cost) -> Cost:
        """`base` with this mapping's figures in place of its own."""
        return base.model_copy(update=self.model_dump(exclude_none=True, exclude={"preset"}))
