"""The terminal table: one aligned row per arrangement, means +/- 95% half-widths over seeds."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..texts import aligned
from .columns import CONSOLE_COLUMNS, OPTION_COLUMNS, summary_column
from .metrics import LIMIT_COLUMNS

#: summary columns that judge one limit (empty when it is off: left out of the table)
LIMITS_JUDGING = {c for cols in LIMIT_COLUMNS.values() for c in cols}
#: the percentiles criterion's figures, in the console table when present
CRITERION_CONSOLE = ("slo_first_word_s", "slo_mean_gap_ms", "slo_longest_gap_ms", "slo_met")

# Student t, two-sided 95% (the 0.975 quantile), for 1..30 degrees of freedom.
_T975 = (
    12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
    2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860,
    2.0796, 2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423,
)


def t975(dof: int) -> float:
    """The 97.5% quantile of Student's t (a table to 30, a Cornish-Fisher series beyond)."""
    if dof <= len(_T975):
        return _T975[dof - 1]
    z, v = 1.959963984540054, float(dof)
    return (
        z
        + (z**3 + z) / (4 * v)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * v**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * v**3)
    )


def mean_half_width(values: pd.Series) -> tuple[float, float]:
    """Mean and the 95% Student-t half-width of the mean (NaN half-width for one value)."""
    v = values.dropna().to_numpy(dtype=float)
    if len(v) == 0:
        return math.nan, math.nan
    if len(v) == 1:
        return float(v[0]), math.nan
    return float(v.mean()), t975(len(v) - 1) * float(v.std(ddof=1)) / math.sqrt(len(v))


def _cell(value: float, decimals: int) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{decimals}f}"


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
    """Aligned text table; with a `seed` column, each figure is mean +/- 95% half-width.

    By default the registry's console columns (`columns.CONSOLE_COLUMNS`), each name broken over two header lines so that the table
    fits 120 characters; `wide` prints every column, one header line."""
    columns = [c for c in summary.columns if c not in ("arrangement", "seed")
               and (wide or c in CONSOLE_COLUMNS or c in CRITERION_CONSOLE)
               and not (c in OPTION_COLUMNS and summary[c].isna().all())  # E4, E5 figures only when on
               and not (c in LIMITS_JUDGING and summary[c].isna().all())]  # nor those of a limit that is off
    rows = []
    for name, block in summary.groupby("arrangement", sort=False, observed=True):
        cells = [str(name)]
        for col in columns:
            d = summary_column(col).decimals
            if "seed" in summary.columns and summary["seed"].nunique() > 1:
                mean, hw = mean_half_width(block[col])
                cells.append(f"{_cell(mean, d)}±{_cell(hw, d)}")
            else:
                cells.append(_cell(float(block[col].iloc[0]), d))
        rows.append(cells)
    if wide:
        headers = [["arrangement", *columns]]
    else:
        split = [_two_lines(c) for c in columns]
        headers = [["", *(a for a, _ in split)], ["arrangement", *(b for _, b in split)]]
    return "\n".join(aligned([*headers, *rows], strip=True))


def summary_json(summary: pd.DataFrame) -> list[dict]:
    """Summary rows as JSON-ready dicts (NaN becomes null)."""
    records = summary.astype(object).where(summary.notna(), None).to_dict("records")
    for row in records:
        for k, v in row.items():
            if isinstance(v, np.generic):
                row[k] = v.item()
    return records
