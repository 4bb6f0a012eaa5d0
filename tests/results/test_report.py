"""The console table (results/report.py): it fits 120 columns with the widest figures a run gives,
and --wide prints every column."""

from __future__ import annotations

import numpy as np
import pandas as pd

from disagg_simpy.results.report import format_table


def _wide_summary(n_seeds: int) -> pd.DataFrame:
    """A summary with the widest cells a run gives (three-digit figures, two-digit half-widths)."""
    rng = np.random.default_rng(0)
    names = ["same-gpu", "chunked-512", "split-2-2", "split-1-3", "split-3-1"]
    from disagg_simpy.results.metrics import SUMMARY_COLUMNS

    rows = []
    for seed in range(n_seeds):
        for name in names:
            row = {c: float(rng.uniform(0, 500)) for c in SUMMARY_COLUMNS[1:]}
            rows.append({"arrangement": name, **row, "seed": seed})
    return pd.DataFrame(rows)


def test_the_table_fits_120_columns_and_wide_prints_every_column():
    summary = _wide_summary(30)
    table = format_table(summary)
    assert max(map(len, table.split("\n"))) <= 120
    header = "".join(table.split("\n")[:2])
    for column in ("on_time", "late_first", "late_mean", "froze", "p50_s", "p90_s", "median_mean", "longest"):
        assert column in header
    assert "words_per_s" not in table and "p99_gap_ms" not in table
    wide = format_table(summary, wide=True)  # every column, in blocks that each fit 120 characters
    headers = " ".join(line for line in wide.split("\n") if line.startswith("arrangement"))
    assert all(c in headers.split() for c in summary.columns if c != "seed")
    assert max(map(len, wide.split("\n"))) <= 120 and "-±-" not in wide
