"""The pages of `--html` on sweep, goodput, plan and map (page/batch.py draws them): each the
command's table, sortable, and its picture as inline SVG with a tooltip on every point or cell."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from .batch import Chart, table_html, write_batch_page

#: Okabe-Ito, in the order every picture and the run's page use (plots/style.py, page.js).
COLOURS = ("#0072B2", "#009E73", "#CC79A7", "#56B4E9", "#000000", "#E69F00", "#F0E442")
RATE = "rate_per_s"


def _colours(names) -> dict[str, str]:
    return {n: COLOURS[i % len(COLOURS)] for i, n in enumerate(names)}


def _f(digits: int):
    return lambda v: "" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{digits}f}"


def _interval(mean: str, low: str, high: str, digits: int = 1):
    """A cell 'mean (low-high)' from three columns."""
    f = _f(digits)
    return lambda r: f(r[mean]) + ("" if pd.isna(r[low]) else f" ({f(r[low])}-{f(r[high])})")


def sweep_page(path: Path, bands: pd.DataFrame, keys: list[str], title: str, target: float | None) -> Path:
    """Attainment curves with their 95% bands, a chart per value of the keys other than the rate."""
    names = list(dict.fromkeys(bands["arrangement"]))
    colours = _colours(names)
    others = [k for k in keys if k != RATE]
    panels = list(bands.groupby(others, sort=False)) if others else [((), bands)]
    charts = []
    for values, block in panels:
        values = values if isinstance(values, tuple) else (values,)
        caption = ", ".join(f"{k} = {v}" for k, v in zip(others, values)) or "replies on time against offered rate"
        c = Chart(caption, (float(block[RATE].min()), float(block[RATE].max())), (0, 100),
                  "offered rate (requests/s)", "replies on time (%)")
        for name in names:
            b = block[block["arrangement"] == name].sort_values(RATE)
            tips = [f"{name} at {r:g}/s: {m:.1f}% on time" + ("" if pd.isna(lo) else f" (95% interval {lo:.1f}-{hi:.1f})")
                    for r, m, lo, hi in zip(b[RATE], b["on_time_pct"], b["on_time_low_pct"], b["on_time_high_pct"])]
            c.line(name, colours[name], b[RATE].tolist(), b["on_time_pct"].tolist(), b["on_time_low_pct"].tolist(),
                   b["on_time_high_pct"].tolist(), tips)
        if target is not None:
            c.hline(target, f"target {target:g}%")
        charts.append(c.svg(yticks=[0, 20, 40, 60, 80, 100]))
    columns = [(k, k) for k in keys] + [("arrangement", "arrangement"), ("on_time_pct", "on time % (95% interval)"),
                                        ("seeds", "seeds")]
    table = table_html(bands, columns, {"on_time_pct": _interval("on_time_pct", "on_time_low_pct", "on_time_high_pct")})
    return write_batch_page(path, title, "Mean on-time share over the seeds at each point, with its 95% interval "
                            "(docs/statistics.md). Click a column to sort; hover a point for its figures.",
                            [("On time against offered rate", f'<div class="charts">{"".join(charts)}</div>'),
                             ("Every point", table)])


def _curves_chart(table: pd.DataFrame, caption: str) -> str:
    """Each arrangement's on-time curve over the rates probed, with its band and its goodput."""
    curves = table.attrs.get("curves", {})
    names = list(table["arrangement"])
    colours = _colours(names)
    rates = [p[RATE] for n in names for p in curves.get(n, [])]
    if not rates:
        return ""
    c = Chart(caption, (0, max(rates) * 1.05), (0, 100), "offered rate (requests/s)", "replies on time (%)", 760, 380)
    for name in names:
        pts = [p for p in curves.get(name, []) if p["complete"]]  # an early-stopped probe has only a bound (the table has it)
        tips = [f"{name} at {p[RATE]:.2f}/s: {p['on_time_pct']:.1f}% on time" +
                ("" if p["complete"] else " (at most: a seed stopped early)") for p in pts]
        c.line(name, colours[name], [p[RATE] for p in pts], [p["on_time_pct"] for p in pts],
               [p["low_pct"] for p in pts], [p["high_pct"] for p in pts], tips)
        good = table.loc[table["arrangement"] == name, "goodput_per_s"].iloc[0]
        c.vline(float(good), colours[name], f"{name}: goodput {good:.2f} requests/s")
    target = float(table["target_pct"].iloc[0]) if "target_pct" in table else None
    if target is not None:
        c.hline(target, f"target {target:g}%")
    return c.svg(yticks=[0, 20, 40, 60, 80, 100])


def goodput_page(path: Path, table: pd.DataFrame, title: str) -> Path:
    columns = [("arrangement", "arrangement"), ("n_gpus", "GPUs"), ("goodput_per_s", "goodput/s (95% interval)"),
               ("goodput_per_gpu_per_s", "per GPU"), ("passing_rate_per_s", "passes at"),
               ("passing_on_time_pct", "on time %"), ("failing_rate_per_s", "fails at"),
               ("failing_on_time_pct", "on time %"), ("binding_limit", "fails first"), ("n_probes", "probes")]
    cells = {"goodput_per_s": _interval("goodput_per_s", "goodput_low_per_s", "goodput_high_per_s", 2),
             "goodput_per_gpu_per_s": lambda r: _f(2)(r["goodput_per_gpu_per_s"]),
             "passing_rate_per_s": lambda r: _f(2)(r["passing_rate_per_s"]),
             "failing_rate_per_s": lambda r: _f(2)(r["failing_rate_per_s"]),
             "passing_on_time_pct": _interval("passing_on_time_pct", "passing_on_time_low_pct", "passing_on_time_high_pct"),
             "failing_on_time_pct": _interval("failing_on_time_pct", "failing_on_time_low_pct", "failing_on_time_high_pct")}
    probes = []
    for name, pts in table.attrs.get("curves", {}).items():
        probes += [{"arrangement": name, **p} for p in pts]
    probe_table = table_html(pd.DataFrame(probes, columns=["arrangement", RATE, "on_time_pct", "low_pct", "high_pct",
                                                           "complete"]),
                             [("arrangement", "arrangement"), (RATE, "rate/s"), ("on_time_pct", "on time % (95% interval)"),
                              ("complete", "every seed to its verdict")],
                             {RATE: lambda r: _f(3)(r[RATE]), "on_time_pct": _interval("on_time_pct", "low_pct", "high_pct")},
                             "probes")
    return write_batch_page(path, title, "Goodput: the highest offered rate whose mean on-time share over the seeds "
                            "meets the target; its 95% interval is of the same statistic (docs/statistics.md).",
                            [("Goodput", table_html(table, columns, cells)),
                             ("On time at every rate probed", _curves_chart(table, "on-time share at each rate probed")),
                             ("Probes", probe_table)])


def plan_page(path: Path, table: pd.DataFrame, title: str, recommendation: str, target: float) -> Path:
    columns = [("rank", "rank"), ("arrangement", "arrangement"), ("gpus", "GPUs"),
               ("goodput_per_s", "goodput/s (95% interval)"), ("goodput_per_gpu_per_s", "per GPU"),
               ("on_time_pct_at_rate", "on time % at rate"), ("binding_limit", "fails first")]
    cells = {"goodput_per_s": _interval("goodput_per_s", "goodput_low_per_s", "goodput_high_per_s", 2),
             "goodput_per_gpu_per_s": lambda r: _f(2)(r["goodput_per_gpu_per_s"]),
             "on_time_pct_at_rate": lambda r: _f(1)(r["on_time_pct_at_rate"])}
    chart = _curves_chart(table.assign(target_pct=target), "each arrangement's on-time share around its goodput")
    return write_batch_page(path, title, recommendation,
                            [("Ranked by goodput", table_html(table, columns, cells)), ("On time around goodput", chart)])


def map_page(path: Path, cells: pd.DataFrame, title: str, names: list[str]) -> Path:
    """The map's grid: a cell per (rate, y value) in its winner's colour, hover for the figures."""
    colours = _colours(names)
    rates = sorted(cells[RATE].unique())
    ys = list(dict.fromkeys(cells["y_value"]))
    dx = (rates[1] - rates[0]) if len(rates) > 1 else 1.0
    c = Chart(title, (rates[0] - dx / 2, rates[-1] + dx / 2), (-0.5, len(ys) - 0.5), "offered rate (requests/s)",
              str(cells["y_key"].iloc[0]), 860, 420)
    for row in cells.itertuples():
        j = ys.index(row.y_value)
        tip = (f"{row.rate_per_s:g}/s, {row.y_key} = {row.y_value}: " +
               (f"{row.winner} {row.winner_on_time_pct:.1f}% on time" if row.winner else "no measured request") +
               (f", then {row.runner_up} {row.runner_up_on_time_pct:.1f}%" if row.runner_up else "") +
               ("; too close to call" if row.too_close else ""))
        c.rect(row.rate_per_s - dx / 2, row.rate_per_s + dx / 2, j - 0.5, j + 0.5,
               colours.get(row.winner, "#ffffff"), tip, bool(row.too_close))
    for name in names:
        if name in set(cells["winner"]):
            c.legend.append((name, colours[name]))
    grid = c.svg(yticks=list(range(len(ys))), ylabels=[str(v) for v in ys])
    columns = [(k, k) for k in cells.columns]
    return write_batch_page(path, title, "Each cell: the arrangement with the most replies on time (mean over seeds); "
                            "dashed outline: too close to call against the runner-up (paired 95% interval includes 0).",
                            [("Map", grid), ("Every cell", table_html(cells, columns))])
