"""SLO scale: at the scenario's rate, the smallest factor s such that, with every limit that is
on multiplied by s, an arrangement meets the target (`goodput --vary slo`).

Meeting the target only gets easier as limits grow, so s is found as goodput's rate is, the other
way round: probe s = 1, step by factors 2, 4, 16, ... down while it passes (or up while it
fails) until the answer changes, then halve the bracket until it is no wider than the
tolerance (0.01). A probe passes as a goodput probe does (`goodput.decide`: the mean on-time share
over the seeds against the target, or the percentiles criterion), on the same requests at every s.
"""

from __future__ import annotations

import math
from collections.abc import Generator

import pandas as pd

from ..errors import InputError
from ..results.columns import names
from ..results.intervals import SHARE, Interval, interval
from ..scenario.schema import Scenario, Slo
from .goodput import Probe, Prober, Request, _rerun, drive, probe_rate
from .grid import ONLY, SLO_SCALE, resolve

#: slo_scale.csv's columns (declared in results/columns.py)
SLO_SCALE_COLUMNS = names("slo_scale")
MIN_SCALE, MAX_SCALE = 1e-3, 1e3
MAX_STEPS = 12


class ScaleProber(Prober):
    """A goodput prober whose 'rate' is the SLO scale: the scenario with its limits scaled."""

    def at(self, rate: float, name: str | None = None) -> Scenario | None:
        if (rate, name) not in self.resolved:
            point = {SLO_SCALE: rate} | ({ONLY: name} if name is not None else {})
            try:
                self.resolved[rate, name] = resolve(self.scenario, point)
            except InputError:
                self.resolved[rate, name] = None
        return self.resolved[rate, name]


def search_scale(name: str, seeds: tuple[int, ...], target: float, tolerance: float, fits, slo_at
                 ) -> Generator[Request, list[dict], tuple[Probe | None, Probe | None, int]]:
    """Bisect one arrangement's smallest passing scale; returns (failing probe below it, passing
    probe, probe count), None where never found. `slo_at(s)`: the limits scaled by s (the
    percentiles criterion compares its figures with them)."""
    first, ok = yield from probe_rate(name, 1.0, seeds, target, slo_at(1.0))
    n = 1
    fail, good = (None, first) if ok else (first, None)
    s, factor = 1.0, 2.0
    for _ in range(MAX_STEPS):
        if fail is not None and good is not None:
            break
        s = s / factor if fail is None else s * factor
        factor *= factor
        if not MIN_SCALE <= s <= MAX_SCALE or not fits(s):
            break
        probe, ok = yield from probe_rate(name, s, seeds, target, slo_at(s))
        n += 1
        if ok:
            good = probe
        else:
            fail = probe
    while fail is not None and good is not None and good.rate - fail.rate > tolerance:
        mid = (fail.rate + good.rate) / 2
        probe, ok = yield from probe_rate(name, mid, seeds, target, slo_at(mid))
        n += 1
        if ok:
            good = probe
        else:
            fail = probe
    if fail is not None:  # the failing scale's every figure, from runs to their end
        fail = yield from _rerun(name, fail, seeds, "full", lambda r: not r.get("full", False))
    return fail, good, n


def slo_scales(scenario: Scenario, runner, seeds: tuple[int, ...], target: float, tolerance: float = 0.01) -> pd.DataFrame:
    """slo_scale.csv: one row per arrangement, searched together."""
    prober = ScaleProber(scenario, runner, target)
    names = [a.name for a in scenario.arrangements]
    def slo_at(s: float) -> Slo:
        scaled = prober.at(s)
        assert scaled is not None  # a scale probed has passed `fits` (or is 1: the scenario itself)
        return scaled.slo

    found = drive({n: search_scale(n, seeds, target, tolerance, prober.fits, slo_at) for n in names}, prober.run_batch)
    rows = []
    for a in scenario.arrangements:
        fail, good, n = found[a.name]
        none = Interval(math.nan, math.nan, math.nan, 0)
        passing, failing = (interval(p.on_time(), SHARE) if p is not None else none for p in (good, fail))
        rows.append({
            "arrangement": a.name, "n_gpus": a.n_gpus, "rate_per_s": float(scenario.workload.rate_per_s or math.nan),
            "target_pct": target, "seeds": len(seeds),
            "slo_scale": good.rate if good is not None else math.nan,
            "passing_scale": good.rate if good is not None else math.nan,
            "failing_scale": fail.rate if fail is not None else math.nan,
            "passing_on_time_pct": passing.mean, "passing_on_time_low_pct": passing.low,
            "passing_on_time_high_pct": passing.high, "failing_on_time_pct": failing.mean,
            "failing_on_time_low_pct": failing.low, "failing_on_time_high_pct": failing.high, "n_probes": n,
        })
    return pd.DataFrame(rows, columns=list(SLO_SCALE_COLUMNS))


def format_scales(table: pd.DataFrame) -> str:
    """Aligned text: each arrangement's smallest passing scale and the bracket around it."""
    def num(x, spec=".2f"):
        return "-" if math.isnan(x) else format(x, spec)

    def pm(m, low, high):
        return Interval(m, low, high, 2).text()

    header = ["arrangement", "gpus", "SLO scale", "passes at", "on time %", "fails at", "on time %"]
    rows = [[r.arrangement, str(r.n_gpus), num(r.slo_scale), num(r.passing_scale, ".3f"),
             pm(r.passing_on_time_pct, r.passing_on_time_low_pct, r.passing_on_time_high_pct), num(r.failing_scale, ".3f"),
             pm(r.failing_on_time_pct, r.failing_on_time_low_pct, r.failing_on_time_high_pct)] for r in table.itertuples()]
    widths = [max(len(x[i]) for x in [header, *rows]) for i in range(len(header))]
    return "\n".join(" ".join([x[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(x[1:], widths[1:]))])
                     for x in [header, *rows])
