"""`plan SCENARIO --gpus N --over-time`: the best split per period of a scenario's schedule, the
switching plan as a `roles:` block, and the whole day run for it, every static split and the
reactive policy (sweep/role_plan.py; docs/over-time.md)."""

from __future__ import annotations

import math

from ..errors import InputError
from ..scenario.roles import DEFAULT_SWITCH_S
from ..texts import aligned
from .batch import Batch, Job


def switch_seconds(text: str) -> float:
    """--switch-s: seconds of warm-up, 0 or more."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 <= value <= 1e9:
        raise InputError(f"--switch-s: got {text!r}, expected a move's warm-up in seconds, 0 or more")
    return value


def check_over_time(args, scenario) -> None:
    """--over-time needs --gpus (at least 2: a split) and a workload with a schedule, or a rate
    curve with --period-s. An unset --switch-s takes its default here (without --over-time it is refused)."""
    if args.switch_s is None:
        args.switch_s = DEFAULT_SWITCH_S
    if args.gpus is None:
        raise InputError("--over-time: got it with --rate, expected it with --gpus N (the GPUs whose roles change)")
    if args.gpus < 2:
        raise InputError(f"--gpus: got {args.gpus} with --over-time, expected at least 2 (a split's two sides)")
    w = scenario.workload
    if getattr(w, "rate_curve", None) is not None and getattr(w, "schedule", None) is None:
        if args.period_s is None:
            raise InputError("--over-time: the scenario's workload has a rate_curve and no schedule, expected "
                             "--period-s S (the periods to plan, each at the curve's mean rate over it)")
        if w.measure_s is None or args.period_s >= w.measure_s:
            raise InputError(f"--period-s: got {args.period_s:g}, expected less than workload.measure_s "
                             f"({w.measure_s if w.measure_s is not None else 'not set'}): at least two periods")
        return
    if args.period_s is not None:
        raise InputError("--period-s: got it with a workload.schedule, expected it only with a rate_curve "
                         "(a schedule's periods are its own)")
    if getattr(w, "schedule", None) is None:
        raise InputError("--over-time: the scenario's workload has no schedule, expected workload.schedule "
                         "(periods: docs/traffic.md) whose best split may change")


def _pct(mean: float, low: float, high: float) -> str:
    if math.isnan(mean):
        return "-"
    return f"{mean:.1f}" if math.isnan(low) else f"{mean:.1f} ({low:.1f} to {high:.1f})"


def format_over_time(table, parts: list[str]) -> str:
    header = ["arrangement", "moves", *[("on time % " + p.replace("_", " ")) for p in parts],
              "vs best static (day)"]
    rows = []
    for name, t in table.groupby("arrangement", sort=False):
        t = t.set_index("part")
        day = t.loc["day"]
        rows.append([name, f"{day.n_switches:.1f}", *[_pct(t.loc[p].on_time_pct, t.loc[p].on_time_low_pct,
                                                            t.loc[p].on_time_high_pct) for p in parts],
                     _pct(day.vs_best_static_pct, day.vs_best_static_low_pct, day.vs_best_static_high_pct)])
    return "\n".join(aligned([header, *rows], left={0}))


def plan_over_time(job: Job) -> Batch:
    from ..sweep.plan import with_candidates
    from ..sweep.role_plan import (
        OVER_TIME_KEYS,
        REACTIVE,
        SWITCHING,
        best_per_period,
        day_arrangements,
        over_time_table,
        roles_text,
        switching_roles,
        whole_day,
    )

    scenario, seeds, args, runner = job.scenario, job.seeds, job.args, job.runner
    n = args.gpus
    best = best_per_period(scenario, n, runner, seeds, args.period_s)
    roles = switching_roles(best, args.switch_s)
    arrangements = day_arrangements(n, best, args.switch_s)
    day_scenario = with_candidates(scenario, arrangements, "--gpus", OVER_TIME_KEYS)
    names = [a["name"] for a in arrangements]
    day = whole_day(day_scenario, runner, seeds, tuple(p.start_s for p in best))
    table, best_static = over_time_table(day, best, names)
    parts = ["day", *[f"period_{p.index}" for p in best]]
    t = table.set_index(["arrangement", "part"])
    plan_day = t.loc[(SWITCHING, "day")]
    per_period = "; ".join(f"period {p.index} ({p.start_s:g}-{p.end_s:g} s, {p.rate_per_s:.2f} requests/s): "
                           f"split-{p.best_reading}-{n - p.best_reading}" for p in best)
    paired = ("one seed: no interval" if math.isnan(plan_day.vs_best_static_low_pct) else
              f"{plan_day.vs_best_static_low_pct:+.1f} to {plan_day.vs_best_static_high_pct:+.1f}, paired over "
              f"{len(seeds)} seeds")
    line = (f"switching plan: {_pct(plan_day.on_time_pct, plan_day.on_time_low_pct, plan_day.on_time_high_pct)}% "
            f"on time over the day, {plan_day.vs_best_static_pct:+.1f} points ({paired}) against the best static "
            f"split, {best_static}")
    react = t.loc[(REACTIVE, "day")]
    line2 = (f"reactive policy: {react.on_time_pct:.1f}% on time, {react.vs_best_static_pct:+.1f} points "
             f"against {best_static}, {react.n_switches:.1f} moves a day")
    paste = roles_text(n, roles)
    title = (f"{scenario.name}: {n} GPUs over {len(best)} periods, switch_s {args.switch_s:g} "
             f"(mean of {len(seeds)} seed{'s' * (len(seeds) > 1)})")

    from ..page.commands import over_time_page

    def picture(folder):
        from ..plots.roles import save_over_time

        return save_over_time(folder / "plan_over_time.png", title, best, day, table, names, n, best_static)

    return Batch(
        table,
        info={"gpus": n, "switch_s": args.switch_s, "best_static": best_static,
              "best_split_per_period": [{"period": p.index, "start_s": p.start_s, "end_s": p.end_s,
                                         "reading_gpus": p.best_reading, "on_time_pct": p.on_time} for p in best],
              "switching_plan": roles, "recommendation": line},
        lines=[title, f"best split per period (steady runs): {per_period}", format_over_time(table, parts),
               line, line2, "the switching plan, ready to paste under arrangements:", paste],
        picture=picture,
        page=lambda path: over_time_page(path, table, title, [line + ".", line2 + "."], best, day, n, best_static, paste),
    )
