"""The other seeds' runs the page's player can switch to, collected seed by seed as the run
command streams them (cli/run_tables.py): of each seed only the requests in progress during the
player's default window (SEED_SPAN_S where it opens) and the iterations there, so a seed adds
~85 KB to the page for the default scenario, not the ~1 MB of the whole span the page's own
seed has; and at most MAX_SEED_BYTES of them in all, the seeds past it left out (the page says
which). Deterministic: the same seeds give the same runs and the same ones left out.
"""

from __future__ import annotations

import json

from ..units import NS_PER_S
from .data import arrangement_rows, default_span_s, player_run

#: The player's default window (s), as player.js opens it: a third of the way into the measured window.
PLAYER_WINDOW_S = 4.0
#: How long a stretch of another seed's run the page holds (s): the player's default window.
SEED_SPAN_S = PLAYER_WINDOW_S
#: Most bytes of other seeds' runs one page holds (the default scenario's 30 seeds take ~2.5 MB).
MAX_SEED_BYTES = 3_000_000


def seed_span_ns(result) -> tuple[int, int]:
    """The span kept of a seed's run: from where the player's window opens (player.js `init`),
    SEED_SPAN_S long, inside the page's span."""
    lo, hi = default_span_s(result)
    m0, m1 = result.measured_span_s
    length = min(PLAYER_WINDOW_S, hi - lo)
    start = max(lo, min(hi - length, m0 + (m1 - m0) / 3))
    return round(start * NS_PER_S), round(min(hi, start + SEED_SPAN_S) * NS_PER_S)


class SeedRuns:
    """Collects `player_run`s seed by seed: `add(one, seed)` for each arrangement's run of a seed,
    `done(seed)` when the seed is over; `for_page(shown)` gives the runs of every seed but the
    one shown (which the page holds whole) and a note naming those left out."""

    def __init__(self, limit: int = MAX_SEED_BYTES):
        self.limit = limit
        self.runs: dict[int, dict] = {}
        self.bytes = 0  # of the runs kept, as the page's JSON
        self.left_out: list[int] = []
        self._parts: dict[str, dict] = {}
        self._span: tuple[int, int] | None = None
        self._full = False  # a seed's run went past the limit: no more are kept

    def add(self, one, seed: int) -> None:
        if self._full:
            return
        if self._span is None:
            self._span = seed_span_ns(one)
        for name in one.records:
            self._parts[name] = arrangement_rows(one, name, *self._span)

    def done(self, seed: int) -> None:
        run = {"seed": int(seed), **player_run(self._parts, *self._span)} if self._parts and self._span else None
        size = len(json.dumps(run, separators=(",", ":"))) if run is not None else 0
        if run is not None and self.bytes + size <= self.limit:
            self.runs[int(seed)] = run
            self.bytes += size
        else:
            self._full = True
            self.left_out.append(int(seed))
        self._parts, self._span = {}, None

    def for_page(self, shown: int) -> tuple[list[dict], str]:
        """The runs of every seed kept but `shown`, and a note naming the seeds left out ("" if none)."""
        left = sorted(s for s in self.left_out if s != shown)
        note = ""
        if left:
            note = (f"{len(left)} seed{'s' * (len(left) > 1)} ({_seeds_text(left)}) not embedded: a page holds at most "
                    f"{self.limit / 1e6:g} MB of other seeds' runs")
        return [r for s, r in sorted(self.runs.items()) if s != shown], note


def _seeds_text(seeds: list[int]) -> str:
    return f"{seeds[0]}" if len(seeds) == 1 else f"{seeds[0]} to {seeds[-1]}" if seeds[-1] - seeds[0] == len(seeds) - 1 \
        else ", ".join(map(str, seeds))
