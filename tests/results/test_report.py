"""The console table (results/report.py): it fits 120 columns with the widest figures a run gives,
and --wide prints every column."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

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


def test_cost_per_on_time_request_over_seeds_is_taken_at_the_mean_on_time_rate():
    """G5 (review2): over seeds, `dollars_per_million_on_time` is dollars per hour at the mean on-time
    rate (the row's own `on_time_per_gpu_hour`), its interval the rate's with ends swapped (as goodput's
    cost figures), in the console table, --json and the page alike; the mean of per-seed ratios (1140.87
    here) contradicted the row and its interval, cut at 0, reached $0.00."""
    from disagg_simpy.page.data import over_seeds
    from disagg_simpy.results.costs import per_million
    from disagg_simpy.results.intervals import NOT_NEGATIVE, interval
    from disagg_simpy.results.report import summary_means_json

    gpus, usd, per_gpu_hour = 4, 8.0, [1260.0, 2880.0]  # two seeds that differ (review2's repro)
    summary = pd.DataFrame({"arrangement": ["same-gpu"] * 2, "seed": [1, 2], "dollars_per_hour": [usd, usd],
                            "dollars_per_million_on_time": [per_million(usd, r * gpus / 3600) for r in per_gpu_hour],
                            "on_time_per_gpu_hour": per_gpu_hour})
    rate = interval(per_gpu_hour, NOT_NEGATIVE)
    expected = [per_million(usd, x * gpus / 3600) for x in (rate.mean, rate.high, rate.low)]
    assert round(expected[0], 2) == 966.18 and expected[2] == np.inf
    row = summary_means_json(summary)[0]
    assert row["dollars_per_million_on_time"] == pytest.approx(expected[0], rel=1e-12)
    assert row["interval"]["dollars_per_million_on_time"] == [pytest.approx(expected[1], rel=1e-12), "inf"]
    page = over_seeds(summary, "same-gpu")
    assert page["means"]["dollars_per_million_on_time"] == pytest.approx(expected[0], abs=1e-6)
    assert "966.18 (" in format_table(summary, wide=True)
