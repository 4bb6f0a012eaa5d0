"""E12: GPUs that change role on a split (docs/rules.md#e12), as a controller beside the engine.

A move takes an instance off its side at once (the router stops sending it work), lets it
drain (a writing instance finishes its replies, a reading one reads the prompts already routed
to it), then warms it up for `switch_s` serving nothing, and only then adds it to the other
side. The controller acts at two points of an instant, both at the start of D5 step 2 (after
every iteration end, before ship ends and arrivals): warm-ups that end, then the schedule's or
the policy's decision. A draining instance tells the engine when its last iteration ends
(`Gpu.draining`, the one hook in gpu.py).
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Protocol

import simpy

from ..scenario.arrangements import Disaggregated
from .costs import CostNs, exact_ns, nearest_ns
from .gpu import Gpu
from .phases import PHASE_ARRIVE, Slot
from .records import n_recorded

if TYPE_CHECKING:
    from collections import deque

    from ..scenario.arrangements import Arrangement
    from ..scenario.roles import RoleChanges
    from .phases import Environment
    from .request import Request
    from .router import Side

PHASE_WARM = PHASE_ARRIVE - 2  # warm-ups that end (start of D5 step 2)
PHASE_DECIDE = PHASE_ARRIVE - 1  # then the schedule's or the policy's decision

SWITCH_FIELDS = ("gpu", "from_role", "to_role", "why", "requested_at_ns", "drained_at_ns", "serving_at_ns")


def seconds_ns(s: float) -> int:
    """Seconds as written, to the nearest ns, halves up (D10)."""
    return nearest_ns(Fraction(Decimal(repr(float(s)))) * 1_000_000_000)


@dataclass
class Switch:
    """One move of one instance (a row of switches.csv; -1: not yet)."""

    gpu: int
    from_role: str
    to_role: str
    why: str
    requested_at_ns: int
    drained_at_ns: int = -1
    serving_at_ns: int = -1


class Host(Protocol):
    """What the controller reads of the engine it moves instances for (model/engine.py's `Engine`, which imports
    this module: a Protocol, so no import circle): its clock, arrangement, reading cost, GPUs and sides."""

    env: Environment
    arrangement: Arrangement
    cost: CostNs
    gpus: list[Gpu]
    handoff: deque[Request] | None  # E4e: read prompts waiting for writing memory
    local_max: int | None  # E6
    reading: Side[Gpu]
    writing: Side[Gpu]


class RoleController:
    """Moves instances between the engine's reading and writing sides (E12)."""

    def __init__(self, engine: Host, spec: RoleChanges, writing_cost: CostNs, chunk: int | None):
        self.engine = engine
        self.spec = spec
        self.writing_cost = writing_cost
        self.chunk = chunk
        self.switch_ns = seconds_ns(spec.switch_s)
        self.target = len(engine.reading.gpus)  # reading instances once every move is done
        self.moving: dict[int, Switch] = {}  # instance number -> its move under way
        self.switches: list[Switch] = []
        self.last_decision_ns: int | None = None
        self.why = "schedule"
        for g in engine.gpus:
            g.may_change_role()  # (it starts in step 3, so a decision sees the queues D1 counts)

    def processes(self) -> list[Generator[simpy.Event, Any, None]]:
        """The SimPy processes that decide moves: the schedule's steps, or the policy's checks."""
        if self.spec.policy is not None:
            return [self._checks()]
        return [self._schedule()]

    # -- decisions ------------------------------------------------------------------------------
    def _schedule(self) -> Generator[simpy.Event, Any, None]:
        env, arrangement = self.engine.env, self.engine.arrangement
        assert isinstance(arrangement, Disaggregated)  # (E12 is a split's: scenario/roles.py)
        tp = arrangement.reading_tp or 1
        for step in self.spec.schedule or ():
            at = seconds_ns(step.from_s)
            if at == 0:
                continue
            yield Slot(env, at - env.now, PHASE_DECIDE)
            self.target = step.reading_gpus // tp
            self.why = "schedule"
            self._rebalance(env.now)

    def _checks(self) -> Generator[simpy.Event, Any, None]:
        env, spec = self.engine.env, self.spec
        every = seconds_ns(spec.setting("check_s"))
        cooldown, wait = seconds_ns(spec.setting("cooldown_s")), seconds_ns(spec.setting("wait_s"))
        gap = exact_ns(spec.setting("gap_ms"))
        k = 0
        while True:
            k += 1
            yield Slot(env, k * every - env.now, PHASE_DECIDE)
            now = env.now
            if self.moving or (self.last_decision_ns is not None and now - self.last_decision_ns < cooldown):
                continue
            reading, writing = self.engine.reading.gpus, self.engine.writing.gpus
            read_wait = any(g.queue.waiting and now - g.queue.waiting[0].arrived_at_ns >= wait for g in reading)
            write_gap = any(self.writing_cost.iteration_ns(g.batch.n_replies + g.n_shipping, 0) >= gap for g in writing)
            write_memory = bool(self.engine.handoff)  # E4e: a read prompt waits for writing memory
            write_pressure = write_gap or write_memory
            if read_wait and not write_pressure and len(writing) > 1:
                self.target, self.why = len(reading) + 1, "reading_wait"
            elif write_pressure and not read_wait and len(reading) > 1:
                self.target, self.why = len(reading) - 1, "writing_gap" if write_gap else "writing_memory"
            else:
                continue
            self.last_decision_ns = now
            self._rebalance(now)

    def _rebalance(self, now: int) -> None:
        """With no move under way, start the moves that bring the reading side to `target`."""
        if self.moving:
            return
        engine = self.engine
        n_moves = self.target - len(engine.reading.gpus)
        for _ in range(n_moves):
            # the writing instance with the fewest replies (D3's count), ties lowest number
            g = min(engine.writing.gpus, key=lambda g: (g.batch.n_replies + g.n_shipping + g.n_local, g.number))
            self._start(g, "writes", "reads", now)
        for _ in range(-n_moves):
            g = min(engine.reading.gpus, key=lambda g: (g.queue.queued_tokens, g.number))  # least queued (D1)
            self._start(g, "reads", "writes", now)

    # -- one move ---------------------------------------------------------------------------------
    def _start(self, g: Gpu, from_role: str, to_role: str, now: int) -> None:
        (self.engine.reading if from_role == "reads" else self.engine.writing).leave(g)
        move = Switch(g.number, from_role, to_role, self.why, now)
        self.moving[g.number] = move
        self.switches.append(move)
        g.drain(True)
        if g.n_started == n_recorded(g.log):  # not in an iteration
            self.drained(g, now)

    def drained(self, g: Gpu, now: int) -> None:
        """Called when a draining instance may be empty (at its iteration ends): if it is, warm up."""
        if g.queue.waiting or g.batch.n_replies or g.n_shipping:
            return
        g.drain(False)
        self.moving[g.number].drained_at_ns = now
        Slot(self.engine.env, self.switch_ns, PHASE_WARM).callbacks.append(lambda _: self._serve(g))

    def _serve(self, g: Gpu) -> None:
        """Warm-up over: `g` joins its new side as a never-assigned GPU (D2)."""
        engine, now = self.engine, self.engine.env.now
        move = self.moving.pop(g.number)
        move.serving_at_ns = now
        reading = move.to_role == "reads"
        g.serve(reading, engine.cost if reading else self.writing_cost, self.chunk if reading or engine.local_max else None)
        (engine.reading if reading else engine.writing).join(g)
        self._rebalance(now)

    def records(self) -> dict[str, list[int | str]]:
        """Every move, in the order it was asked for (switches.csv)."""
        return {f: [getattr(s, f) for s in self.switches] for f in SWITCH_FIELDS}
