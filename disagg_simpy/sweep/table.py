"""The sweep's tables: one tidy row per point x seed x arrangement, and the on-time band
(mean and 95% interval over seeds) per point x arrangement."""

from __future__ import annotations

import pandas as pd

from ..results.columns import PREFIX_COLUMNS, SEED, SUMMARY_COLUMNS
from ..results.intervals import SHARE, Interval, interval
from ..results.rules import rule_columns
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
    tasks = sweep_tasks(scenario, grid, seeds)
    rows = [row for rows in runner.run(tasks, "runs (points x seeds)") for row in rows]
    columns = [*grid.keys, *([RATE] if grid.per_gpu else []), SEED.name, *SUMMARY_COLUMNS]
    columns += list(dict.fromkeys(c for t in tasks for c in rule_columns(t.scenario.slo)))  # (--set slo.*: each point's)
    if any(PREFIX_COLUMNS[0] in row for row in rows):  # E13 on at some point (a key of --set)
        columns += list(PREFIX_COLUMNS)
    return pd.DataFrame(rows).reindex(columns=columns)


def on_time_bands(table: pd.DataFrame, keys: list[str], column: str = "on_time_pct") -> pd.DataFrame:
    """Per point x arrangement: `on_time_pct` mean over seeds, its 95% interval
    (`on_time_low_pct`, `on_time_high_pct`; results/intervals.py), `seeds` (or the mean and
    interval of another `column`, such as `slo_ratio`, under those names); and each limit alone
    (--limits): the share within it, `first_word_ok_pct`, `mean_gap_ok_pct` (NaN when it is off)."""
    columns = [*keys, "arrangement"]
    groups = table.groupby(columns, sort=False)
    out = []
    for group in table[columns].drop_duplicates().itertuples(index=False, name=None):  # in grid order
        block = groups.get_group(group)
        i = interval(block[column], SHARE if column == "on_time_pct" else None)
        out.append({**dict(zip(columns, group)), "on_time_pct": i.mean, "on_time_low_pct": i.low,
                    "on_time_high_pct": i.high, "seeds": len(block),
                    "first_word_ok_pct": 100.0 - float(block["late_first_word_pct"].mean()),
                    "mean_gap_ok_pct": 100.0 - float(block["late_mean_gap_pct"].mean())})
    return pd.DataFrame(out, columns=[*columns, *BAND_COLUMNS, "first_word_ok_pct", "mean_gap_ok_pct"])


#: on_time_bands' columns after the point's and the arrangement
BAND_COLUMNS = ("on_time_pct", "on_time_low_pct", "on_time_high_pct", "seeds")


def format_bands(bands: pd.DataFrame, keys: list[str]) -> str:
    """Text table: a row per point (in grid order), a column per arrangement, cells
    the mean and its interval ('93.1±1.2' or '93.1 (90.2 to 94.5)')."""
    names = list(dict.fromkeys(bands["arrangement"]))
    value = lambda v: f"{v:g}" if isinstance(v, float) else str(v)  # noqa: E731
    points: dict[tuple, dict[str, str]] = {}
    at = [bands.columns.get_loc(k) for k in keys]
    for row in bands.itertuples(index=False, name=None):
        cells = points.setdefault(tuple(value(row[i]) for i in at), {})
        mean, low, high = row[len(keys) + 1:len(keys) + 4]
        cells[row[len(keys)]] = Interval(mean, low, high, 0).text()
    header = [*keys, *names]
    lines = [[*p, *(cells.get(n, "") for n in names)] for p, cells in points.items()]
    return "\n".join(aligned([header, *lines], left=()))
