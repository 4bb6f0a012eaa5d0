"""The HTML page in a real browser: Debian's headless Chromium driven by Playwright for Python.

Skipped, with the reason, where Playwright or Chromium is missing (`.ci/run` installs both;
see docs/development.md). Set DISAGG_SIMPY_CHROMIUM to use another Chromium.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pandas as pd
import pytest
from helpers import DEFAULT

from disagg_simpy import load_scenario
from disagg_simpy.cli import main

sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright for Python is not installed (pip install -e '.[test]')")
CHROMIUM = os.environ.get("DISAGG_SIMPY_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
if not Path(CHROMIUM).exists():
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install -y chromium)", allow_module_level=True)

#: Flags for a headless browser that reaches nothing on its own.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


class Run:
    """What the command line wrote: the page and the CSVs it reads back."""

    def __init__(self, folder: Path):
        self.html = folder / "page.html"
        self.requests = pd.read_csv(folder / "requests.csv")
        self.summary = pd.read_csv(folder / "summary.csv")
        self.roles = {}
        for a in load_scenario(DEFAULT).arrangements:
            if a.kind == "colocated":
                self.roles[a.name] = ["both"] * a.gpus
            else:
                self.roles[a.name] = ["reads"] * a.reading_gpus + ["writes"] * a.writing_gpus


@pytest.fixture(scope="module")
def res(tmp_path_factory) -> Run:
    """A short run of the default scenario through the command line: requests.csv and the page."""
    folder = tmp_path_factory.mktemp("run")
    argv = [str(DEFAULT), "--measure-s", "4", "--seeds", "1", "--out", str(folder), "--no-plots", "--html", str(folder / "page.html")]
    assert main(argv) == 0
    return Run(folder)


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser, res):
    """The page opened from a file: URL, with every console message, page error and request kept."""
    path = res.html
    pg = browser.new_page(viewport={"width": 1280, "height": 900})
    pg.seen = {"console": [], "errors": [], "requests": []}
    pg.on("console", lambda m: pg.seen["console"].append((m.type, m.text)))
    pg.on("pageerror", lambda e: pg.seen["errors"].append(str(e)))
    pg.on("request", lambda r: pg.seen["requests"].append(r.url))
    pg.goto(path.as_uri())
    pg.wait_for_selector("[data-testid=arrangement-row]")
    pg.url_of_file = path.as_uri()
    yield pg
    pg.close()


def test_opens_with_no_errors_and_no_network(page, res, tmp_path):
    rows = page.locator("[data-testid=arrangement-row]")
    assert [rows.nth(i).get_attribute("data-arrangement") for i in range(rows.count())] == list(res.roles)
    page.click("[data-testid=arrangement-row][data-arrangement=split-2-2]")
    page.click("[data-testid=play]")
    page.wait_for_timeout(200)
    page.screenshot(path=str(tmp_path / "page.png"))
    assert (tmp_path / "page.png").stat().st_size > 10_000
    assert page.seen["errors"] == []
    assert [m for m in page.seen["console"] if m[0] in ("error", "warning")] == []
    assert page.seen["requests"] == [page.url_of_file]


def test_clicking_a_row_shows_that_arrangements_lanes(page, res):
    for name in ("same-gpu", "split-1-3", "chunked-512"):
        page.click(f"[data-testid=arrangement-row][data-arrangement={name}]")
        player = page.locator("[data-testid=player]")
        assert player.get_attribute("data-arrangement") == name
        lanes = player.locator("[data-testid=gpu-lane]")
        roles = res.roles[name]
        assert [lanes.nth(g).get_attribute("data-role") for g in range(lanes.count())] == roles
        assert player.locator("[data-testid=ship-lane]").count() == ("reads" in roles)
        assert player.locator("[data-testid=reply-lane]").count() > 0
        row = page.locator(f"[data-testid=arrangement-row][data-arrangement={name}]")
        assert row.get_attribute("aria-selected") == "true"


def test_reply_detail_shows_the_requests_csv_numbers(page, res):
    name = "split-2-2"
    page.click(f"[data-testid=arrangement-row][data-arrangement={name}]")
    lanes = page.locator("[data-testid=reply-lane]")
    lanes.nth(lanes.count() // 2).click()
    detail = page.locator("[data-testid=reply-detail]")
    rid = int(detail.get_attribute("data-request-id"))
    req = res.requests
    row = req[(req["arrangement"] == name) & (req["request_id"] == rid)].iloc[0]
    shown = {f: detail.locator(f"[data-field={f}]").text_content() for f in (
        "n_prompt_tokens", "n_reply_words", "arrived_at_s", "reading_gpu", "first_word_at_s", "first_word_s",
        "writing_gpu", "finished_at_s", "mean_gap_ms", "max_gap_ms", "n_freezes", "verdict")}
    for f in ("n_prompt_tokens", "n_reply_words", "reading_gpu", "writing_gpu", "n_freezes"):
        assert int(shown[f]) == int(row[f]), f
    for f in ("arrived_at_s", "first_word_at_s", "first_word_s", "finished_at_s"):
        assert float(shown[f]) == pytest.approx(row[f], abs=5e-7), f
    for f in ("mean_gap_ms", "max_gap_ms"):
        assert float(shown[f]) == pytest.approx(row[f], abs=5e-4), f
    assert (shown["verdict"] == "on time") == bool(row["on_time"])

    # a late reply says which limit it broke
    page.click("[data-testid=arrangement-row][data-arrangement=same-gpu]")
    page.locator("[data-testid=reply-lane].late").first.hover()
    detail = page.locator("[data-testid=reply-detail]")
    verdict = detail.locator("[data-field=verdict]").text_content()
    rid = int(detail.get_attribute("data-request-id"))
    row = res.requests[(res.requests["arrangement"] == "same-gpu") & (res.requests["request_id"] == rid)].iloc[0]
    assert not row["on_time"]
    assert verdict.startswith("late: ")
    assert ("froze" in verdict) == (row["n_freezes"] > 0)


def test_play_advances_the_clock_and_keys_play_and_scrub(page):
    clock = page.locator("[data-testid=clock]")
    t0 = float(clock.text_content())
    page.click("[data-testid=play]")
    page.wait_for_timeout(250)
    page.click("[data-testid=play]")  # pause
    t1 = float(clock.text_content())
    assert t1 > t0
    page.locator("h1").click()  # focus away from the controls
    page.keyboard.press("ArrowRight")
    assert float(clock.text_content()) == pytest.approx(t1 + 0.1, abs=1.5e-3)
    page.keyboard.press("Space")
    page.wait_for_timeout(250)
    page.keyboard.press("Space")
    assert float(clock.text_content()) > t1 + 0.1


def test_sorting_and_following_a_request(page, res):
    page.click("#arrangements thead button[data-key=on_time_pct]")
    rows = page.locator("[data-testid=arrangement-row]")
    order = [rows.nth(i).get_attribute("data-arrangement") for i in range(rows.count())]
    s = res.summary
    assert order == list(s.sort_values("on_time_pct", ascending=False, kind="stable")["arrangement"])
    rid = int(res.requests["request_id"].iloc[5])
    page.fill("#follow-id", str(rid))
    page.keyboard.press("Enter")
    follow = page.locator("[data-testid=follow] tbody tr")
    assert follow.count() == len(res.roles)
    follow.nth(len(res.roles) - 1).click()
    name = list(res.roles)[-1]
    assert page.locator("[data-testid=player]").get_attribute("data-arrangement") == name
    assert page.locator(f"[data-testid=reply-lane][data-request-id='{rid}']").count() == 1
