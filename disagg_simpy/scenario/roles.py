"""E12's scenario keys: a split whose GPUs change role over a run (`roles:` on a
disaggregated arrangement; docs/rules.md#e12).

`roles: static` (the default) keeps today's split. `roles: {schedule: [...]}` sets the reading
GPUs from given times; `roles: {policy: queue, ...}` moves one instance at a time when the
reading queue's wait or the writing side's gap (or, under E4, its memory) crosses a threshold.
Either way a move costs a drain and `switch_s` of warm-up (the model's side: model/roles.py).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from .base import Gpus, NonNegSeconds, Seconds, _as_tuple, _Strict

#: A move's warm-up when `switch_s` is not given: a guess at restarting an engine process on
#: weights already in memory (docs/over-time.md says how the plan's verdict moves with it).
DEFAULT_SWITCH_S = 10.0


class RoleStep(_Strict):
    """From `from_s` on, `reading_gpus` of the arrangement's GPUs read prompts."""

    from_s: NonNegSeconds
    reading_gpus: Gpus


_POLICY_KEYS = {"check_s": 1.0, "cooldown_s": 60.0, "wait_s": 1.0, "gap_ms": 40.0}


class RoleChanges(_Strict):
    """`roles:` other than static: a `schedule` of reading GPUs by time (a plan's switching plan
    is one), or the reactive rule `policy: queue` (E12c): every `check_s`, outside a cooldown and
    with no move under way, move one instance to the side under pressure while the other is not.
    One mapping for both, so an error names the key the user wrote."""

    schedule: tuple[RoleStep, ...] | None = Field(None, min_length=1, max_length=10_000)
    policy: Literal["queue"] | None = None
    switch_s: NonNegSeconds = DEFAULT_SWITCH_S
    check_s: Seconds | None = None  # how often the rule looks (default 1 s)
    cooldown_s: NonNegSeconds | None = None  # from one decision to the next, at least (default 60 s)
    wait_s: Seconds | None = None  # reading pressure: a waiting prompt arrived this long ago (default 1 s)
    gap_ms: Annotated[float, Field(gt=0, le=1e6)] | None = None  # writing pressure (default 40 ms)

    _tuple = field_validator("schedule", mode="before")(_as_tuple)

    @model_validator(mode="after")
    def _one_kind(self) -> RoleChanges:
        if (self.schedule is None) == (self.policy is None):
            raise ValueError("@schedule: expected either a schedule (a list of {from_s, reading_gpus}) or "
                             "policy: queue, not both or neither")
        if self.schedule is not None:
            for key in _POLICY_KEYS:
                if getattr(self, key) is not None:
                    raise ValueError(f"@{key}: got it with a schedule, expected it only with policy: queue")
        return self

    def setting(self, key: str) -> float:
        """A policy threshold, its default when unset."""
        value = getattr(self, key)
        return _POLICY_KEYS[key] if value is None else value


Roles = RoleChanges | None  # None: static


def static_roles(value):
    """`roles: static` is the default (stored as None, so it is not dumped)."""
    return None if value == "static" else value


def colocated_roles(value):
    """A colocated arrangement takes only `roles: static`: its GPUs all read and write."""
    if value is None or value == "static":
        return None
    raise ValueError("got a schedule or policy, expected static: a colocated arrangement's GPUs all read "
                     "and write (roles change only on kind: disaggregated)")


def check_roles(a) -> None:
    """A split's `roles` against its GPUs (E12e, reading R33): raises '@roles...' errors."""
    roles = a.role_changes
    if roles is None:
        return
    rtp, wtp = a.reading_tp or 1, a.writing_tp or 1
    if rtp != wtp:
        raise ValueError(f"@roles: got reading_tp {rtp} and writing_tp {wtp}, expected one TP degree on both "
                         "sides when roles change (instances move whole)")
    if a.reading_kv_capacity_tokens != a.writing_kv_capacity_tokens:
        raise ValueError("@roles: got different reading_ and writing_kv_capacity_tokens, expected one capacity "
                         "on both sides when roles change (a GPU keeps its memory)")
    if roles.policy is not None:
        if a.reading_gpus // rtp < 1 or a.writing_gpus // wtp < 1:
            raise ValueError("@roles: expected at least one instance on each side")
        return
    total = a.reading_gpus + a.writing_gpus
    before = -1.0
    for i, step in enumerate(roles.schedule or ()):
        key = f"@roles.schedule[{i}]"
        if step.from_s <= before:
            raise ValueError(f"{key}.from_s: got {step.from_s:g} after {before:g}, expected entries in "
                             "increasing from_s")
        before = step.from_s
        if step.reading_gpus >= total:
            raise ValueError(f"{key}.reading_gpus: got {step.reading_gpus} of {total} GPUs, expected at most "
                             f"{total - rtp} (the writing side needs a GPU)")
        if step.reading_gpus % rtp:
            raise ValueError(f"{key}.reading_gpus: got {step.reading_gpus}, expected a multiple of the TP "
                             f"degree {rtp} (instances move whole)")
        if step.from_s == 0 and step.reading_gpus != a.reading_gpus:
            raise ValueError(f"{key}.reading_gpus: got {step.reading_gpus} from 0 s, expected the arrangement's "
                             f"reading_gpus {a.reading_gpus} (or no entry at 0 s)")


def reading_instances_over_time(a) -> list[tuple[float, int]]:
    """A schedule's (from_s, reading instances), starting with the arrangement's own at 0 s."""
    tp = a.reading_tp or 1
    steps = [(0.0, a.reading_gpus // tp)]
    for s in a.role_changes.schedule:
        if s.from_s == 0:
            continue
        steps.append((s.from_s, s.reading_gpus // tp))
    return steps
