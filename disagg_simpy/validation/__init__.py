"""Accuracy against published measurements (`python -m disagg_simpy validate`, docs/accuracy.md).

The catalog (`catalog.yaml`, shipped in the package) holds each published figure with its source,
setup, value and a tolerance fixed from the source's own variability before our side was run.
Each figure is reproduced by a scenario under `scenarios/validation/` with the project's presets
and options only: `goodput` (the highest rate its arrangement carries under the scenario's rule)
`slo_scale` (at the scenario's rate, the smallest factor on every limit at which it meets the rule,
as DistServe's "SLO scale" panels), or `concurrency` (the mean TTFT or TPOT at the rate whose requests in flight, by Little's law,
equal the measurement's concurrency). `compare` turns the figures into rows with error and
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
    how: str  # goodput, slo_scale or concurrency
    fast: bool = False
    concurrency: int | None = None


def load_catalog(path: Path = HERE / "catalog.yaml") -> tuple[dict[str, dict], list[Figure]]:
    """The catalog's sources (by id: group, cite) and figures, in order."""
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    figures = [Figure(**f) for f in raw["figures"]]
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
    if figure.how == "goodput":
        from ..sweep.goodput import goodput

        table = goodput(scenario, runner, picked, 90.0, 0.02, names=[figure.arrangement])
        return float(table[figure.metric].iloc[0])  # goodput_per_s, or per GPU as papers plot it
    if figure.how == "slo_scale":
        from ..sweep.slo_scale import slo_scales

        return float(slo_scales(scenario, runner, picked, 90.0).set_index("arrangement").loc[figure.arrangement, "slo_scale"])
    if figure.how == "concurrency":
        assert figure.concurrency is not None
        ttft, tpot = at_concurrency(scenario, figure.concurrency, picked[0])
        return ttft if figure.metric == "ttft_ms" else tpot
    raise InputError(f"validate: {figure.id}: how {figure.how!r}, expected goodput, slo_scale or concurrency")


def at_concurrency(scenario: Scenario, concurrency: int, seed: int, halvings: int = 10) -> tuple[float, float]:
    """(mean TTFT ms, mean TPOT ms) of the measured requests at the rate whose requests in flight
    (Little's law: rate x (TTFT + (words - 1) x TPOT)) equal `concurrency`: bisection from an idle
    run's rate, `halvings` steps, the largest rate below it (a closed loop holds that many; open
    Poisson arrivals bunch, so TTFT near saturation is the least comparable figure)."""
    from ..api import run
    from ..scenario.schema import SyntheticWorkload

    w = scenario.workload
    fixed = getattr(w.reply_words, "fixed", None) if isinstance(w, SyntheticWorkload) else None
    if fixed is None:
        raise InputError(f"{scenario.source}: workload.reply_words: expected {{fixed: N}} synthetic replies (a "
                         "concurrency figure holds every reply at the measurement's output length)")
    words = float(fixed)

    def at(rate: float) -> tuple[float, float, float]:
        changes: dict[str, Any] = {"workload.rate_per_s": float(f"{rate:.6g}")}
        req = run(scenario.with_overrides(**changes), seed).requests
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
