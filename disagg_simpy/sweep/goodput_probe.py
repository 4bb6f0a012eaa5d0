"""A goodput probe: one rate of one arrangement over the seeds, run as far as its verdict needs.

A seed stopped early (`GiveUp`) counts with an upper bound on its on-time share, never a
made-up share; a probe whose verdict still depends on one runs that seed again to the verdict
cap. A staged probe (`staged_probe`) runs a few seeds first, deeper below the target, so that
a rate far above capacity fails on them alone (sweep/goodput.py searches with these).
"""

from __future__ import annotations

import math
from collections.abc import Generator
from dataclasses import dataclass

import pandas as pd

from ..results.rules import CRITERION_COLUMNS, SLACK
from ..scenario.schema import Slo


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


#: A run request from a search: (arrangement, rate, seeds, mode, give-up share). Modes: "probe"
#: stops early once a seed's on-time share is certainly below the give-up share (% ; None: the
#: target) and at the verdict cap; "verdicts" runs to the verdict cap (exact on-time shares);
#: "full" runs to the end (every figure, for the failing rate reported).
Request = tuple[str, float, tuple[int, ...], str, float | None]
#: how far below the target the first seeds of a staged probe run before they give up (points)
STAGE_DEPTH = 40.0
MODES = {"probe": (True, True), "verdicts": (False, True), "full": (False, False)}  # (give up, verdicts only)


def percentiles_pass(rows: pd.DataFrame, slo: Slo) -> bool:
    """The percentiles criterion over seeds: the mean over the rows (seeds) of each figure whose
    limit is on is within the limit (1 ns of slack, D8); a seed with a figure never reached
    (+inf) fails it."""
    return all(float(rows[CRITERION_COLUMNS[k]].mean()) <= limit + SLACK[k] for k, limit in slo.on.items())


def probe_with(name: str, rate: float, seeds: tuple[int, ...], test, seen: dict[float, Probe], bound=None,
               staged: float | None = None, mode: str = "probe") -> Generator[Request, list[dict], tuple[Probe, bool]]:
    """`test(probe)` at `rate` (True, False, or None while an early-stopped seed leaves it open:
    those seeds run again to the verdict cap). A rate already probed (`seen`) runs nothing new.
    `bound(rate)`: each seed's most possible on-time share in % (plan_bounds), or None; where
    their mean is below `test`'s target it stands for the runs, as seeds stopped early do.
    `staged`: the target of the mean on-time share (per-request criterion), to run the seeds in
    two stages (`staged_probe`); `mode` "verdicts": every seed to the verdict cap at once (a test
    that needs every share)."""
    probe = seen.get(rate)
    if probe is None and bound is not None and (most := bound(rate)) is not None:
        probe = Probe(rate, [{"seed": s, "below_target": True, "on_time_at_most_pct": m} for s, m in zip(seeds, most)])
    if probe is None and staged is not None and mode == "probe" and len(seeds) > 1:
        probe = yield from staged_probe(name, rate, seeds, test, staged)
    if probe is None:
        rows = yield (name, rate, seeds, mode, None)
        probe = Probe(rate, rows)
    verdict = test(probe)
    if verdict is None:
        probe = yield from _rerun(name, probe, seeds, "verdicts", lambda r: r["below_target"])
        verdict = test(probe)
    seen[rate] = probe
    return probe, bool(verdict)


def _rerun(name: str, probe: Probe, seeds: tuple[int, ...], mode: str, which
           ) -> Generator[Request, list[dict], Probe]:
    """The probe with the seeds whose rows satisfy `which` run again in `mode`."""
    again = tuple(r["seed"] for r in probe.rows if which(r))
    if not again:
        return probe
    rows = yield (name, probe.rate, again, mode, None)
    by_seed = {r["seed"]: r for r in probe.rows} | {r["seed"]: r for r in rows}
    return Probe(probe.rate, [by_seed[s] for s in seeds])


def staged_target(target: float, slo: Slo | None) -> float | None:
    """The target a staged probe needs, under the per-request criterion only (the percentiles
    criterion runs every seed whole)."""
    return target if slo is None or slo.criterion == "per_request" else None


def unrun(seed: int) -> dict:
    """A seed not run (yet): its on-time share is at most 100%, as a seed stopped early says."""
    return {"seed": seed, "below_target": True, "on_time_at_most_pct": 100.0}


def staged_probe(name: str, rate: float, seeds: tuple[int, ...], test, target: float
                 ) -> Generator[Request, list[dict], Probe]:
    """A probe whose failure over the seeds is known as early as it can be: the mean on-time share
    fails the target once the seeds' shares add up to less than target x seeds, counting a
    seed not run at 100% and a seed stopped early at its upper bound. So the first k seeds run
    until each is below `target - (100 - target)(n - k) / k` (k the fewest that need no more
    than `STAGE_DEPTH` points below the target), which alone fails the mean when all of them
    get there; the rest run, if `test` still needs them, until each is below what the mean
    then needs (or, if that is nothing, to the verdict cap). Seeds of far overloaded rates stop
    sooner in all, and the verdict is the same (`test` sees only true shares and true upper
    bounds; what is still open runs again to the verdict cap, as before)."""
    n = len(seeds)
    k = next(k for k in range(1, n + 1) if (100.0 - target) * (n - k) / k <= STAGE_DEPTH)
    if k == n:
        rows = yield (name, rate, seeds, "probe", None)
        return Probe(rate, rows)
    first, rest = seeds[:k], seeds[k:]
    rows = yield (name, rate, first, "probe", target - (100.0 - target) * (n - k) / k)
    probe = Probe(rate, rows + [unrun(s) for s in rest])
    if test(probe) is not None:
        return probe
    need = (target * n - float(Probe(rate, rows).at_most().sum())) / len(rest)  # each of the rest below it: fails
    more = yield ((name, rate, rest, "probe", min(need, 100.0)) if need > 0 else (name, rate, rest, "verdicts", None))
    return Probe(rate, rows + more)
