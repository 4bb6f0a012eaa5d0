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

All arrangements search at once: each round sends every arrangement's next probe, every seed,
to the runner as one batch (parallel, resumable, local or Dask).
"""

from __future__ import annotations

import math
from collections.abc import Generator, Hashable
from dataclasses import dataclass
from typing import Any, TypeVar

import pandas as pd

from ..errors import InputError
from ..results.columns import names
from ..results.metrics import CRITERION_COLUMNS
from ..results.report import mean_half_width
from ..scenario.schema import Scenario, Slo
from .grid import ONLY, RATE, resolve
from .runner import Runner, Task

#: goodput.csv's columns (docs/outputs.md; the registry, results/columns.py)
GOODPUT_COLUMNS = names("goodput")
#: binding_limit values, by the summary column of the share that broke each limit
LIMITS = {"late_first_word_pct": "first_word", "late_mean_gap_pct": "mean_gap", "froze_pct": "freeze"}
STEP = 1.25  # the first step from the start rate; each next step squares the factor
MAX_STEPS = 12


@dataclass
class Probe:
    """One rate's rows, one per seed (a seed stopped early has `below_target`)."""

    rate: float
    rows: list[dict]

    @property
    def complete(self) -> bool:
        return not any(r["below_target"] for r in self.rows)

    def on_time(self) -> pd.Series:
        return pd.Series([r.get("on_time_pct", math.nan) if not r["below_target"] else math.nan for r in self.rows])

    def at_most(self) -> pd.Series:
        return pd.Series([r["on_time_at_most_pct"] if r["below_target"] else r["on_time_pct"] for r in self.rows])


def decide(probe: Probe, target: float, slo: Slo | None = None) -> bool | None:
    """Whether the probe passes: the mean on-time share over seeds is at least the target; with
    `slo.criterion` percentiles, the mean over seeds of each percentile figure whose limit is on
    is within it (the target is not used). None when an early-stopped seed leaves it open."""
    if slo is not None and slo.criterion == "percentiles":
        return percentiles_pass(pd.DataFrame(probe.rows), slo)
    if probe.complete:
        return bool(float(probe.on_time().mean()) >= target - 1e-9)
    if float(probe.at_most().mean()) < target - 1e-9:
        return False  # even the upper bounds' mean misses: known without running on
    return None


#: A run request from a search: (arrangement, rate, seeds, mode). Modes: "probe" stops early
#: once below target and at the verdict cap; "verdicts" runs to the verdict cap (exact on-time
#: shares); "full" runs to the end (every figure, for the failing rate reported).
Request = tuple[str, float, tuple[int, ...], str]
MODES = {"probe": (True, True), "verdicts": (False, True), "full": (False, False)}  # (give up, verdicts only)
#: A search as `drive` advances it: yields run requests, receives their rows, returns its answer.
Search = Generator[Request, list[dict], Any]
Key = TypeVar("Key", bound=Hashable)


def percentiles_pass(rows: pd.DataFrame, slo: Slo) -> bool:
    """The percentiles criterion over seeds: the mean over the rows (seeds) of each figure whose
    limit is on is within the limit (1 ns of slack, D8); a seed with a figure never reached
    (+inf) fails it."""
    slack = {"first_word_s": 1e-9, "mean_gap_ms": 1e-6, "freeze_ms": 1e-6}
    return all(float(rows[CRITERION_COLUMNS[k]].mean()) <= limit + slack[k] for k, limit in slo.on.items())


def criterion_text(slo: Slo, target: float) -> str:
    """What a table's pass/fail means: '90% on time (per request: first word within 2 s, ...)'
    or 'P90 of each: first word within 2 s, ... (criterion percentiles, mean over seeds)'."""
    if slo.criterion == "percentiles":
        return f"{slo.words()} (criterion percentiles, mean over seeds)"
    return f"{target:g}% on time (per request: {slo.words()})"


def probe_rate(name: str, rate: float, seeds: tuple[int, ...], target: float, slo: Slo | None = None
               ) -> Generator[Request, list[dict], tuple[Probe, bool]]:
    """Whether `rate` passes for one arrangement over `seeds` (a search step); the probe."""
    rows = yield (name, rate, seeds, "probe")
    probe = Probe(rate, rows)
    verdict = decide(probe, target, slo)
    if verdict is None:
        probe = yield from _rerun(name, probe, seeds, "verdicts", lambda r: r["below_target"])
        verdict = decide(probe, target, slo)
    return probe, bool(verdict)


def _rerun(name: str, probe: Probe, seeds: tuple[int, ...], mode: str, which
           ) -> Generator[Request, list[dict], Probe]:
    """The probe with the seeds whose rows satisfy `which` run again in `mode`."""
    again = tuple(r["seed"] for r in probe.rows if which(r))
    if not again:
        return probe
    rows = yield (name, probe.rate, again, mode)
    by_seed = {r["seed"]: r for r in probe.rows} | {r["seed"]: r for r in rows}
    return Probe(probe.rate, [by_seed[s] for s in seeds])


def search(name: str, start: float, seeds: tuple[int, ...], target: float, tolerance: float, fits,
           report: bool = True, slo: Slo | None = None
           ) -> Generator[Request, list[dict], tuple[Probe | None, Probe | None, int]]:
    """Bisect one arrangement's goodput: yields run requests, receives their rows; returns
    the passing and failing probes that bracket it (None if never found) and the probe count.
    `fits(rate)` says whether the scenario may run at that rate (the documented limits);
    `report` runs the failing rate's seeds to their end for its every figure."""
    n = 1
    first, ok = yield from probe_rate(name, start, seeds, target, slo)
    lo, hi = (first, None) if ok else (None, first)
    rate, factor = start, STEP
    for _ in range(MAX_STEPS):
        if (lo is not None and hi is not None) or (hi is not None and rate / factor < tolerance):
            break
        rate = rate * factor if hi is None else rate / factor
        factor *= factor
        if not fits(rate):
            break
        probe, ok = yield from probe_rate(name, rate, seeds, target, slo)
        n += 1
        if ok:
            lo = probe
        else:
            hi = probe
    while lo is not None and hi is not None and hi.rate - lo.rate > tolerance:
        probe, ok = yield from probe_rate(name, (lo.rate + hi.rate) / 2, seeds, target, slo)
        n += 1
        if ok:
            lo = probe
        else:
            hi = probe
    if hi is not None and report:  # the failing rate's every figure, from runs to their end
        hi = yield from _rerun(name, hi, seeds, "full", lambda r: not r.get("full", False))
    return lo, hi, n


def drive(searches: dict[Key, Search], run_batch) -> dict[Key, Any]:
    """Advance every search together: each round runs all pending requests as one batch."""
    results: dict[Key, Any] = {}
    pending: dict[Key, Request] = {}
    for name, gen in searches.items():
        pending[name] = next(gen)
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
        return self.at(rate) is not None

    def run_batch(self, requests: list[Request]) -> list[list[dict]]:
        tasks, owner = [], []
        for i, (name, rate, seeds, mode) in enumerate(requests):
            s = self.at(rate, name)
            if s is None:  # only the start can get here: `search` checks the rest
                s = resolve(self.scenario, {RATE: rate})  # raises the one-line error
            give_up, verdicts_only = MODES[mode if s.slo.criterion == "per_request" else "full"]  # (percentiles: whole runs)
            for seed in seeds:
                tasks.append(Task(s, seed, give_up_below_pct=self.target if give_up else None,
                                  verdicts_only=verdicts_only))
                owner.append(i)
        rows = self.runner.run(tasks, "probes")
        out: list[list[dict]] = [[] for _ in requests]
        for i, r in zip(owner, rows):
            out[i].extend(r)
        return out


def goodput_row(scenario: Scenario, name: str, seeds: tuple[int, ...], target: float,
                lo: Probe | None, hi: Probe | None, n_probes: int) -> dict:
    """One goodput.csv row."""
    arrangement = next(a for a in scenario.arrangements if a.name == name)
    good = lo.rate if lo is not None else 0.0
    pass_mean, pass_half = mean_half_width(lo.on_time()) if lo is not None else (math.nan, math.nan)
    fail_mean, fail_half = mean_half_width(hi.on_time()) if hi is not None else (math.nan, math.nan)
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
        "passing_rate_per_s": lo.rate if lo is not None else math.nan,
        "failing_rate_per_s": hi.rate if hi is not None else math.nan,
        "passing_on_time_pct": pass_mean,
        "failing_on_time_pct": fail_mean,
        "binding_limit": binding,
        "passing_on_time_half_width_pct": pass_half,
        "failing_on_time_half_width_pct": fail_half,
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
    searches = {n: search(n, (starts or {}).get(n, start), seeds, target, tolerance, prober.fits, slo=scenario.slo)
                for n in names}
    found = drive(searches, prober.run_batch)
    rows = [goodput_row(scenario, n, seeds, target, *found[n]) for n in names]
    return pd.DataFrame(rows, columns=list(GOODPUT_COLUMNS))
