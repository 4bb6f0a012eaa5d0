"""E8's batch limits on an arrangement (docs/rules.md#e8): the general keys' check, and a split's
per-side keys (E8e, readings R89-R93): how they combine with the general ones, their checks, and
each role's limits the engine builds its GPUs with."""

from __future__ import annotations

#: E8 per side on a split (reading R89): each overrides the arrangement's general key for its side
SIDE_LIMIT_KEYS = ("reading_max_batch_tokens", "reading_max_batch_requests", "writing_max_batch_replies",
                   "writing_max_batch_tokens")
#: what each E8 key expects, for loading's one-line errors
BATCH_LIMIT_EXPECT = {"max_batch_replies": "a whole number of replies from 1 to 2**53",
                      "max_batch_tokens": "a whole number of tokens from 2 to 2**53"} | {
    f"{side}_max_batch_{unit}": f"a whole number of {what} from {low} to 2**53 (per {side} iteration)"
    for side, unit, what, low in (("reading", "tokens", "tokens", 1), ("reading", "requests", "prompts", 1),
                                  ("writing", "replies", "replies", 1), ("writing", "tokens", "tokens", 2))}


def check_budget(a):
    """E8: a token budget must hold one reply and one prompt token."""
    if a.max_batch_tokens is not None and a.max_batch_tokens < 2:
        raise ValueError(f"@max_batch_tokens: got {a.max_batch_tokens}, expected at least 2 "
                         "(one reply written and one prompt token read)")
    return a


def check_side_limits(a) -> None:
    """E8 per side (R89, R90): a side's own key overrides the general one for that side; a general key
    that no instance would keep, or per-side keys on GPUs that change role, is refused."""
    if a.writing_max_batch_tokens is not None and a.writing_max_batch_tokens < 2:
        raise ValueError(f"@writing_max_batch_tokens: got {a.writing_max_batch_tokens}, expected at least 2 "
                         "(one reply written and one prompt token read)")
    if a.max_batch_replies is not None and a.writing_max_batch_replies is not None:
        raise ValueError(f"@writing_max_batch_replies: got {a.writing_max_batch_replies} with max_batch_replies "
                         f"{a.max_batch_replies}, expected one of them (on a split only writing instances write "
                         "replies: both limit the same seats; remove max_batch_replies)")
    if a.max_batch_tokens is not None and a.reading_max_batch_tokens is not None and (
            a.writing_max_batch_tokens is not None):
        raise ValueError(f"@max_batch_tokens: got {a.max_batch_tokens} with reading_max_batch_tokens and "
                         "writing_max_batch_tokens, expected at most two of the three (each side's own key "
                         "overrides max_batch_tokens there, so it would limit nothing; remove it)")
    if a.role_changes is not None and any(getattr(a, k) is not None for k in SIDE_LIMIT_KEYS):
        key = next(k for k in SIDE_LIMIT_KEYS if getattr(a, k) is not None)
        raise ValueError(f"@{key}: got {getattr(a, key)} with roles that change (E12), expected static roles with "
                         "per-side batch limits (an instance that moves would change its limits; use max_batch_tokens "
                         "and max_batch_replies, the same on both sides)")


def side_batch_limits(a, role: str) -> tuple[int | None, int | None, int | None]:
    """A split's E8 for an instance of `role` (R89): (replies written, replies + prompt tokens read,
    prompts read) per iteration, each the side's own key, else the general one; None: no limit.
    The cap on prompts is a reading instance's only."""
    if role == "reads":
        tokens = a.reading_max_batch_tokens
        return a.max_batch_replies, a.max_batch_tokens if tokens is None else tokens, a.reading_max_batch_requests
    replies, tokens = a.writing_max_batch_replies, a.writing_max_batch_tokens
    return (a.max_batch_replies if replies is None else replies, a.max_batch_tokens if tokens is None else tokens, None)
