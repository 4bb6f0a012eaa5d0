"""KV-cache shipping from a reading GPU to a writing GPU (M4, D9).

A ship takes `kv_ship_ms_per_token` per prompt token, occupies no GPU and never waits for
another ship. Its writing GPU is chosen when the prompt's last token is read (D3), so the reply
counts against that GPU while it ships; it joins the GPU's next iteration when the ship ends.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import simpy

from .gpu import Gpu
from .phases import PHASE_ARRIVE, Slot
from .request import Request


class KvLink:
    """Ships in flight, by the time they end (so a GPU can tell if one lands this instant)."""

    def __init__(self, env: simpy.Environment, ship_ns: Callable[[int], int], gpus: Sequence[Gpu]):
        self.env = env
        self.ship_ns = ship_ns  # prompt tokens -> ship time (M4, D10)
        self.gpus = gpus
        self.n_ending_at: dict[int, int] = {}

    def start_ship(self, request: Request, writer: Gpu, now: int) -> None:
        """Reserve `writer` for `request`, note when its ship will end, start the ship."""
        end = now + self.ship_ns(request.n_prompt_tokens)
        writer.n_shipping += 1
        self.n_ending_at[end] = self.n_ending_at.get(end, 0) + 1
        request.ship = self.env.process(self.ship(request, end))

    def ship(self, request: Request, end: int):
        """The KV-transfer process: wait out the ship, then join the writing GPU (D5 step 2)."""
        env = self.env
        yield Slot(env, end - env.now, PHASE_ARRIVE + request.request_id)
        left = self.n_ending_at[end] - 1
        if left:
            self.n_ending_at[end] = left
        else:
            del self.n_ending_at[end]
        writer = self.gpus[request.writing_gpu]
        writer.n_shipping -= 1
        writer.add_reply(request, env.now)
