"""`plan SCENARIO --gpu-kinds a100-80gb,h100-80gb (--budget-per-hour USD | --power-budget-kw KW |
--rate R | --iso-cost USD | --iso-power KW)`: plans over GPU kinds (sweep/plan_kinds.py, docs/cost.md)."""

from __future__ import annotations

import math
import sys

import yaml

from ..errors import InputError
from .batch import Batch, Job, refuse_varying_traffic
from .common import positive_float

#: the flags that ask for a plan over GPU kinds, and what each budget is
BUDGETS = {"budget_per_hour": "--budget-per-hour", "power_budget_kw": "--power-budget-kw", "iso_cost": "--iso-cost",
           "iso_power": "--iso-power"}


def add_kinds_flags(p, budget) -> None:
    """--gpu-kinds and the budgets (in plan's group of --gpus and --rate: one at a time)."""
    from ..sweep.plan_kinds import kinds_flag

    p.add_argument("--gpu-kinds", type=kinds_flag, metavar="K1,K2",
                   help="plan over these GPU kinds (python -m disagg_simpy presets gpus), each side on the scenario's "
                        "preset on its kind, up to --max-gpus GPUs: with --budget-per-hour or --power-budget-kw, rank "
                        "what fits by goodput per dollar (per kW); with --rate, the cheapest that carries it "
                        "(docs/cost.md)")
    budget.add_argument("--budget-per-hour", type=positive_float("--budget-per-hour"), metavar="USD",
                        help="with --gpu-kinds: the most the GPUs may cost an hour")
    budget.add_argument("--power-budget-kw", type=positive_float("--power-budget-kw"), metavar="KW",
                        help="with --gpu-kinds: the most board power the GPUs may draw (kW); ranked per kW")
    budget.add_argument("--iso-cost", type=positive_float("--iso-cost"), metavar="USD",
                        help="with --gpu-kinds: the best arrangement of each kind and of each mixed pool costing at most "
                             "USD an hour, side by side")
    budget.add_argument("--iso-power", type=positive_float("--iso-power"), metavar="KW",
                        help="with --gpu-kinds: the same at equal power (kW)")


def wants_kinds(args) -> bool:
    return args.gpu_kinds is not None or any(getattr(args, k) is not None for k in BUDGETS)


def _budget(args):
    from ..sweep.plan_kinds import Budget

    usd = args.budget_per_hour if args.budget_per_hour is not None else args.iso_cost
    kw = args.power_budget_kw if args.power_budget_kw is not None else args.iso_power
    return Budget(usd, kw, args.max_gpus)


def check_kinds(args, scenario, check_cost):
    """Every check before any run: the flags together, each kind's preset, the budget (one no
    arrangement fits is refused, naming the cheapest's cost), the plan's cost. Returns what the
    plan searches: (presets by kind, the scenario with the candidates in the budget, units to rank
    per, the candidates as written). `check_cost` is plan's (cli/plan.py)."""
    from ..sweep.plan_kinds import candidates, capacity_notes, side_presets, version_notes, within

    given = [flag for key, flag in BUDGETS.items() if getattr(args, key) is not None]
    if args.gpu_kinds is None:
        raise InputError(f"{given[0]}: got it without --gpu-kinds, expected --gpu-kinds K1,K2 (the GPU kinds to plan over)")
    if args.gpus is not None:
        raise InputError("--gpu-kinds: got it with --gpus, expected a budget instead: --budget-per-hour, --power-budget-kw, "
                         "--rate, --iso-cost or --iso-power (the GPUs are counted up to --max-gpus)")
    for flag, bad in (("--over-time", args.over_time), ("--period-s", args.period_s is not None),
                      ("--switch-s", args.switch_s is not None)):
        if bad:
            raise InputError(f"{flag}: got it with --gpu-kinds, expected one at a time (a plan over the day moves GPUs "
                             "of one pool between reading and writing): plan --gpu-kinds at the busiest period's --rate "
                             "picks the pool, then plan --over-time with its arrangement's preset in cost: plans the day")
    if args.cost_error is not None and args.budget_per_hour is None and args.power_budget_kw is None:
        mode = "--rate" if args.rate is not None else "--iso-cost" if args.iso_cost is not None else "--iso-power"
        raise InputError(f"--cost-error: got it with --gpu-kinds and {mode}, expected it with --budget-per-hour or "
                         "--power-budget-kw, where plan checks its two best per dollar (or kW) against cost errors; "
                         f"for {mode}'s answer, run plan --gpus N --cost-error on a scenario of its arrangement")
    if args.splits is not None and any(r >= args.max_gpus for r in args.splits):
        raise InputError(f"--splits: got {','.join(map(str, args.splits))}, expected reading GPU counts below "
                         f"--max-gpus {args.max_gpus} (a split keeps a writing GPU)")
    refuse_varying_traffic(scenario, "plan")
    presets = side_presets(scenario, args.gpu_kinds)
    for note in (*version_notes(scenario, args.gpu_kinds), *capacity_notes(scenario)):
        print(f"warning: --gpu-kinds: {note}", file=sys.stderr)
    searched = presets if args.tp == (1,) else _at_tps(args, presets)
    arrangements = candidates(searched, args.max_gpus, args.chunks, splits=args.splits)
    if args.rate is not None:
        from ..sweep.plan_kinds import with_kinds

        planned, per = with_kinds(scenario, arrangements, "--gpu-kinds"), {"": 0.0}
    else:
        planned, per = within(scenario, arrangements, _budget(args), given[0])
    note = check_cost(args, planned, [a.model_dump(mode="json") for a in planned.arrangements],
                      _seeds(scenario))
    if note:
        print(note, file=sys.stderr)
    return searched, planned, per, arrangements


def _at_tps(args, presets: dict[str, str]) -> dict[str, tuple[str, ...]]:
    """--tp with --gpu-kinds: each kind's preset at each degree; those missing said on stderr, a
    kind with none refused in one line."""
    from ..sweep.plan_kinds import at_tps

    searched, missing = at_tps(presets, args.tp)
    empty = [k for k, names in searched.items() if not names]
    if empty:
        raise InputError(f"--tp: got {','.join(map(str, args.tp))}, but {empty[0]} has no preset of "
                         f"{presets[empty[0]]}'s model and engine at those degrees; expected degrees with a preset on "
                         "every kind (python -m disagg_simpy presets lists them)")
    if missing:
        print(f"--tp: no preset {', '.join(missing)}; searching the others", file=sys.stderr)
    return searched


def _names(presets: dict) -> tuple[str, ...]:
    """The presets a plan over GPU kinds runs (one per kind, or one per kind and TP)."""
    return tuple(n for v in presets.values() for n in ((v,) if isinstance(v, str) else v))


def _seeds(scenario):
    from .common import seeds_to_run

    return seeds_to_run(scenario)[0]


def recommendation(table, target: float, per: str, slo=None) -> str:
    """The best per dollar (or kW) and whether it beats the runner-up: their 95% intervals of
    dollars per million requests (per kW: of goodput per kW) do not overlap (the other way
    round, said so). Worded
    after the scenario's rule `slo` (on time only where on time is the rule)."""
    at = _at(slo, target)
    if table.empty or not table["goodput_per_s"].iloc[0] > 0:
        return f"no arrangement reaches {at.removeprefix('at ')} at any rate tried"
    best = table.iloc[0]
    head = (f"{best.arrangement} ({best.gpu_kinds}) carries the most per {per}: {best.goodput_per_s:.2f} requests/s "
            f"{at} for {best.dollars_per_hour:.2f} $/h ({best.power_kw:.1f} kW): "
            f"{_money(best, 'dollars_per_million')} $ per million requests at its goodput")
    if len(table) < 2 or math.isnan(table["goodput_per_s"].iloc[1]):
        return head
    second = table.iloc[1]
    if math.isnan(best.goodput_low_per_s) or math.isnan(second.goodput_low_per_s):
        return f"{head}; next {second.arrangement} ({_money(second, 'dollars_per_million')}; one seed: no interval)"
    from .cost_text import money

    (b_low, b_high), (s_low, s_high) = _ranked_interval(best, per), _ranked_interval(second, per)
    fmt = money if per == "dollar" else (lambda v: f"{v:.2f}")
    ranges = (f"{fmt(b_low)}-{fmt(b_high)} against {fmt(s_low)}-{fmt(s_high)} "
              f"{'$ per million' if per == 'dollar' else 'requests/s per kW'}, 95% intervals")
    # per dollar, fewer dollars per million is better; per kW, more goodput per kW
    ahead, behind = (b_high < s_low, s_high < b_low) if per == "dollar" else (b_low > s_high, s_low > b_high)
    if ahead:
        return f"{head}; it beats {second.arrangement}: {ranges}"
    if behind:
        return f"{head}; {second.arrangement} is ahead on the intervals though behind on the means: {ranges}"
    return f"{head}; too close to call against {second.arrangement}: {ranges} overlap"


def _ranked_interval(r, per: str) -> tuple[float, float]:
    """The 95% interval the ranking is judged on: dollars per million (per dollar), or goodput
    per kW (per kW, from the goodput's)."""
    if per == "dollar":
        return r.dollars_per_million_low, r.dollars_per_million_high
    return r.goodput_low_per_s / r.power_kw, r.goodput_high_per_s / r.power_kw


def _at(slo, target: float) -> str:
    """'at 90% on time', or the rule's own words (`Slo.at_text`)."""
    return slo.at_text(target) if slo is not None else f"at {target:g}% on time"


def _money(r, key: str) -> str:
    from .cost_text import money

    return money(getattr(r, key))


def plan_kinds(job: Job, format_plan) -> Batch | None:
    """The plan over GPU kinds the flags ask for; `format_plan` is plan's table (cli/plan.py)."""
    from ..page.commands import plan_page
    from ..sweep.cost_error import cost_error_check, with_bands
    from ..sweep.goodput import criterion_text
    from ..sweep.plan import plan
    from ..sweep.plan_kinds import cheapest_for_rate, iso

    scenario, seeds, args, runner = job.scenario, job.seeds, job.args, job.runner
    presets, planned, per, arrangements = job.prepared
    kinds = ", ".join(args.gpu_kinds)
    sure = None
    criterion = f"criterion: {criterion_text(scenario.slo, args.target)}"
    at = _at(scenario.slo, args.target)
    if args.rate is not None:
        table, chosen = cheapest_for_rate(scenario, arrangements, runner, seeds, args.target, args.tolerance, args.rate)
        if chosen is None:
            print(f"no arrangement of up to {args.max_gpus} GPUs of {kinds} carries {args.rate:g} requests/s "
                  f"{at} (mean of {len(seeds)} seeds, goodput interval above the rate); try more "
                  "--max-gpus", file=sys.stderr)
            return None
        best = table[table["arrangement"] == chosen].iloc[0]
        title = f"{scenario.name}: the cheapest of {kinds} carrying {args.rate:g} requests/s {at}"
        line = (f"{chosen} ({best.gpu_kinds}) is the cheapest that carries {args.rate:g} requests/s: {best.dollars_per_hour:.2f} "
                f"$/h, goodput {best.goodput_per_s:.2f}" + ("" if math.isnan(best.goodput_low_per_s) else
                f" ({best.goodput_low_per_s:.2f}-{best.goodput_high_per_s:.2f}, above the rate)") +
                f"; {_money(best, 'dollars_per_million')} $ per million requests at its goodput; cheaper ones "
                "passing at the rate but not clearly above it are listed above it" * (len(table) > 1))
        pick = chosen
    elif args.iso_cost is not None or args.iso_power is not None:
        budget = _budget(args)
        table = iso(scenario, runner, seeds, args.target, args.tolerance, presets, budget, args.chunks,
                    "--iso-cost" if args.iso_cost is not None else "--iso-power", args.splits)
        title = f"{scenario.name}: the best of each pool of {kinds} at {budget.text()}, {at}"
        line = iso_text(table)
        pick = table["arrangement"].iloc[table["goodput_per_s"].fillna(0).argmax()]
    else:
        table = plan(planned, runner, seeds, args.target, args.tolerance, exhaustive=args.exhaustive, per=per)
        sure, bands = cost_error_check(planned, runner, seeds, args.target, args.tolerance, table, args.cost_error,
                                       per=per, presets=_names(presets))
        table = with_bands(table, bands)
        unit = "dollar" if args.power_budget_kw is None else "kW"
        title = f"{scenario.name}: goodput per {unit} of {kinds} within {_budget(args).text()}, {at}"
        line = recommendation(table, args.target, unit, scenario.slo)
        pick = table["arrangement"].iloc[0]
    block = _block(scenario, arrangements, pick)
    rate = args.rate

    def picture(folder):
        from ..plots.capacity import save_cost_plan

        return save_cost_plan(table, folder / "plan.png", title, rate, scenario.slo.carried_text())

    return Batch(
        table,
        info={"gpu_kinds": list(args.gpu_kinds), "presets": presets, "target_pct": args.target,
              "tolerance_per_s": args.tolerance, "max_gpus": args.max_gpus, "recommendation": line,
              **{k: getattr(args, k) for k in BUDGETS if getattr(args, k) is not None},
              **({"rate_per_s": rate} if rate is not None else {}), **({"cost_error": sure} if sure else {})},
        lines=[title, criterion, format_plan(table, scenario.slo.share_header(), pools="pool" in table.columns), line,
               *([sure] if sure else []),
               *([f"as a scenario arrangement: {block}"] if block else [])],
        picture=picture,
        page=lambda path: plan_page(path, table, title, line, args.target),
    )


def _block(scenario, arrangements: list[dict], pick) -> str:
    """The picked candidate as simulated (the keys carried from the scenario's engine included,
    `with_kinds`), as a scenario file writes it: pasted into the scenario, it runs the same."""
    from ..sweep.plan_kinds import written

    raw = [d for d in arrangements if d["name"] == pick]
    return yaml.safe_dump(written(scenario, raw), default_flow_style=True, sort_keys=False, width=10**6).strip() \
        if raw else ""


def iso_text(table) -> str:
    """Each mixed pool's best against the best pool of one kind: goodput and dollars per million
    requests at the goodput (results/costs.py)."""
    single = table[~table["pool"].str.contains("reading")]
    if single.empty or table.empty:
        return "no pool fits the budget"
    top = single.loc[single["goodput_per_s"].fillna(0).idxmax()]
    out = [f"best of one kind: {top.arrangement} ({top.pool}), {top.goodput_per_s:.2f} requests/s for "
           f"{top.dollars_per_hour:.2f} $/h"]
    for r in table[table["pool"].str.contains("reading")].itertuples():
        ratio = r.goodput_per_s / top.goodput_per_s if top.goodput_per_s > 0 else math.nan
        paired = "" if math.isnan(r.vs_best_single_low) else (
            f", {r.vs_best_single_per_million:+.2f} $ per million requests at the goodput against it ({r.vs_best_single_low:+.2f} to "
            f"{r.vs_best_single_high:+.2f}, paired over seeds)")
        out.append(f"{r.pool}: {r.arrangement}, {r.goodput_per_s:.2f} requests/s for {r.dollars_per_hour:.2f} $/h "
                   f"({ratio:.2f}x the goodput{paired})")
    return "; ".join(out)
