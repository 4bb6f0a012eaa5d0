"""Plan: the best way to use N GPUs for a scenario's traffic, or the fewest GPUs for a rate.

Every arrangement that fits the budget is searched for its goodput (as `goodput` does: the
highest rate whose mean on-time share over the seeds meets the target), and ranked by it.
Its 95% interval is goodput's own (sweep/goodput.py `goodput_search`: where the on-time
share's interval crosses the target), so the point lies in it; two arrangements whose
intervals overlap are too close to call. Candidates are named as a scenario file would
name them (`same-gpu`, `chunked-512`, `split-2-2`, `split-2-2-chunked-512`), and each plan row
says how to write it.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pandas as pd

from ..errors import InputError
from ..results.columns import names
from ..scenario.limits import MAX_ARRANGEMENTS
from ..scenario.schema import DROP, Scenario
from .goodput import Prober, Search, drive, goodput_row, goodput_search, probe_rate
from .grid import RATE, resolve
from .plan_bounds import Bounds, capacity_proxy
from .runner import Runner, Task

DEFAULT_CHUNKS = (256, 512, 1024, 2048)

PLAN_COLUMNS = names("plan")
#: arrangements searched together, the likeliest first, before the next are checked against the bounds
WAVE = 8


def candidates(n_gpus: int, chunks: tuple[int, ...] = DEFAULT_CHUNKS, split_chunks: tuple[int, ...] | None = None,
               splits: tuple[int, ...] | None = None, tps: tuple[int, ...] = (1,),
               tp_cost: Callable[[int], dict] | None = None) -> list[dict]:
    """Every arrangement of `n_gpus` GPUs: same GPU whole and in each chunk size; every split
    r + w = n (or those with r reading GPUs in `splits`), whole and with chunked reading
    (`split_chunks`, default the same sizes). With TP degrees `tps`, also each of those whose
    sides' GPUs the degrees divide (GPUs stay GPUs), named with `-tpT` (a split `-tpR-W`), each
    TP side with the cost block `tp_cost(T)` (its instances' costs); a TP of 1 keeps the plain
    names and the scenario's costs."""
    split_chunks = chunks if split_chunks is None else split_chunks

    def own(tp: int, key: str, cost_key: str) -> dict:
        return {} if tp == 1 else {key: tp, **({cost_key: tp_cost(tp)} if tp_cost else {})}

    out = []
    for tp in (t for t in tps if n_gpus % t == 0):
        tag = "" if tp == 1 else f"-tp{tp}"
        same = {"name": f"same-gpu{tag}", "kind": "colocated", "gpus": n_gpus, **own(tp, "tp", "cost")}
        out.append(same)
        out += [{**same, "name": f"chunked-{c}{tag}", "chunk_tokens": c} for c in chunks]
    for r in range(1, n_gpus):
        if splits is not None and r not in splits:
            continue
        for rtp in (t for t in tps if r % t == 0):
            for wtp in (t for t in tps if (n_gpus - r) % t == 0):
                tag = "" if rtp == wtp == 1 else f"-tp{rtp}-{wtp}"
                split = {"name": f"split-{r}-{n_gpus - r}{tag}", "kind": "disaggregated", "reading_gpus": r,
                         "writing_gpus": n_gpus - r, **own(rtp, "reading_tp", "reading_cost"),
                         **own(wtp, "writing_tp", "writing_cost")}
                out.append(split)
                out += [{**split, "name": f"split-{r}-{n_gpus - r}-chunked-{c}{tag}", "chunk_tokens": c}
                        for c in split_chunks]
    return out


def with_candidates(scenario: Scenario, arrangements: list[dict], flag: str) -> Scenario:
    """The scenario's traffic, costs and limits with these arrangements instead of its own."""
    if len(arrangements) > MAX_ARRANGEMENTS:
        raise InputError(f"{flag}: got {len(arrangements)} arrangements to compare, expected at most "
                         f"{MAX_ARRANGEMENTS} (fewer GPUs or chunk sizes)")
    return scenario.with_overrides(flags={"arrangements": flag}, arrangements=arrangements, reference=DROP)


def arrangement_text(a) -> str:
    """An arrangement as a scenario file writes it (one YAML flow mapping)."""
    fields = a.model_dump(mode="json", exclude_defaults=True)
    return "{" + ", ".join(f"{k}: {v}" for k, v in fields.items()) + "}"


def at_rate(scenario: Scenario, runner: Runner, seeds: tuple[int, ...]) -> dict[str, float]:
    """Mean on-time share over seeds at the scenario's own rate, per arrangement (runs to the
    verdict cap: the share is exact)."""
    tasks = [Task(scenario, seed, verdicts_only=True) for seed in seeds]
    rows = pd.DataFrame([r for rows in runner.run(tasks, "runs") for r in rows])
    return rows.groupby("arrangement", sort=False)["on_time_pct"].mean().to_dict()


def plan(scenario: Scenario, runner: Runner, seeds: tuple[int, ...], target: float, tolerance: float,
         exhaustive: bool = False) -> pd.DataFrame:
    """plan.csv: every arrangement of `scenario`, ranked by goodput (1 = best).

    Arrangements are searched in waves, the likeliest first (`plan_bounds.capacity_proxy`);
    after each wave, one whose bound says every rate from the runner-up's goodput up fails
    (`plan_bounds.Bounds`) is not searched: its goodput is below the top two's, so the top two,
    their intervals and the recommendation are those of searching every one (`exhaustive`)."""
    if scenario.workload.rate_per_s is None:
        raise InputError(f"{scenario.source}: workload.rate_per_s: missing, expected a rate to start the search from")
    start = float(scenario.workload.rate_per_s)
    prober = Prober(scenario, runner, target)
    by_name = {a.name: a for a in scenario.arrangements}
    names = list(by_name)
    todo, below = names, {}
    found: dict[str, tuple] = {}
    bounds = None if exhaustive else Bounds(scenario, seeds, target)
    if bounds is not None:
        todo = sorted(names, key=lambda n: -capacity_proxy(scenario, by_name[n]))
    while todo:
        wave, todo = (todo, []) if bounds is None else (todo[:WAVE], todo[WAVE:])
        searches: dict[str, Search] = {n: goodput_search(n, start, seeds, target, tolerance, prober.fits,
                                                         slo=scenario.slo) for n in wave}
        found |= drive(searches, prober.run_batch)
        best = sorted((_goodput(found[n]) for n in found), reverse=True)
        if bounds is not None and len(best) >= 2 and best[1] > 0:
            for n in [n for n in todo if bounds.fails_from(by_name[n], best[1])]:
                below[n] = best[1]
            todo = [n for n in todo if n not in below]
    on_time = at_rate(scenario, runner, seeds)
    rows = []
    for a in scenario.arrangements:
        if a.name in below:
            rows.append(_not_searched(a, below[a.name], on_time))
            continue
        g = goodput_row(scenario, a.name, seeds, target, *found[a.name][:5])
        rows.append({
            "arrangement": a.name, "kind": a.kind, "gpus": a.n_gpus,
            "reading_gpus": a.n_reading_gpus if a.is_split else None,
            "writing_gpus": a.n_writing_gpus if a.is_split else None,
            "chunk_tokens": a.chunk_tokens,
            "goodput_per_s": g["goodput_per_s"], "goodput_per_gpu_per_s": g["goodput_per_gpu_per_s"],
            "goodput_low_per_s": g["goodput_low_per_s"], "goodput_high_per_s": g["goodput_high_per_s"],
            "on_time_pct_at_rate": on_time.get(a.name, math.nan), "binding_limit": g["binding_limit"],
            "goodput_below_per_s": math.nan,
        })
    table = pd.DataFrame(rows)
    for column in ("reading_gpus", "writing_gpus", "chunk_tokens"):  # whole numbers, empty where none
        table[column] = table[column].astype("Int64")
    table = table.sort_values(["goodput_per_s", "on_time_pct_at_rate"], ascending=False, kind="stable")
    table.insert(0, "rank", range(1, len(table) + 1))
    table = table.reset_index(drop=True)[list(PLAN_COLUMNS)]
    table.attrs["curves"] = {name: found[name][5] for name in found}  # for the --html page
    return table


def _not_searched(a, below: float, on_time: dict) -> dict:
    """The row of an arrangement not searched: its goodput is below `below` (the runner-up's)."""
    return {"arrangement": a.name, "kind": a.kind, "gpus": a.n_gpus,
            "reading_gpus": a.n_reading_gpus if a.is_split else None,
            "writing_gpus": a.n_writing_gpus if a.is_split else None,
            "chunk_tokens": a.chunk_tokens, "goodput_per_s": math.nan, "goodput_per_gpu_per_s": math.nan,
            "goodput_low_per_s": math.nan, "goodput_high_per_s": math.nan,
            "on_time_pct_at_rate": on_time.get(a.name, math.nan), "binding_limit": "", "goodput_below_per_s": below}


def _goodput(found: tuple) -> float:
    lo = found[0]
    return lo.rate if lo is not None else 0.0


def recommendation(table: pd.DataFrame, target: float) -> str:
    """One line: the best arrangement, and whether it beats the runner-up: it does when their
    95% goodput intervals do not overlap (best's low end above the runner-up's high end)."""
    if table.empty or table["goodput_per_s"].iloc[0] <= 0:
        return f"no arrangement reaches {target:g}% on time at any rate tried"
    best = table.iloc[0]
    text = f"{best.arrangement} carries the most: {best.goodput_per_s:.2f} requests/s at {target:g}% on time"
    if len(table) < 2:
        return text
    second = table.iloc[1]
    if math.isnan(best.goodput_low_per_s) or math.isnan(second.goodput_high_per_s):
        return f"{text}; next {second.arrangement} ({second.goodput_per_s:.2f}; one seed: no interval)"
    ranges = (f"{best.goodput_low_per_s:.2f}-{best.goodput_high_per_s:.2f} against "
              f"{second.goodput_low_per_s:.2f}-{second.goodput_high_per_s:.2f}, 95% intervals")
    if best.goodput_low_per_s > second.goodput_high_per_s:
        return f"{text}; it beats {second.arrangement} ({second.goodput_per_s:.2f}): {ranges}"
    return f"{text}; too close to call against {second.arrangement} ({second.goodput_per_s:.2f}): {ranges} overlap"


def fewest_gpus(scenario: Scenario, runner: Runner, seeds: tuple[int, ...], target: float, rate: float,
                max_gpus: int, chunks: tuple[int, ...], tps: tuple[int, ...] = (1,),
                tp_cost: Callable[[int], dict] | None = None) -> tuple[int | None, list[str]]:
    """The fewest GPUs (1..max_gpus) with an arrangement whose mean on-time share at `rate`
    meets the target, and those arrangements; (None, []) if none up to max_gpus does."""
    for n in range(1, max_gpus + 1):
        s = resolve(with_candidates(scenario, candidates(n, chunks, tps=tps, tp_cost=tp_cost), "--rate"), {RATE: rate})
        prober = Prober(s, runner, target)
        probes = {a.name: probe_rate(a.name, rate, seeds, target, s.slo) for a in s.arrangements}
        found = drive(probes, prober.run_batch)
        passing = [name for name, (_, ok) in found.items() if ok]
        if passing:
            return n, passing
    return None, []
