"""The sweep's tables: one tidy row per point x seed x arrangement, and the on-time band
(mean and 95% half-width over seeds) per point x arrangement."""

from __future__ import annotations

import math

import pandas as pd

from ..results.columns import SEED, SUMMARY_COLUMNS
from ..results.metrics import CRITERION_COLUMNS
from ..results.report import mean_half_width
from ..scenario.schema import Scenario
from ..texts import aligned
from .grid import ONLY, RATE, RATE_PER_GPU, Grid, resolve, shown
from .runner import Runner, Task


def sweep_tasks(scenario: Scenario, grid: Grid, seeds: tuple[int, ...]) -> list[Task]:
    """One task per point x seed (all arrangements on the same requests), labelled with the
    point's values as the table shows them."""
    tasks = []
    for point in grid.points():
        labels = {k: shown(v) for k, v in point.items()}
        if not grid.per_gpu:
            tasks += [Task(resolve(scenario, point), seed, labels=labels) for seed in seeds]
            continue
        for a in scenario.arrangements:  # each at its own rate: the rate per GPU x its GPUs
            resolved = resolve(scenario, {**point, ONLY: a.name})
            at = labels | {RATE: point[RATE_PER_GPU] * a.n_gpus}  # (the rate resolve set)
            tasks += [Task(resolved, seed, labels=at) for seed in seeds]
    return tasks


def sweep(scenario: Scenario, grid: Grid, seeds: tuple[int, ...], runner: Runner) -> pd.DataFrame:
    """Every point x seed x arrangement: the grid keys, `seed`, `arrangement`, then every
    summary column."""
    rows = [row for rows in runner.run(sweep_tasks(scenario, grid, seeds), "points") for row in rows]
    columns = [*grid.keys, *([RATE] if grid.per_gpu else []), SEED.name, *SUMMARY_COLUMNS]
    if scenario.slo.criterion == "percentiles":
        columns += [*CRITERION_COLUMNS.values(), "slo_met", "slo_ratio"]
    return pd.DataFrame(rows).reindex(columns=columns)


def on_time_bands(table: pd.DataFrame, keys: list[str], column: str = "on_time_pct") -> pd.DataFrame:
    """Per point x arrangement: `on_time_pct` mean, `half_width_pct` (95%, over seeds), `seeds`
    (or the mean and half-width of another `column`, under those names)."""
    columns = [*keys, "arrangement"]
    groups = table.groupby(columns, sort=False)
    out = []
    for group in table[columns].drop_duplicates().itertuples(index=False, name=None):  # in grid order
        block = groups.get_group(group)
        mean, half = mean_half_width(block[column])
        out.append({**dict(zip(columns, group)), "on_time_pct": mean, "half_width_pct": half, "seeds": len(block),
                    # each limit alone (--limits): the share within it, NaN when it is off
                    "first_word_ok_pct": 100.0 - float(block["late_first_word_pct"].mean()),
                    "mean_gap_ok_pct": 100.0 - float(block["late_mean_gap_pct"].mean())})
    return pd.DataFrame(out, columns=[*columns, "on_time_pct", "half_width_pct", "seeds", "first_word_ok_pct", "mean_gap_ok_pct"])


def format_bands(bands: pd.DataFrame, keys: list[str]) -> str:
    """Text table: a row per point (in grid order), a column per arrangement, cells
    'mean±half-width'."""
    names = list(dict.fromkeys(bands["arrangement"]))
    cell = lambda m, h: (f"{m:.1f}" + ("" if math.isnan(h) else f"±{h:.1f}")) if m < 100 else f"{m:.3g}"  # noqa: E731
    value = lambda v: f"{v:g}" if isinstance(v, float) else str(v)  # noqa: E731
    points: dict[tuple, dict[str, str]] = {}
    at = [bands.columns.get_loc(k) for k in keys]
    for row in bands.itertuples(index=False, name=None):
        cells = points.setdefault(tuple(value(row[i]) for i in at), {})
        cells[row[len(keys)]] = cell(row[len(keys) + 1], row[len(keys) + 2])
    header = [*keys, *names]
    lines = [[*p, *(cells.get(n, "") for n in names)] for p, cells in points.items()]
    return "\n".join(aligned([header, *lines], left=()))
