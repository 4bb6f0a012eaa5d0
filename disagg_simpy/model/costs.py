"""Costs in exact integer nanoseconds (M1, M4, D10; E1-E3, E7, E13-E17): the one cost object.

Every term of an iteration's cost is written here once (`total_full`, `pairs`, `context`, `step`),
rounded once (`rounded`, D10); the rest of the model asks this object for durations (`duration`,
the functions chosen once per run: `iteration_fn`, `writing_fn`, `reading_fn`; a repeat's
`ends`) and never adds a term itself.

Each figure is the decimal the scenario wrote, in exact ns, scaled to whole numbers over one
common denominator, so all terms of one iteration are added before its single rounding to the
nearest ns, halves up, with no float error. With the usual costs (whole ns) the denominator is 1.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from functools import cached_property
from itertools import accumulate
from typing import TYPE_CHECKING, Protocol

import numpy as np

from ..workload.speculative import writing_iterations

if TYPE_CHECKING:
    from ..scenario.cost_fields import Cost
    from ..scenario.speculative import Speculative


class Read(Protocol):
    """What the cost reads of a prompt being read (model/request.py's `Request`)."""

    read_size: int
    unread_tokens: int
    cached_tokens: int
    read_started_at_ns: int


class HasId(Protocol):
    """A request, by its id (model/request.py's `Request`)."""

    request_id: int


class HasContext(Protocol):
    """What a duration chosen once per run reads of its GPU as it goes (E3's context sum)."""

    context_base: int
    track_context: bool


def nearest_ns(ns: Fraction) -> int:
    """D10: exact ns to the nearest whole ns, halves up."""
    return (2 * ns.numerator + ns.denominator) // (2 * ns.denominator)


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
    draft_tokens: int = 0  # E16: a count, not a cost: draft tokens each written reply verifies (0: off)
    per_draft_token: int = 0  # E16: drafting one of them
    per_expert: int = 0  # E17: per expert of a MoE layer the iteration's tokens touch
    experts: int = 0  # E17: a count, not a cost: the model's experts (of a MoE layer)
    experts_per_token: int = 0  # E17: a count, not a cost: the experts each token is routed to (top-k)

    @classmethod
    def from_ms(cls, iteration_ms: float, per_reply_ms: float, per_prompt_token_ms: float,
                kv_ship_ms_per_token: float, per_reread_token_ms: float = 0.0,
                per_context_token_ms: float = 0.0, per_attention_pair_ms: float = 0.0,
                per_cached_token_ms: float = 0.0, prompt_iteration_ms: float = 0.0,
                free_prompt_tokens: int = 0, per_token_tile_ms: float = 0.0, token_tile: int = 1,
                draft_tokens: int = 0, per_draft_token_ms: float = 0.0, per_expert_ms: float = 0.0,
                experts: int = 0, experts_per_token: int = 0) -> CostNs:
        parts = [exact_ns(x) for x in (iteration_ms, per_reply_ms, per_prompt_token_ms, kv_ship_ms_per_token,
                                       per_reread_token_ms, per_context_token_ms, per_attention_pair_ms,
                                       per_cached_token_ms, prompt_iteration_ms, per_token_tile_ms, per_draft_token_ms,
                                       per_expert_ms)]
        den = math.lcm(*(p.denominator for p in parts))
        it, reply, token, ship, reread, context, pair, cached, read_it, tile, draft, expert = (int(p * den) for p in parts)
        return cls(it, reply, token, ship, den, reread, context, pair, cached, read_it, int(free_prompt_tokens),
                   tile, int(token_tile), int(draft_tokens), draft, expert, int(experts), int(experts_per_token))

    @classmethod
    def from_cost(cls, cost: Cost, kv_ship_ms_per_token: float, speculative: Speculative | None = None) -> CostNs:
        """From a scenario `Cost` (one side's figures, E1), the arrangement's ship cost and the
        scenario's speculative decoding (E16), if on."""
        spec = (speculative.tokens, speculative.per_draft_token_ms) if speculative is not None else (0, 0.0)
        return cls.from_ms(cost.iteration_ms, cost.per_reply_ms, cost.per_prompt_token_ms, kv_ship_ms_per_token,
                           cost.per_reread_token_ms, cost.per_context_token_ms, cost.per_attention_pair_ms,
                           cost.per_cached_token_ms or 0.0, cost.prompt_iteration_ms or 0.0,
                           cost.free_prompt_tokens or 0, cost.per_token_tile_ms or 0.0, cost.token_tile or 1, *spec,
                           cost.per_expert_ms or 0.0, cost.experts or 0, cost.experts_per_token or 0)

    @cached_property
    def per_verified_reply(self) -> int:
        """E16: what verifying a written reply's draft tokens adds to an iteration (over
        `denominator`): each at `per_prompt_token_ms` (a token read), plus drafting it."""
        return self.draft_tokens * (self.per_prompt_token + self.per_draft_token)

    @property
    def tokens_per_reply(self) -> int:
        """The tokens of E8's token budget a written reply takes: its word, and E16's draft tokens it
        verifies (docs/rules.md#r84)."""
        return 1 + self.draft_tokens

    @cached_property
    def extra_terms(self) -> bool:
        """Whether re-reading (E2), context (E3), attention (E7) or cached tokens (E13) cost anything."""
        return bool(self.per_reread_token or self.per_context_token or self.per_attention_pair or self.per_cached_token)

    @cached_property
    def writing_grows(self) -> bool:
        """Whether a writing iteration costs more than the one before it in a repeat (E3's context)."""
        return bool(self.per_context_token)

    @cached_property
    def reading_grows(self) -> bool:
        """Whether an iteration reading a chunk of a prompt costs more than the one before (E2, E3, E7)."""
        return bool(self.per_context_token or self.per_reread_token or self.per_attention_pair)

    @cached_property
    def attention_alone(self) -> bool:
        """Whether E7's attention pairs are the only term on beside M1 (E2, E3, E13, E14, E15, E17 off)."""
        return bool(self.per_attention_pair) and not (
            self.per_reread_token or self.per_context_token or self.per_cached_token or self.prompt_iteration
            or self.free_prompt_tokens or self.per_token_tile or self.per_expert)

    # -- the terms, each written once ---------------------------------------------------------
    def rounded(self, total: int) -> int:
        """D10: an iteration's sum of terms (over `denominator`) to the nearest ns, halves up, once."""
        return (2 * total + self.denominator) // (2 * self.denominator)

    @staticmethod
    def pairs(n: int, before: int) -> int:
        """E7: attention pairs of `n` prompt tokens read after `before` tokens of the same prompt:
        each attends to the tokens before it and to itself."""
        return n * before + n * (n + 1) // 2

    @staticmethod
    def read_pairs(taken: Iterable[tuple[Read, int]]) -> int:
        """E7: the pairs of an iteration's reads, just taken (`unread_tokens` already lowered by them)."""
        total = 0
        for r, n in taken:
            total += n * (r.read_size - r.unread_tokens - n) + n * (n + 1) // 2  # (`pairs`, inline: a hot loop)
        return total

    def total_full(self, n_replies: int, n_tokens: int, n_reread: int = 0, n_context: int = 0,
                   n_pairs: int = 0, n_cached: int = 0) -> int:
        """The one sum of an iteration's terms, before its rounding, over `denominator`: M1, `n_reread`
        re-read tokens (E2), `n_context` context tokens (E3), `n_pairs` attention pairs (E7), `n_cached`
        cached prompt tokens (E13), E14, E15, E16's verification of the replies' draft tokens and E17."""
        total = (self.iteration + (self.per_reply + self.per_verified_reply) * n_replies
                 + self.per_prompt_token * n_tokens
                 + self.per_reread_token * n_reread + self.per_context_token * n_context
                 + self.per_attention_pair * n_pairs + self.per_cached_token * n_cached)
        if n_tokens and (self.prompt_iteration or self.free_prompt_tokens):
            total += self._unsaturated(n_tokens)
        if self.per_token_tile:
            total += self._tiles(n_replies, n_tokens)
        if self.per_expert:
            total += self._experts(n_replies, n_tokens)
        return total

    def iteration_ns_full(self, n_replies: int, n_tokens: int, n_reread: int = 0, n_context: int = 0,
                          n_pairs: int = 0, n_cached: int = 0) -> int:
        """`total_full`, rounded once (D10)."""
        return self.rounded(self.total_full(n_replies, n_tokens, n_reread, n_context, n_pairs, n_cached))

    def iteration_ns(self, n_replies: int, n_tokens: int) -> int:
        """M1 (with E14, E15, E17) of an iteration writing `n_replies` replies and reading `n_tokens` prompt tokens."""
        return self.rounded(self.total_full(n_replies, n_tokens))

    def _tiles(self, n_replies: int, n_tokens: int) -> int:
        """E15: per_token_tile_ms for each started tile of token_tile rows of the iteration's matrix
        products, one a prompt token read or a reply written (E16: and each draft token it verifies)."""
        return self.per_token_tile * -(-(n_replies * (1 + self.draft_tokens) + n_tokens) // self.token_tile)

    def _experts(self, n_replies: int, n_tokens: int) -> int:
        """E17: per_expert_ms for each expert the iteration's tokens touch, min(experts,
        experts_per_token x tokens), its tokens E15's rows: prompt tokens read and replies written
        (E16: and each draft token it verifies)."""
        return self.per_expert * min(self.experts,
                                     self.experts_per_token * (n_replies * (1 + self.draft_tokens) + n_tokens))

    def _unsaturated(self, n_tokens: int) -> int:
        """E14, for an iteration reading n_tokens > 0 prompt tokens: its one prompt_iteration_ms,
        less the per-token cost of the first free_prompt_tokens of them."""
        return self.prompt_iteration - self.per_prompt_token * min(n_tokens, self.free_prompt_tokens)

    def context(self, context_base: int, key: int, n_replies: int) -> int:
        """E3: the context tokens of `n_replies` replies at their words' iteration `key`
        (`context_base`: sum over them of prompt + 1 - the iteration they joined at)."""
        return context_base + key * n_replies if n_replies else 0

    def duration(self, context_base: int, now: int, index: int, n_replies: int, n_tokens: int,
                 taken: Sequence[tuple[Read, int]]) -> int:
        """An iteration's duration with every term that is on (E2, E3, E7, E13, E14, E15) for its reads
        `taken` (just taken, starting `now`); `index` counts its replies' words (E10: writing ones).
        A writing-only iteration pays, of E2/E3/E7/E13, E3's context alone."""
        if not taken:
            if n_replies and self.per_context_token:
                return self.iteration_ns_full(n_replies, 0, 0, self.context(context_base, index, n_replies))
            return self.iteration_ns(n_replies, 0)
        if not self.extra_terms:
            return self.iteration_ns(n_replies, n_tokens)
        n_reread = n_pairs = n_cached = 0
        for r, n in taken:
            before = r.read_size - r.unread_tokens - n  # E2: tokens of it earlier iterations read (or cached)
            n_reread += before
            n_pairs += self.pairs(n, before)
            n_cached += r.cached_tokens if r.read_started_at_ns == now else 0  # E13: paid when its reading begins
        return self.iteration_ns_full(n_replies, n_tokens, n_reread, self.context(context_base, index, n_replies),
                                      n_pairs, n_cached)

    def step(self, n_replies: int, n_tokens: int) -> int:
        """How much each iteration of a repeat costs more than the one before, before rounding (over
        `denominator`): each of `n_replies` replies' context grows by one token (E3); a repeat reading
        `n_tokens`-token chunks of one prompt (0: none) re-reads one chunk more each (E2), and its tokens
        attend to one chunk more (E7)."""
        return self.per_context_token * n_replies + (self.per_reread_token + self.per_attention_pair * n_tokens) * n_tokens

    def ends(self, first: int, step: int, n: int, n_replies: int, chunk: int, before: int, n_context: int) -> list[int]:
        """The ends, after the first start, of a repeat's `n` iterations whose sums grow by `step`
        each (`step`): the first writes `n_replies` replies with `n_context` context tokens and reads
        `chunk` tokens (0: none) of a prompt after `before` of it; each duration rounded once (D10).
        In whole ns nothing rounds: the durations are `first` (the first's, as the GPU computed it)
        and each `step` more."""
        if self.denominator == 1:
            return list(accumulate(range(first, first + step * n, step)))
        den2 = 2 * self.denominator
        total = self.total_full(n_replies, chunk, before, n_context, self.pairs(chunk, before) if chunk else 0)
        at = 2 * total + self.denominator  # (iteration j's duration is (2 * (total + step * j) + den) // den2: all in C)
        return list(accumulate(map(den2.__rfloordiv__, range(at, at + 2 * step * n, 2 * step))))

    # -- the durations a GPU's run pays, chosen once per run ------------------------------------
    def iteration_fn(self) -> Callable[[int, int], int]:
        """`iteration_ns` as a function of (replies written, prompt tokens read), chosen once for a
        GPU's run with every option off (model/gpu.py: its cost is paid each iteration). A kept fusion:
        without E14 and E15 in whole ns, M1's three terms as one expression (tests/model/test_units.py
        checks it against `iteration_ns`); else `iteration_ns` itself (E14, E15, E17)."""
        if (self.prompt_iteration or self.free_prompt_tokens or self.per_token_tile or self.per_expert
                or self.denominator != 1):
            return self.iteration_ns
        it, reply, token = self.iteration, self.per_reply + self.per_verified_reply, self.per_prompt_token
        return lambda n_replies, n_tokens: it + reply * n_replies + token * n_tokens

    def writing_fn(self, gpu: HasContext) -> Callable[[int, int], int]:
        """The duration of an iteration of `gpu` that writes `n` replies and reads nothing, `key`
        counting its words (E10: writing iterations): of the options' terms only E3's context."""
        if gpu.track_context:  # E3: prompt + word - 1, summed over its replies
            return lambda n, key: self.iteration_ns_full(n, 0, 0, gpu.context_base + key * n) if n else self.iteration_ns(0, 0)
        m1 = self.iteration_fn()
        if m1 == self.iteration_ns:  # (E14, E15, E17, a fraction of a ns)
            return lambda n, key: m1(n, 0)
        it, reply = self.iteration, self.per_reply + self.per_verified_reply  # (`iteration_fn`'s M1, no tokens: one call)
        return lambda n, key: it + reply * n

    def reading_fn(self, gpu: HasContext) -> Callable[[int, int, int, int, Sequence[tuple[Read, int]]], int]:
        """The duration of an iteration of `gpu` that reads `taken` (`n_tokens` tokens, starting `now`)
        and writes `n_replies` replies (`index` counting their words): M1 (E14, E15) alone, M1 with
        E7's pairs, or `duration`'s terms (E17 beside them, in `total_full`)."""
        if not self.extra_terms:
            m1 = self.iteration_fn()
            return lambda now, index, n_replies, n_tokens, taken: m1(n_replies, n_tokens)
        if self.per_reread_token or self.per_context_token or self.per_cached_token:  # (E2, E3, E13)
            duration = self.duration
            return lambda now, index, n_replies, n_tokens, taken: duration(gpu.context_base, now, index, n_replies,
                                                                            n_tokens, taken)
        read_pairs = self.read_pairs
        if not self.attention_alone or self.denominator != 1:  # (E14, E15, E17, a fraction of a ns: their terms too)
            full = self.iteration_ns_full
            return lambda now, index, n_replies, n_tokens, taken: full(n_replies, n_tokens, 0, 0, read_pairs(taken))
        it, reply, token, pair = self.iteration, self.per_reply + self.per_verified_reply, self.per_prompt_token, self.per_attention_pair
        return lambda now, index, n_replies, n_tokens, taken: (it + reply * n_replies + token * n_tokens
                                                                + pair * read_pairs(taken))

    def ship_ns(self, n_tokens: int) -> int:
        """M4: a KV ship of `n_tokens` prompt tokens (D10)."""
        return self.rounded(self.kv_ship_per_token * n_tokens)


class ContextSteps:
    """E3 with E16, on one GPU: a reply's context grows by the words each of its iterations writes
    (docs/rules.md#r86), where the GPU's context sum `context_base + key x replies` (`CostNs.context`)
    counts one: the rest is added to `context_base` at the starts of its later iterations (`due`),
    and taken back with the reply when it leaves (`leave`); a reply that leaves its seat early (E9's
    preemption, R108) takes back what was added for it so far, and its steps still to come are dropped."""

    def __init__(self, keys: np.ndarray, tokens: int, acceptance: float) -> None:
        self.keys, self.tokens, self.acceptance = keys, tokens, acceptance
        self.at: dict[int, dict[int, int]] = {}  # iteration key -> request id -> context tokens its start adds
        self.added: dict[int, int] = {}  # request id -> context tokens added for it so far
        self.ahead: dict[int, list[int]] = {}  # request id -> the keys of its steps (some maybe added already)

    def seat(self, request_id: int, n_words: int, key: int) -> None:
        """Request `request_id`'s reply of `n_words` words is seated at iteration `key` (its words from word 2)."""
        _, ordinals = writing_iterations(self.keys[request_id:request_id + 1], np.array([n_words]), self.tokens,
                                         self.acceptance)
        extra = (np.bincount(ordinals)[:-1] - 1).tolist()  # each iteration's words past its first, but the last's
        self._steps(request_id, key, extra)

    def follow(self, request_id: int, key: int, starts: Sequence[int]) -> None:
        """A reply seated at key `key` whose iterations begin at the words `starts` (E9's seat by a word plan, its
        first word that of the seat: R104, R108): iteration j's context is prompt + starts[j] - 1."""
        self._steps(request_id, key, [b - a - 1 for a, b in zip(starts, starts[1:])])

    def _steps(self, request_id: int, key: int, extra: list[int]) -> None:
        """Iteration key + s + 1's start adds `extra[s]` to the reply's context (one token of it the sum's own)."""
        keys = []
        for s, e in enumerate(extra):
            if e:
                self.at.setdefault(key + s + 1, {})[request_id] = e
                keys.append(key + s + 1)
        self.added[request_id] = 0
        self.ahead[request_id] = keys

    def due(self, index: int) -> int:
        """What iteration `index`'s start adds to the GPU's context sum."""
        step = self.at.pop(index, None)
        if not step:
            return 0
        added = self.added
        for request_id, e in step.items():
            added[request_id] += e
        return sum(step.values())

    def leave(self, leaving: Iterable[HasId]) -> int:
        """What the replies `leaving` (their last word written, or preempted) had added to the GPU's context sum."""
        total, at = 0, self.at
        for r in leaving:
            for key in self.ahead.pop(r.request_id, ()):
                step = at.get(key)
                if step is not None and step.pop(r.request_id, None) is not None and not step:
                    del at[key]
            total += self.added.pop(r.request_id, 0)
        return total
