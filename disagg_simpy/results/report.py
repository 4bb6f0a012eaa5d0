"""The terminal table: one aligned row per arrangement, means and 95% intervals over seeds."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .columns import CONSOLE_COLUMNS, COST_CONSOLE_COLUMNS, OPTION_COLUMNS, RULE, summary_column
from .costs import over_seeds
from .intervals import t975  # noqa: F401 (t975: re-exported)
from .metrics import LIMIT_COLUMNS

#: summary columns that judge one limit (empty when it is off: left out of the table)
LIMITS_JUDGING = {c for cols in LIMIT_COLUMNS.values() for c in cols}
#: the SLO rule's own figures, in the console table when present (the registry's `RULE`)
CRITERION_CONSOLE = tuple(c.name for c in RULE if c.console)


def _cell(value: float, decimals: int) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{decimals}f}"


WIDTH = 120  # characters a table line may take


def _two_lines(column: str) -> tuple[str, str]:
    """A column name broken at an underscore: the latest that keeps the longer line within one
    character of the best balance (`first_word_` over `p50_s`)."""
    cuts = [i for i, ch in enumerate(column) if ch == "_"]
    if not cuts:
        return "", column
    longer = {k: max(k + 1, len(column) - k - 1) for k in cuts}
    best = min(longer.values())
    i = max(k for k in cuts if longer[k] <= best + 1)
    return column[: i + 1], column[i + 1 :]


def format_table(summary: pd.DataFrame, wide: bool = False) -> str:
    """Aligned text table; with a `seed` column, each figure is the mean and its 95% interval
    over seeds: '93.1±2.9', the interval's longer side (it lies within), so that the table fits;
    `wide` prints a lopsided interval itself ('93.1 (90.2 to 94.5)').

    By default the registry's console columns (`columns.CONSOLE_COLUMNS`), each name broken over two header lines so that the table
    fits 120 characters; `wide` prints every column, one header line, in blocks of columns
    that each fit 120 characters (the arrangement first in each)."""
    columns = [c for c in summary.columns if c not in ("arrangement", "seed")
               and (wide or c in CONSOLE_COLUMNS or c in CRITERION_CONSOLE or c in COST_CONSOLE_COLUMNS)
               and not (c in OPTION_COLUMNS and summary[c].isna().all())  # E4, E5 figures only when on
               and not (c in LIMITS_JUDGING and summary[c].isna().all())]  # nor those of a limit that is off
    rows = []
    for name, block in summary.groupby("arrangement", sort=False, observed=True):
        cells = [str(name)]
        for col in columns:
            d = summary_column(col).decimals
            if "seed" in summary.columns and summary["seed"].nunique() > 1:
                cells.append(over_seeds(block, col).text(d, lopsided=wide))
            else:
                cells.append(_cell(float(block[col].iloc[0]), d))
        rows.append(cells)
    if wide:
        headers = [["arrangement", *columns]]
    else:
        split = [_two_lines(c) for c in columns]
        headers = [["", *(a for a, _ in split)], ["arrangement", *(b for _, b in split)]]
    widths = [max(len(r[i]) for r in [*headers, *rows]) for i in range(len(headers[0]))]
    blocks, block = [], [0]  # column indexes per block; the arrangement's (0) starts each
    for i in range(1, len(widths)):
        if wide and len(block) > 1 and sum(widths[j] + 2 for j in [*block, i]) - 2 > WIDTH:
            blocks.append(block)
            block = [0]
        block.append(i)
    blocks.append(block)
    lines = []
    for k, block in enumerate(blocks):
        if k:
            lines.append("")
        for r in [*headers, *rows]:
            cells = [r[0].ljust(widths[0]), *(r[j].rjust(widths[j]) for j in block[1:])]
            lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


INFINITE = "inf"  # an infinite figure in JSON (JSON has no infinity): see json_figure


def json_figure(value):
    """A figure as JSON can hold it: NaN (no figure) becomes None (null); +inf (a reply never
    finished under a percentiles rule, or dollars per million with nothing on time) becomes the
    string "inf" ("-inf" below); numpy scalars become Python numbers."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float):
        if math.isnan(value):
            return None
        if math.isinf(value):
            return INFINITE if value > 0 else "-" + INFINITE
    return value


def summary_json(summary: pd.DataFrame) -> list[dict]:
    """Summary rows as JSON-ready dicts (`json_figure`: NaN null, infinity "inf")."""
    records = summary.astype(object).where(summary.notna(), None).to_dict("records")
    return [{k: json_figure(v) for k, v in row.items()} for row in records]


def summary_means_json(summary: pd.DataFrame) -> list[dict]:
    """What the terminal table shows, as JSON: with one seed, the summary rows; with several,
    one row per arrangement with every figure's mean over seeds, `seeds` (how many),
    `interval` (each figure's 95% interval, [low, high]: results/intervals.py) and `per_seed`
    (that arrangement's summary rows, seed by seed, as summary.csv has them)."""
    if "seed" not in summary.columns or summary["seed"].nunique() < 2:
        return summary_json(summary)
    out = []
    figures = [c for c in summary.columns if c not in ("arrangement", "seed") and pd.api.types.is_numeric_dtype(summary[c])]
    for name, block in summary.groupby("arrangement", sort=False, observed=True):
        row: dict = {"arrangement": str(name), "seeds": int(block["seed"].nunique())}
        spans = {}
        for col in figures:
            i = over_seeds(block, col)
            row[col] = json_figure(i.mean)
            spans[col] = None if math.isnan(i.low) else [json_figure(i.low), json_figure(i.high)]
        row["interval"] = spans
        row["per_seed"] = summary_json(block)
        out.append(row)
    return out
