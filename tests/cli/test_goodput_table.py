"""The goodput table's failing share, in the console and on the --html page: a mean share just
below the target (89.96 at 90%) shows with the decimals that keep it below, never as '90.0'
beside 'fails at'."""

from __future__ import annotations

import math

import pandas as pd

from disagg_simpy.cli.goodput import format_goodput
from disagg_simpy.page.commands import goodput_page
from disagg_simpy.results.intervals import decimals_below


def row(failing: float) -> pd.DataFrame:
    return pd.DataFrame([{"arrangement": "a", "n_gpus": 1, "goodput_per_s": 2.0, "goodput_low_per_s": 1.9,
                          "goodput_high_per_s": 2.1, "goodput_per_gpu_per_s": 2.0, "passing_rate_per_s": 2.0,
                          "passing_on_time_pct": 93.0, "passing_on_time_low_pct": 90.5, "passing_on_time_high_pct": 95.5,
                          "failing_rate_per_s": 2.1, "failing_on_time_pct": failing,
                          "failing_on_time_low_pct": failing - 10, "failing_on_time_high_pct": min(failing + 10, 100),
                          "binding_limit": "mean gap", "n_probes": 6, "target_pct": 90.0}])


def test_a_failing_share_just_below_the_target_never_reads_as_reaching_it(tmp_path):
    assert [decimals_below(m, 90.0) for m in (89.96, 89.94, 89.996, 95.0, 90.0)] == [2, 1, 3, 1, 1]
    assert decimals_below(math.nan, 90.0) == 1
    text = format_goodput(row(89.96))
    assert "89.96±10.00" in text and "90.0" not in text.splitlines()[1].split("2.10", 1)[1], text
    assert "85.0±10.0" in format_goodput(row(85.0))  # one decimal where it already reads below
    page = goodput_page(tmp_path / "g.html", row(89.96), "t").read_text()
    assert "89.96 (79.96-99.96)" in page and "90.0 (" not in page


def test_the_goodput_page_shows_the_costs_goodput_csv_holds(tmp_path):
    """goodput --html with a price: the page's table has the cost columns, each cell the figure
    of goodput.csv (read, not recomputed)."""
    from helpers import preset_scenario

    from disagg_simpy.cli import main

    path = preset_scenario(tmp_path, "g", {"rate_per_s": 4.0, "measure_s": 5, "prompt_mix": [
        {"share": 1, "tokens": [100, 1000]}], "reply_words": [50, 200]},
        [{"name": "a", "kind": "colocated", "gpus": 1}, {"name": "h", "kind": "colocated", "gpus": 1, "gpu": "h100-80gb"}],
        seeds=2)
    html = tmp_path / "g.html"
    assert main(["goodput", str(path), "--out", str(tmp_path / "out"), "--no-plots", "--workers", "1", "--tolerance", "1",
                 "--html", str(html)]) == 0
    table = pd.read_csv(tmp_path / "out" / "goodput.csv")
    page = html.read_text()
    for header in ("GPU kinds", "$/h", "$/M at goodput (95% interval)", "requests/GPU-h", "kW"):
        assert header in page, header
    for r in table.itertuples():
        assert f"{r.dollars_per_million:.2f} ({r.dollars_per_million_low:.2f}-{r.dollars_per_million_high:.2f})" in page
        assert f"{r.requests_per_gpu_hour:.0f}" in page and r.gpu_kinds in page
