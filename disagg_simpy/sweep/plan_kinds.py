"""Plan over GPU kinds (docs/cost.md): the arrangements of one or more kinds, each side on the
scenario's preset on its kind, that fit a budget in dollars an hour or kW; ranked by goodput per
dollar (`plan(per=...)`, the same bounds and pruning as a plan of N GPUs); the cheapest that
carries a rate; and the best of each pool (all of one kind, or reading on one and writing on
another) under one budget, side by side (`--iso-cost`, `--iso-power`, as Splitwise compares).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ..errors import InputError
from ..results.columns import ISO_COLUMNS
from ..results.costs import per_million
from ..results.intervals import interval
from ..scenario import gpu_kinds
from ..scenario.presets import unfill
from ..scenario.schema import Scenario, has_attention_term
from .goodput import Prober, drive, goodput_search, probe_rate
from .grid import RATE, resolve
from .plan import PLANNED_KEYS, plan, with_candidates
from .plan_bounds import Bounds
from .runner import Runner

#: arrangements probed at a time when looking for the cheapest that carries a rate
RATE_WAVE = 8
#: the KV capacity keys: a capacity is one GPU kind's memory, so a candidate over kinds takes each
#: side's from its kind's preset, never the scenario's (`capacity_notes` says so)
CAPACITY_KEYS = ("kv_capacity_tokens", "reading_kv_capacity_tokens", "writing_kv_capacity_tokens")
#: the keys a candidate over GPU kinds sets itself (besides plan's): each side's kind and preset (and
#: so its KV capacity); the scenario's other per-arrangement keys are carried to it as to any plan's
KIND_KEYS = (*PLANNED_KEYS, "gpu", "reading_gpu", "writing_gpu", "cost", "reading_cost", "writing_cost", "kv_path",
             *CAPACITY_KEYS)


def with_kinds(scenario: Scenario, arrangements: list[dict], flag: str) -> Scenario:
    """The scenario (its own arrangements, not a plan's) with these candidates over GPU kinds."""
    return with_candidates(scenario, arrangements, flag, planned=KIND_KEYS)


@dataclass(frozen=True)
class Budget:
    """Dollars an hour and kW an arrangement may use (None: no limit), and the GPUs it may have."""

    dollars_per_hour: float | None
    kw: float | None
    max_gpus: int

    def text(self) -> str:
        parts = [f"{self.dollars_per_hour:g} $/h" if self.dollars_per_hour is not None else "",
                 f"{self.kw:g} kW" if self.kw is not None else ""]
        return " and ".join(p for p in parts if p) or f"{self.max_gpus} GPUs"


def side_presets(scenario: Scenario, kinds: tuple[str, ...], flag: str = "--gpu-kinds") -> dict[str, str]:
    """Each kind's preset: the scenario's `cost: preset` on that kind, or the newest version of its
    engine there where that version has none (`gpu_kinds.preset_on`); refused, in one line, where
    the scenario names none or a kind has no preset of its model, TP and engine."""
    base = scenario.cost.preset
    if base is None:
        raise InputError(f"{flag}: got {','.join(kinds)} with no preset in the scenario's cost:, expected cost: "
                         "{preset: NAME} (its model, TP and engine are taken on each kind; python -m disagg_simpy presets)")
    out = {k: gpu_kinds.preset_on(base, k) for k in kinds}
    missing = [k for k, name in out.items() if name is None]
    if missing:
        have = [k for k in gpu_kinds.KIND_NAMES if gpu_kinds.preset_on(base, k)]
        raise InputError(f"{flag}: got {', '.join(missing)}, but no preset of the model, TP and engine of {base} exists "
                         f"on {missing[0]}; expected kinds among {', '.join(have)} (python -m disagg_simpy presets)")
    return {k: n for k, n in out.items() if n is not None}


def version_notes(scenario: Scenario, kinds: tuple[str, ...]) -> list[str]:
    """Each kind that runs another version of the scenario's preset's engine (none of that
    version on it: its newest), said so: the pools then compare engine versions as well as GPUs."""
    base = scenario.cost.preset
    notes = [n for k in kinds if base and (n := gpu_kinds.version_note(base, k))]
    return [f"{n}; pools of these kinds compare engine versions as well as GPUs (docs/cost.md)" for n in notes]


def _as_written(scenario: Scenario) -> list[dict]:
    """The scenario's arrangements as a file writes them (what their presets fill left out)."""
    return unfill(scenario.model_dump(mode="json", exclude_none=True), has_attention_term())["arrangements"]


def written(scenario: Scenario, arrangement: list[dict]) -> dict:
    """One candidate as simulated (the keys carried from the scenario's engine included,
    `with_kinds`) as a scenario file writes it: pasted into the scenario, it runs the same."""
    planned = with_kinds(scenario, arrangement, "--gpu-kinds")
    [a] = _as_written(planned)
    fields = {f.alias or k: f for k, f in type(planned.arrangements[0]).model_fields.items()}
    return {k: v for k, v in a.items() if not (k in fields and v == fields[k].default)}


def capacity_notes(scenario: Scenario) -> list[str]:
    """Each KV capacity the scenario's arrangements write (not from a preset), said not carried:
    it is the scenario's GPU's memory, and each candidate takes its kinds' presets' instead."""
    raw = _as_written(scenario)
    return [f"arrangements.{a['name']}.{k}: {a[k]} is the scenario's GPU's memory, not carried: each candidate takes "
            "each side's KV capacity from its kind's preset" for a in raw for k in CAPACITY_KEYS if k in a]


def kinds_flag(text: str) -> tuple[str, ...]:
    """--gpu-kinds a100-80gb,h100-80gb: distinct GPU kinds."""
    kinds = tuple(k.strip() for k in text.split(","))
    for k in kinds:
        if (bad := gpu_kinds.kind_problem(k)) is not None:
            raise InputError(f"--gpu-kinds: {bad}")
    if len(set(kinds)) != len(kinds):
        raise InputError(f"--gpu-kinds: got {text!r}, expected distinct GPU kinds")
    return kinds


def _short(kind: str) -> str:
    return kind.split("-")[0]


def at_tps(presets: dict[str, str], tps: tuple[int, ...]) -> tuple[dict[str, tuple[str, ...]], list[str]]:
    """`--tp` with `--gpu-kinds`: each kind's preset at each TP degree that has one (its GPU,
    model and engine), and the names of those missing (to say so)."""
    out: dict[str, tuple[str, ...]] = {}
    missing: list[str] = []
    for kind, preset in presets.items():
        names = [gpu_kinds.preset_at_tp(preset, t) for t in tps]
        out[kind] = tuple(n for n, shipped in names if shipped)
        missing += [n for n, shipped in names if not shipped]
    return out, missing


def candidates(presets: dict[str, str] | dict[str, tuple[str, ...]], max_gpus: int, chunks: tuple[int, ...],
               mixed: bool = True, splits: tuple[int, ...] | None = None) -> list[dict]:
    """Every arrangement of up to `max_gpus` GPUs of the kinds (whole TP instances of each
    kind's preset, or of each of its presets at several TP degrees, `at_tps`): all of one kind
    and TP on the same GPU, whole and in each chunk size; every split, each side of any kind and
    TP (`mixed`: also sides of two kinds; `splits`: only these reading GPU counts), whole and
    with chunked reading. A split of two kinds ships its KV caches between nodes (`kv_path:
    inter_node`: no node holds two kinds); one of a kind within a node, as plan's splits do.
    Names say the kinds (and, from `at_tps`, the TP where it is not 1 or a kind has several): `a100-same-8`,
    `h100-chunked-512-8`, `split-4-4-h100-a100` (H100 reading, A100 writing), `h100-tp2-same-4`."""
    units = []  # (tag, kind, preset, TP)
    for kind, given in presets.items():
        several = (given,) if isinstance(given, str) else given
        for preset in several:
            t = gpu_kinds.preset_tp(preset)
            tagged = not isinstance(given, str) and (len(several) > 1 or t != 1)  # (--tp given: as plan tags)
            units.append((f"{_short(kind)}-tp{t}" if tagged else _short(kind), kind, preset, t))
    out = []
    for tag, kind, preset, t in units:
        for n in range(t, max_gpus + 1, t):
            same = {"name": f"{tag}-same-{n}", "kind": "colocated", "gpus": n, "gpu": kind,
                    "cost": {"preset": preset}, **({"tp": t} if t > 1 else {})}
            out.append(same)
            out += [{**same, "name": f"{tag}-chunked-{c}-{n}", "chunk_tokens": c} for c in chunks]
    for rtag, rk, rp, rt in units:
        for wtag, wk, wp, wt in units:
            if rk != wk and not mixed:
                continue
            for r in range(rt, max_gpus, rt):
                if splits is not None and r not in splits:
                    continue
                for w in range(wt, max_gpus - r + 1, wt):
                    tag = rtag if rp == wp else f"{rtag}-{wtag}"
                    split = {"name": f"split-{r}-{w}-{tag}", "kind": "disaggregated", "reading_gpus": r,
                             "writing_gpus": w, "reading_gpu": rk, "writing_gpu": wk, "reading_cost": {"preset": rp},
                             "writing_cost": {"preset": wp},
                             **({"reading_tp": rt} if rt > 1 else {}),
                             **({"writing_tp": wt} if wt > 1 else {}),
                             **({"kv_path": "inter_node"} if rk != wk else {})}  # two kinds: two nodes
                    out.append(split)
                    out += [{**split, "name": f"split-{r}-{w}-chunked-{c}-{tag}", "chunk_tokens": c} for c in chunks]
    return out


def _units(scenario: Scenario, a) -> tuple[float, float]:
    usd, kw = gpu_kinds.dollars_per_hour(scenario, a), gpu_kinds.power_kw(scenario, a)
    assert usd is not None and kw is not None  # (every candidate names its kinds)
    return usd, kw


def within(scenario: Scenario, arrangements: list[dict], budget: Budget, flag: str) -> tuple[Scenario, dict[str, float]]:
    """The scenario with the candidates that fit the budget, and each one's units to rank per
    (dollars an hour; kW with a power budget only). None fitting: refused in one line, with the
    cheapest candidate's cost."""
    every = with_kinds(scenario, arrangements, flag)
    units = {a.name: _units(every, a) for a in every.arrangements}
    fit = [d for d in arrangements if (budget.dollars_per_hour is None or units[d["name"]][0] <= budget.dollars_per_hour + 1e-9)
           and (budget.kw is None or units[d["name"]][1] <= budget.kw + 1e-9)]
    if not fit:
        key = 0 if budget.dollars_per_hour is not None else 1
        cheapest = min(units, key=lambda n: (units[n][key], len(n), n))  # (the plainest of equal cost)
        usd, kw = units[cheapest]
        raise InputError(f"{flag}: got {budget.text()}, which no arrangement of up to {budget.max_gpus} GPUs fits: the "
                         f"cheapest, {cheapest}, costs {usd:.2f} $/h and draws {kw:.2f} kW; expected a budget of at "
                         f"least {usd if key == 0 else kw:.2f} {'$/h' if key == 0 else 'kW'}")
    planned = with_kinds(scenario, fit, flag)
    key = 0 if budget.dollars_per_hour is not None or budget.kw is None else 1
    return planned, {a.name: units[a.name][key] for a in planned.arrangements}


def cheapest_for_rate(scenario: Scenario, arrangements: list[dict], runner: Runner, seeds: tuple[int, ...],
                      target: float, tolerance: float, rate: float) -> tuple[pd.DataFrame, str | None]:
    """The cheapest candidate (dollars an hour) that carries `rate` on time: its mean on-time
    share at the rate meets the target and its goodput's 95% interval lies wholly above the rate.
    Candidates are probed at the rate cheapest first, `RATE_WAVE` at a time (one whose bound
    fails the rate runs nothing); those passing are searched for their goodput and interval,
    cheapest first, until one's interval clears the rate (one seed: its goodput reaches it).
    `scenario` is the scenario's own (the candidates are `arrangements`). Returns (their plan.csv
    rows, cheapest first; the chosen name, or None)."""
    at = resolve(with_kinds(scenario, arrangements, "--gpu-kinds"), {RATE: rate})
    raw = {d["name"]: d for d in arrangements}
    units = {a.name: _units(at, a)[0] for a in at.arrangements}
    order = sorted(units, key=lambda n: (units[n], n))
    bounds = Bounds(at, seeds, target)
    by_name = {a.name: a for a in at.arrangements}
    prober = Prober(at, runner, target)
    rows: list[pd.DataFrame] = []
    for i in range(0, len(order), RATE_WAVE):
        wave = [n for n in order[i:i + RATE_WAVE] if not bounds.fails_from(by_name[n], rate)]
        found = drive({n: probe_rate(n, rate, seeds, target, at.slo) for n in wave}, prober.run_batch)
        for name in (n for n in wave if found[n][1]):
            one = resolve(with_kinds(scenario, [raw[name]], "--gpu-kinds"), {RATE: rate})
            row = plan(one, runner, seeds, target, tolerance, exhaustive=True)
            rows.append(row)
            low = row["goodput_low_per_s"].iloc[0]
            if (len(seeds) > 1 and low > rate) or (len(seeds) == 1 and row["goodput_per_s"].iloc[0] >= rate):
                return _ranked(rows), name
    return (_ranked(rows) if rows else pd.DataFrame()), None


def _ranked(rows: list[pd.DataFrame]) -> pd.DataFrame:
    table = pd.concat(rows, ignore_index=True)
    table["rank"] = range(1, len(table) + 1)
    return table


def pools(presets: dict) -> list[tuple[str, str, str]]:
    """(pool name, reading kind, writing kind): all of each kind, then each ordered pair of two kinds."""
    out = [(f"all {k}", k, k) for k in presets]
    out += [(f"{r} reading, {w} writing", r, w) for r in presets for w in presets if r != w]
    return out


def pool_of(a: dict) -> tuple[str, str]:
    return (a.get("reading_gpu", a.get("gpu")), a.get("writing_gpu", a.get("gpu")))  # type: ignore[return-value]


def iso(scenario: Scenario, runner: Runner, seeds: tuple[int, ...], target: float, tolerance: float,
        presets: dict[str, str] | dict[str, tuple[str, ...]], budget: Budget, chunks: tuple[int, ...], flag: str,
        splits: tuple[int, ...] | None = None) -> pd.DataFrame:
    """The best arrangement (most goodput) of each pool under the same budget, one row each (a
    pool with no arrangement in the budget: no row); each mixed pool's dollars per million requests
    at its goodput against the best pool of one kind's, paired over seeds (`paired_per_million`)."""
    every = candidates(presets, budget.max_gpus, chunks, splits=splits)
    raw = {a["name"]: a for a in every}
    rows = []
    for label, r, w in pools(presets):
        mine = [a for a in every if pool_of(a) == (r, w)]
        try:
            planned, _ = within(scenario, mine, budget, flag)
        except InputError:
            continue
        table = plan(planned, runner, seeds, target, tolerance)
        rows.append(table.iloc[[0]].assign(pool=label))
    if not rows:
        within(scenario, every, budget, flag)  # (refuses, naming the cheapest)
    out = pd.concat(rows, ignore_index=True)
    # (rows in pool order; rank as plan.csv's means it: 1 = the most goodput, ties in pool order)
    out["rank"] = out["goodput_per_s"].fillna(-1.0).rank(ascending=False, method="first").astype(int)
    for key in ISO_COLUMNS[1:]:
        out[key] = float("nan")
    single = out[~out["pool"].str.contains("reading")]
    if len(seeds) > 1 and not single.empty:
        best = single.loc[single["goodput_per_s"].fillna(0).idxmax(), "arrangement"]
        for i in out.index[out["pool"].str.contains("reading")]:
            name = out.at[i, "arrangement"]
            both = with_kinds(scenario, [raw[name], raw[best]], flag)
            diff = paired_per_million(both, runner, seeds, target, tolerance, name, best)
            out.loc[i, list(ISO_COLUMNS[1:])] = [diff.mean, diff.low, diff.high]
    return out


def paired_per_million(scenario: Scenario, runner: Runner, seeds: tuple[int, ...], target: float, tolerance: float,
                       first: str, second: str):
    """`first`'s dollars per million requests at its goodput minus `second`'s, each goodput
    searched on each seed alone (the same requests for both): the mean of the per-seed
    differences and its 95% interval (results/intervals.py). NaN where either carries nothing
    on time on some seed (its cost per request is unbounded)."""
    prober = Prober(scenario, runner, target)
    start = float(scenario.workload.rate_per_s or 1.0)
    searches = {(n, s): goodput_search(n, start, (s,), target, tolerance, prober.fits, report=False, slo=scenario.slo)
                for n in (first, second) for s in seeds}
    found = drive(searches, prober.run_batch)  # type: ignore[arg-type]
    by_name = {a.name: a for a in scenario.arrangements}
    usd = {n: _units(scenario, by_name[n])[0] for n in (first, second)}
    cost = {k: per_million(usd[k[0]], v[0].rate if v[0] is not None else 0.0) for k, v in found.items()}
    diffs = [cost[(first, s)] - cost[(second, s)] for s in seeds]
    return interval([float("nan")] if any(d != d or abs(d) == float("inf") for d in diffs) else diffs)
