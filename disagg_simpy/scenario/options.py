"""The checks of the options that need the workload's sizes (E4f: a KV reservation larger than a
GPU's memory) or a side's cost preset (TP: a preset of another TP degree).

Pure functions over the validated models; `schema` calls them from its checks and the workload
stage calls `capacity_problem` on a trace's rows.
"""

from __future__ import annotations

import re

import numpy as np


def reservation(arrangement, prompt, reply):
    """E4f (reading R9): the largest KV reservation each request makes on one GPU of
    `arrangement`: prompt + reply on a colocated GPU, on a split's writing GPU (nothing there for a
    one-word reply) and for a local prompt (E6); the prompt alone on a split's reading GPU."""
    prompt, reply = np.asarray(prompt, dtype=np.int64), np.asarray(reply, dtype=np.int64)
    whole = prompt + reply
    if not arrangement.is_split:
        return whole
    out = np.where(reply > 1, whole, prompt)
    local = arrangement.local_prompt_limit
    if local is not None:
        out = np.where(prompt <= local, whole, out)
    return out


def sizes_text(prompt: int, reply: int, needed: int, drafts: int = 0) -> str:
    """'prompt 8000 + reply 400 = 8400 tokens', or 'prompt 8000 tokens' when the reply reserves
    nothing (a one-word reply on a split's reading GPU); `drafts`: E16's k draft tokens held too (E9)."""
    if needed == prompt:
        return f"prompt {prompt:,} tokens"
    if drafts and needed != prompt + reply:  # E9 with E16 (docs/rules.md#r106)
        return f"prompt {prompt:,} + reply {reply:,} + {drafts:,} draft tokens: {needed:,} tokens in KV blocks"
    if needed != prompt + reply:  # E9: blocks of prompt + reply - 1 tokens, plus one block to admit it
        return f"prompt {prompt:,} + reply {reply:,}: {needed:,} tokens in KV blocks"
    return f"prompt {prompt:,} + reply {reply:,} = {needed:,} tokens"


def side_needs(arrangement, prompt, reply, drafts: int = 0) -> list[tuple[str, int, np.ndarray]]:
    """E4f per side with a KV limit: (the key that sets it, its capacity per instance, the largest
    reservation each request makes on one instance of that side). A split's reading side holds
    the prompt alone (nothing for a local prompt, E6); its writing side prompt + reply (nothing
    for a one-word reply read elsewhere); a colocated instance prompt + reply. `drafts`: E16's k
    draft tokens, which E9's blocks of a written reply hold too (docs/rules.md#r106)."""
    prompt, reply = np.asarray(prompt, dtype=np.int64), np.asarray(reply, dtype=np.int64)
    whole = prompt + reply
    paged = getattr(arrangement, "paged", None)
    if paged is not None:  # E9: the most a request holds is prompt + reply - 1 tokens, in blocks, plus one to admit it
        block = paged[0]
        whole = block * (-(-(whole - 1 + np.where(reply > 1, drafts, 0)) // block) + 1)
        held = block * (-(-prompt // block) + 1)
    else:
        held = prompt
    reading_cap, writing_cap = arrangement.kv_capacities
    if not arrangement.is_split:
        return [] if reading_cap is None else [(arrangement.kv_capacity_key("both"), reading_cap, whole)]
    local = arrangement.local_prompt_limit
    is_local = prompt <= local if local is not None else np.zeros(len(prompt), bool)
    sides = (("reads", reading_cap, np.where(is_local, 0, held)),
             ("writes", writing_cap, np.where((reply > 1) | is_local, whole, 0)))
    return [(arrangement.kv_capacity_key(role), cap, need) for role, cap, need in sides if cap is not None]


def largest_draw(arrangement, prompt_ranges, reply_range, drafts: int = 0) -> tuple[str, int, int, int, int] | None:
    """E4f on synthetic traffic: None, or (key, capacity, prompt, reply, reservation) of the
    largest reservation the workload can draw on a side whose instances cannot hold it. Its
    largest prompt with its largest reply and, with local prompts (E6), its largest local prompt
    with its largest reply are the candidates (reservations grow with both sizes)."""
    biggest = max(hi for _, hi in prompt_ranges)
    candidates = [biggest]
    local = arrangement.local_prompt_limit
    if local is not None:
        candidates += [min(hi, local) for lo, hi in prompt_ranges if lo <= local]
    reply = reply_range[1]
    worst = None
    for key, cap, need in side_needs(arrangement, candidates, [reply] * len(candidates), drafts):
        i = int(np.argmax(need))
        if need[i] > cap and (worst is None or need[i] > worst[4]):
            worst = (key, cap, int(candidates[i]), reply, int(need[i]))
    return worst


def capacity_problem(arrangement, prompt: np.ndarray, reply: np.ndarray, drafts: int = 0
                     ) -> tuple[int, str, int, int] | None:
    """E4f on a trace: None, or (index, key, capacity, reservation) of the first request whose
    reservation exceeds its side's capacity (the largest such reservation of that request)."""
    if not len(prompt):
        return None
    found = None
    for key, cap, need in side_needs(arrangement, prompt, reply, drafts):
        over = np.flatnonzero(need > cap)
        if len(over):
            i = int(over[0])
            if found is None or i < found[0] or (i == found[0] and need[i] > found[3]):
                found = (i, key, cap, int(need[i]))
    return found


def preset_tp_problem(arrangement, base_cost) -> tuple[str, str] | None:
    """TP: None, or (key, message) when a side's cost preset (its own block's `preset`, else the
    scenario's) names another TP degree than the side's: a preset's costs are those of an
    instance of its TP degree (`.../tp2/ENGINE`), so they cannot be an instance of another."""
    for cost_key, (tp_key, tp) in arrangement.side_tps.items():
        own = getattr(getattr(arrangement, cost_key, None), "preset", None)
        name = own or getattr(base_cost, "preset", None)
        found = re.search(r"/tp(\d+)/[^/]+$", name) if isinstance(name, str) else None
        if found and int(found[1]) != tp:
            where = f"its {cost_key}" if own else "the scenario's cost"
            return tp_key, (f"got {tp} with preset {name!r} ({where}), a TP{found[1]} instance's costs; expected "
                            f"{tp_key}: {found[1]}, or a TP{tp} preset for these GPUs")
    return None
