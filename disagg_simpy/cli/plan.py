"""`python -m disagg_simpy plan SCENARIO --gpus 4` (or `--rate R`): every arrangement that fits
the GPUs, ranked by goodput for the scenario's traffic, and a one-line recommendation."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence

from ..errors import InputError
from ..scenario.roles import DEFAULT_SWITCH_S
from ..texts import aligned
from .batch import Batch, Job, batch_parser, output_files, refuse_varying_traffic, run_batch, target_flag
from .common import cost_error_flag, int_at_least, int_list_flag, positive_float
from .plan_kinds import add_kinds_flags, check_kinds, plan_kinds, wants_kinds
from .plan_over_time import switch_seconds

OUTPUT_FILES = output_files("plan")


chunks_flag = int_list_flag("--chunks", "chunk sizes in tokens like 256,512", "tokens")
splits_flag = int_list_flag("--splits", "reading GPU counts like 2,4,6", "reading GPUs")
tp_flag = int_list_flag("--tp", "TP degrees like 1,2,4", "GPUs per instance", none_ok=False)


def build_plan_parser():
    p = batch_parser("plan", "Rank every arrangement of --gpus GPUs (same GPU, chunks, every reading:writing "
                     "split, whole or chunked reading) by goodput for the scenario's traffic; or, with --rate, "
                     "find the fewest GPUs that carry that rate on time.")
    budget = p.add_mutually_exclusive_group(required=True)
    budget.add_argument("--gpus", type=int_at_least("--gpus", 1, 64), metavar="N", help="GPUs to arrange")
    budget.add_argument("--rate", type=positive_float("--rate"), metavar="PER_S",
                        help="requests/s to carry: find the fewest GPUs (up to --max-gpus) and how to use them")
    p.add_argument("--max-gpus", type=int_at_least("--max-gpus", 1, 64), default=16, metavar="N",
                   help="with --rate or --gpu-kinds: the most GPUs to try (default 16)")
    add_kinds_flags(p, budget)
    p.add_argument("--set", dest="fixed", action="append", default=[], metavar="KEY=VALUE",
                   help="set a scenario key for every run, e.g. router=prefix_aware or prefix_cache_tokens=500000 "
                        "(repeatable)")
    p.add_argument("--target", type=target_flag, default=90.0, metavar="PCT", help="on-time share to meet (default 90)")
    p.add_argument("--tolerance", type=positive_float("--tolerance"), default=0.1, metavar="PER_S",
                   help="bisection tolerance of each goodput (default 0.1 requests/s)")
    p.add_argument("--cost-error", type=cost_error_flag, metavar="PCT",
                   help="re-run the two best with each side's costs off by up to PCT %% (one side at a time) and say "
                   "whether the winner holds or which cost error flips it (default: the cost preset's stated errors, "
                   "when the scenario names a preset)")
    p.add_argument("--chunks", type=chunks_flag, default=(256, 512, 1024, 2048), metavar="C1,C2",
                   help="chunk sizes tried, on the same GPU and on a split's reading GPUs (default 256,512,1024,2048)")
    p.add_argument("--exhaustive", action="store_true",
                   help="search every arrangement to its end, with its interval (default: leave those that cannot reach "
                        "the top two, and search intervals for the top two only)")
    p.add_argument("--splits", type=splits_flag, metavar="R1,R2",
                   help="reading GPUs of the splits tried, e.g. 4,6,8 (default every split; none: no split)")
    p.add_argument("--tp", type=tp_flag, default=(1,), metavar="T1,T2",
                   help="TP degrees tried, e.g. 1,2,4 (default 1): each from the preset of the scenario's GPU, "
                        "model and engine at that TP (its cost: block, or every arrangement's, names a preset of any TP)")
    p.add_argument("--over-time", action="store_true",
                   help="with a workload.schedule: the best split per period, the switching plan as a roles: block, "
                        "and the whole day run for it, every static split and the reactive policy (plan_over_time.csv; "
                        "docs/over-time.md)")
    p.add_argument("--period-s", type=positive_float("--period-s"), metavar="S",
                   help="with --over-time on a workload.rate_curve: plan periods of S seconds (each at the curve's mean rate)")
    p.add_argument("--switch-s", type=switch_seconds, metavar="S",
                   help=f"with --over-time: a move's warm-up in seconds (default {DEFAULT_SWITCH_S:g})")
    return p


def check_cost(args, scenario, arrangements: list[dict], seeds) -> str:
    """Refuse a plan that would run for hours, saying how long and how to narrow it; the note
    for stderr of one that takes minutes ('' if not)."""
    import os

    from ..sweep.plan_cost import plan_cost_problem

    narrow = "--splits R1,R2 (the reading GPUs of the splits to try), --chunks none (or fewer sizes)"
    narrow += ", --tp" if hasattr(args, "tp") else ""
    narrow += ", fewer --seeds, or more --workers or a --dask cluster"
    workers = None if args.dask else (args.workers or os.cpu_count() or 1)
    problem, note = plan_cost_problem(scenario, arrangements, len(seeds), workers, narrow,
                                      exhaustive=getattr(args, "exhaustive", True))
    if problem:
        raise InputError(problem)
    return note


def format_plan(table, share: str = "on time %", pools: bool = False) -> str:
    """Aligned text of plan.csv; `share`: the header of the per-request share (`Slo.share_header`);
    `pools`: `plan --iso-cost/--iso-power`'s rows, one per pool, led by the pool (no rank or GPU kinds)."""
    import pandas as pd

    from . import cost_text

    costs = cost_text.has_costs(table)
    header = [*(["pool"] if pools else ["rank"]), "arrangement", "gpus", "goodput/s (95% interval)", "per GPU",
              f"{share} at rate", "fails first", *([*(() if pools else ("GPU kinds",)), *cost_text.header()] if costs
                                                  else [])]
    rows = []
    for r in table.itertuples():
        interval = "" if math.isnan(r.goodput_low_per_s) else f" ({r.goodput_low_per_s:.2f}-{r.goodput_high_per_s:.2f})"
        goodput = f"{r.goodput_per_s:.2f}{interval}"
        if not math.isnan(r.goodput_below_per_s):  # left: two others beat it (sweep/plan.py)
            goodput = f"below {r.goodput_below_per_s:.2f} (left: not in the top two)"
        gpus = f"{r.gpus}" if pd.isna(r.reading_gpus) else f"{r.reading_gpus}+{r.writing_gpus}"  # a split's sides
        rows.append([r.pool if pools else str(r.rank), r.arrangement, gpus, goodput,
                     "-" if math.isnan(r.goodput_per_gpu_per_s) else f"{r.goodput_per_gpu_per_s:.2f}",
                     "-" if math.isnan(r.on_time_pct_at_rate) else f"{r.on_time_pct_at_rate:.1f}", r.binding_limit or "-",
                     *([*(() if pools else (r.gpu_kinds or "-",)), *cost_text.cells(r)] if costs else [])])
    return "\n".join(aligned([header, *rows], left={0, 1} if pools else {1}))


def tp_search(args, scenario, say: bool = True) -> tuple[tuple[int, ...], Callable[[int], dict | None] | None]:
    """--tp: the TP degrees to search and each one's cost block (the preset of the scenario's GPU,
    model and engine at that TP); the degrees without a preset are left out, and said on stderr."""
    if args.tp == (1,):
        return args.tp, None
    from ..costs.presets import NAMES, at_tp, parts

    preset = scenario.cost.preset or _arrangements_preset(scenario)
    found = parts(preset) if preset else None
    if preset is None or found is None:
        got = f"the cost {preset}" if preset else "no preset"
        raise InputError(f"--tp: got {','.join(map(str, args.tp))} with {got} in the scenario's cost:, expected a "
                         "preset there (its GPU, model and engine give each TP degree's costs; python -m "
                         "disagg_simpy presets lists them)")
    tp_of_scenario = found[2]
    have = tuple(t for t in args.tp if at_tp(preset, t) in NAMES)
    missing = [str(t) for t in args.tp if t not in have]
    if not have:
        degrees = sorted(p[2] for n in NAMES if (p := parts(n)) and at_tp(n, 1) == at_tp(preset, 1))
        raise InputError(f"--tp: got {','.join(map(str, args.tp))}, but {at_tp(preset, 0).replace('/tp0/', '/')} "
                         f"has no preset at TP {', '.join(missing)}; expected degrees with a preset: "
                         f"{', '.join(map(str, degrees))} (python -m disagg_simpy presets lists them)")
    if missing and say:
        print(f"--tp: no preset {', '.join(at_tp(preset, int(t)) for t in missing)}; "
              f"searching TP {', '.join(map(str, have))}", file=sys.stderr)
    # (a TP1 candidate keeps the scenario's costs when they are TP1's, else takes the TP1 preset)
    return have, lambda t: None if t == 1 == tp_of_scenario else {"preset": at_tp(preset, t)}


def _arrangements_preset(scenario) -> str | None:
    """The one cost preset every arrangement of the scenario names (each writes its own `cost:`),
    else None: --tp then starts from it as from the scenario's cost:."""
    named = {c.preset for a in scenario.arrangements for c in (getattr(a, k, None) for k in a.side_tps) if c}
    return named.pop() if len(named) == 1 else None


def _check(args, scenario) -> None:
    """Every check before any run: --splits against --gpus, the candidates, the plan's cost."""
    from ..sweep.plan import candidates, with_candidates
    from .common import seeds_to_run

    if wants_kinds(args):  # plans over GPU kinds (plan_kinds.py)
        return check_kinds(args, scenario, check_cost)
    if args.over_time:
        from .plan_over_time import check_over_time

        return check_over_time(args, scenario)
    if args.period_s is not None:
        raise InputError("--period-s: got it without --over-time, expected it with --over-time (plans over a day)")
    if args.switch_s is not None:
        raise InputError(f"--switch-s: got {args.switch_s:g} without --over-time, expected it with --over-time "
                         "(a move's warm-up in the plan over a day)")
    refuse_varying_traffic(scenario, "plan")

    if args.splits is not None and args.gpus is None:
        raise InputError("--splits: got it with --rate, expected it with --gpus N (the splits of N GPUs to try)")
    if args.splits is not None and any(r >= args.gpus for r in args.splits):
        raise InputError(f"--splits: got {','.join(map(str, args.splits))}, expected reading GPU counts below "
                         f"--gpus {args.gpus} (a split keeps a writing GPU)")
    tps, tp_cost = tp_search(args, scenario)
    if args.gpus is not None:
        arrangements = candidates(args.gpus, args.chunks, splits=args.splits, tps=tps, tp_cost=tp_cost)
        cost_note = check_cost(args, scenario, arrangements, seeds_to_run(scenario)[0])
        with_candidates(scenario, arrangements, "--gpus")
        if cost_note:
            print(cost_note, file=sys.stderr)


def _plan(job: Job) -> Batch | None:
    from ..page.commands import plan_page
    from ..sweep.goodput import criterion_text
    from ..sweep.grid import RATE, resolve
    from ..sweep.plan import arrangement_text, candidates, fewest_gpus, plan, recommendation, with_candidates

    if wants_kinds(job.args):
        return plan_kinds(job, format_plan)
    scenario, seeds, args, runner = job.scenario, job.seeds, job.args, job.runner
    n_gpus, passing = args.gpus, None
    tps, tp_cost = tp_search(args, scenario, say=False)
    if args.rate is not None:
        n_gpus, passing = fewest_gpus(scenario, runner, seeds, args.target, args.rate, args.max_gpus, args.chunks,
                                      tps=tps, tp_cost=tp_cost)
    if n_gpus is None:
        print(f"no arrangement of up to {args.max_gpus} GPUs carries {args.rate:g} requests/s "
              f"{scenario.slo.at_text(args.target)} (mean of {len(seeds)} seeds); try more --max-gpus", file=sys.stderr)
        return None
    planned = with_candidates(scenario, candidates(n_gpus, args.chunks, splits=args.splits, tps=tps, tp_cost=tp_cost),
                              "--gpus")
    if args.rate is not None:
        planned = resolve(planned, {RATE: args.rate})
    table = plan(planned, runner, seeds, args.target, args.tolerance, exhaustive=args.exhaustive)
    best = table.iloc[0]
    line = recommendation(table, args.target, scenario.slo)
    if args.rate is not None:
        line = (f"{n_gpus} GPU{'s' * (n_gpus > 1)} carry {args.rate:g} requests/s {scenario.slo.at_text(args.target)} "
                f"({', '.join(passing or [])}); {line}")
    arrangement = next(a for a in planned.arrangements if a.name == best.arrangement)
    w = scenario.workload
    at = scenario.slo.at_text(args.target)
    title = (f"{scenario.name}: goodput {at} on {n_gpus} GPUs (mean of {len(seeds)} "
             f"seed{'s' * (len(seeds) > 1)}; measured window {w.measure_s:g} s)" if w.measure_s else
             f"{scenario.name}: goodput {at} on {n_gpus} GPUs")
    labels = {a.name: a.label for a in planned.arrangements}

    def picture(folder):
        from ..plots.capacity import save_plan

        return save_plan(table, folder / "plan.png", title, labels, scenario.slo.carried_text())

    from ..sweep.cost_error import cost_error_check, with_bands

    sure, bands = cost_error_check(planned, runner, seeds, args.target, args.tolerance, table, args.cost_error)
    table = with_bands(table, bands)
    return Batch(
        table,
        info={"gpus": int(n_gpus), "target_pct": args.target, "tolerance_per_s": args.tolerance,
              "recommendation": line, "cost_error": sure},
        lines=[f"{title}; {scenario.slo.share_header()} at {planned.workload.rate_per_s:g} requests/s",
               f"criterion: {criterion_text(scenario.slo, args.target)}", format_plan(table, scenario.slo.share_header()), line,
               *([sure] if sure else []),
               f"as a scenario arrangement: {arrangement_text(arrangement)}"],
        picture=picture,
        page=lambda path: plan_page(path, table, title, line, args.target),
    )


def plan_command(argv: Sequence[str]) -> int:
    """Rank every way to use N GPUs (or find the fewest GPUs for a rate) for the scenario's traffic."""
    if "--over-time" in (argv or ()):  # E12: plan_over_time.csv instead of plan.csv
        from .plan_over_time import plan_over_time

        return run_batch(argv, build_plan_parser(), "plan_over_time", plan_over_time, prepare=_check)
    return run_batch(argv, build_plan_parser(), "plan", _plan, prepare=_check)
