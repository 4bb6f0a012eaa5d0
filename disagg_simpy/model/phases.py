"""The order of one instant (D5) on SimPy's event queue: the one module that touches SimPy
internals.

SimPy runs the events of one instant by priority, then in the order they were scheduled; its
own events use priorities 0 and 1. Public SimPy offers no way to schedule an event with a chosen
priority, so `Slot` and `fire` set the fields `Event.succeed` would set (`_ok`, `_value`) and call
`Environment.schedule` with the priority of their phase; `events_scheduled` reads the counter
SimPy numbers its events with (`_eid`). These names are stable across SimPy 4.x (hence
`simpy>=4.1,<5` in pyproject.toml); if SimPy changes them, this module is all that changes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import simpy

if TYPE_CHECKING:
    class Environment(simpy.Environment):
        """SimPy's environment as the model drives it: every delay is whole ns (D10), so the
        time is an int (SimPy types it int | float). For the type checker only."""

        @property
        def now(self) -> int: ...
else:
    Environment = simpy.Environment

PHASE_END = 10  # (1) iterations that end, by GPU number
PHASE_ARRIVE = 10**7  # (2) ship ends and arrivals, by request id
PHASE_START = 10**16  # (3) idle GPUs with work start, by GPU number
PHASE_STOP = 10**17  # after everything else of the instant


class Slot(simpy.events.Event):
    """A timeout that fires in a chosen phase of its instant (D5); with `delay` None, not scheduled yet (`again`)."""

    def __init__(self, env: simpy.Environment, delay: int | None, priority: int):
        self.env = env
        self.callbacks = []
        self._value = None
        self._ok = True
        if delay is not None:
            env.schedule(self, priority, delay)  # type: ignore[arg-type]  # SimPy types a priority as a NewType of int


def again(slot: Slot, delay: int, priority: int) -> Slot:
    """`slot`, fired (or never scheduled), on the queue again `delay` from now in phase `priority`, waited on by
    no one yet: one event object reused where one waiter waits on one event at a time (a GPU's iteration end,
    the next arrival), half the cost of a new Slot. The same event count and order as a new Slot."""
    slot.callbacks = []
    slot.env.schedule(slot, priority, delay)  # type: ignore[arg-type]  # (as in Slot)
    return slot


def take_over(slot: Slot, delay: int, priority: int) -> Slot:
    """A new Slot, `delay` from now in phase `priority`, that takes over whatever waits on `slot`
    (a GPU's process): SimPy cannot take a scheduled event back, so `slot` stays on the queue
    and fires with no one waiting."""
    new = Slot(slot.env, delay, priority)
    new.callbacks, slot.callbacks = slot.callbacks, []
    return new


def fire(event: simpy.events.Event, priority: int) -> None:
    """`event.succeed()` in a chosen phase of the current instant."""
    event._ok = True
    event._value = None
    event.env.schedule(event, priority, 0)  # type: ignore[arg-type]  # (as in Slot)


def events_scheduled(env: simpy.Environment) -> int:
    """How many events SimPy has scheduled so far (a structural cost measure)."""
    return next(env._eid)
