"""One arrangement, one request stream: the SimPy model (M1-M7, D1-D10).

Processes: one per GPU (`gpu.Gpu.run`); each arrival is one timeout whose callback routes the
request and schedules the next arrival (`_source`), each ship one timeout (`kv_link`). Requests
are state, not processes: they wait on nothing. The clock counts whole nanoseconds (D10). The
run stops when every measured reply has its last word, or at the safety cap (D6).

The options (docs/rules.md E1-E8, E10) live here as state the explainer's rules leave empty: per-side costs
(E1, each GPU's `cost`), KV memory (E4, each GPU's counter, and the handoff queue of a split),
the links (E5, `kv_link`) and local prompts (E6, routed to a writing GPU on arrival).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypedDict

import numpy as np
import simpy

from ..scenario.arrangements import Arrangement
from ..scenario.paging import paged_settings
from ..scenario.prefixes import PREFIX_LOAD_CAP_TOKENS
from ..scenario.schema import Scenario
from ..workload.speculative import IterationCounts
from ..workload.stream import Requests
from .costs import ContextSteps, CostNs, exact_ns
from .gpu import Gpu
from .kv_link import KvLink
from .paged_away import stretch_log
from .paged_kv import PagedKv, blocks_for, prepare
from .phases import PHASE_ARRIVE, PHASE_STOP, Environment, Slot, again, events_scheduled
from .prefix_cache import CacheBlockIds, PrefixCache
from .records import ArrangementRecords
from .request import Request
from .roles import RoleController
from .router import Side

__all__ = ["CostNs", "Engine", "exact_ns"]


class BatchLimits(TypedDict):
    """E8's and E10's keys a GPU is made with."""

    max_replies: int | None
    max_tokens: int | None
    max_requests: int | None  # E8 per side (R89): prompts a reading instance reads per iteration
    mixed: bool


@dataclass(frozen=True)
class GiveUp:
    """Stop a run once `max_late` measured replies are certainly late, so a probe whose verdict
    is already known ("below target") need not run to its end. A reply counts when its first
    word comes later than `first_word_ns` after arrival, or (first word in time) when it
    finishes with a mean gap over `mean_gap_ns`; both limits include the 1 ns slack (D8).
    Freezes and replies still waiting are not counted, so the count never exceeds the truth."""

    first_word_ns: int
    mean_gap_ns: int
    max_late: int


class Engine:
    """Builds the GPUs of one arrangement and runs the request stream through them. With
    `give_up`, the run stops early once enough measured replies are late (`gave_up`)."""

    def __init__(self, scenario: Scenario, arrangement: Arrangement, requests: Requests, give_up: GiveUp | None = None):
        reading_cost, writing_cost = arrangement.side_costs(scenario.cost)
        ship_ms = arrangement.kv_ship_ms(scenario.cost)
        spec = self.speculative = scenario.speculative  # E16: its verification is a cost term of writing iterations
        self.cost = CostNs.from_cost(reading_cost, ship_ms, spec)
        writing = CostNs.from_cost(writing_cost, ship_ms, spec)
        self.arrangement = arrangement
        self.requests = requests
        self.env = Environment()
        self.split = arrangement.is_split
        chunk = arrangement.chunk_tokens
        reading_capacity, writing_capacity = arrangement.kv_capacities  # E4, per instance (a side's own with TP)
        kv_on = arrangement.kv_limited
        self.local_max = arrangement.local_prompt_limit  # E6
        mixed = getattr(arrangement, "mixed_iterations", None) is not False  # E10 (colocated only)
        self.batch_limits: dict[str, BatchLimits] = {}  # E8 by role, per side on a split (R89)
        for role in ("both", "reads", "writes"):
            replies, tokens, prompts = arrangement.batch_limits(role)
            self.batch_limits[role] = {"max_replies": replies, "max_tokens": tokens, "max_requests": prompts, "mixed": mixed}
        # one model GPU per instance: with TP an instance's GPUs serve as one (its own costs)
        self.paged = paged_settings(arrangement)  # E9: (block tokens, preemption, swap ms per token, max preemptions)
        self.gpus = [self._gpu(i, role, chunk, writing, writing_capacity if role == "writes" else reading_capacity)
                     for i, role in enumerate(arrangement.roles)]
        counts, steps = None, None
        if spec is not None:  # E16: each reply's writing iterations, from its draws (workload/speculative.py)
            assert requests.draft_keys is not None  # (drawn with speculative: workload.stream)
            counts = IterationCounts(requests.draft_keys, requests.n_reply_words, spec.tokens, spec.acceptance)
            steps = (requests.draft_keys, spec.tokens, spec.acceptance)  # (each GPU's own `ContextSteps`, used with E3)
        if self.paged is not None:
            block, preemption, swap_ms, max_preemptions = self.paged
            swap = CostNs.from_ms(0, 0, 0, swap_ms).ship_ns
            for g in self.gpus:  # (E16: the draws' plans, R103-R107)
                g.use_paging(PagedKv(g, block, preemption, swap, max_preemptions, counts))
        self.reading: Side[Gpu] = Side([g for g in self.gpus if g.reads])
        self.writing: Side[Gpu] = Side([g for g in self.gpus if g.writes and not g.reads])
        self.chunk_readers = [g for g in self.reading.gpus if g.queue.chunk_tokens is not None]  # repeats to sync (D1)
        link = arrangement.kv_link_mode
        self.kv_link = KvLink(self.env, self.cost.ship_ns, self.gpus, link, kv=kv_on)
        # E4e: requests read on a split whose writing GPU has no room yet, in D5 step 1 order
        self.handoff: deque[Request] | None = deque() if self.split and kv_on else None
        self._prefix_caches(scenario, requests)
        for g in self.gpus:
            # a handoff may reserve memory on (or ship to) a GPU that already ended its iteration
            # at this instant, and a ship started by a link at a ship end may be over at once (a
            # ship time that rounds to 0 ns): only D5 step 3 sees such an instant settled (on a
            # colocated arrangement only an arrival reaches a GPU from outside: `more_may_arrive_now`)
            g.set_up(self.handoff is not None, (kv_on and self.split) or link != "independent",
                     self.prefix_caches.get(g.number))
            if steps is not None:  # E16's draws (model/batch.py)
                g.batch.speculate(counts, ContextSteps(*steps))
        # (D5 step 2's test at an iteration end, chosen once: colocated, only an arrival reaches a GPU)
        self.more_may_arrive_now: Callable[[int, Gpu], bool] = self._arrival_now if not self.split else self._ship_or_arrival_now
        self.next_arrival_ns = -1
        self.arrived: list[Request] = []
        self.n_measured_left = int(requests.measured.sum())
        self.stopped_at_ns: int | None = None
        self.n_events = 0
        self.give_up = give_up
        self.n_late_first_word = 0  # counted only with give_up
        self.n_late_mean_gap = 0
        self.gave_up = False
        roles = getattr(arrangement, "role_changes", None)  # E12
        self.roles = RoleController(self, roles, writing, chunk) if roles is not None else None

    def _speculative_records(self) -> tuple[int, float, np.ndarray] | None:
        """E16 for the records: (draft tokens, acceptance, the keys of the requests that arrived)."""
        spec, keys = self.speculative, self.requests.draft_keys
        return None if spec is None or keys is None else (spec.tokens, spec.acceptance, keys[:len(self.arrived)])

    def _gpu(self, number: int, role: str, chunk: int | None, writing: CostNs, capacity: int | None) -> Gpu:
        """A GPU of `role`: 'both' reads and writes with the reading figures (one cost, E1);
        'reads' reserves no reply memory (E4); 'writes' reads only local prompts (E6)."""
        limits = self.batch_limits[role]
        if role == "both":
            return Gpu(number, True, True, chunk, self.cost, capacity, **limits)
        if role == "reads":
            return Gpu(number, True, False, chunk, self.cost, capacity, reserve_reply=False, **limits)
        # (a writing GPU reads local prompts, E6, and replies read again, E9, as E6 says)
        return Gpu(number, False, True, chunk if self.local_max or self.paged else None, writing, capacity, **limits)

    def _prefix_caches(self, scenario: Scenario, requests: Requests) -> None:
        """E13: a prefix cache on every instance that reads prompts (not a split's writing
        instances), each request's cache block ids, and the router's settings."""
        self.router = scenario.router
        self.load_cap = scenario.router_load_cap_tokens or PREFIX_LOAD_CAP_TOKENS
        self.router_draws = requests.router_draws.tolist() if requests.router_draws is not None else None
        self.blocks: CacheBlockIds | None = None
        self.prefix_caches: dict[int, PrefixCache] = {}  # GPU number -> its cache (`Gpu.set_up`)
        capacity = scenario.prefix_cache_tokens
        self.prefix_on = capacity is not None
        if capacity is None:
            return
        block = scenario.prefix_block_tokens
        for g in self.reading.gpus:
            self.prefix_caches[g.number] = PrefixCache(capacity, block)
        b = requests.blocks
        if b is not None:
            self.blocks = CacheBlockIds(b.ids, b.starts, b.unit, block)

    def _route(self, request: Request) -> Gpu:
        """The reading instance of a prompt, by the scenario's router (M3, D1, D2; E13)."""
        side, router = self.reading, self.router
        if router == "least_loaded":
            return side.least_queued()
        if router == "round_robin":
            return side.round_robin()
        if router == "power_of_two":
            assert self.router_draws is not None  # (drawn for power_of_two: workload.stream)
            return side.power_of_two(self.router_draws[request.request_id])
        hits = [g.prefix.hit_blocks(request.blocks, request.n_prompt_tokens)  # type: ignore[union-attr]  # (prefix_aware: caches on)
                for g in side.gpus]
        return side.prefix_aware(hits, self.load_cap)

    # -- processes -----------------------------------------------------------------------
    def _source(self) -> None:
        """Each request arrives, in phase (2) of its instant (D5), and is routed (`arrive`). The arrivals are a chain
        of Slots, each scheduling the next once it is routed: a callback, not a process (no generator to resume)."""
        env, r = self.env, self.requests
        times = r.arrived_at_ns.tolist() + [-1]  # (-1: no later arrival)
        prompts = r.n_prompt_tokens.tolist()
        words = r.n_reply_words.tolist()
        measured = r.measured.tolist()
        paged, blocks, arrived, arrive = self.paged is not None, self.blocks, self.arrived, self.arrive

        def arrival(slot: Slot) -> None:
            i = len(arrived)
            at = times[i]
            request = (Request(i, at, prompts[i], words[i], measured[i]) if blocks is None else
                       Request(i, at, prompts[i], words[i], measured[i], blocks.of(i)))  # (E13: its prompt's block ids)
            if paged:
                prepare(request)
            arrived.append(request)
            self.next_arrival_ns = later = times[i + 1]  # (only later ones: D5 step 2)
            arrive(request, at)
            if later >= 0:
                again(slot, later - at, PHASE_ARRIVE + i + 1).callbacks.append(arrival)

        if times[0] >= 0:
            self.next_arrival_ns = times[0]
            Slot(env, times[0] - env.now, PHASE_ARRIVE).callbacks.append(arrival)

    def arrive(self, request: Request, now: int) -> None:
        """Route a request that arrives now to the GPU that reads its prompt (M3, D1, E6).

        A request is not a process, and waits on no event: what happens to it next happens at
        iteration ends, in the order of the instant (D5): the reading GPU gives word 1, keeps
        the reply or picks a writing GPU and starts the ship (`prompts_read`); the writing GPU's
        iterations write the rest and the last one finishes it (`replies_finished`)."""
        if self.local_max is not None and request.n_prompt_tokens <= self.local_max:
            reader = self.writing.fewest_replies()  # E6: read where it will be written
            reader.local_routed(1)
        else:
            if self.chunk_readers:  # queued tokens as they stand now (D1), mid-repeat too
                for g in self.chunk_readers:
                    if g.repeat is not None:
                        g.repeat.sync(now)
            reader = self.reading.least_queued() if self.router == "least_loaded" else self._route(request)
        request.routed(reader.number)
        reader.add_prompt(request)

    # -- called by GPUs at the end of an iteration (D5 step 1) ----------------------------
    def prompts_read(self, gpu: Gpu, requests: list[Request], now: int) -> None:
        """Word 1 for prompts whose last token was just read; their replies go to a writer. First
        (E13) their full blocks enter the reading GPU's prefix cache. A re-read (E9) gives its
        reply's next word instead (model/paged_kv.py)."""
        if gpu.paged is not None:
            requests = gpu.paged.reread(requests, gpu.n_started - 1, now, self)
        if gpu.prefix is not None:
            gpu.prefix.reads_ended(requests)
        ships = self.split and gpu.reads
        local = not gpu.reads  # E6: read on its writing GPU
        for r in requests:
            if self.give_up is not None and r.measured and now - r.arrived_at_ns > self.give_up.first_word_ns:
                self.n_late_first_word += 1
                self._check_give_up()
            if local:
                gpu.local_routed(-1)
            if r.n_reply_words == 1:
                r.first_word(now)
                self._finished(r, now)
            elif ships:
                r.first_word(now)
                if self.handoff is None:  # D3 (the explainer's rules): chosen now, inline for speed
                    self.kv_link.start_ship(r, self.writing.fewest_replies(), now)
                else:
                    self.handoff.append(r)  # served right after this iteration end (E4e)
            else:
                r.stays(gpu.number, now)  # (word 1, and the reply joins here)
                gpu.add_reply(r, now)

    def iteration_ended(self, now: int) -> None:
        """E4e: serve the handoff queue from its head; a head with no room stops it.

        E9: a writing GPU mid-repeat first takes the blocks due at its starts by now (`sync_kv`),
        but only once a writing GPU's free memory before them would hold the head: they only take
        memory (`BlockSchedule.grow`), so a head that does not fit in that memory does not fit after
        them, and the blocks are taken later as they would be (the repeat's next sync, cut or end).
        Under load the head waits through many iteration ends: this is most calls."""
        queue = self.handoff
        synced = False
        while queue:
            r = queue[0]
            if self.paged is None:
                need = reserve = r.n_prompt_tokens + r.n_reply_words
            else:  # E9: the prompt's blocks plus one free; its blocks reserved
                block = self.paged[0]
                reserve = blocks_for(r.n_prompt_tokens, block) * block
                need = reserve + block
                if not synced:
                    for g in self.writing.gpus:  # (a writing GPU with room before the due blocks: look closer)
                        if g.paged.limit - g.memory.used >= need and not g.paged.n_away:
                            break
                    else:
                        return
                    for g in self.writing.gpus:
                        if g.repeat is not None:
                            g.repeat.sync_kv(now)
                    synced = True
            writer = self.writing.fewest_replies(need, self.paged is not None)
            if writer is None:
                return
            queue.popleft()
            writer.reserve(reserve)
            if self.paged is not None:
                r.holds_blocks(reserve // self.paged[0])
            self.kv_link.start_ship(r, writer, now)  # (D3, E5)

    def requests_dropped(self, requests: list[Request], now: int) -> None:
        """E9: requests preempted more than `max_preemptions` times leave unfinished (not on time)."""
        for r in requests:
            if r.measured:
                self.n_measured_left -= 1
                if self.n_measured_left == 0:
                    Slot(self.env, 0, PHASE_STOP).callbacks.append(simpy.core.StopSimulation.callback)

    def replies_finished(self, requests: list[Request], now: int) -> None:
        for r in requests:
            self._finished(r, now)

    def _finished(self, r: Request, now: int) -> None:
        r.finish(now)
        g = self.give_up
        if (g is not None and r.measured and r.first_word_at_ns - r.arrived_at_ns <= g.first_word_ns
                and now - r.first_word_at_ns > (r.n_reply_words - 1) * g.mean_gap_ns):
            self.n_late_mean_gap += 1
            self._check_give_up()
        if r.measured:
            self.n_measured_left -= 1
            if self.n_measured_left == 0:
                Slot(self.env, 0, PHASE_STOP).callbacks.append(simpy.core.StopSimulation.callback)

    def _check_give_up(self) -> None:
        assert self.give_up is not None  # (counted only with give_up)
        if not self.gave_up and self.n_late_first_word + self.n_late_mean_gap >= self.give_up.max_late:
            self.gave_up = True
            Slot(self.env, 0, PHASE_STOP).callbacks.append(simpy.core.StopSimulation.callback)

    def gpu_drained(self, gpu: Gpu, now: int) -> None:
        """E12: a GPU leaving its side ended an iteration."""
        self.roles.drained(gpu, now)  # type: ignore[union-attr]  # (draining only with roles)

    def _ship_or_arrival_now(self, now: int, gpu: Gpu) -> bool:
        """`more_may_arrive_now` on a split: whether something that may change `gpu`'s next iteration is due
        later in this instant (D5 step 2), asked at its iteration end (step 1): an arrival (routed by every reading GPU's
        queue, D1), or a ship to `gpu` that ends now. A ship end changes nothing but its writing
        GPU (the reply joins it), unless E4 frees its reading GPU's memory or a link (E5) starts
        the next ship: their GPUs always put their start off to step 3 (`Gpu.always_defer`)."""
        return self.next_arrival_ns == now or (gpu.ships_due[0] == now if gpu.ships_due else False)

    def _arrival_now(self, now: int, gpu: Gpu) -> bool:
        """`more_may_arrive_now` on a colocated arrangement (no ships): an arrival later in this instant."""
        return self.next_arrival_ns == now

    def quiet_until(self, at: int) -> bool:
        """Whether nothing can reach a GPU after this moment of step 2 up to `at` included: no
        arrival, and no ships at all (colocated)."""
        return not self.split and not (0 <= self.next_arrival_ns <= at)

    # -- the run ---------------------------------------------------------------------------
    def run(self) -> ArrangementRecords:
        env = self.env
        for gpu in self.gpus:
            env.process(gpu.run(env, self))
        self._source()
        for process in self.roles.processes() if self.roles else ():
            env.process(process)
        if self.n_measured_left > 0:
            env.run(until=self.requests.cap_ns + 1)
        self.stopped_at_ns = min(env.now, self.requests.cap_ns)
        for gpu in self.gpus:
            if gpu.repeat is not None:  # iterations that ended by the stop, as one by one
                gpu.repeat.flush(self.stopped_at_ns)
        self.n_events = events_scheduled(env)
        return ArrangementRecords.collect(
            name=self.arrangement.name,
            kind=self.arrangement.kind,
            gpus=self.gpus,
            arrived=self.arrived,
            stopped_at_ns=self.stopped_at_ns,
            cap_ns=self.requests.cap_ns,
            n_events=self.n_events,
            kv_capacity_tokens=[g.memory.capacity or 0 for g in self.gpus] if self.arrangement.kv_limited else None,
            speculative=self._speculative_records(),
            kv_link=self.arrangement.kv_link_mode if self.split else None,
            stretch_log=None if self.paged is None else stretch_log(self.arrived),  # E9: replies resumed later
            preemption_logs=None if self.paged is None else [g.paged.preemptions for g in self.gpus],
            cached_tokens=[r.cached_tokens for r in self.arrived] if self.prefix_on else None,
            # E12: roles at the start, and every move
            start_roles=None if self.roles is None else tuple(self.arrangement.roles),
            switches=None if self.roles is None else self.roles.records(),
        )
