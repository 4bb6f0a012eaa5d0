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
import re
from collections.abc import Callable

import pandas as pd

from ..errors import InputError
from ..results.columns import names
from ..results.costs import with_costs
from ..scenario import presets
from ..scenario.arrangements import KINDS
from ..scenario.limits import arrangements_limit
from ..scenario.schema import DROP, Scenario, Slo, has_attention_term
from .goodput import Probe, Prober, _rerun, bisect, decide, drive, goodput_interval, goodput_row, probe_curve, probe_rate, staged_target
from .grid import RATE, resolve
from .plan_bounds import Bounds, capacity_proxy
from .runner import Runner, Task

DEFAULT_CHUNKS = (256, 512, 1024, 2048)

PLAN_COLUMNS = names("plan")
#: arrangements searched together, the likeliest first, before the next are checked against the bounds
WAVE = 8
#: the waves after the first (the runner-up is known by then: more at once keeps the workers busy)
LATER_WAVE = 32


def candidates(n_gpus: int, chunks: tuple[int, ...] = DEFAULT_CHUNKS, split_chunks: tuple[int, ...] | None = None,
               splits: tuple[int, ...] | None = None, tps: tuple[int, ...] = (1,),
               tp_cost: Callable[[int], dict | None] | None = None) -> list[dict]:
    """Every arrangement of `n_gpus` GPUs: same GPU whole and in each chunk size; every split
    r + w = n (or those with r reading GPUs in `splits`), whole and with chunked reading
    (`split_chunks`, default the same sizes). With TP degrees `tps`, also each of those whose
    sides' GPUs the degrees divide (GPUs stay GPUs), named with `-tpT` (a split `-tpR-W`), each
    TP side with the cost block `tp_cost(T)` (its instances' costs); a TP of 1 keeps the plain
    names, and the scenario's costs unless `tp_cost(1)` gives a block."""
    split_chunks = chunks if split_chunks is None else split_chunks

    def own(tp: int, key: str, cost_key: str) -> dict:
        cost = tp_cost(tp) if tp_cost else None
        return {**({} if tp == 1 else {key: tp}), **({cost_key: cost} if cost else {})}

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


#: The keys a candidate sets itself: its kind, split, chunks and TP (and, over a day, its roles);
#: every other key of an arrangement is the scenario's, carried to the candidate (`carried`).
PLANNED_KEYS = ("name", "kind", "gpus", "reading_gpus", "writing_gpus", "chunk_tokens", "tp", "reading_tp", "writing_tp")
#: Keys a candidate of another kind or split cannot take as written, and why (`carried` refuses them).
_NOT_CARRIED = {
    "roles": "its moves name one split's GPU counts; plan ranks static arrangements (plan --over-time plans the "
             "roles over a day)",
}
#: Keys of one kind that mean nothing on the other, by the candidate's kind: where the scenario has no
#: arrangement of a candidate's kind, the candidate borrows the other kind's keys but these (a colocated
#: GPU ships no KV; a split's reading GPUs never write, so there is nothing to mix).
_NO_MEANING = {"colocated": ("kv_link", "kv_path", "kv_ship_ms_per_token", "local_prompt_max_tokens"),
               "disaggregated": ("mixed_iterations",)}
#: Keys of one side of a split, which a candidate whose side has TP instances cannot take (its costs and
#: memory per instance come from the preset at that TP), by the TP key of that side.
_PER_INSTANCE = {"tp": ("cost", "kv_capacity_tokens"),
                 "reading_tp": ("reading_cost", "kv_capacity_tokens", "reading_kv_capacity_tokens"),
                 "writing_tp": ("writing_cost", "kv_capacity_tokens", "writing_kv_capacity_tokens")}


def carried(scenario: Scenario, arrangements: list[dict], planned: tuple[str, ...] = PLANNED_KEYS) -> list[dict]:
    """Each candidate as the scenario's arrangement of its kind, with only its `planned` keys
    (kind, split, chunks, TP) changed: every other key the scenario's arrangements of that kind
    write (or, when it has none of that kind, all of its arrangements) is carried, so a plan
    answers for the engine the scenario describes (batch limits, KV memory and policy, its own
    costs, ...). A key the scenario's arrangements write differently, or that a candidate cannot
    carry, is refused in one line naming it (docs/plan.md)."""
    raw = presets.unfill(scenario.model_dump(mode="python", exclude_none=True), has_attention_term())["arrangements"]
    written = {a["name"]: _written(a, planned) for a in raw}
    out = []
    for cand in arrangements:
        kind = cand["kind"]
        source = [a["name"] for a in raw if a["kind"] == kind] or [a["name"] for a in raw]
        own: dict[str, tuple[str, object]] = {}  # key -> (the arrangement writing it, its value)
        for name in source:
            for k, v in written[name].items():
                own.setdefault(k, (name, v))
        same_kind = all(a["kind"] == kind for a in raw if a["name"] in source)
        for k, (first, v) in own.items():
            if k in _NOT_CARRIED:
                raise InputError(f"{scenario.source}: arrangements.{first}.{k}: got {_value(v)}, which plan cannot "
                                 f"carry to its candidates ({_NOT_CARRIED[k]}); expected no {k}")
            for name in source:
                if written[name].get(k) != v:
                    raise InputError(f"{scenario.source}: arrangements.{name}.{k}: got {_value(written[name].get(k))}, "
                                     f"but {first} writes {_value(v)}; expected one value in every "
                                     f"{_kind_text(kind) + ' ' if same_kind else ''}arrangement: plan builds each "
                                     f"candidate from the scenario's engine (write {k} the same in each)")
        for k, (first, origin, v) in _mapped(own, kind, same_kind).items():
            if not same_kind and k in _NO_MEANING.get(kind, ()):
                continue
            why = ""
            if not why and k not in KINDS[kind].model_fields and not _alias(kind, k):
                why = f"a {_kind_text(kind)} arrangement has no {k}"
            for tp_key, keys_of_side in _PER_INSTANCE.items():
                if cand.get(tp_key, 1) != 1 and k in keys_of_side and cand.get(k) != v:
                    why = (f"its {tp_key} {cand[tp_key]} takes each instance's costs and memory from the preset at "
                           "that TP")
            if why:
                fix = ("remove it to plan without it, or narrow the search: --tp" if same_kind else
                       f"add a {_kind_text(kind)} arrangement to the scenario to say how its engine runs, or remove "
                       "it to plan without it")
                raise InputError(f"{scenario.source}: arrangements.{first}.{origin}: got {_value(v)}, which plan cannot "
                                 f"carry to the candidate {cand['name']} ({why}); expected no {origin} ({fix})")
            if k not in cand:
                cand = {**cand, k: v}
        out.append(cand)
    return out


def _written(a: dict, planned: tuple[str, ...]) -> dict:
    """An arrangement's keys as its file writes them, without the planned ones and those at
    their default."""
    fields = {f.alias or k: f for k, f in KINDS[a["kind"]].model_fields.items()}
    return {k: v for k, v in a.items() if k not in planned and not (k in fields and v == fields[k].default)}


def _mapped(own: dict[str, tuple[str, object]], kind: str, same_kind: bool) -> dict[str, tuple[str, str, object]]:
    """key -> (arrangement, the key it wrote, value). Where the scenario has no arrangement of
    the candidate's kind, the same GPU's own `cost` (and `gpu` kind) is both sides' on a split, and
    a split's sides' costs (GPU kinds), when the same, a colocated arrangement's `cost` (`gpu`)."""
    out = {k: (name, k, v) for k, (name, v) in own.items()}
    if same_kind:
        return out
    for same, sides in (("cost", ("reading_cost", "writing_cost")), ("gpu", ("reading_gpu", "writing_gpu"))):
        if kind == "disaggregated" and same in out:
            out[sides[0]] = out[sides[1]] = out.pop(same)
        reading, writing = out.get(sides[0]), out.get(sides[1])
        if kind == "colocated" and reading is not None and writing is not None and reading[2] == writing[2]:
            out[same] = out.pop(sides[0])
            del out[sides[1]]
    return out


def _alias(kind: str, key: str) -> bool:
    return any(f.alias == key for f in KINDS[kind].model_fields.values())


def _kind_text(kind: str) -> str:
    return "split" if KINDS[kind].is_split else kind


def _value(v: object) -> str:
    return "none" if v is None else repr(v) if isinstance(v, str) else str(v)


def with_candidates(scenario: Scenario, arrangements: list[dict], flag: str,
                    planned: tuple[str, ...] = PLANNED_KEYS) -> Scenario:
    """The scenario's traffic, costs and limits with these arrangements instead of its own, each
    carrying the scenario's per-arrangement options (`carried`)."""
    if len(arrangements) > arrangements_limit():  # (a batch command keeps one arrangement's rows at a time)
        raise InputError(f"{flag}: got {len(arrangements)} arrangements to compare, expected at most "
                         f"{arrangements_limit():,} (fewer GPUs, chunk sizes, --splits or --tp)")
    built = carried(scenario, arrangements, planned)
    try:
        return scenario.with_overrides(flags={"arrangements": flag}, arrangements=built, reference=DROP)
    except InputError as err:
        raise InputError(_candidate_error(str(err), scenario.source, flag, built)) from None


#: A refusal located in one of the candidates (`{source}[:line]: arrangements[i].key: ... (with
#: --gpus from the command line)`): its index is plan's, not the file's.
_AT_CANDIDATE = re.compile(r"^(?P<source>.*?)(?::\d+)?: arrangements\[(?P<i>\d+)\](?:\.(?P<key>\S+))?: (?P<body>.*?)"
                           r"(?: \(with [^()]* from the command line\))?$")


def _candidate_error(text: str, source: str, flag: str, built: list[dict]) -> str:
    """A candidate's refusal said of the candidate (`flag`: plan's candidate NAME), not of the
    user's file, whose arrangements[i] is another arrangement or none (review F18)."""
    m = _AT_CANDIDATE.match(text)
    if m is None or m["source"] != source or int(m["i"]) >= len(built):
        return text
    cand = built[int(m["i"])]
    key = f"{m['key']}: " if m["key"] else ""
    fix = ("plan sets each candidate's TP itself (TP1 unless --tp names the degrees): try --tp with the degree "
           "the preset costs" if m["key"] and m["key"].endswith("tp") else
           "plan builds each candidate from the scenario's arrangements: change what they write, or narrow the "
           "search")
    return (f"{flag}: plan's candidate {cand['name']} (built from {source}): {key}{m['body']} ({fix})")


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
         exhaustive: bool = False, per: dict[str, float] | None = None) -> pd.DataFrame:
    """plan.csv: every arrangement of `scenario`, ranked by goodput (1 = best).

    Exact where it decides the answer, cheaper elsewhere (`exhaustive`: every figure of every
    arrangement). Arrangements are searched in waves, the likeliest first
    (`plan_bounds.capacity_proxy`); one is left (`goodput_below_per_s`: its goodput is below
    that) as soon as two others are known to beat it: before its search when its bound fails
    every rate from the runner-up's passing rate up (`plan_bounds.Bounds.fails_from`), or during
    it when its failing rate is at or below two others' passing rates (its goodput lies below its
    failing rate), or when it passes no rate from the runner-up's up: its search first runs only
    the rates from there up, taking those below as passed (a fail there would leave it below the
    runner-up too), and runs again in full only if one of them passes. A probe whose bound alone
    fails it runs nothing. The interval and the limit
    that fails first are searched for the top two only, whose comparison the recommendation
    states. So the recommendation, the top two rows and every goodput searched to its end are
    those of the exhaustive search.

    `per` (by name; `plan_kinds.py`): rank by goodput per unit of it (dollars an hour, or kW)
    instead; the pruning compares each arrangement's rates with the runner-up's goodput per unit
    times its own units, so the same holds of the ranking per unit."""
    if scenario.workload.rate_per_s is None:
        raise InputError(f"{scenario.source}: workload.rate_per_s: missing, expected a rate to start the search from")
    start = float(scenario.workload.rate_per_s)
    prober = Prober(scenario, runner, target)
    by_name = {a.name: a for a in scenario.arrangements}
    bounds = None if exhaustive else Bounds(scenario, seeds, target)
    seen: dict[str, dict[float, Probe]] = {n: {} for n in by_name}
    passed: dict[str, float] = {}  # the highest rate each search has passed so far (its goodput is at least that)
    below: dict[str, float] = {}  # arrangements left, and the rate their goodput is below

    unit = per or dict.fromkeys(by_name, 1.0)

    def runner_up(name: str) -> float:
        """The second-highest passing rate of the others (per unit, times this one's units): two
        of them have goodputs (per unit) at least this (this one's, at this rate)."""
        rates = sorted((r / unit[n] for n, r in passed.items() if n != name), reverse=True)
        return rates[1] * unit[name] if len(rates) >= 2 else 0.0

    def point(name: str):
        a = by_name[name]

        def stop(lo, hi) -> bool:
            if lo is not None and lo.rows:  # (a pass run, not guessed)
                passed[name] = max(passed.get(name, 0.0), lo.rate)
            if bounds is not None and hi is not None and hi.rate <= runner_up(name):
                below[name] = hi.rate
                return True
            return False

        def guess(rate: float):
            """Below the runner-up's passing rate, a pass: were it a fail, this one's goodput would
            be below it, and the search would end here anyway (see `plan`)."""
            return (Probe(rate, []), True) if rate < runner_up(name) else None

        bound = None if bounds is None else lambda rate: _bound_pct(bounds, a, rate, target)
        test = lambda p: decide(p, target, scenario.slo)  # noqa: E731
        staged = staged_target(target, scenario.slo)
        if bounds is not None and runner_up(name) > 0:  # first without the rates below the runner-up's
            lo, hi, n = yield from bisect(name, start, seeds, test, tolerance, prober.fits, seen[name], stop=stop,
                                          bound=bound, guess=guess, staged=staged)
            if name in below:
                return lo, hi, n
            if lo is None or lo.rows == []:  # (guessed: every rate it passed is below the runner-up's)
                below[name] = runner_up(name)
                return lo, hi, n
        lo, hi, n = yield from bisect(name, start, seeds, test, tolerance, prober.fits, seen[name], stop=stop,
                                      bound=bound, staged=staged)
        stop(lo, None)
        return lo, hi, n

    todo = list(by_name) if bounds is None else sorted(by_name, key=lambda n: -capacity_proxy(scenario, by_name[n]) / unit[n])
    points: dict[str, tuple] = {}
    while todo:
        size = WAVE if not points else LATER_WAVE
        wave, todo = (todo, []) if bounds is None else (todo[:size], todo[size:])
        if bounds is not None:
            for n in wave:
                if (r := runner_up(n)) > 0 and bounds.fails_from(by_name[n], r):
                    below[n] = r
        points |= drive({n: point(n) for n in wave if n not in below}, prober.run_batch)
    searched = [n for n in by_name if n not in below]
    on_time = drive({n: _on_time_at(n, seen[n][start], seeds) for n in searched}, prober.run_batch)
    order = sorted(searched, key=lambda n: (-_goodput(points[n]) / unit[n], -on_time[n]))  # (stable: ties keep their order)
    top = order if bounds is None else order[:2]
    details = drive({n: goodput_interval(n, points[n][0], points[n][1], points[n][2], seeds, target, tolerance,
                                         prober.fits, seen[n], slo=scenario.slo) for n in top}, prober.run_batch)
    rows = []
    for a in scenario.arrangements:
        if a.name in below:
            rows.append(_not_searched(a, below[a.name]))
            continue
        lo, hi, n, low, high = details[a.name][:5] if a.name in details else (*points[a.name][:2], points[a.name][2],
                                                                              math.nan, math.nan)
        g = goodput_row(scenario, a.name, seeds, target, lo, hi if a.name in details else None, n, low, high)
        rows.append({
            **_shape(a),
            "goodput_per_s": g["goodput_per_s"], "goodput_per_gpu_per_s": g["goodput_per_gpu_per_s"],
            "goodput_low_per_s": g["goodput_low_per_s"], "goodput_high_per_s": g["goodput_high_per_s"],
            "on_time_pct_at_rate": on_time[a.name], "binding_limit": g["binding_limit"],
            "goodput_below_per_s": math.nan,
        })
    table = pd.DataFrame(rows)
    for column in ("reading_gpus", "writing_gpus", "tp", "reading_tp", "writing_tp", "chunk_tokens"):  # whole, or empty
        table[column] = table[column].astype("Int64")
    table = table.assign(_score=table["goodput_per_s"] / table["arrangement"].map(unit))
    table = table.sort_values(["_score", "on_time_pct_at_rate"], ascending=False, kind="stable").drop(columns="_score")
    table.insert(0, "rank", range(1, len(table) + 1))
    table = table.reset_index(drop=True)[list(PLAN_COLUMNS)]
    table.attrs["curves"] = {name: probe_curve(seen[name]) for name in searched}  # for the --html page
    return with_costs(table, scenario)


def _bound_pct(bounds: Bounds, arrangement, rate: float, target: float) -> list[float] | None:
    """Each seed's most possible on-time share at `rate` (%), where their mean fails the target."""
    most = bounds.share_at_most(arrangement, rate)
    if most is None or sum(most) / len(most) * 100 >= target - 1e-9:
        return None
    return [100.0 * m for m in most]


def _on_time_at(name: str, probe: Probe, seeds: tuple[int, ...]):
    """The mean on-time share at the start rate, from its probe (seeds stopped early run again to
    the verdict cap: the share is exact)."""
    probe = yield from _rerun(name, probe, seeds, "verdicts", lambda r: r["below_target"])
    return float(probe.on_time().mean())


def _shape(a) -> dict:
    """plan.csv's cells that say what the arrangement is: its GPUs, TP (each side's) and chunks."""
    split = a.is_split
    return {"arrangement": a.name, "kind": a.kind, "gpus": a.n_gpus,
            "reading_gpus": a.n_reading_gpus if split else None, "writing_gpus": a.n_writing_gpus if split else None,
            "tp": None if split else a.tp or 1, "reading_tp": (a.reading_tp or 1) if split else None,
            "writing_tp": (a.writing_tp or 1) if split else None, "chunk_tokens": a.chunk_tokens}


def _not_searched(a, below: float) -> dict:
    """The row of an arrangement left: its goodput is below `below` (two others' is not)."""
    return {**_shape(a), "goodput_per_s": math.nan, "goodput_per_gpu_per_s": math.nan,
            "goodput_low_per_s": math.nan, "goodput_high_per_s": math.nan,
            "on_time_pct_at_rate": math.nan, "binding_limit": "", "goodput_below_per_s": below}


def _goodput(found: tuple) -> float:
    lo = found[0]
    return lo.rate if lo is not None else 0.0


def recommendation(table: pd.DataFrame, target: float, slo: Slo | None = None) -> str:
    """One line: the best arrangement, and whether it beats the runner-up: it does when their
    95% goodput intervals do not overlap (best's low end above the runner-up's high end). The
    rule is worded after `slo` (default: the explainer's 'at 90% on time')."""
    at = slo.at_text(target) if slo is not None else f"at {target:g}% on time"
    if table.empty or table["goodput_per_s"].iloc[0] <= 0:
        return f"no arrangement reaches {target:g}% on time at any rate tried" if slo is None or slo.is_default_kind \
            else f"no arrangement carries any rate tried {at}"
    best = table.iloc[0]
    text = f"{best.arrangement} carries the most: {best.goodput_per_s:.2f} requests/s {at}"
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
                tp_cost: Callable[[int], dict | None] | None = None) -> tuple[int | None, list[str]]:
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
