"""The run page of traffic that changes over time (E11) shows over_time.csv: the offered rate and
each arrangement's on-time share per window (with several seeds, their mean, as over_time.png
draws it), read from the results, in a real browser (a run without periods shows none:
test_page_data)."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from disagg_simpy.cli import main
from disagg_simpy.page import embedded_data

#: two periods (quiet short prompts, then three times the rate of long ones) on two arrangements
SPEC = {"name": "two-periods", "max_sim_s": 40,
        "workload": {"measure_s": 6, "prompt_mix": [{"share": 1, "tokens": [100, 300]}], "reply_words": [5, 20],
                     "schedule": [{"until_s": 3, "rate_per_s": 3},
                                  {"until_s": 6, "rate_per_s": 9, "prompt_mix": [{"share": 1, "tokens": [2000, 4000]}]}]},
        "arrangements": [{"name": "same-gpu", "kind": "colocated", "gpus": 1},
                         {"name": "split-1-1", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 1}]}


@pytest.fixture(scope="module")
def periods_run(tmp_path_factory) -> Path:
    """Two seeds of SPEC through the command line: over_time.csv and the page."""
    folder = tmp_path_factory.mktemp("periods")
    (folder / "s.yaml").write_text(yaml.safe_dump(SPEC, sort_keys=False))
    assert main([str(folder / "s.yaml"), "--seeds", "2", "--out", str(folder / "out"), "--no-plots",
                 "--html", str(folder / "page.html")]) == 0
    return folder


def csv_means(folder: Path) -> pd.DataFrame:
    """over_time.csv's mean over seeds per arrangement and window, recomputed here from the file."""
    frame = pd.read_csv(folder / "out" / "over_time.csv")
    assert sorted(frame["seed"].unique()) == [1, 2]
    return frame.groupby(["arrangement", "window_start_s"], sort=False)[["window_end_s", "offered_rate_per_s",
                                                                        "on_time_pct"]].mean().reset_index()


def test_the_page_data_has_over_time_csvs_windows_and_means(periods_run):
    o = embedded_data((periods_run / "page.html").read_text(encoding="utf-8"))["over_time"]
    mean = csv_means(periods_run)
    assert o["n_seeds"] == 2 and o["boundaries_s"] == [3]
    for k, name in enumerate(("same-gpu", "split-1-1")):
        rows = mean[mean["arrangement"] == name]
        assert np.allclose(o["start_s"], rows["window_start_s"]) and np.allclose(o["end_s"], rows["window_end_s"])
        assert np.allclose(o["rate_per_s"], rows["offered_rate_per_s"])
        shown = np.array([np.nan if v is None else v for v in o["on_time_pct"][k]])
        assert np.allclose(shown, rows["on_time_pct"], equal_nan=True, atol=1e-6), name


sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright for Python is not installed")
CHROMIUM = os.environ.get("DISAGG_SIMPY_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"


def _linear(x, y) -> bool:
    """Whether y is one straight (non-constant) function of x: drawn to one scale."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    slope, cut = np.polyfit(x, y, 1)
    return abs(slope) > 0 and np.allclose(slope * x + cut, y, atol=0.15)


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}")
def test_the_browser_draws_each_window_rate_and_share_of_over_time_csv(periods_run):
    html = periods_run / "page.html"
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors, requests = [], []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: requests.append(r.url))
        page.goto(html.as_uri())
        chart = page.wait_for_selector("[data-testid=over-time]")
        windows = chart.eval_on_selector_all("[data-testid=over-time-window]", """els => els.map(e =>
            [e.dataset.startS, e.dataset.endS, e.dataset.ratePerS].map(Number))""")
        points = chart.eval_on_selector_all("[data-testid=over-time-point]", """els => els.map(e =>
            [e.dataset.arrangement, Number(e.dataset.window), Number(e.dataset.onTimePct), Number(e.getAttribute('cy'))])""")
        rate_path = chart.eval_on_selector("[data-testid=offered-rate]", "e => e.getAttribute('d')")
        n_boundaries = len(chart.query_selector_all("[data-testid=period-boundary]"))
        caption = chart.evaluate("e => e.parentElement.querySelector('figcaption').textContent")
        browser.close()
    assert errors == [] and requests == [html.as_uri()]
    assert "mean of 2 seeds" in caption and n_boundaries == 1
    assert "dotted line: the schedule's period boundary" in caption  # said, as over_time.png's legend says it
    mean = csv_means(periods_run)
    first = mean[mean["arrangement"] == "same-gpu"]
    assert np.allclose(np.array(windows), first[["window_start_s", "window_end_s", "offered_rate_per_s"]].to_numpy())
    # the rate's steps: one level per window, at the height of its rate
    levels = [float(y) for y in re.findall(r"[ML][\d.]+ ([\d.]+)H", rate_path)]
    assert len(levels) == len(first) and _linear(first["offered_rate_per_s"], levels)
    for name in ("same-gpu", "split-1-1"):
        rows = mean[mean["arrangement"] == name].reset_index(drop=True)
        want = rows["on_time_pct"].dropna()
        mine = [pt for pt in points if pt[0] == name]
        assert [pt[1] for pt in mine] == want.index.tolist(), name  # a point for each window with measured requests
        assert np.allclose([pt[2] for pt in mine], want, atol=1e-6), name
    assert _linear([pt[2] for pt in points], [pt[3] for pt in points])  # every share drawn to one scale
