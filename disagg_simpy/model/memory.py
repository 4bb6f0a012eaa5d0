"""E4: a GPU's KV memory, the memory part of its state (docs/architecture.md, "Owned parts").

KV memory is a plain counter per GPU, not a SimPy `Container`: a reservation is taken whole by the
iteration that starts a prompt's reading (or by the handoff, E4e), only if it fits at that moment,
and the first prompt that does not fit blocks those behind it. That is a check at a known point of
the instant (D5), not a process waiting in a queue; a Container's get/put events would run at
SimPy's own priorities and could not keep D5's order. Only this module writes a `Memory`: the
other modules call its methods (E9's blocks are whole numbers of tokens here too)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .request import Request


class Memory:
    """Tokens of KV cache a GPU holds (`used`), at most `capacity` (None: no limit), and the most
    it held at any moment (`peak`). A prompt reserves n_prompt (+ n_reply if `reserve_reply`)."""

    __slots__ = ("capacity", "reserve_reply", "used", "peak")

    def __init__(self, capacity: int | None, reserve_reply: bool):
        self.capacity = capacity
        self.reserve_reply = reserve_reply
        self.used = 0
        self.peak = 0

    def need(self, request: Request) -> int:
        """Tokens a prompt read here reserves (E4a, b, E6)."""
        return request.n_prompt_tokens + (request.n_reply_words if self.reserve_reply else 0)

    def hold(self, tokens: int) -> None:
        """Hold `tokens` more (a reservation, E9's blocks)."""
        used = self.used = self.used + tokens
        if used > self.peak:
            self.peak = used

    def give_back(self, tokens: int) -> None:
        """Hold `tokens` fewer (a reply gone, a prompt shipped, a preemption)."""
        self.used -= tokens

    def restore(self, used: int, peak: int) -> None:
        """Back to what it held before a start that never happened (a run stopped first: `Repeat.flush`)."""
        self.used, self.peak = used, peak

    def set_reserve_reply(self, on: bool) -> None:
        """E12: a GPU that changes role reserves its replies' memory as its new role does."""
        self.reserve_reply = on
