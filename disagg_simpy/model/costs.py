"""Costs in exact integer nanoseconds (M1, M4, D10; E1-E3, E7, E13, E14, E15).

Each figure is the decimal the scenario wrote, in exact ns, scaled to whole numbers over one
common denominator, so all terms of one iteration are added before its single rounding to the
nearest ns, halves up, with no float error. With the usual costs (whole ns) the denominator is 1.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from functools import cached_property


def exact_ns(ms: float) -> Fraction:
    """A cost in ms, taken as the decimal the scenario wrote (its shortest repr), in exact ns."""
    return Fraction(Decimal(repr(float(ms)))) * 1_000_000


@dataclass(frozen=True)
class CostNs:
    """One GPU's iteration cost (M1, E2, E3, E7) and the KV ship time (M4) over `denominator`."""

    iteration: int
    per_reply: int
    per_prompt_token: int
    kv_ship_per_token: int
    denominator: int = 1
    per_reread_token: int = 0  # E2
    per_context_token: int = 0  # E3
    per_attention_pair: int = 0  # E7
    per_cached_token: int = 0  # E13
    prompt_iteration: int = 0  # E14: once in an iteration that reads prompt tokens
    free_prompt_tokens: int = 0  # E14: a count, not a cost: prompt tokens an iteration reads at no per-token cost
    per_token_tile: int = 0  # E15: once per started tile of token_tile tokens (prompt tokens read + replies written)
    token_tile: int = 1  # E15: a count, not a cost

    @classmethod
    def from_ms(cls, iteration_ms: float, per_reply_ms: float, per_prompt_token_ms: float,
                kv_ship_ms_per_token: float, per_reread_token_ms: float = 0.0,
                per_context_token_ms: float = 0.0, per_attention_pair_ms: float = 0.0,
                per_cached_token_ms: float = 0.0, prompt_iteration_ms: float = 0.0,
                free_prompt_tokens: int = 0, per_token_tile_ms: float = 0.0, token_tile: int = 1) -> CostNs:
        parts = [exact_ns(x) for x in (iteration_ms, per_reply_ms, per_prompt_token_ms, kv_ship_ms_per_token,
                                       per_reread_token_ms, per_context_token_ms, per_attention_pair_ms,
                                       per_cached_token_ms, prompt_iteration_ms, per_token_tile_ms)]
        den = math.lcm(*(p.denominator for p in parts))
        it, reply, token, ship, reread, context, pair, cached, read_it, tile = (int(p * den) for p in parts)
        return cls(it, reply, token, ship, den, reread, context, pair, cached, read_it, int(free_prompt_tokens),
                   tile, int(token_tile))

    @classmethod
    def from_cost(cls, cost, kv_ship_ms_per_token: float) -> CostNs:
        """From a scenario `Cost` (one side's figures, E1) and the arrangement's ship cost."""
        return cls.from_ms(cost.iteration_ms, cost.per_reply_ms, cost.per_prompt_token_ms, kv_ship_ms_per_token,
                           cost.per_reread_token_ms, cost.per_context_token_ms, cost.per_attention_pair_ms,
                           cost.per_cached_token_ms or 0.0, cost.prompt_iteration_ms or 0.0,
                           cost.free_prompt_tokens or 0, cost.per_token_tile_ms or 0.0, cost.token_tile or 1)

    @classmethod
    def from_scenario(cls, scenario) -> CostNs:
        c = scenario.cost
        return cls.from_cost(c, c.kv_ship_ms_per_token)

    @cached_property
    def extra_terms(self) -> bool:
        """Whether re-reading (E2), context (E3), attention (E7) or cached tokens (E13) cost anything."""
        return bool(self.per_reread_token or self.per_context_token or self.per_attention_pair or self.per_cached_token)

    def iteration_ns(self, n_replies: int, n_tokens: int) -> int:
        total = self.iteration + self.per_reply * n_replies + self.per_prompt_token * n_tokens
        if n_tokens and (self.prompt_iteration or self.free_prompt_tokens):
            total += self._unsaturated(n_tokens)
        if self.per_token_tile:
            total += self._tiles(n_replies, n_tokens)
        return (2 * total + self.denominator) // (2 * self.denominator)  # halves up

    def iteration_fn(self) -> Callable[[int, int], int]:
        """`iteration_ns` as a function of (replies written, prompt tokens read), chosen once for a
        GPU's run (model/gpu.py, with every option off: its cost is paid each iteration): without
        E14 and E15, M1's three terms as plain numbers, rounded once (D10; whole ns, as the usual
        costs are, need no rounding); else `iteration_ns` itself."""
        if self.prompt_iteration or self.free_prompt_tokens or self.per_token_tile:
            return self.iteration_ns
        it, reply, token, den = self.iteration, self.per_reply, self.per_prompt_token, self.denominator
        if den == 1:
            return lambda n_replies, n_tokens: it + reply * n_replies + token * n_tokens
        den2 = 2 * den
        return lambda n_replies, n_tokens: (2 * (it + reply * n_replies + token * n_tokens) + den) // den2

    def _tiles(self, n_replies: int, n_tokens: int) -> int:
        """E15: per_token_tile_ms for each started tile of token_tile rows of the iteration's matrix
        products, one a prompt token read or a reply written."""
        return self.per_token_tile * -(-(n_replies + n_tokens) // self.token_tile)

    def _unsaturated(self, n_tokens: int) -> int:
        """E14, for an iteration reading n_tokens > 0 prompt tokens: its one prompt_iteration_ms,
        less the per-token cost of the first free_prompt_tokens of them."""
        return self.prompt_iteration - self.per_prompt_token * min(n_tokens, self.free_prompt_tokens)

    def iteration_ns_full(self, n_replies: int, n_tokens: int, n_reread: int, n_context: int,
                          n_pairs: int = 0, n_cached: int = 0) -> int:
        """M1 plus `n_reread` re-read tokens (E2), `n_context` context tokens (E3), `n_pairs`
        attention pairs (E7), `n_cached` cached prompt tokens (E13), E14 and E15, one rounding."""
        total = self.total_full(n_replies, n_tokens, n_reread, n_context, n_pairs, n_cached)
        return (2 * total + self.denominator) // (2 * self.denominator)

    def total_full(self, n_replies: int, n_tokens: int, n_reread: int, n_context: int,
                   n_pairs: int = 0, n_cached: int = 0) -> int:
        """`iteration_ns_full`'s sum before its rounding, over `denominator` (model/repeats.py
        adds to it the growth of a repeat's later iterations)."""
        total = (self.iteration + self.per_reply * n_replies + self.per_prompt_token * n_tokens
                 + self.per_reread_token * n_reread + self.per_context_token * n_context
                 + self.per_attention_pair * n_pairs + self.per_cached_token * n_cached)
        if n_tokens and (self.prompt_iteration or self.free_prompt_tokens):
            total += self._unsaturated(n_tokens)
        if self.per_token_tile:
            total += self._tiles(n_replies, n_tokens)
        return total

    def ship_ns(self, n_tokens: int) -> int:
        return (2 * self.kv_ship_per_token * n_tokens + self.denominator) // (2 * self.denominator)
