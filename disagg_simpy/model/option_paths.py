"""An iteration's reads and duration under the options (E2-E4, E7, E8, E10, E13), without the
general path's work for the options that are off: most iterations of a run with E7, E8 or E10
on have no KV limit to check (E4), no prefix cache (E13), and either read prompt tokens or write
words under E10, so a writing-only iteration pays no attention or re-read term (E2, E7).
`model/gpu.py`'s `Gpu` calls these (`_duration` is `duration`); what they return is what the
general path returns (tests/model: the reference model, to the ns)."""

from __future__ import annotations

from typing import Any


def take(gpu: Any, now: int, n_written: int) -> tuple[list, int]:
    """The prompt tokens an iteration starting now reads under the options, writing `n_written`
    replies, and how many (D4; E4d, E8, E13 as `Gpu._take_with_options` chooses them). With no
    KV limit and no prefix cache, and unless it reads whole prompts under a token budget, that
    choice is D4's plain one, chunked up to min(chunk_tokens, max_batch_tokens - n_written)."""
    if not gpu.waiting:
        return [], 0
    chunk, limit = gpu.chunk_tokens, gpu.max_tokens
    if gpu.kv_capacity is None and gpu.prefix is None and (chunk is not None or limit is None):
        if limit is not None and chunk is not None and limit - n_written < chunk:
            if limit == n_written:
                return [], 0
            return gpu._take_prompt_tokens(now, None, limit - n_written)
        return gpu._take_prompt_tokens(now)
    return gpu._take_prompt_tokens(now, gpu._take_with_options(n_written))


def duration(gpu: Any, now: int, index: int, n_replies: int, n_tokens: int, taken) -> int:
    """An iteration's duration with the options' terms (E2, E3, E7, E13); `index` counts its
    replies' words (E10: writing ones). A writing-only iteration pays, of those terms, E3's context alone."""
    cost = gpu.cost
    if not taken:
        if n_replies and gpu.track_context:  # E3: prompt + word - 1, summed over its replies
            return cost.iteration_ns_full(n_replies, 0, 0, gpu.context_base + index * n_replies)
        return cost.iteration_ns(n_replies, 0)
    if not cost.extra_terms:
        return cost.iteration_ns(n_replies, n_tokens)
    n_reread = n_pairs = n_cached = 0
    for r, n in taken:
        before = r.read_size - r.unread_tokens - n  # E2: tokens of it earlier iterations read (or cached)
        n_reread += before
        n_pairs += n * before + n * (n + 1) // 2  # E7: each token read attends to those before it and itself
        n_cached += r.cached_tokens if r.read_started_at_ns == now else 0  # E13: paid when its reading begins
    n_context = gpu.context_base + index * n_replies if n_replies else 0  # E3
    return cost.iteration_ns_full(n_replies, n_tokens, n_reread, n_context, n_pairs, n_cached)
