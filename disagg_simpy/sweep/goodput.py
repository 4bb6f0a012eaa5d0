"""Goodput: the highest offered rate at which an arrangement keeps enough replies on time.

Definition. For one arrangement, `passes(rate)` holds when the mean over the seeds of the
on-time share (all three limits, per measured request, as in a run) is at least the target.
Goodput is the highest rate found to pass, by bisection to the tolerance: start at the
scenario's rate, step up (or down) by factors 1.25, 1.25**2, 1.25**4, ... until the answer
changes, then halve the bracket until it is no wider than the tolerance. (Capacity is
usually near the scenario's rate, so small first steps give a narrow bracket; growing steps
still reach a far one in a few probes.) A seed
gives the same requests at every rate, time-compressed (arrival gaps are unit exponentials
divided by the rate), so the curve is smooth and the bisection stable.

Probes above capacity stop early (`GiveUp`) once a seed's on-time share can no longer reach
the target; such a seed counts as below target with an upper bound, never a made-up share.
A probe whose verdict still depends on an early-stopped seed runs that seed to its end, and so
does the failing rate finally reported, so both bracketing rates show true figures.

Its 95% interval is of the same statistic (`goodput_search`): the rates at which the on-time
share's own interval (results/intervals.py) crosses the target, bisected the same way, so the
point always lies in its interval.

All arrangements search at once: each round sends every arrangement's next probe, every seed,
to the runner as one batch (parallel, resumable, local or Dask).
"""

from __future__ import annotations

import math
from collections.abc import Generator, Hashable
from typing import Any, TypeVar

import pandas as pd

from ..errors import InputError
from ..results.columns import names
from ..results.costs import with_costs
from ..results.intervals import SHARE, Interval, interval
from ..results.rules import CRITERION_COLUMNS, SLACK
from ..scenario.counts import counted_requests
from ..scenario.schema import Scenario, Slo
from ..units import NS_PER_S
from .goodput_probe import MODES, Probe, Request, _rerun, decide, percentiles_pass, probe_with, staged_target  # noqa: F401
from .grid import ONLY, RATE, resolve
from .runner import Runner, Task

#: goodput.csv's columns (docs/outputs.md; the registry, results/columns.py)
GOODPUT_COLUMNS = names("goodput")
#: binding_limit values, by the summary column of the share that broke each limit
LIMITS = {"late_first_word_pct": "first_word", "late_mean_gap_pct": "mean_gap", "froze_pct": "freeze",
          "late_e2e_pct": "e2e", "late_delay_pct": "delay"}
STEP = 1.25  # the first step from the start rate; each next step squares the factor
MAX_STEPS = 12
#: A search as `drive` advances it: yields run requests, receives their rows, returns its answer.
Search = Generator[Request, list[dict], Any]
Key = TypeVar("Key", bound=Hashable)


def criterion_text(slo: Slo, target: float) -> str:
    """What a table's pass/fail means: '90% on time (per request: first word within 2 s, ...)'
    or 'P90 of each: first word within 2 s, ... (criterion percentiles, mean over seeds)'."""
    return slo.criterion_text(target)


def probe_rate(name: str, rate: float, seeds: tuple[int, ...], target: float, slo: Slo | None = None
               ) -> Generator[Request, list[dict], tuple[Probe, bool]]:
    """Whether `rate` passes for one arrangement over `seeds` (a search step); the probe."""
    return (yield from probe_with(name, rate, seeds, lambda p: decide(p, target, slo), {}, staged=staged_target(target, slo)))


def bisect(name: str, start: float, seeds: tuple[int, ...], test, tolerance: float, fits, seen: dict[float, Probe],
           lo: Probe | None = None, hi: Probe | None = None, stop=None, bound=None, guess=None,
           staged: float | None = None, mode: str = "probe"
           ) -> Generator[Request, list[dict], tuple[Probe | None, Probe | None, int]]:
    """The highest rate passing `test`, bracketed to the tolerance: probe `start`, step away
    by growing factors until the answer changes, then halve the bracket. `lo`/`hi` are a
    passing and a failing probe already known; `seen` the probes run so far (reused). The
    answer always lies in [lo, hi) as they stand: `stop(lo, hi)`, asked before every probe
    after the first, ends the search early when that is enough (a plan's arrangement that
    cannot reach the top two); `bound` as in `probe_with`; `guess(rate)`, a (probe, verdict) to
    take without running (not kept in `seen`), or None; `staged` and `mode` as in `probe_with`."""

    def step(rate: float):
        if guess is not None and rate not in seen and (taken := guess(rate)) is not None:
            return taken
        return (yield from probe_with(name, rate, seeds, test, seen, bound, staged, mode))

    n = 0
    before = len(seen)
    first, ok = yield from step(start)
    if ok:
        lo = first if lo is None or first.rate > lo.rate else lo
    else:
        hi = first if hi is None or first.rate < hi.rate else hi
    rate, factor = start, STEP
    for _ in range(MAX_STEPS):
        if (lo is not None and hi is not None) or (hi is not None and rate / factor < tolerance):
            break
        rate = rate * factor if hi is None else rate / factor
        factor *= factor
        if not fits(rate) or (stop is not None and stop(lo, hi)):
            break
        probe, ok = yield from step(rate)
        if ok:
            lo = probe
        else:
            hi = probe
    while lo is not None and hi is not None and hi.rate - lo.rate > tolerance:
        if stop is not None and stop(lo, hi):
            break
        probe, ok = yield from step((lo.rate + hi.rate) / 2)
        if ok:
            lo = probe
        else:
            hi = probe
    n += len(seen) - before
    return lo, hi, n


def interval_passes(probe: Probe, target: float, side: str, slo: Slo | None = None) -> bool | None:
    """Whether the 95% interval of the mean on-time share (results/intervals.py) at the probe's
    rate has its `side` ("low" or "high") at or above the target; None while early-stopped
    seeds leave it open. The low side is at most the mean, so a mean of upper bounds below the
    target settles "low" as failing. With `slo.criterion` percentiles, the same with each
    percentile figure whose limit is on: "low" passes when every figure's interval lies wholly
    within its limit, "high" when every figure's interval still reaches within it."""
    if slo is not None and slo.criterion == "percentiles":
        rows = pd.DataFrame(probe.rows)
        slack = SLACK
        figures = {k: rows[CRITERION_COLUMNS[k]].astype(float) for k in slo.on}
        spans = {k: interval(v) if v.lt(math.inf).all() else Interval(math.inf, math.inf, math.inf, len(v))
                 for k, v in figures.items()}  # a figure never reached (+inf) fails either side
        return all((i.high if side == "low" else i.low) <= slo.on[k] + slack[k] for k, i in spans.items())
    if probe.complete:
        i = interval(probe.on_time(), SHARE)
        return bool((i.low if side == "low" else i.high) >= target - 1e-9)
    if side == "low" and float(probe.at_most().mean()) < target - 1e-9:
        return False
    return None


def goodput_search(name: str, start: float, seeds: tuple[int, ...], target: float, tolerance: float, fits,
                   report: bool = True, slo: Slo | None = None) -> Generator[Request, list[dict], tuple]:
    """Goodput and its 95% interval, one statistic: the point is the highest rate at which the
    mean on-time share over seeds meets the target; the interval inverts the on-time share's
    own interval: its low end is the highest rate whose interval lies wholly at or above the
    target, its high end the highest rate whose interval still reaches it (both bisected to the
    tolerance). The true goodput lies in it whenever the true share at the true goodput lies in
    its interval (95%), and low <= point <= high by construction (the interval holds its mean,
    and the two searches start from the point's bracket). Returns (passing probe, failing
    probe, probe count, low, high, curve); NaN bounds with one seed; `curve`: every rate probed
    with its on-time share (`probe_curve`). With `slo.criterion` percentiles, the same with that
    criterion's test (`decide`, `interval_passes`)."""
    seen: dict[float, Probe] = {}
    lo, hi, n = yield from bisect(name, start, seeds, lambda p: decide(p, target, slo), tolerance, fits, seen,
                                  staged=staged_target(target, slo))
    return (yield from goodput_interval(name, lo, hi, n, seeds, target, tolerance, fits, seen, report, slo))


def goodput_interval(name: str, lo: Probe | None, hi: Probe | None, n: int, seeds: tuple[int, ...], target: float,
                     tolerance: float, fits, seen: dict[float, Probe], report: bool = True, slo: Slo | None = None,
                     bound=None) -> Generator[Request, list[dict], tuple]:
    """The rest of `goodput_search` once its point is bracketed (`lo`, `hi`, after `n` probes,
    `seen`): the interval, and the failing rate's every figure (`report`); the same tuple."""
    low = high = math.nan
    if len(seeds) > 1:
        if lo is None:
            low = 0.0
        else:
            below = lambda p: interval_passes(p, target, "low", slo)  # noqa: E731
            l_lo, _, k = yield from bisect(name, lo.rate, seeds, below, tolerance, fits, seen, hi=hi, bound=bound,
                                           staged=staged_target(target, slo))
            low, n = (l_lo.rate if l_lo is not None else 0.0), n + k
        above = lambda p: interval_passes(p, target, "high", slo)  # noqa: E731
        if hi is None:
            high = lo.rate if lo is not None else 0.0  # the highest rate the scenario allows passed
        else:
            h_lo, _, k = yield from bisect(name, hi.rate, seeds, above, tolerance, fits, seen, lo=lo, bound=bound,
                                           mode="verdicts")  # (an interval's high end needs every share)
            high, n = (h_lo.rate if h_lo is not None else 0.0), n + k
    if hi is not None and report:  # the failing rate's every figure, from runs to their end
        hi = yield from _rerun(name, hi, seeds, "full", lambda r: not r.get("full", False))
    return lo, hi, n, low, high, probe_curve(seen)


def probe_curve(seen: dict[float, Probe]) -> list[dict]:
    """Each rate probed, ascending: the mean on-time share over seeds and its 95% interval
    (`complete` false: a seed stopped early, so the share shown is the mean of upper bounds)."""
    out = []
    for rate in sorted(seen):
        probe = seen[rate]
        i = interval(probe.on_time(), SHARE) if probe.complete else Interval(float(probe.at_most().mean()),
                                                                               math.nan, math.nan, 0)
        out.append({"rate_per_s": rate, "on_time_pct": i.mean, "low_pct": i.low, "high_pct": i.high,
                    "complete": probe.complete})
    return out


def drive(searches: dict[Key, Search], run_batch) -> dict[Key, Any]:
    """Advance every search together: each round runs all pending requests as one batch."""
    results: dict[Key, Any] = {}
    pending: dict[Key, Request] = {}
    for name, gen in searches.items():
        try:
            pending[name] = next(gen)
        except StopIteration as done:  # (nothing to run)
            results[name] = done.value
    while pending:
        answers = run_batch(list(pending.values()))
        for (name, _), rows in zip(list(pending.items()), answers):
            try:
                pending[name] = searches[name].send(rows)
            except StopIteration as done:
                results[name] = done.value
                del pending[name]
    return results


class Prober:
    """Runs `drive`'s requests as tasks (one arrangement, one rate, one seed each)."""

    def __init__(self, scenario: Scenario, runner: Runner, target: float):
        self.scenario, self.runner, self.target = scenario, runner, target
        self.resolved: dict[tuple[float, str | None], Scenario | None] = {}

    def at(self, rate: float, name: str | None = None) -> Scenario | None:
        """The scenario at `rate` (with arrangement `name` alone, so that its runs are stored
        under that arrangement only), or None where it breaks a documented limit."""
        if (rate, name) not in self.resolved:
            try:
                point: dict[str, Any] = {RATE: rate}
                if name is not None:
                    point[ONLY] = name
                self.resolved[rate, name] = resolve(self.scenario, point)
            except InputError:
                self.resolved[rate, name] = None
        return self.resolved[rate, name]

    def fits(self, rate: float) -> bool:
        """Whether a search may probe `rate`. With a count of requests (`n_requests`), a rate
        past the one at which they all arrive within about a nanosecond is refused in one line:
        a search that gets there passed at every rate (all N at once are on time), so the count
        bounds no goodput; an answer there would be a meaningless number."""
        count = counted_requests(self.scenario)
        if count is not None and rate > count * NS_PER_S:
            raise InputError(f"{self.scenario.source}: workload: every rate probed is on time, up to rates at which "
                             f"all {count:,.0f} counted requests arrive within nanoseconds, so the "
                             "count bounds no goodput; expected more requests (n_requests, n_requests_per_gpu) or a "
                             "measured window (measure_s) instead of a count")
        return self.at(rate) is not None

    def run_batch(self, requests: list[Request]) -> list[list[dict]]:
        tasks, owner = [], []
        for i, (name, rate, seeds, mode, below) in enumerate(requests):
            s = self.at(rate, name)
            if s is None:  # only the start can get here: `search` checks the rest
                s = resolve(self.scenario, {RATE: rate})  # raises the one-line error
            give_up, verdicts_only = MODES[mode if s.slo.criterion == "per_request" else "full"]  # (percentiles: whole runs)
            for seed in seeds:
                tasks.append(Task(s, seed, give_up_below_pct=(self.target if below is None else below) if give_up
                                  else None, verdicts_only=verdicts_only))
                owner.append(i)
        rows = self.runner.run(tasks, "runs (probes x seeds)")
        out: list[list[dict]] = [[] for _ in requests]
        for i, r in zip(owner, rows):
            out[i].extend(r)
        return out


def goodput_row(scenario: Scenario, name: str, seeds: tuple[int, ...], target: float,
                lo: Probe | None, hi: Probe | None, n_probes: int, low: float = math.nan, high: float = math.nan
                ) -> dict:
    """One goodput.csv row."""
    arrangement = next(a for a in scenario.arrangements if a.name == name)
    good = lo.rate if lo is not None else 0.0
    none = Interval(math.nan, math.nan, math.nan, 0)
    passing = interval(lo.on_time(), SHARE) if lo is not None else none
    failing = interval(hi.on_time(), SHARE) if hi is not None else none
    binding = ""
    if hi is not None:
        frame = pd.DataFrame(hi.rows)
        shares = {LIMITS[c]: float(frame[c].mean()) for c in LIMITS if c in frame and frame[c].notna().any()}
        if scenario.slo.criterion == "percentiles":  # the figure furthest over its limit
            shares = {k.removesuffix("_s").removesuffix("_ms"): float(frame[CRITERION_COLUMNS[k]].mean()) / v
                      for k, v in scenario.slo.on.items()}
        binding = max(shares, key=lambda k: shares[k]) if shares else ""
    return {
        "arrangement": name,
        "n_gpus": arrangement.n_gpus,
        "target_pct": target,
        "seeds": len(seeds),
        "measure_s": scenario.workload.measure_s if scenario.workload.measure_s is not None else math.nan,
        "goodput_per_s": good,
        "goodput_per_gpu_per_s": good / arrangement.n_gpus,
        "goodput_low_per_s": low,
        "goodput_high_per_s": high,
        "passing_rate_per_s": lo.rate if lo is not None else math.nan,
        "failing_rate_per_s": hi.rate if hi is not None else math.nan,
        "passing_on_time_pct": passing.mean,
        "failing_on_time_pct": failing.mean,
        "binding_limit": binding,
        "passing_on_time_low_pct": passing.low,
        "passing_on_time_high_pct": passing.high,
        "failing_on_time_low_pct": failing.low,
        "failing_on_time_high_pct": failing.high,
        "n_probes": n_probes,
    }


def goodput(scenario: Scenario, runner: Runner, seeds: tuple[int, ...], target: float, tolerance: float,
            names: list[str] | None = None, starts: dict[str, float] | None = None) -> pd.DataFrame:
    """goodput.csv: one row per arrangement, searched together (from `starts[name]`, e.g. a rate
    per GPU x its GPUs, else the scenario's rate)."""
    if scenario.workload.rate_per_s is None:
        raise InputError(f"{scenario.source}: workload.rate_per_s: missing, expected a rate to start the search "
                         "from (goodput scales the traffic's rate)")
    names = names or [a.name for a in scenario.arrangements]
    start = float(scenario.workload.rate_per_s)
    prober = Prober(scenario, runner, target)
    searches = {n: goodput_search(n, (starts or {}).get(n, start), seeds, target, tolerance, prober.fits,
                                  slo=scenario.slo) for n in names}
    found = drive(searches, prober.run_batch)
    rows = [goodput_row(scenario, n, seeds, target, *found[n][:5]) for n in names]
    table = pd.DataFrame(rows, columns=list(GOODPUT_COLUMNS))
    table.attrs["curves"] = {n: found[n][5] for n in names}  # for the --html page
    return with_costs(table, scenario)
