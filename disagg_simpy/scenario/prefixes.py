"""E13 (prefix caching and routers) as a scenario states it: the defaults and the checks that
need several keys (docs/rules.md#e13)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator

from .base import _as_tuple, _ordered_range, _Strict
from .limits import MAX_TIME_S

Tokens = Annotated[int, Field(ge=1, le=10_000_000)]
Turns = Annotated[int, Field(ge=1, le=1000)]
Think = Annotated[float, Field(ge=0, le=MAX_TIME_S)]


class Prefixes(_Strict):
    """Synthetic shared prefixes (E13): a `share` of requests begin with one of `groups` prefixes;
    group g (from 0) is drawn with weight 1 / (g + 1) ** `zipf` (Zipf popularity, exponent 1 by
    default; 0: all alike); each group's length is drawn once per seed, uniformly from `tokens`."""

    share: Annotated[float, Field(gt=0, le=1)]
    groups: Annotated[int, Field(ge=1, le=100_000)]
    tokens: tuple[Tokens, Tokens]
    zipf: Annotated[float, Field(ge=0, le=10)] = 1.0

    _tuple = field_validator("tokens", mode="before")(_as_tuple)
    _range = field_validator("tokens")(_ordered_range)


class Sessions(_Strict):
    """Synthetic multi-turn sessions (E13): arrivals start sessions; each has a number of turns
    drawn uniformly from `turns`; turn k + 1 arrives `think_s` (uniform) after turn k arrived
    (open loop: not after its reply ends); its prompt is turn k's prompt and reply, then new
    tokens drawn as a prompt of the mix."""

    turns: tuple[Turns, Turns]
    think_s: tuple[Think, Think]

    _tuple = field_validator("turns", "think_s", mode="before")(_as_tuple)
    _range = field_validator("turns", "think_s")(_ordered_range)


def prefix_class_problem(prefixes: Prefixes, class_bounds: list[tuple[int, int]]) -> str | None:
    """A prefix must leave a prompt of every class at least one token of its own."""
    for i, (lo, _) in enumerate(class_bounds):
        if prefixes.tokens[1] >= lo:
            return (f"@prefixes.tokens: got up to {prefixes.tokens[1]:,} tokens, but prompt_mix[{i}] draws prompts "
                    f"from {lo:,} tokens; expected prefixes shorter than every prompt (at most {lo - 1:,} tokens)")
    return None


def session_bounds(sessions: Sessions | None, prompt: tuple[int, int], reply: tuple[int, int]) -> tuple[int, int]:
    """The smallest and largest prompt of a class with sessions: turn K's prompt is the K - 1
    earlier new parts and replies, then its own."""
    if sessions is None:
        return prompt
    k = sessions.turns[1]
    return prompt[0], k * prompt[1] + (k - 1) * reply[1]

#: A mooncake trace's block (one `hash_ids` entry per this many prompt tokens), the default
#: cache block, and prefix_aware's default load cap (D1 tokens above the least loaded instance).
MOONCAKE_BLOCK_TOKENS = 512
DEFAULT_BLOCK_TOKENS = 512
PREFIX_LOAD_CAP_TOKENS = 16_384
#: The scenario's E13 keys at their defaults (left out of files while so).
E13_DEFAULTS = {"router": "least_loaded", "router_load_cap_tokens": None, "prefix_cache_tokens": None,
                "prefix_block_tokens": DEFAULT_BLOCK_TOKENS, "prefixes": None, "sessions": None,
                "speculative": None}  # (and E16's, scenario/speculative.py: out of files while off too)


def omit_defaults(self, handler, info):
    """The scenario's (and synthetic workload's) serializer: in files (json mode: run.json, the
    store's keys) the E13 keys are left out while at their defaults, so a scenario without them is
    dumped as before they existed."""
    out = handler(self)
    if info.mode_is_json() and isinstance(out, dict):
        for key, default in E13_DEFAULTS.items():
            if out.get(key, default) == default:
                out.pop(key, None)
    return out


def prefix_problem(scenario) -> str | None:
    """E13h: None, or the message (`@key: ...`) of the first problem: a cache smaller than one
    block; a block that does not divide a mooncake trace's 512; a cache with roles that change
    (E12); prefix_aware without a cache; a load cap with another router."""
    block = scenario.prefix_block_tokens
    cache = scenario.prefix_cache_tokens
    if cache is not None and cache < block:
        return (f"@prefix_cache_tokens: got {cache:,}, expected at least prefix_block_tokens ({block:,}): a cache "
                "smaller than one block holds nothing")
    w = scenario.workload
    if cache is not None and getattr(w, "format", None) == "mooncake" and MOONCAKE_BLOCK_TOKENS % block:
        return (f"@prefix_block_tokens: got {block:,}, expected a divisor of the mooncake trace's block of "
                f"{MOONCAKE_BLOCK_TOKENS} tokens (one hash_ids entry each), e.g. 16, 64 or 512")
    for i, a in enumerate(scenario.arrangements):
        if cache is not None and getattr(a, "role_changes", None) is not None:
            return (f"@arrangements[{i}].roles: got roles that change (E12) with prefix_cache_tokens, expected static "
                    "roles with a prefix cache (a cache stays with its instance; moving one is not modelled)")
    if scenario.router == "prefix_aware" and cache is None:
        return ("@router: got 'prefix_aware' without prefix_cache_tokens, expected prefix_cache_tokens (the router "
                "looks for the longest cached prefix) or another router")
    if scenario.router_load_cap_tokens is not None and scenario.router != "prefix_aware":
        return (f"@router_load_cap_tokens: got {scenario.router_load_cap_tokens:,} with router {scenario.router!r}, "
                "expected router: prefix_aware (the cap is its)")
    return None
