"""`plan --over-time`: when to move GPUs between reading and writing over a day (E11 periods,
E12 roles that change).

1. Each period of the workload's schedule, run alone at its own steady rate and mix, ranks every
   split of the GPUs by its mean on-time share over seeds: the best split per period.
2. The switching plan: a `roles.schedule` that asks, at each period's start, for that period's
   best reading GPUs (a scenario block ready to paste).
3. The whole day is run (the scenario's own traffic, every period in turn) for the switching
   plan, every static split and the reactive policy (`policy: queue`, starting from the first
   period's best split): on-time share over the day and per period (requests by the period they
   arrive in), moves made, and each one's paired difference from the best static split over
   seeds (results/intervals.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..api import run_each
from ..results.intervals import SHARE, interval
from ..scenario.schema import Scenario
from ..workload.periods import periods
from .plan import PLANNED_KEYS, at_rate, with_candidates
from .runner import Runner

SWITCHING, REACTIVE = "switching", "reactive"


#: The keys a candidate over a day sets itself: a plan's own, and its roles (the plan's moves)
OVER_TIME_KEYS = (*PLANNED_KEYS, "roles")


def split(r: int, n: int) -> dict:
    return {"name": f"split-{r}-{n - r}", "kind": "disaggregated", "reading_gpus": r, "writing_gpus": n - r}


@dataclass(frozen=True)
class PeriodBest:
    """One period's steady runs: its bounds, rate, each split's mean on-time share, the best."""

    index: int
    start_s: float
    end_s: float
    rate_per_s: float
    on_time: dict[str, float]  # split name -> mean on-time % over seeds
    best_reading: int


def best_per_period(scenario: Scenario, n_gpus: int, runner: Runner, seeds: tuple[int, ...],
                    period_s: float | None = None) -> list[PeriodBest]:
    """Every split of `n_gpus` on each period's steady traffic (a schedule's periods; a rate
    curve's windows of `period_s` up to `measure_s`, at each window's mean rate); the best by
    mean on-time share; ties: the previous period's split (no move), then the most even split,
    then fewer reading GPUs."""
    splits = [split(r, n_gpus) for r in range(1, n_gpus)]
    out: list[PeriodBest] = []
    w = scenario.workload
    for p in periods(w, period_s, w.measure_s):  # type: ignore[arg-type]  # (checked: synthetic, over time)
        steady = with_candidates(scenario, splits, "--gpus", OVER_TIME_KEYS).with_overrides(
            workload=p.workload.model_dump(mode="python", exclude_none=True))
        shares = at_rate(steady, runner, seeds)
        before = out[-1].best_reading if out else None
        best = max(range(1, n_gpus), key=lambda r: (shares[f"split-{r}-{n_gpus - r}"], r == before,
                                                    -abs(2 * r - n_gpus), -r))
        out.append(PeriodBest(p.index, p.start_s, p.end_s, p.rate_per_s, shares, best))
    return out


def switching_roles(best: list[PeriodBest], switch_s: float) -> dict:
    """The `roles:` block of the switching plan: from each period's start, its best reading GPUs
    (an entry only where the count changes; the first is the arrangement's own, at 0 s)."""
    steps, last = [], None
    for p in best:
        if p.best_reading != last:
            steps.append({"from_s": p.start_s, "reading_gpus": p.best_reading})
            last = p.best_reading
    return {"schedule": steps, "switch_s": switch_s}


def roles_text(n_gpus: int, roles: dict) -> str:
    """The switching plan as a scenario arrangement, ready to paste under `arrangements:`."""
    first = roles["schedule"][0]["reading_gpus"]
    lines = [f"  - name: {SWITCHING}", "    kind: disaggregated", f"    reading_gpus: {first}",
             f"    writing_gpus: {n_gpus - first}", "    roles:", f"      switch_s: {roles['switch_s']:g}",
             "      schedule:"]
    lines += [f"        - {{from_s: {s['from_s']:g}, reading_gpus: {s['reading_gpus']}}}" for s in roles["schedule"]]
    return "\n".join(lines)


def day_arrangements(n_gpus: int, best: list[PeriodBest], switch_s: float, policy: dict | None = None) -> list[dict]:
    """Every static split, the switching plan and the reactive policy, for the whole day."""
    roles = switching_roles(best, switch_s)
    first = best[0].best_reading
    planned = {**split(first, n_gpus), "name": SWITCHING, "roles": roles}  # (one split all day: no move)
    reactive = {**split(first, n_gpus), "name": REACTIVE, "roles": {"policy": "queue", "switch_s": switch_s,
                                                                     **(policy or {})}}
    return [split(r, n_gpus) for r in range(1, n_gpus)] + [planned, reactive]


def day_figures(task: tuple[Scenario, int, tuple[float, ...]]) -> list[dict]:
    """One seed of the whole day, every arrangement: on-time % over the measured requests and by
    the period they arrive in (period starts `bounds`), and the moves made. A pool's task."""
    scenario, seed, bounds = task
    rows = []
    for one in run_each(scenario, seed):
        (name, rec), = one.records.items()
        gaps = one.gaps[name]
        arrived = rec.requests["arrived_at_ns"][gaps.rows] / 1e9
        on_time = np.asarray(gaps.on_time, dtype=bool)
        period = np.searchsorted(np.asarray(bounds[1:]), arrived, side="right")
        row = {"arrangement": name, "seed": seed, "day": 100.0 * on_time.mean() if len(on_time) else np.nan,
               "n_switches": len(rec.switches["gpu"]) if rec.switches else 0,
               "moves": list(zip(rec.switches["requested_at_ns"], rec.switches["serving_at_ns"], rec.switches["to_role"]))
               if rec.switches else []}
        for k in range(len(bounds)):
            mine = on_time[period == k]
            row[f"period_{k}"] = 100.0 * mine.mean() if len(mine) else np.nan
        rows.append(row)
    return rows


def whole_day(scenario: Scenario, runner: Runner, seeds: tuple[int, ...], bounds: tuple[float, ...]) -> pd.DataFrame:
    """`day_figures` of every seed, through the runner's pool (local processes or Dask)."""
    tasks = [(scenario, seed, bounds) for seed in seeds]
    out: list[list[dict]] = [[] for _ in tasks]
    for i, rows in runner.pool.run(day_figures, tasks):
        out[i] = rows
    return pd.DataFrame([r for rows in out for r in rows])


def over_time_table(day: pd.DataFrame, best: list[PeriodBest], names: list[str]) -> tuple[pd.DataFrame, str]:
    """plan_over_time.csv: per arrangement and part of the day (`day`, then each period), the mean
    on-time share and its 95% interval over seeds, the mean moves, and the paired difference from
    the best static split (the static split with the highest mean over the day); and its name."""
    statics = [n for n in names if n.startswith("split-")]
    by = {n: day[day.arrangement == n].set_index("seed") for n in names}
    best_static = max(statics, key=lambda n: (by[n]["day"].mean(), -statics.index(n)))
    parts = [("day", best[0].start_s, best[-1].end_s)] + [(f"period_{p.index}", p.start_s, p.end_s) for p in best]
    rows = []
    for n in names:
        for part, start, end in parts:
            share = interval(by[n][part], SHARE)
            diff = interval(by[n][part] - by[best_static][part])
            rows.append({"arrangement": n, "part": part, "start_s": start, "end_s": end,
                         "on_time_pct": share.mean, "on_time_low_pct": share.low, "on_time_high_pct": share.high,
                         "vs_best_static_pct": diff.mean, "vs_best_static_low_pct": diff.low,
                         "vs_best_static_high_pct": diff.high, "n_switches": float(by[n]["n_switches"].mean())})
    from ..results.columns import names as column_names

    return pd.DataFrame(rows, columns=list(column_names("plan_over_time"))), best_static
