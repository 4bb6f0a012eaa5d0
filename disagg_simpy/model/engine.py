"""One arrangement, one request stream: the SimPy model (M1-M7, D1-D10).

Processes: one per GPU (`gpu.Gpu.run`), a source that starts one process per request at its
arrival, and a KV-transfer process per ship (`kv_link`). The clock counts whole nanoseconds
(D10). The run stops when every measured reply has its last word, or at the safety cap (D6).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

import simpy

from ..scenario.schema import Colocated, Scenario
from ..workload.stream import Requests
from .gpu import Gpu
from .kv_link import KvLink
from .phases import PHASE_ARRIVE, PHASE_STOP, Slot, events_scheduled
from .records import ArrangementRecords
from .request import Request
from .router import Side


def exact_ns(ms: float) -> Fraction:
    """A cost in ms, taken as the decimal the scenario wrote (its shortest repr), in exact ns."""
    return Fraction(Decimal(repr(float(ms)))) * 1_000_000


@dataclass(frozen=True)
class CostNs:
    """M1 and M4 in exact nanoseconds: whole numbers over one common denominator, so each
    iteration's cost and each ship time rounds to the nearest ns, halves up, with no float error
    (D10). With the usual costs (whole ns) the denominator is 1."""

    iteration: int
    per_reply: int
    per_prompt_token: int
    kv_ship_per_token: int
    denominator: int = 1

    @classmethod
    def from_ms(cls, iteration_ms: float, per_reply_ms: float, per_prompt_token_ms: float,
                kv_ship_ms_per_token: float) -> CostNs:
        parts = [exact_ns(x) for x in (iteration_ms, per_reply_ms, per_prompt_token_ms, kv_ship_ms_per_token)]
        den = math.lcm(*(p.denominator for p in parts))
        return cls(*(int(p * den) for p in parts), denominator=den)

    @classmethod
    def from_scenario(cls, scenario: Scenario) -> CostNs:
        c = scenario.cost
        return cls.from_ms(c.iteration_ms, c.per_reply_ms, c.per_prompt_token_ms, c.kv_ship_ms_per_token)

    def iteration_ns(self, n_replies: int, n_tokens: int) -> int:
        total = self.iteration + self.per_reply * n_replies + self.per_prompt_token * n_tokens
        return (2 * total + self.denominator) // (2 * self.denominator)  # halves up

    def ship_ns(self, n_tokens: int) -> int:
        return (2 * self.kv_ship_per_token * n_tokens + self.denominator) // (2 * self.denominator)


class Engine:
    """Builds the GPUs of one arrangement and runs the request stream through them."""

    def __init__(self, scenario: Scenario, arrangement, requests: Requests):
        self.cost = CostNs.from_scenario(scenario)
        self.arrangement = arrangement
        self.requests = requests
        self.env = simpy.Environment()
        self.split = not isinstance(arrangement, Colocated)
        n_reading = arrangement.n_reading
        chunk = arrangement.chunk_tokens
        if self.split:
            self.gpus = [Gpu(i, True, False, chunk) for i in range(n_reading)] + [
                Gpu(n_reading + i, False, True, None) for i in range(arrangement.writing_gpus)
            ]
        else:
            self.gpus = [Gpu(i, True, True, chunk) for i in range(arrangement.gpus)]
        self.reading = Side([g for g in self.gpus if g.reads])
        self.writing = Side([g for g in self.gpus if g.writes and not g.reads])
        self.kv_link = KvLink(self.env, self.cost.ship_ns, self.gpus)
        self.next_arrival_ns = -1
        self.arrived: list[Request] = []
        self.n_measured_left = int(requests.measured.sum())
        self.stopped_at_ns: int | None = None
        self.n_events = 0

    # -- processes -----------------------------------------------------------------------
    def source(self):
        """Starts each request's process at its arrival, in phase (2) of its instant (D5)."""
        env = self.env
        r = self.requests
        times = r.arrived_at_ns.tolist()
        prompts = r.n_prompt_tokens.tolist()
        words = r.n_reply_words.tolist()
        measured = r.measured.tolist()
        for i, at in enumerate(times):
            self.next_arrival_ns = at
            yield Slot(env, at - env.now, PHASE_ARRIVE + i)
            request = Request(i, at, prompts[i], words[i], measured[i])
            self.arrived.append(request)
            env.process(self.request_process(request))
        self.next_arrival_ns = -1

    def request_process(self, request: Request):
        """Arrive, be routed, wait for the prompt to be read, wait for the KV ship when split,
        wait for the last word.

        The hand-overs themselves happen at iteration ends, in the order of the instant (D5):
        the reading GPU gives word 1, keeps the reply or picks a writing GPU and starts the
        ship (`prompts_read`); the writing GPU's iterations write the rest.
        """
        env = self.env
        request.read = env.event()
        request.done = env.event()
        reader = self.reading.least_queued()
        request.reading_gpu = reader.number
        reader.add_prompt(request)
        yield request.read
        request.read = None
        if request.ship is not None:
            yield request.ship
            request.ship = None
        if request.done is not None:
            yield request.done

    # -- called by GPUs at the end of an iteration (D5 step 1) ----------------------------
    def prompts_read(self, gpu: Gpu, requests: list[Request], now: int) -> None:
        """Word 1 for prompts whose last token was just read; their replies go to a writer."""
        for r in requests:
            r.first_word_at_ns = now
            if r.n_reply_words == 1:
                self._finished(r, now)
            elif self.split:
                writer = self.writing.fewest_replies()
                r.writing_gpu = writer.number
                self.kv_link.start_ship(r, writer, now)
            else:
                r.writing_gpu = gpu.number
                gpu.add_reply(r, now)
            r.read.succeed()

    def replies_finished(self, requests: list[Request], now: int) -> None:
        for r in requests:
            self._finished(r, now)

    def _finished(self, r: Request, now: int) -> None:
        r.finished_at_ns = now
        r.done.succeed()
        r.done = None  # its process still holds it; finished requests keep no event
        if r.measured:
            self.n_measured_left -= 1
            if self.n_measured_left == 0:
                Slot(self.env, 0, PHASE_STOP).callbacks.append(simpy.core.StopSimulation.callback)

    def more_may_arrive_now(self, now: int) -> bool:
        """Whether an arrival or a ship end is due later in this instant (D5 step 2)."""
        return self.next_arrival_ns == now or now in self.kv_link.n_ending_at

    # -- the run ---------------------------------------------------------------------------
    def run(self) -> ArrangementRecords:
        env = self.env
        for gpu in self.gpus:
            env.process(gpu.run(env, self))
        env.process(self.source())
        if self.n_measured_left > 0:
            env.run(until=self.requests.cap_ns + 1)
        self.stopped_at_ns = min(env.now, self.requests.cap_ns)
        self.n_events = events_scheduled(env)
        return ArrangementRecords.collect(
            name=self.arrangement.name,
            kind=self.arrangement.kind,
            gpus=self.gpus,
            arrived=self.arrived,
            stopped_at_ns=self.stopped_at_ns,
            cap_ns=self.requests.cap_ns,
            n_events=self.n_events,
        )
