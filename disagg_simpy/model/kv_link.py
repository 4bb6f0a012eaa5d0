"""KV-cache shipping from a reading GPU to a writing GPU (M4, D9, E5).

A ship takes `kv_ship_ms_per_token` per prompt token and occupies no GPU. Its writing GPU is
chosen (and, under E4, its memory reserved) when the ship is requested (D3, E4e), so the reply
counts against that GPU while it waits and ships; it joins the GPU's next iteration when the
ship ends (D5 step 2), which also frees its reading GPU's reservation (E4b).

E5: with `kv_link: independent` (the explainer's rules) ships never wait. Otherwise each link (one
per reading GPU, one per writing GPU, or one in all) carries one ship at a time; a ship that
cannot start waits in its link's FIFO queue and starts at the instant the ship before it ends.
A link is a busy flag and a deque, not a SimPy `Resource`: a Resource grants the next request
through events at SimPy's own priorities, outside D5's order of an instant, and would add two
events per ship; here the next ship starts inside the ending ship's own step-2 event.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from functools import partial

from .gpu import Gpu
from .phases import PHASE_ARRIVE, Environment, Slot
from .request import Request


class Link:
    """One link of E5: whether a ship is on it, and the ships waiting, in request order."""

    __slots__ = ("busy", "ships")

    def __init__(self) -> None:
        self.busy = False
        self.ships: deque[Request] = deque()


class KvLink:
    """Starts and ends ships. The ends of the ships under way to a writing GPU are its heap
    `Gpu.ships_due`: it can tell whether one lands this instant (`Engine.more_may_arrive_now`),
    and its repeats end by the first (`Gpu.steady_iterations`)."""

    def __init__(self, env: Environment, ship_ns: Callable[[int], int], gpus: Sequence[Gpu],
                 mode: str = "independent", kv: bool = False):
        self.env = env
        self.ship_ns = ship_ns  # prompt tokens -> ship time (M4, D10)
        self.gpus = gpus
        self.kv = kv  # E4: a ship end frees the reading GPU's reservation
        self.key = {"independent": None, "shared": lambda r: 0,
                    "per_reading_gpu": lambda r: r.reading_gpu, "per_writing_gpu": lambda r: r.writing_gpu}[mode]
        self.links: dict[int, Link] = {}

    def start_ship(self, request: Request, writer: Gpu, now: int) -> None:
        """The reply's writing GPU `writer` is chosen now (D3, E4e): count it there and start its ship, or queue it for
        its link (E5)."""
        if self.key is None:  # (the explainer's rules: the ship leaves now, one call to each of the request and GPU)
            request.hand_over(writer.number, now, now)
            self._start(request, writer, now, 1)
            return
        request.hand_over(writer.number, now)
        writer.ship_coming(1)
        link = self.links.get(k := self.key(request))
        if link is None:
            link = self.links[k] = Link()
        if link.busy:
            link.ships.append(request)
            return
        link.busy = True
        request.ship_starts(now)
        self._start(request, writer, now, 0)

    def _start(self, request: Request, writer: Gpu, now: int, counted: int) -> None:
        """The ship leaves now (counted against `writer`, unless `counted` says it is now); it ends its ship time later,
        in D5 step 2 (one timeout)."""
        end = now + self.ship_ns(request.n_prompt_tokens)
        writer.ship_due(end, counted)  # (its repeats end by it: `Gpu.steady_iterations`)
        Slot(self.env, end - now, PHASE_ARRIVE + request.request_id).callbacks.append(partial(self.ended, request))

    def ended(self, request: Request, _event: object) -> None:
        """The ship ends: the reply joins its writing GPU (D5 step 2)."""
        now = self.env.now
        if self.key is not None:
            link = self.links[self.key(request)]
            if link.ships:
                (waited := link.ships.popleft()).ship_starts(now)
                self._start(waited, self.gpus[waited.writing_gpu], now, 0)
            else:
                link.busy = False
        if self.kv:
            reader = self.gpus[request.reading_gpu]
            reader.free(request.n_prompt_tokens if reader.paged is None else reader.paged.held(request))  # E4b (E9: blocks)
        request.joins(now)
        self.gpus[request.writing_gpu].add_reply(request, now, True)  # (its ship, the first here, counted off there)
