"""The pages of `--html` on sweep, goodput, plan and map (page/batch.py draws them): each the
command's table, sortable, and its picture as inline SVG with a tooltip on every point or cell."""

from __future__ import annotations

import math
from html import escape
from pathlib import Path

import pandas as pd

from ..results.columns import COST_CELLS, cost_heading
from ..results.intervals import decimals_below
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


#: What the probes table's last column says (its header is short).
VERDICT_NOTE = ("\"Every seed to its verdict\": True when every seed's run at that rate went on until its on-time "
                "share was known; False when a seed was stopped early, once its share could no longer meet the "
                "target (a rate far above capacity): the share shown is then the mean of upper bounds on the "
                "seeds' shares, with no interval, and the rate fails.")


def _probes_table(table: pd.DataFrame) -> str:
    """Every rate probed per arrangement, with its mean on-time share and interval, and a line
    saying what the last column means."""
    probes = []
    for name, pts in table.attrs.get("curves", {}).items():
        probes += [{"arrangement": name, **p} for p in pts]
    frame = pd.DataFrame(probes, columns=["arrangement", RATE, "on_time_pct", "low_pct", "high_pct", "complete"])
    return table_html(frame, [("arrangement", "arrangement"), (RATE, "rate/s"), ("on_time_pct", "on time % (95% interval)"),
                              ("complete", "every seed to its verdict")],
                      {RATE: lambda r: _f(3)(r[RATE]), "on_time_pct": _interval("on_time_pct", "low_pct", "high_pct")},
                      "probes") + f'<p class="note" data-testid="verdict-note">{escape(VERDICT_NOTE)}</p>'


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
             "failing_on_time_pct": lambda r: _interval("failing_on_time_pct", "failing_on_time_low_pct",
                                                        "failing_on_time_high_pct",
                                                        decimals_below(r["failing_on_time_pct"], r["target_pct"]))(r)}
    _cost_cells(table, columns, cells)
    return write_batch_page(path, title, "Goodput: the highest offered rate whose mean on-time share over the seeds "
                            "meets the target; its 95% interval is of the same statistic (docs/statistics.md).",
                            [("Goodput", table_html(table, columns, cells)),
                             ("On time at every rate probed, around each goodput", _curves_charts(table)),
                             ("Every probe", _probes_table(table))])


def _cost_cells(table: pd.DataFrame, columns: list, cells: dict) -> None:
    """The cost columns (docs/cost.md), read from the table, when it has them: added to `columns`
    and `cells` in place (per request at the goodput, under any rule)."""
    if "dollars_per_hour" not in table.columns:
        return
    columns += [(name, cost_heading(name)) for name in ("gpu_kinds", *COST_CELLS)]
    cells |= {"dollars_per_hour": lambda r: _f(2)(r["dollars_per_hour"]), "power_kw": lambda r: _f(1)(r["power_kw"]),
              "requests_per_gpu_hour": lambda r: _f(0)(r["requests_per_gpu_hour"]),
              "dollars_per_million": _interval("dollars_per_million", "dollars_per_million_low",
                                               "dollars_per_million_high", 2)}


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
    if "cost_error_low_per_s" in table.columns:  # plan checked its top two against cost errors (sweep/cost_error.py)
        columns.insert(4, ("cost_error_low_per_s", "goodput/s with the costs off (the top two)"))
        cells["cost_error_low_per_s"] = lambda r: ("" if pd.isna(r["cost_error_low_per_s"]) else
                                                   f"{r['cost_error_low_per_s']:.2f}-{r['cost_error_high_per_s']:.2f}")
    _cost_cells(table, columns, cells)
    chart = _curves_charts(table.assign(target_pct=target))
    return write_batch_page(path, title, recommendation,
                            [("Ranked by goodput", table_html(table, columns, cells)), ("On time around goodput", chart),
                             ("Every probe", _probes_table(table))])


def map_page(path: Path, cells: pd.DataFrame, title: str, names: list[str], words: str = "most replies on time",
             share: str = "on time") -> Path:
    """The map's grid: a cell per (rate, y value) in its winner's colour (it has the `words`,
    sweep/winners.py `winner_words`), paler the smaller its margin over the runner-up (as
    map.png), outlined where too close to call; hover for the figures (each share: `share`)."""
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
               (f"{row.winner} {row.winner_on_time_pct:.1f}% {share}" if row.winner else "no measured request") +
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
    return write_batch_page(path, title, f"Each cell: the arrangement with the {words} (mean over seeds), "
                            "paler the smaller its margin over the runner-up; dashed outline: too close to call "
                            "(paired 95% interval of the difference includes 0). Hover a cell for its figures.",
                            [("Map", grid), ("Every cell", table_html(cells, columns))])


def slo_scale_page(path: Path, table: pd.DataFrame, title: str) -> Path:
    """goodput --vary slo: a bar per arrangement to its smallest passing SLO scale, a line on to
    the largest scale found to fail below it (the bracket), the scenario's own limits (scale 1)
    marked; then the table. Read from slo_scale.csv's rows."""
    names = [str(n) for n in table["arrangement"]]
    colours = _colours(names)
    found = [v for v in [*table["passing_scale"], *table["failing_scale"], 1.0] if not pd.isna(v)]
    n = len(names)
    c = Chart("each arrangement's smallest SLO scale meeting the target (bar), the largest found to fail (line "
              "from the bar); dashed: the scenario's own limits", (0, max(found) * 1.1), (-0.5, n - 0.5),
              "SLO scale (every limit that is on, times it)", "", 860, 90 + 44 * n, left=180)
    for i, row in enumerate(table.itertuples()):
        y = n - 1 - i
        good, fail = float(row.passing_scale), float(row.failing_scale)
        tip = (f"{row.arrangement}: " + ("no passing scale found" if math.isnan(good) else
                                         f"passes at scale {good:.4g} ({row.passing_on_time_pct:.1f}% on time)") +
               ("" if math.isnan(fail) else f"; fails at {fail:.4g} ({row.failing_on_time_pct:.1f}% on time)"))
        if not math.isnan(good):
            c.rect(0, good, y - 0.3, y + 0.3, colours[row.arrangement], tip)
            c.parts.append(f'<text x="{c.X(good) + 4:.1f}" y="{c.Y(y) + 4:.1f}">{good:.3g}'
                           + ("" if math.isnan(fail) else f" (fails at {fail:.3g})") + "</text>")
        if not math.isnan(fail):
            c.parts.append(f'<line x1="{c.X(fail):.1f}" x2="{c.X(good if not math.isnan(good) else fail):.1f}" '
                           f'y1="{c.Y(y):.1f}" y2="{c.Y(y):.1f}" stroke="#000" stroke-width="2" data-testid="bracket">'
                           f"<title>{escape(tip)}</title></line>")
    c.parts.append(f'<line x1="{c.X(1.0):.1f}" x2="{c.X(1.0):.1f}" y1="{c.y0}" y2="{c.y1}" stroke="#000" '
                   'stroke-dasharray="3 3"><title>scale 1: the scenario\'s own limits</title></line>')
    chart = c.svg(yticks=list(range(n)), ylabels=names[::-1])
    columns = [(k, k) for k in table.columns]
    return write_batch_page(path, title, "The smallest SLO scale s (every limit that is on, multiplied by s) at which "
                            "each arrangement meets the target at the scenario's rate, bracketed by the largest "
                            "scale found to fail. Hover a bar for its figures; click a column to sort.",
                            [("SLO scale", f'<div class="charts">{chart}</div>'), ("Every row", table_html(table, columns))])


def over_time_page(path: Path, table: pd.DataFrame, title: str, lines: list[str], best, day: pd.DataFrame,
                   n_gpus: int, best_static: str, paste: str) -> Path:
    """plan --over-time: what plan_over_time.png draws, from the same results: the offered rate per
    period, the reading GPUs serving over the day (the first seed's moves) and the on-time share per
    period with its 95% interval, for the switching plan, the reactive policy and the best static
    split; then plan_over_time.csv and the plan to paste."""
    from ..results.over_time import reading_serving

    shown = ["switching", "reactive", best_static]
    colours = _colours(shown)
    end_s = best[-1].end_s
    edges = [p.start_s for p in best] + [end_s]
    rate = Chart("offered requests/s in each period", (0, end_s), (0, max(p.rate_per_s for p in best) * 1.15),
                 "time of day (s)", "requests/s", 860, 200)
    rate.steps("offered rate", "#777777", edges, [p.rate_per_s for p in best],
               [f"period {p.index} ({p.start_s:g}-{p.end_s:g} s): {p.rate_per_s:g} requests/s; best split "
                f"split-{p.best_reading}-{n_gpus - p.best_reading}" for p in best])
    first_seed = day["seed"].min()
    reading = Chart(f"reading GPUs serving (of {n_gpus}), seed {first_seed}'s moves: a GPU leaves its side when asked "
                    "and joins the other after its warm-up", (0, end_s), (-0.2, n_gpus - 0.8),
                    "time of day (s)", "reading GPUs", 860, 260)
    for k, name in enumerate(shown):
        row = day[(day.arrangement == name) & (day.seed == first_seed)].iloc[0]
        start = int(name.split("-")[1]) if name.startswith("split-") else best[0].best_reading
        sw = {"requested_at_ns": [m[0] for m in row["moves"]], "serving_at_ns": [m[1] for m in row["moves"]],
              "to_role": [m[2] for m in row["moves"]]}
        t, n = reading_serving(start, sw, end_s)
        reading.steps(name, colours[name], [float(v) for v in t], [int(v) for v in n[:-1]],
                      [f"{name}: {int(v)} reading GPUs from {float(x):g} s" for x, v in zip(t, n[:-1])],
                      dash=("", "6 3", "2 2")[k])
    parts = [f"period_{p.index}" for p in best] + ["day"]
    labels = [f"period {p.index} ({p.start_s:g}-{p.end_s:g} s)" for p in best] + ["whole day"]
    t = table.set_index(["arrangement", "part"])
    share = Chart("on time per period and over the day (bar: mean over seeds; line: its 95% interval)",
                  (-0.5, len(parts) - 0.5), (0, 100), "part of the day", "on time (%)", 860, 300)
    width = 0.8 / len(shown)
    for i, part in enumerate(parts):
        for j, name in enumerate(shown):
            r = t.loc[(name, part)]
            x0 = i - 0.4 + j * width
            tip = (f"{name}, {labels[i]}: {r.on_time_pct:.1f}% on time" +
                   ("" if math.isnan(r.on_time_low_pct) else f" (95% interval {r.on_time_low_pct:.1f}-{r.on_time_high_pct:.1f})"))
            share.bar(x0, x0 + width, float(r.on_time_pct), float(r.on_time_low_pct), float(r.on_time_high_pct),
                      colours[name], tip)
    share.legend += [(name, colours[name]) for name in shown]
    charts = "".join(c.svg() for c in (rate, reading)) + share.svg(yticks=[0, 20, 40, 60, 80, 100],
                                                                     xticks=list(range(len(parts))), xlabels=labels)
    columns = [(k, k) for k in table.columns]
    lede = " ".join(lines)
    return write_batch_page(path, title, lede,
                            [("Over the day", f'<div class="charts">{charts}</div>'),
                             ("Every arrangement and part of the day", table_html(table, columns)),
                             ("The switching plan, ready to paste under arrangements:",
                              f'<pre data-testid="roles">{escape(paste)}</pre>')])


def table_page(path: Path, table: pd.DataFrame, title: str) -> Path:
    """A command's table alone, sortable (goodput --vary slo: a scale per arrangement)."""
    return write_batch_page(path, title, "Click a column to sort.",
                            [("Every row", table_html(table, [(k, k) for k in table.columns]))])
