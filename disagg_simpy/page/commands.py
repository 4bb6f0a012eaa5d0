"""The pages of `--html` on sweep, goodput, plan and map (page/batch.py draws them): each the
command's table, sortable, and its picture as inline SVG with a tooltip on every point or cell."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from .batch import Chart, table_html, write_batch_page

#: Okabe-Ito, by position, as every picture and the run's page (plots/style.py ARRANGEMENT_COLOURS, page.js).
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


#: x-axis labels by grid key (as sweep.png's)
X_LABELS = {RATE: "offered rate (requests/s)", "rate_per_gpu": "offered rate per GPU (requests/s per GPU)",
            "slo_scale": "SLO scale (every limit multiplied by it)"}
#: --limits: each limit alone, drawn dashed and dotted beside the joint on-time line (as sweep.png)
LIMIT_LINES = (("first_word_ok_pct", "within the first-word limit", "6 3"), ("mean_gap_ok_pct", "within the mean-gap limit", "1.5 2.5"))


def sweep_page(path: Path, bands: pd.DataFrame, keys: list[str], title: str, target: float | None, x: str = RATE,
               limits: bool = False) -> Path:
    """Attainment curves against `x` (the rate, the rate per GPU or the SLO scale) with their 95%
    bands, a chart per value of the other keys; with `limits`, each limit's own share too."""
    names = list(dict.fromkeys(bands["arrangement"]))
    colours = _colours(names)
    others = [k for k in keys if k != x]
    panels = list(bands.groupby(others, sort=False)) if others else [((), bands)]
    charts = []
    for values, block in panels:
        values = values if isinstance(values, tuple) else (values,)
        caption = ", ".join(f"{k} = {v}" for k, v in zip(others, values)) or f"replies on time against {X_LABELS.get(x, x)}"
        c = Chart(caption, (float(block[x].min()), float(block[x].max())), (0, 100), X_LABELS.get(x, x),
                  "replies on time (%)")
        for name in names:
            b = block[block["arrangement"] == name].sort_values(x)
            tips = [f"{name} at {x} {v:g}: {m:.1f}% on time" + ("" if pd.isna(lo) else f" (95% interval {lo:.1f}-{hi:.1f})")
                    for v, m, lo, hi in zip(b[x], b["on_time_pct"], b["on_time_low_pct"], b["on_time_high_pct"])]
            c.line(name, colours[name], b[x].tolist(), b["on_time_pct"].tolist(), b["on_time_low_pct"].tolist(),
                   b["on_time_high_pct"].tolist(), tips)
            for column, what, dash in LIMIT_LINES if limits else ():
                if column in b and b[column].notna().any():
                    c.line(name, colours[name], b[x].tolist(), b[column].tolist(), dash=dash, legend=False,
                           tips=[f"{name} at {x} {v:g}: {m:.1f}% {what}" for v, m in zip(b[x], b[column])])
        if target is not None:
            c.hline(target, f"target {target:g}%")
        charts.append(c.svg(yticks=[0, 20, 40, 60, 80, 100]))
    columns = [(k, k) for k in keys] + [("arrangement", "arrangement"), ("on_time_pct", "on time % (95% interval)"),
                                        ("seeds", "seeds")]
    cells = {"on_time_pct": _interval("on_time_pct", "on_time_low_pct", "on_time_high_pct")}
    if limits:
        columns += [(k, f"% {what}") for k, what, _ in LIMIT_LINES]
        cells.update({k: (lambda r, k=k: _f(1)(r[k])) for k, _, _ in LIMIT_LINES})
    table = table_html(bands, columns, cells)
    lede = ("Mean on-time share over the seeds at each point, with its 95% interval (docs/statistics.md)"
            + ("; dashed: within the first-word limit alone, dotted: within the mean-gap limit alone" if limits else "")
            + ". Click a column to sort; hover a point for its figures.")
    return write_batch_page(path, title, lede, [("On time", f'<div class="charts">{"".join(charts)}</div>'),
                                                ("Every point", table)])


def _curves_charts(table: pd.DataFrame) -> str:
    """A small chart per arrangement (in the table's order): its on-time share at every rate
    probed with the 95% band, the target, and its goodput as a line in a strip (its interval).
    The x axis reaches twice the goodput's high end (or the failing rate): probes beyond it are
    in the probes table."""
    curves = table.attrs.get("curves", {})
    names = [n for n in table["arrangement"] if curves.get(n)]
    colours = _colours(list(table["arrangement"]))
    target = float(table["target_pct"].iloc[0]) if "target_pct" in table else None
    charts = []
    for name in names:
        row = table[table["arrangement"] == name].iloc[0]
        good, low, high = (float(row.get(k, math.nan)) for k in ("goodput_per_s", "goodput_low_per_s", "goodput_high_per_s"))
        pts = [p for p in curves[name] if p["complete"]]  # an early-stopped probe has only a bound
        reach = max([v for v in (good, high, float(row.get("failing_rate_per_s", math.nan))) if not math.isnan(v)],
                    default=0.0)
        x_max = min(max(p[RATE] for p in curves[name]), 2 * reach) if reach > 0 else max(p[RATE] for p in curves[name])
        shown = [p for p in pts if p[RATE] <= x_max * 1.0001]
        left = len(curves[name]) - len(shown)
        caption = f"{name}" + (f" ({left} probe{'s' * (left > 1)} off this axis: see the table)" if left else "")
        c = Chart(caption, (0, x_max * 1.05), (0, 100), "offered rate (requests/s)", "on time (%)", 380, 240)
        if not math.isnan(good):  # (plan: an arrangement not searched has only its bound)
            if not math.isnan(low):
                c.xspan(low, high, colours[name], f"{name}: goodput's 95% interval {low:.2f}-{high:.2f} requests/s")
            c.vline(good, colours[name], f"{name}: goodput {good:.2f} requests/s")
        c.line(name, colours[name], [p[RATE] for p in shown], [p["on_time_pct"] for p in shown],
               [p["low_pct"] for p in shown], [p["high_pct"] for p in shown],
               [f"{name} at {p[RATE]:.2f}/s: {p['on_time_pct']:.1f}% on time" +
                ("" if math.isnan(p["low_pct"]) else f" (95% interval {p['low_pct']:.1f}-{p['high_pct']:.1f})")
                for p in shown], legend=False)
        if target is not None:
            c.hline(target, f"target {target:g}%")
        charts.append(c.svg(yticks=[0, 20, 40, 60, 80, 100]))
    return f'<div class="charts">{"".join(charts)}</div>'


def _probes_table(table: pd.DataFrame) -> str:
    """Every rate probed per arrangement, with its mean on-time share and interval."""
    probes = []
    for name, pts in table.attrs.get("curves", {}).items():
        probes += [{"arrangement": name, **p} for p in pts]
    frame = pd.DataFrame(probes, columns=["arrangement", RATE, "on_time_pct", "low_pct", "high_pct", "complete"])
    return table_html(frame, [("arrangement", "arrangement"), (RATE, "rate/s"), ("on_time_pct", "on time % (95% interval)"),
                              ("complete", "every seed to its verdict")],
                      {RATE: lambda r: _f(3)(r[RATE]), "on_time_pct": _interval("on_time_pct", "low_pct", "high_pct")},
                      "probes")


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
    return write_batch_page(path, title, "Goodput: the highest offered rate whose mean on-time share over the seeds "
                            "meets the target; its 95% interval is of the same statistic (docs/statistics.md).",
                            [("Goodput", table_html(table, columns, cells)),
                             ("On time at every rate probed, around each goodput", _curves_charts(table)),
                             ("Every probe", _probes_table(table))])


def plan_page(path: Path, table: pd.DataFrame, title: str, recommendation: str, target: float) -> Path:
    columns = [("rank", "rank"), ("arrangement", "arrangement"), ("gpus", "GPUs"),
               ("goodput_per_s", "goodput/s (95% interval)"), ("goodput_per_gpu_per_s", "per GPU"),
               ("on_time_pct_at_rate", "on time % at rate"), ("binding_limit", "fails first")]
    searched = _interval("goodput_per_s", "goodput_low_per_s", "goodput_high_per_s", 2)
    cells = {"goodput_per_s": lambda r: (searched(r) if pd.isna(r.get("goodput_below_per_s")) else
                                         f"below {r['goodput_below_per_s']:.2f} (left: not in the top two)"),
             "goodput_per_gpu_per_s": lambda r: _f(2)(r["goodput_per_gpu_per_s"]),
             "on_time_pct_at_rate": lambda r: _f(1)(r["on_time_pct_at_rate"]),
             "gpus": lambda r: str(r["gpus"]) if pd.isna(r.get("reading_gpus")) else f"{r['reading_gpus']}+{r['writing_gpus']}"}
    if "dollars_per_hour" in table.columns:  # costs (docs/cost.md), when the plan has them
        columns += [("gpu_kinds", "GPU kinds"), ("dollars_per_hour", "$/h"),
                    ("dollars_per_million", "$/M on time (95% interval)"), ("power_kw", "kW")]
        cells |= {"dollars_per_hour": lambda r: _f(2)(r["dollars_per_hour"]), "power_kw": lambda r: _f(1)(r["power_kw"]),
                  "dollars_per_million": _interval("dollars_per_million", "dollars_per_million_low",
                                                   "dollars_per_million_high", 2)}
    chart = _curves_charts(table.assign(target_pct=target))
    return write_batch_page(path, title, recommendation,
                            [("Ranked by goodput", table_html(table, columns, cells)), ("On time around goodput", chart),
                             ("Every probe", _probes_table(table))])


def map_page(path: Path, cells: pd.DataFrame, title: str, names: list[str]) -> Path:
    """The map's grid: a cell per (rate, y value) in its winner's colour, paler the smaller its
    margin over the runner-up (as map.png), outlined where too close to call; hover for the figures."""
    colours = _colours(names)
    rates = sorted(cells[RATE].unique())
    ys = list(dict.fromkeys(cells["y_value"]))
    dx = (rates[1] - rates[0]) if len(rates) > 1 else 1.0
    widest = max(len(str(v)) for v in ys)  # the y labels' room: about 7 px a character
    c = Chart(title, (rates[0] - dx / 2, rates[-1] + dx / 2), (-0.5, len(ys) - 0.5), "offered rate (requests/s)",
              str(cells["y_key"].iloc[0]), 860 + 7 * widest, 420, left=36 + 7 * widest)
    for row in cells.itertuples():
        j = ys.index(row.y_value)
        tip = (f"{row.rate_per_s:g}/s, {row.y_key} = {row.y_value}: " +
               (f"{row.winner} {row.winner_on_time_pct:.1f}% on time" if row.winner else "no measured request") +
               (f", then {row.runner_up} {row.runner_up_on_time_pct:.1f}%" if row.runner_up else "") +
               ("; too close to call" if row.too_close else ""))
        margin = row.winner_on_time_pct - (row.runner_up_on_time_pct if row.runner_up else 0.0) if row.winner else 0.0
        strength = 0.3 + 0.7 * min(max(margin, 0.0) / 20.0, 1.0)  # full colour from a 20-point margin
        c.rect(row.rate_per_s - dx / 2, row.rate_per_s + dx / 2, j - 0.5, j + 0.5,
               colours.get(row.winner, "#ffffff"), tip, bool(row.too_close), strength)
    won = set(cells["winner"])
    c.legend += [(name, colours[name]) for name in names if name in won]
    grid = c.svg(yticks=list(range(len(ys))), ylabels=[str(v) for v in ys])
    columns = [(k, k) for k in cells.columns]
    return write_batch_page(path, title, "Each cell: the arrangement with the most replies on time (mean over seeds), "
                            "paler the smaller its margin over the runner-up; dashed outline: too close to call "
                            "(paired 95% interval of the difference includes 0). Hover a cell for its figures.",
                            [("Map", grid), ("Every cell", table_html(cells, columns))])


def table_page(path: Path, table: pd.DataFrame, title: str) -> Path:
    """A command's table alone, sortable (goodput --vary slo: a scale per arrangement)."""
    return write_batch_page(path, title, "Click a column to sort.",
                            [("Every row", table_html(table, [(k, k) for k in table.columns]))])
