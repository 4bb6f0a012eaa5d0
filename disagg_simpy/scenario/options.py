"""The optional model rules (E1-E6) as a scenario states them: which are on,
and the checks that need the workload's sizes (E4f: a reservation larger than a GPU's memory).

Pure functions over the validated models; `schema` calls them from its checks and the workload
stage calls `capacity_problem` on a trace's rows.
"""

from __future__ import annotations

import numpy as np


def reservation(arrangement, prompt, reply):
    """E4f (reading R9): the largest KV reservation each request makes on one GPU of
    `arrangement`: prompt + reply on a colocated GPU, on a split's writing GPU (nothing there for a
    one-word reply) and for a local prompt (E6); the prompt alone on a split's reading GPU."""
    prompt, reply = np.asarray(prompt, dtype=np.int64), np.asarray(reply, dtype=np.int64)
    whole = prompt + reply
    if arrangement.kind == "colocated":
        return whole
    out = np.where(reply > 1, whole, prompt)
    if arrangement.local_prompt_max_tokens is not None:
        out = np.where(prompt <= arrangement.local_prompt_max_tokens, whole, out)
    return out


def sizes_text(prompt: int, reply: int, needed: int) -> str:
    """'prompt 8000 + reply 400 = 8400 tokens', or 'prompt 8000 tokens' when the reply reserves
    nothing (a one-word reply on a split's reading GPU)."""
    if needed == prompt:
        return f"prompt {prompt:,} tokens"
    return f"prompt {prompt:,} + reply {reply:,} = {needed:,} tokens"


def largest_draw(arrangement, prompt_ranges, reply_range) -> tuple[int, int, int]:
    """(prompt, reply, reservation) of the largest reservation a synthetic workload can draw
    (E4f): its largest prompt with its largest reply and, with local prompts (E6), its largest
    local prompt with its largest reply (reservations grow with both sizes)."""
    biggest = max(hi for _, hi in prompt_ranges)
    candidates = [biggest]
    local = getattr(arrangement, "local_prompt_max_tokens", None)
    if local is not None:
        candidates += [min(hi, local) for lo, hi in prompt_ranges if lo <= local]
    reply = reply_range[1]
    need = reservation(arrangement, candidates, [reply] * len(candidates))
    i = int(np.argmax(need))
    return int(candidates[i]), reply, int(need[i])


def capacity_problem(arrangement, prompt: np.ndarray, reply: np.ndarray) -> int | None:
    """Index of the first request whose reservation exceeds `kv_capacity_tokens` (E4f), or None."""
    cap = arrangement.kv_capacity_tokens
    if cap is None or not len(prompt):
        return None
    over = np.flatnonzero(reservation(arrangement, prompt, reply) > cap)
    return int(over[0]) if len(over) else None
