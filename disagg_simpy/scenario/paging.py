"""E9's keys on an arrangement (paged KV memory with preemption, docs/rules.md#e9): which go
together, and the settings the model reads."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from .base import CostMs, Count, _Strict
from .limits import MAX_COUNT

#: E9's keys, left out of a dump while unset (so files without them dump as before)
E9_KEYS = ("kv_policy", "kv_block_tokens", "preemption", "swap_ms_per_token", "max_preemptions")


class PagedKeys(_Strict):
    """E9's keys, shared by every kind of arrangement (each unset by default: E4's reserve)."""

    kv_policy: Literal["reserve", "paged"] | None = None  # None: reserve, E4
    kv_block_tokens: Count | None = None  # paged; None: 16
    preemption: Literal["recompute", "swap"] | None = None  # paged; None: recompute
    swap_ms_per_token: CostMs | None = None  # swap
    max_preemptions: Annotated[int, Field(ge=0, le=MAX_COUNT)] | None = None  # paged; None: 8

    @property
    def paged(self) -> tuple[int, str, float, int] | None:
        """E9: (block tokens, preemption, swap ms per token, max preemptions), or None (E4's reserve)."""
        return paged_settings(self)


def check_paged(a):
    """E9: paged KV's keys only with `kv_policy: paged` and a KV limit; swap's cost only with swap."""
    if a.kv_policy != "paged":
        for key in E9_KEYS[1:]:
            if getattr(a, key) is not None:
                raise ValueError(f"@{key}: got {getattr(a, key)!r} without kv_policy: paged, expected it only with "
                                 "kv_policy: paged (E9)")
        return a
    if not a.kv_limited:
        raise ValueError("@kv_policy: got 'paged' without kv_capacity_tokens, expected a KV limit to page (E9)")
    if getattr(a, "role_changes", None) is not None:
        raise ValueError("@kv_policy: got 'paged' with roles that change (E12), expected static roles: no rule fixes "
                         "where a preempted reply goes when its GPU changes side (docs/rules.md#e9i)")
    if a.swap_ms_per_token is not None and a.preemption != "swap":
        raise ValueError(f"@swap_ms_per_token: got {a.swap_ms_per_token} with preemption: "
                         f"{a.preemption or 'recompute'}, expected it only with preemption: swap (E9)")
    if a.preemption == "swap" and a.swap_ms_per_token is None:
        raise ValueError("@swap_ms_per_token: missing with preemption: swap, expected ms per token moved each way (E9)")
    return a


def paged_settings(a) -> tuple[int, str, float, int] | None:
    """E9: (block tokens, preemption, swap ms per token, max preemptions) with their defaults
    (16, recompute, 0, 8), or None when the arrangement reserves whole (E4)."""
    if a.kv_policy != "paged":
        return None
    return (a.kv_block_tokens or 16, a.preemption or "recompute", a.swap_ms_per_token or 0.0,
            8 if a.max_preemptions is None else a.max_preemptions)
