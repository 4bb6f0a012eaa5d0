"""Upper bounds on an arrangement's on-time share from the traffic and the costs alone, so that a
plan skips arrangements that cannot reach its top two without changing its answer.

The bound. A measured request on time has its first word within `first_word_s` of arriving, so
by `measure_s + first_word_s`, and its last word within `(words - 1) x mean_gap_ms` after that.
Every prompt token read costs its GPU at least `per_prompt_token_ms` (M1; E2 and E3 only add),
every word after the first at least `per_reply_ms` of the GPU writing it. So the requests on time
fit three budgets: their prompts in the reading GPUs' time up to the last first-word deadline,
their replies in the writing GPUs' time up to the last last-word deadline, and (colocated) both
in all the GPUs' time. At most K of the n measured requests fit, K being how many of the
cheapest fit each budget; K / n bounds the on-time share, seed by seed, exactly.

Every rate at once. A seed's requests are the same at every rate, their arrival times divided
by it (workload/stream.py), so with `warmup_s` 0 the measured requests at rate r are the first
n(r) of one unit-rate stream. Between two rates r1 < r2, the share is at most K(n(r2)) / n(r1);
above the last rate checked, at most (budget / cheapest possible request) / n(last). When the
mean of these bounds over the seeds is below the target on every step from a rate R up to the
highest rate a search may probe, every rate from R up fails: the arrangement's goodput (a rate
that passed) is below R. Without such a bound (a trace, a warm-up, tensor-parallel sides) an
arrangement is always searched.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..scenario.limits import MAX_REQUESTS
from ..scenario.schema import Scenario, SyntheticWorkload

#: the ratio between the rates checked (a looser step loosens the bound, never breaks it)
STEP = 1.05
#: relative margin on times and budgets (float rounding of arrival times, ns rounding of costs)
EPS = 1e-9


@dataclass(frozen=True)
class Budget:
    """One budget: per-request cost weights[kind] (ms per token or word) in `ms` of GPU time."""

    kind: str  # "read", "write" or "both"
    per_token_ms: float
    per_word_ms: float
    ms: float


def budgets(scenario: Scenario, arrangement) -> list[Budget] | None:
    """The arrangement's budgets, or None where no bound is known."""
    if any(getattr(arrangement, k, 1) not in (1, None) for k in ("tp", "reading_tp", "writing_tp")):
        return None
    w, slo = scenario.workload, scenario.slo
    if scenario.prefix_cache_tokens is not None or getattr(w, "sessions", None) is not None:
        return None  # E13: a cached prompt reads less than the bound counts; a session's turns more than the mix
    if not _plain(w) or slo.criterion != "per_request" or slo.first_word_s is None or slo.mean_gap_ms is None:
        return None  # (the bound is of the per-request on-time share, from the first-word and mean-gap limits)
    assert isinstance(w, SyntheticWorkload) and w.measure_s is not None and isinstance(w.reply_words, tuple)
    read_ms = (w.measure_s + slo.first_word_s) * 1e3
    write_ms = read_ms + (w.reply_words[1] - 1) * slo.mean_gap_ms
    reading, writing = arrangement.side_costs(scenario.cost)
    n = arrangement.n_gpus
    if arrangement.kind == "colocated":
        out = [Budget("read", reading.per_prompt_token_ms, 0.0, n * read_ms),
               Budget("both", reading.per_prompt_token_ms, writing.per_reply_ms, n * write_ms)]
    else:
        readers = n if getattr(arrangement, "local_prompt_max_tokens", None) is not None else arrangement.reading_gpus
        out = [Budget("read", reading.per_prompt_token_ms, 0.0, readers * read_ms),
               Budget("write", 0.0, writing.per_reply_ms, arrangement.writing_gpus * write_ms)]
    return [b for b in out if b.per_token_ms > 0 or b.per_word_ms > 0] or None


class Bounds:
    """The unit-rate streams of a plan's seeds, and whether an arrangement fails at every rate
    from some rate up (`fails_from`)."""

    def __init__(self, scenario: Scenario, seeds: tuple[int, ...], target: float):
        self.scenario, self.target = scenario, target / 100.0 - EPS
        w = scenario.workload
        self.ok = False
        self.top = MAX_REQUESTS / scenario.cap_s(None)  # no search probes a higher rate (limits)
        self.streams: list = []
        if _plain(w) and isinstance(w, SyntheticWorkload) and w.warmup_s == 0 and w.measure_s is not None:
            from ..workload.stream import _synthetic

            self.ok, self.measure_s = True, w.measure_s
            unit = w.model_copy(update={"rate_per_s": 1.0})
            horizon = self.top * w.measure_s * (1 + 1e-6)
            at_unit = scenario.model_copy(update={"workload": unit, "max_sim_s": horizon})  # (not run: no limits)
            for seed in seeds:
                s = _synthetic(unit, at_unit, seed)
                self.streams.append((s.arrived_at_ns / 1e9, s.n_prompt_tokens.astype(float),
                                     np.maximum(s.n_reply_words - 1, 0).astype(float)))
            self.least_tokens = min(c.tokens[0] for c in w.prompt_mix if isinstance(c.tokens, tuple))
            self.least_words = w.reply_words[0] - 1 if isinstance(w.reply_words, tuple) else 0

    def _n(self, t: np.ndarray, rate: float, side: float) -> int:
        return int(np.searchsorted(t, rate * self.measure_s * (1 + side * EPS)))

    def share_at_most(self, arrangement, rate: float) -> list[float] | None:
        """Each seed's on-time share at `rate` can be at most this (0-1); None if unknown."""
        found = budgets(self.scenario, arrangement) if self.ok else None
        if found is None:
            return None
        out = []
        for t, tokens, words in self.streams:
            low, high = self._n(t, rate, -1), self._n(t, rate, +1)
            k = min(_fit(b.per_token_ms * tokens[:high] + b.per_word_ms * words[:high], b.ms * (1 + EPS) + 1e-3)
                    for b in found)
            out.append(min(k / low, 1.0) if low else 1.0)
        return out

    def fails_from(self, arrangement, rate: float) -> bool:
        """Whether every rate from `rate` up (to the highest a search may probe) fails."""
        if not self.ok:
            return False
        found = budgets(self.scenario, arrangement)
        if found is None:
            return False
        most = [b.ms * (1 + EPS) + 1e-3 for b in found]
        least = [b.per_token_ms * self.least_tokens + b.per_word_ms * self.least_words for b in found]
        r = rate
        while r <= self.top:
            hi = r * STEP
            shares, tail = [], []
            for t, tokens, words in self.streams:
                low, high = self._n(t, r, -1), self._n(t, min(hi, self.top), +1)
                if low == 0:
                    return False
                k = min(_fit(b.per_token_ms * tokens[:high] + b.per_word_ms * words[:high], m) for b, m in zip(found, most))
                shares.append(k / low)
                fit_any = min((m // c if c > 0 else np.inf) for m, c in zip(most, least))
                tail.append(fit_any / self._n(t, min(hi, self.top), -1))
            if np.mean(shares) >= self.target:
                return False
            if np.mean(tail) < self.target:
                return True  # every rate from hi up fails too
            r = hi
        return True


def _plain(w) -> bool:
    """Synthetic traffic of uniform lengths (as [low, high]) over a measured window: the traffic the
    bound knows (length distributions and n_requests are searched without one)."""
    return (isinstance(w, SyntheticWorkload) and w.measure_s is not None and getattr(w, "n_requests", None) is None
            and isinstance(w.reply_words, tuple) and all(isinstance(c.tokens, tuple) for c in w.prompt_mix))


def _fit(costs: np.ndarray, budget: float) -> int:
    """How many of the cheapest `costs` fit in `budget`."""
    return int(np.searchsorted(np.cumsum(np.sort(costs)), budget, side="right"))


def capacity_proxy(scenario: Scenario, arrangement) -> float:
    """Requests/s an arrangement's busiest side could serve on average (instances over mean work
    per request): only the order in which a plan searches, never a verdict."""
    w = scenario.workload
    if not _plain(w):
        return 0.0
    assert isinstance(w, SyntheticWorkload) and w.measure_s is not None and isinstance(w.reply_words, tuple)
    tokens = sum(c.share * (c.tokens[0] + c.tokens[1]) / 2 for c in w.prompt_mix if isinstance(c.tokens, tuple))
    words = (w.reply_words[0] + w.reply_words[1]) / 2 - 1
    found = budgets(scenario, arrangement) or []
    first_word_s, mean_gap_ms = scenario.slo.first_word_s, scenario.slo.mean_gap_ms
    if first_word_s is None or mean_gap_ms is None:  # (no budgets then: `budgets` needs both limits)
        return 0.0
    rates = []
    for b in found:
        per_request = b.per_token_ms * tokens + b.per_word_ms * words
        gpus = b.ms / ((w.measure_s + first_word_s) * 1e3 if b.kind == "read" else
                       (w.measure_s + first_word_s) * 1e3 + (w.reply_words[1] - 1) * mean_gap_ms)
        rates.append(gpus * 1e3 / per_request if per_request > 0 else np.inf)
    return float(min(rates)) if rates else 0.0
