"""Accuracy against published measurements (`python -m disagg_simpy validate`, docs/accuracy.md).

The catalog (`catalog.yaml`, shipped in the package) holds each published figure with its source,
setup, value and a tolerance fixed from the source's own variability before our side was run.
Each figure is reproduced by a scenario under `scenarios/validation/` with the project's presets
and options only: `goodput` (the highest rate its arrangement carries under the scenario's rule)
`slo_scale` (at the scenario's rate, the smallest factor on every limit at which it meets the rule,
as DistServe's "SLO scale" panels; with a `grid`, either is read off the panel's own measured
points as its source read them: `grid_crossing`), `concurrency` (the mean TTFT or TPOT at the rate whose
requests in flight, by Little's law, equal the measurement's concurrency), `closed_loop` (the
benchmark's own clients: `concurrency` clients, each sending its next request when its last reply
ends: `closed_loop`) or `run` (the scenario as written: one engine step measured, `as_written`).
`compare` turns the figures into rows with error and
verdict; `gate` compares them with the figures recorded in the repository (`recorded.json`).
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..errors import InputError
from ..scenario.loading import load_scenario
from ..scenario.schema import Scenario

HERE = Path(__file__).resolve().parent
#: where the catalog's scenarios live: the repository's scenarios/validation/
SCENARIOS = HERE.parents[1] / "scenarios" / "validation"
RECORDED = HERE / "recorded.json"
#: the gate: a metric's median absolute error may grow by at most this many points
MEDIAN_SLACK_POINTS = 5.0
#: a closed loop's passes before it is given up (`closed_loop`; in practice requests per client + 2)
MAX_PASSES = 200


@dataclass(frozen=True)
class Figure:
    """One published figure and how it is reproduced."""

    id: str
    source: str
    where: str
    setup: str
    metric: str  # goodput_per_s, goodput_per_gpu_per_s, slo_scale, ttft_ms or tpot_ms
    published: float
    tolerance_pct: float
    tolerance_why: str
    scenario: str
    arrangement: str
    how: str  # goodput, slo_scale, concurrency or closed_loop
    fast: bool = False
    concurrency: int | None = None
    requests_per_client: int = 10  # closed_loop: requests each client sends in turn
    grid: tuple[float, ...] | None = None  # goodput, slo_scale: the panel's measured points, read as its source read them


def load_catalog(path: Path = HERE / "catalog.yaml") -> tuple[dict[str, dict], list[Figure]]:
    """The catalog's sources (by id: group, cite) and figures, in order."""
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    figures = [Figure(**(f | ({"grid": tuple(f["grid"])} if f.get("grid") else {}))) for f in raw["figures"]]
    return raw["sources"], figures


#: a scenario transform (e.g. costs slowed): applied to each figure's scenario before it runs
Transform = Callable[[Scenario], Scenario]


def measure(figure: Figure, runner, seeds: int | tuple[int, ...] | None = None, transform: Transform | None = None,
            folder: Path = SCENARIOS) -> float:
    """Our value of `figure` (its metric, in its unit); `seeds`: these seeds, or a count of them
    from the scenario's own seed (as `--seeds N` means in every command), or the scenario's."""
    path = folder / figure.scenario
    if not path.is_file():
        raise InputError(f"validate: {figure.id}: scenario {path} not found; expected the repository's "
                         "scenarios/validation/ (run validate from a clone of the repository)")
    scenario = load_scenario(path)
    if transform is not None:
        scenario = transform(scenario)
    if isinstance(seeds, tuple) and seeds:
        picked = seeds
    else:
        n = seeds if isinstance(seeds, int) else scenario.seeds
        picked = tuple(range(scenario.seed, scenario.seed + n))
    if figure.how in ("goodput", "slo_scale") and figure.grid:  # (no crossing within the panel: searched)
        read = grid_crossing(scenario, figure.arrangement, runner, picked, figure.how, figure.grid)
        if read is not None:
            return read
    if figure.how == "goodput":
        from ..sweep.goodput import goodput

        table = goodput(scenario, runner, picked, 90.0, 0.02, names=[figure.arrangement])
        return float(table[figure.metric].iloc[0])  # goodput_per_s, or per GPU as papers plot it
    if figure.how == "slo_scale":
        from ..sweep.slo_scale import slo_scales

        return float(slo_scales(scenario, runner, picked, 90.0).set_index("arrangement").loc[figure.arrangement, "slo_scale"])
    if figure.how == "concurrency":
        assert figure.concurrency is not None
        ttft, tpot = at_concurrency(scenario, figure.arrangement, figure.concurrency, picked[0])
        return ttft if figure.metric == "ttft_ms" else tpot
    if figure.how == "closed_loop":
        assert figure.concurrency is not None
        loop = closed_loop(scenario, figure.arrangement, figure.concurrency, figure.requests_per_client)
        return loop.ttft_ms if figure.metric == "ttft_ms" else loop.tpot_ms
    if figure.how == "run":
        return as_written(scenario, figure.arrangement, figure.metric, picked[0])
    raise InputError(f"validate: {figure.id}: how {figure.how!r}, expected goodput, slo_scale, concurrency, "
                     "closed_loop or run")


def first_crossing(xs: list[float], ys: list[float], target: float) -> float | None:
    """The x where the curve through (xs, ys) first crosses `target`, read as DistServe's artifact
    reads its Figures 8-9 (`find_intersection` in evaluation/2-benchmark-serving/plot.ipynb,
    LLMServe/DistServe @ 82831f1): the first pair of neighbouring points with one below the target
    and the other not, linearly interpolated. None when no pair crosses (the notebook then draws
    xs[0] with a warning, a value that says nothing: `measure` searches instead)."""
    for x0, x1, y0, y1 in zip(xs, xs[1:], ys, ys[1:]):
        if (y0 < target) != (y1 < target):
            return (target - y0) * (x1 - x0) / (y1 - y0) + x0
    return None


def grid_crossing(scenario: Scenario, arrangement: str, runner, seeds: tuple[int, ...], how: str,
                  grid: tuple[float, ...], target: float = 90.0) -> float | None:
    """A published panel read the way its source read it: the arrangement's share on time (its
    rule: every request judged, the mean over `seeds`) at each of the panel's measured points,
    per-GPU rates in the order given (`how: goodput`) or SLO scales from the largest down
    (`how: slo_scale`), and the first crossing of `target` between them (`first_crossing`; None
    when the curve does not cross it within the panel)."""
    from ..sweep.grid import ONLY, RATE_PER_GPU, SLO_SCALE, resolve
    from ..sweep.runner import Task

    if scenario.slo.criterion == "percentiles":
        raise InputError(f"{scenario.source}: a grid figure reads the share of requests meeting the rule; expected "
                         "slo.criterion per_request")
    key, xs = (RATE_PER_GPU, list(grid)) if how == "goodput" else (SLO_SCALE, sorted(grid, reverse=True))
    points = [resolve(scenario, {key: x, ONLY: arrangement}) for x in xs]
    rows = runner.run([Task(p, s) for p in points for s in seeds])
    shares = [statistics.fmean(r[0]["on_time_pct"] for r in rows[i * len(seeds):(i + 1) * len(seeds)])
              for i in range(len(xs))]
    return first_crossing(xs, shares, target)


def as_written(scenario: Scenario, arrangement: str, metric: str, seed: int) -> float:
    """The mean TTFT or TPOT (ms) of `arrangement`'s measured requests, the scenario run as written:
    a measurement of one engine step rather than of a served load (one prompt alone at zero load:
    its first word ends its one reading iteration; a batch arriving at once: read together, then
    written together, its mean gap the mean of those writing iterations)."""
    from ..api import run

    req = run(scenario, seed).requests
    mine = req[req["arrangement"] == arrangement]
    return 1e3 * float(mine.first_word_s.mean()) if metric == "ttft_ms" else float(mine.mean_gap_ms.mean())


def _fixed_lengths(scenario: Scenario) -> tuple[int, int]:
    """(prompt tokens, reply words) of a scenario whose every request is the same size."""
    from ..scenario.schema import SyntheticWorkload

    w = scenario.workload
    words = tokens = None
    if isinstance(w, SyntheticWorkload) and len(w.prompt_mix) == 1:
        words, tokens = getattr(w.reply_words, "fixed", None), getattr(w.prompt_mix[0].tokens, "fixed", None)
    if words is None or tokens is None:
        raise InputError(f"{scenario.source}: workload: expected one prompt class of {{fixed: N}} tokens and "
                         "reply_words {fixed: N} (a closed loop sends the measurement's fixed lengths)")
    return int(tokens), int(words)


@dataclass(frozen=True)
class ClosedLoop:
    """A closed loop's figures: means over the steady requests (each client's after its first)."""

    ttft_ms: float
    tpot_ms: float
    first_ttft_ms: float  # the first wave's (every client's first request, all sent at 0)
    passes: int  # simulations until the arrivals were a fixed point
    arrived_ns: Any = None  # by client, then turn: each request's arrival and end (numpy arrays)
    finished_ns: Any = None


def closed_loop(scenario: Scenario, arrangement: str, clients: int, per_client: int = 10) -> ClosedLoop:
    """The benchmark client of a measured deployment (vLLM's and SGLang's `bench_serving
    --max-concurrency`, aiperf's concurrency mode): `clients` clients start together at 0, each
    sending its next request the moment its last reply ends, `per_client` requests each, every
    prompt and reply of the scenario's fixed lengths.

    The model takes its arrivals up front, so the loop is found as a fixed point: arrivals are
    guessed, the arrangement run, each request's arrival set to the end of its client's previous
    one, until no arrival moves (to the nanosecond). The run is causal (an iteration is decided
    by the arrivals before it starts), so a pass whose arrivals are right before time t has its
    replies' ends right until t plus one iteration: each pass moves the first wrong arrival on
    by at least an iteration, so the loop ends, and its fixed point is the closed loop's run
    exactly (in practice `per_client` + 2 passes). TTFT and TPOT are means over the steady
    requests (each client's after its first: the first wave is a burst of every client at once,
    reported apart)."""
    import numpy as np

    from ..api import run_arrangement
    from ..units import NS_PER_S
    from ..workload.stream import Requests

    tokens, words = _fixed_lengths(scenario)
    chosen = [a for a in scenario.arrangements if a.name == arrangement]
    if not chosen:
        raise InputError(f"{scenario.source}: no arrangement {arrangement!r}")
    drawn = [k for k, on in (("speculative", scenario.speculative is not None),
                             ("router: power_of_two", scenario.router == "power_of_two")) if on]
    if drawn:  # (each draws per request from the seed, which this hand-built stream does not do yet)
        raise InputError(f"{scenario.source}: {drawn[0]}: got it in a closed-loop figure, expected neither "
                         "speculative nor router: power_of_two (their per-request draws are not made for the closed "
                         "loop's stream yet); use a figure of another kind (goodput, concurrency, run)")
    n = clients * per_client
    client, turn = np.repeat(np.arange(clients), per_client), np.tile(np.arange(per_client), clients)
    cap_s = scenario.cap_s(None)
    cap_ns = int(cap_s * NS_PER_S)
    arrived = np.zeros(n, np.int64)
    for passes in range(1, MAX_PASSES + 1):
        order = np.lexsort((client, arrived))  # arrival order, ties by client
        stream = Requests(arrived[order], np.full(n, tokens, np.int64), np.full(n, words, np.int64),
                          np.ones(n, bool), cap_ns=cap_ns, info={"closed_loop": clients})
        r = run_arrangement(scenario, chosen[0], stream).requests
        finished, first = np.empty(n, np.int64), np.empty(n, np.int64)
        finished[order], first[order] = r["finished_at_ns"], r["first_word_at_ns"]
        if (finished < 0).any():
            raise InputError(f"{scenario.source}: max_sim_s: {cap_s:g} s ends the closed loop of {clients} "
                             f"clients before its {n} requests finish; expected a larger max_sim_s")
        after = np.where(turn > 0, np.roll(finished, 1), 0)
        if np.array_equal(after, arrived):
            ttft, tpot = (first - arrived) / 1e6, (finished - first) / 1e6 / max(words - 1, 1)
            steady = turn > 0
            return ClosedLoop(float(ttft[steady].mean()), float(tpot[steady].mean()), float(ttft[~steady].mean()),
                              passes, arrived, finished)
        arrived = after
    raise InputError(f"{scenario.source}: the closed loop of {clients} clients did not settle in {MAX_PASSES} passes "
                     "(each pass moves it on by an iteration at least); expected fewer requests_per_client")


def at_concurrency(scenario: Scenario, arrangement: str, concurrency: int, seed: int,
                   halvings: int = 10) -> tuple[float, float]:
    """(mean TTFT ms, mean TPOT ms) of `arrangement`'s measured requests at the rate whose requests
    in flight (Little's law: rate x (TTFT + (words - 1) x TPOT)) equal `concurrency`: bisection
    from an idle run's rate, `halvings` steps, the largest rate below it (a closed loop holds that
    many; open Poisson arrivals bunch, so TTFT near saturation is the least comparable figure).
    Only that arrangement's requests are measured: the figure is of one published deployment."""
    from ..api import run
    from ..scenario.schema import SyntheticWorkload

    named = [a.name for a in scenario.arrangements]
    if arrangement not in named:
        raise InputError(f"{scenario.source}: no arrangement {arrangement!r} (the catalog's arrangement); expected "
                         f"one of {', '.join(named)}")
    w = scenario.workload
    fixed = getattr(w.reply_words, "fixed", None) if isinstance(w, SyntheticWorkload) else None
    if fixed is None:
        raise InputError(f"{scenario.source}: workload.reply_words: expected {{fixed: N}} synthetic replies (a "
                         "concurrency figure holds every reply at the measurement's output length)")
    words = float(fixed)

    def at(rate: float) -> tuple[float, float, float]:
        changes: dict[str, Any] = {"workload.rate_per_s": float(f"{rate:.6g}")}
        req = run(scenario.with_overrides(**changes), seed).requests
        req = req[req["arrangement"] == arrangement]
        ttft, tpot = 1e3 * float(req.first_word_s.mean()), float(req.mean_gap_ms.mean())
        return ttft, tpot, rate * (ttft + (words - 1) * tpot) / 1e3

    ttft, tpot, _ = at(0.05)
    lo, hi = 0.0, concurrency / ((ttft + (words - 1) * tpot) / 1e3)
    for _ in range(halvings):
        mid = (lo + hi) / 2
        _, _, in_flight = at(mid)
        lo, hi = (mid, hi) if in_flight < concurrency else (lo, mid)
    ttft, tpot, _ = at(lo)
    return ttft, tpot


def row(figure: Figure, sources: dict[str, dict], ours: float) -> dict:
    """One row of the table: published, ours, error (% of published) and verdict."""
    error = 100.0 * (ours / figure.published - 1.0) if figure.published else math.nan
    within = abs(error) <= figure.tolerance_pct + 1e-9
    return {"id": figure.id, "source": figure.source, "group": sources[figure.source]["group"], "metric": figure.metric,
            "published": figure.published, "ours": ours, "error_pct": error, "tolerance_pct": figure.tolerance_pct,
            "verdict": "within" if within else "outside", "where": figure.where}


def summary(rows: list[dict]) -> dict:
    """Figures within tolerance, and the median absolute error (points) per metric."""
    by_metric: dict[str, list[float]] = {}
    for r in rows:
        by_metric.setdefault(r["metric"], []).append(abs(r["error_pct"]))
    return {"figures": len(rows), "within": sum(r["verdict"] == "within" for r in rows),
            "median_abs_error_pct": {m: statistics.median(v) for m, v in by_metric.items()}}


def gate(rows: list[dict], recorded: dict) -> list[str]:
    """The accuracy gate's complaints (empty: it passes): a figure recorded within its tolerance
    (or not recorded) that is now outside it; a figure whose error moved by more than
    MEDIAN_SLACK_POINTS points either way from the recorded one (a change to the model's accuracy
    nobody recorded: run `validate --record` to accept it, and say why in the commit); and a
    metric whose median absolute error (over the figures run now) grew by more than
    MEDIAN_SLACK_POINTS points against the recorded errors of the same figures."""
    problems = []
    was = {r["id"]: r for r in recorded.get("rows", [])}
    for r in rows:
        old = was.get(r["id"])
        if r["verdict"] == "outside" and (old is None or old["verdict"] == "within"):
            problems.append(f"{r['id']}: {r['ours']:.4g} against {r['published']:.4g} published ({r['error_pct']:+.1f}%), "
                            f"outside its +-{r['tolerance_pct']:g}% (recorded: {'within' if old else 'not recorded'})")
        elif old is not None and abs(r["error_pct"] - old["error_pct"]) > MEDIAN_SLACK_POINTS:
            problems.append(f"{r['id']}: error {r['error_pct']:+.1f}% against {old['error_pct']:+.1f}% recorded (moved "
                            f"more than {MEDIAN_SLACK_POINTS:g} points; validate --record accepts it)")
    now = summary(rows)["median_abs_error_pct"]
    then = summary([was[r["id"]] for r in rows if r["id"] in was])["median_abs_error_pct"] if was else {}
    for metric, error in now.items():
        if metric in then and error > then[metric] + MEDIAN_SLACK_POINTS:
            problems.append(f"{metric}: median absolute error {error:.1f}% against {then[metric]:.1f}% recorded "
                            f"(more than {MEDIAN_SLACK_POINTS:g} points worse)")
    return problems


def load_recorded(path: Path = RECORDED) -> dict:
    """The figures recorded in the repository (`validate --record` writes them)."""
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
