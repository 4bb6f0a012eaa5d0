"""Upper bounds on an arrangement's on-time share from the traffic and the costs alone, so that a
plan skips arrangements, and decides probes, without changing its answer.

The bound. A measured request on time has its first word within `first_word_s` of arriving, so
by `measure_s + first_word_s`, and its last word within `(words - 1) x mean_gap_ms` after that.
So the requests on time fit budgets of GPU time: their prompts in the reading GPUs' time up to
the last first-word deadline, their replies in the writing GPUs' time up to the last last-word
deadline, and (colocated) both in all the GPUs' time. What each costs at least (M1; E2, E3, E7
only add):
- a prompt token `per_prompt_token_ms`; in chunks of C tokens also `iteration_ms / C`, since an
  iteration reads at most C tokens and pays `iteration_ms` (M5, D4);
- a word after the first `per_reply_ms`, and also `iteration_ms x per_reply_ms / (mean_gap_ms -
  iteration_ms)`: a gap lasts at least the iteration that writes its word, of at least
  `iteration_ms + per_reply_ms x a` with `a` replies on time in it, so replies within the mean-gap
  limit keep the word-weighted mean of `a` at most `(mean_gap_ms - iteration_ms) / per_reply_ms`,
  and (Cauchy-Schwarz) W words need at least W / that many iterations, each `iteration_ms`;
- colocated, both share the fixed cost of the same iterations: any mix (lambda, 1 - lambda) of
  the two fixed-cost terms is a bound; three mixes are tried;
- E14 (unsaturated reading): a prompt token at least `per_prompt_token` (below), the least an
  iteration's reading costs per token read once its free tokens are waived.
At most K of the n measured requests fit a budget, K being how many of the cheapest fit (costs
rounded down to 2,048 levels: K can only grow); K / n bounds the on-time share, seed by seed.

Every rate at once. A seed's requests are the same at every rate, their arrival times divided
by it (workload/stream.py), so with `warmup_s` 0 the measured requests at rate r are the first
n(r) of one unit-rate stream. Between two rates r1 < r2, the share is at most K(n(r2)) / n(r1);
above a rate r, at most (budget / cheapest request) / n(r). `fails_from(R)`: the mean of these
bounds over the seeds is below the target on steps covering every rate from R up to the highest
a search may probe, so the arrangement's goodput (a rate that passed) is below R. Without a
bound (traces, a warm-up, TP, any key this module does not know) an arrangement is always searched.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..scenario.limits import MAX_REQUESTS
from ..scenario.schema import Scenario, SyntheticWorkload

#: the smallest ratio between the rates of one step (a looser step loosens the bound, never breaks it)
STEP = 1.05
#: relative margin on times and budgets (float rounding of arrival times, ns rounding of costs)
EPS = 1e-9
#: cost levels of the histogram that counts the cheapest requests
LEVELS = 2048
#: keys whose effect the bound knows (any other key set: no bound; options added later stay exact)
KNOWN = {
    "scenario": {"name", "seed", "seeds", "workload", "max_sim_s", "cost", "slo", "arrangements", "reference"},
    "workload": {"rate_per_s", "warmup_s", "measure_s", "arrivals", "burstiness", "prompt_mix", "reply_words"},
    "cost": {"iteration_ms", "per_reply_ms", "per_prompt_token_ms", "kv_ship_ms_per_token", "per_reread_token_ms",
             "per_context_token_ms", "per_attention_pair_ms", "prompt_iteration_ms", "free_prompt_tokens", "preset"},
    "arrangement": {"name", "kind", "gpus", "chunk_tokens", "cost", "kv_capacity_tokens", "max_batch_replies",
                    "max_batch_tokens", "reading_gpus", "writing_gpus", "reading_cost", "writing_cost",
                    "kv_ship_ms_per_token", "kv_link", "local_prompt_max_tokens", "kv_path", "label"},
}


@dataclass(frozen=True)
class Budget:
    """One budget: a request costs per_token_ms x its tokens + per_word_ms x its words after
    the first, out of `ms` of GPU time."""

    kind: str  # "read", "write" or "both"
    per_token_ms: float
    per_word_ms: float
    ms: float


def _known(model, what: str) -> bool:
    return set(model.model_dump(exclude_defaults=True)) <= KNOWN[what]


def budgets(scenario: Scenario, arrangement) -> list[Budget] | None:
    """The arrangement's budgets, or None where no bound is known."""
    if any(getattr(arrangement, k, 1) not in (1, None) for k in ("tp", "reading_tp", "writing_tp")):
        return None
    w, slo = scenario.workload, scenario.slo
    if scenario.prefix_cache_tokens is not None or getattr(w, "sessions", None) is not None:
        return None  # E13: a cached prompt reads less than the bound counts; a session's turns more than the mix
    if (not _plain(w) or slo.criterion != "per_request" or slo.tpot != "exclusive" or slo.first_word_s is None
            or slo.mean_gap_ms is None):  # (TPOT with word 1 counted: the bounds assume it is not)
        return None  # (the bound is of the per-request on-time share, from the first-word and mean-gap limits)
    if not (_known(scenario, "scenario") and _known(scenario.cost, "cost") and _known(arrangement, "arrangement")):
        return None
    if not all(_known(c, "cost") for k in ("cost", "reading_cost", "writing_cost") if (c := getattr(arrangement, k, None))):
        return None
    assert isinstance(w, SyntheticWorkload) and w.measure_s is not None and isinstance(w.reply_words, tuple)
    read_ms = (w.measure_s + slo.first_word_s) * 1e3
    write_ms = read_ms + (w.reply_words[1] - 1) * slo.mean_gap_ms
    reading, writing = arrangement.side_costs(scenario.cost)
    n = arrangement.n_gpus
    local = getattr(arrangement, "local_prompt_max_tokens", None) is not None  # (writing GPUs read too: no chunk term)
    chunk = arrangement.chunk_tokens if not local else None
    fixed_word = _fixed_per_word(writing.iteration_ms, writing.per_reply_ms, slo.mean_gap_ms)
    p = writing.per_reply_ms
    if arrangement.kind == "colocated":
        mixes = (0.0, 0.5, 1.0) if chunk or _unsaturated(reading) else (1.0,)
        out = [Budget("read", per_prompt_token(reading, reading.iteration_ms, chunk), 0.0, n * read_ms)]
        out += [Budget("both", per_prompt_token(reading, (1 - lam) * reading.iteration_ms, chunk), p + lam * fixed_word,
                       n * write_ms) for lam in mixes]
    else:
        readers = n if local else arrangement.reading_gpus
        token = per_prompt_token(reading, reading.iteration_ms, chunk)
        if local:  # (a local prompt is read on a writing GPU, at its figures)
            token = min(token, per_prompt_token(writing, writing.iteration_ms, None))
        out = [Budget("read", token, 0.0, readers * read_ms),
               Budget("write", 0.0, p + fixed_word, arrangement.writing_gpus * write_ms)]
    return [b for b in out if b.per_token_ms > 0 or b.per_word_ms > 0] or None


def _unsaturated(cost) -> bool:
    """Whether E14 is on in a cost block."""
    return bool(cost.prompt_iteration_ms or cost.free_prompt_tokens)


def per_prompt_token(cost, fixed_ms: float, cap: int | None) -> float:
    """The least an iteration costs per prompt token it reads, counting `fixed_ms` of its fixed
    cost (M1's `iteration_ms`, or a colocated mix's share of it) as reading's, when it reads at
    most `cap` tokens (chunks; None: any number).

    Without E14 that is `q + (fixed_ms - 1e-6) / cap` (`q` = `per_prompt_token_ms`; `q` alone
    uncapped; D10's rounding takes at most half a ns off an iteration).
    With E14, an iteration reading P > 0 tokens pays at least c(P) = a + q max(0, P - F), with
    a = fixed_ms + `prompt_iteration_ms` - 1e-6 (D10's rounding takes at most half a ns off an
    iteration) and F = `free_prompt_tokens`, every other term (E2, E3, E7, E13) only adding. Its
    cost per token c(P) / P is a / P on 0 < P <= F, falling; and q + (a - qF) / P on P >= F,
    monotone (rising if a < qF, else falling towards q). So over 0 < P <= cap its least is at
    P = min(F, cap) or at P = cap (or the limit q as P grows, uncapped): the smaller of those is
    at most c(P) / P for every P an iteration may read, hence a sum over iterations of this times
    their tokens never exceeds their time: the bound may count it, never more."""
    q = cost.per_prompt_token_ms
    if not _unsaturated(cost):
        return q + (max(fixed_ms - 1e-6, 0.0) / cap if cap else 0.0)
    free = int(cost.free_prompt_tokens or 0)
    a = max(fixed_ms + (cost.prompt_iteration_ms or 0.0) - 1e-6, 0.0)
    per = [(a + q * max(0, cap - free)) / cap if cap else q]
    if free:
        at = min(free, cap) if cap else free
        per.append((a + q * max(0, at - free)) / at)
    return min(per)


def _fixed_per_word(iteration_ms: float, per_reply_ms: float, mean_gap_ms: float) -> float:
    """The fixed cost of an iteration that falls on each word of a reply within the mean-gap
    limit (see the module docstring); 0 when that limit leaves no such bound. Margins: the limit's
    1 ns of slack (D8) and an iteration's rounding to the ns (D10) both loosen it."""
    room = (mean_gap_ms + 2e-6) - (iteration_ms - 1e-6)
    if room <= 0 or per_reply_ms <= 0:
        return 0.0
    return (iteration_ms - 1e-6) * per_reply_ms / room * (1 - 1e-9)


class _Counter:
    """A seed's requests' costs under one budget, rounded down to `LEVELS` levels: how many of
    the cheapest among the first n fit the budget (an upper bound on how many can)."""

    def __init__(self, costs: np.ndarray, budget: Budget):
        low, high = float(costs.min()), float(costs.max())
        width = (high - low) / LEVELS or 1.0
        self.level = np.minimum(((costs - low) / width).astype(np.int64), LEVELS - 1)
        floor = np.full(LEVELS, np.inf)
        np.minimum.at(floor, self.level, costs)  # each level's cheapest request: never above one of its costs
        self.floor = np.where(np.isinf(floor), 0.0, floor)  # (an empty level counts nothing)
        self.budget = budget.ms * (1 + EPS) + 1e-3
        self.cheapest = low

    def fit(self, n: int) -> int:
        counts = np.bincount(self.level[:n], minlength=LEVELS)
        spend = np.cumsum(counts * self.floor)
        j = int(np.searchsorted(spend, self.budget, side="right"))  # levels 0..j-1 fit whole
        k = int(counts[:j].sum())
        if j < LEVELS:
            left = self.budget - (spend[j - 1] if j else 0.0)
            k += int(counts[j]) if self.floor[j] <= 0 else min(int(counts[j]), int(left // self.floor[j]))
        return k

    def most(self) -> float:
        """How many requests could fit at all (each at least the cheapest)."""
        return self.budget // self.cheapest if self.cheapest > 0 else np.inf


class Bounds:
    """The unit-rate streams of a plan's seeds; each seed's on-time share bounded at a rate
    (`share_at_most`) and whether an arrangement fails at every rate from some rate up
    (`fails_from`)."""

    def __init__(self, scenario: Scenario, seeds: tuple[int, ...], target: float):
        self.scenario, self.target = scenario, target / 100.0 - EPS
        w = scenario.workload
        self.ok = False
        self.top = MAX_REQUESTS / scenario.cap_s(None)  # no search probes a higher rate (limits)
        self.streams: list = []
        self.counters: dict[str, list | None] = {}
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

    def _counters(self, arrangement) -> list | None:
        """Per seed, a counter per budget (None: no bound)."""
        if arrangement.name not in self.counters:
            found = budgets(self.scenario, arrangement) if self.ok else None
            self.counters[arrangement.name] = None if found is None else [
                [_Counter(b.per_token_ms * tokens + b.per_word_ms * words, b) for b in found]
                for _, tokens, words in self.streams]
        return self.counters[arrangement.name]

    def _n(self, t: np.ndarray, rate: float, side: float) -> int:
        return int(np.searchsorted(t, rate * self.measure_s * (1 + side * EPS)))

    def shares(self, arrangement, low: float, high: float) -> list[float] | None:
        """Each seed's on-time share (0-1) at any rate from `low` to `high` is at most this:
        how many of the requests measured at `high` could fit, over those measured at `low`."""
        counters = self._counters(arrangement)
        if counters is None:
            return None
        out = []
        for (t, _, _), mine in zip(self.streams, counters):
            first, last = self._n(t, low, -1), self._n(t, high, +1)
            out.append(min(min(c.fit(last) for c in mine) / first, 1.0) if first else 1.0)
        return out

    def share_at_most(self, arrangement, rate: float) -> list[float] | None:
        """Each seed's on-time share at `rate` can be at most this (0-1); None if unknown."""
        return self.shares(arrangement, rate, rate)

    def fails_from(self, arrangement, rate: float) -> bool:
        """Whether every rate from `rate` up (to the highest a search may probe) fails: steps
        from `rate` up, each as long as its bound allows (from 2x down to `STEP`)."""
        counters = self._counters(arrangement)
        if counters is None or rate <= 0:
            return False
        r = rate
        while r < self.top:
            step = 2.0
            while True:
                high = min(r * step, self.top)
                shares = self.shares(arrangement, r, high)
                if shares is None:
                    return False
                if float(np.mean(shares)) < self.target:
                    break
                step = step ** 0.5
                if step < STEP:
                    return False
            tail = [min(c.most() for c in mine) / max(self._n(t, high, -1), 1)
                    for (t, _, _), mine in zip(self.streams, counters)]
            if float(np.mean(tail)) < self.target:
                return True  # every rate from `high` up fails too
            r = high
        return True


def _plain(w) -> bool:
    """Synthetic traffic of uniform lengths (as [low, high]) over a measured window: the traffic the
    bound knows (length distributions and n_requests are searched without one)."""
    return (isinstance(w, SyntheticWorkload) and w.measure_s is not None and getattr(w, "n_requests", None) is None
            and isinstance(w.reply_words, tuple) and all(isinstance(c.tokens, tuple) for c in w.prompt_mix)
            and _known(w, "workload"))


def capacity_proxy(scenario: Scenario, arrangement) -> float:
    """Requests/s an arrangement's busiest budget could serve on average (its GPUs over mean cost
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
