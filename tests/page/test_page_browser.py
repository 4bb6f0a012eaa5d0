"""The HTML page in a real browser: Debian's headless Chromium driven by Playwright for Python.

Skipped, with the reason, where Playwright or Chromium is missing (`.ci/run` installs both;
see docs/development.md). Set DISAGG_SIMPY_CHROMIUM to use another Chromium.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
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
            if not a.is_split:
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


def test_an_unknown_request_id_in_the_follow_box_is_said(page, res):
    """An id the run does not hold is answered on the page (it used to be ignored silently)."""
    page.fill("#follow-id", "999999")
    page.keyboard.press("Enter")
    note = page.locator("[data-testid=follow-unknown]")
    assert note.count() == 1 and "No measured request has id 999999" in note.text_content()
    assert not page.seen["errors"]
    rid = int(res.requests["request_id"].iloc[3])
    page.fill("#follow-id", str(rid))
    page.keyboard.press("Enter")
    assert page.locator("[data-testid=follow-unknown]").count() == 0  # following a real one clears it
    assert page.locator("[data-testid=follow] tbody tr").count() == len(res.roles)


def test_the_players_heading_counts_one_gpu_in_the_singular(page):
    page.click("[data-testid=arrangement-row][data-arrangement=split-1-3]")
    heading = page.locator("#player-h").text_content()
    assert "1 GPU reads prompts, 3 GPUs write replies" in heading and "1 GPUs" not in heading


def test_with_several_seeds_the_table_shows_means_with_intervals_and_each_seed_on_hover(browser, tmp_path):
    folder = tmp_path / "seeds"
    argv = [str(DEFAULT), "--measure-s", "3", "--seeds", "2", "--out", str(folder), "--no-plots",
            "--html", str(folder / "page.html")]
    assert main(argv) == 0
    summary = pd.read_csv(folder / "summary.csv")
    pg = browser.new_page(viewport={"width": 1280, "height": 900})
    errors = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.goto((folder / "page.html").as_uri())
    pg.wait_for_selector("[data-testid=arrangement-row]")
    row = pg.locator("[data-testid=arrangement-row][data-arrangement=same-gpu]")
    cell = row.locator("td").nth(0)  # on time %
    mean = summary[summary.arrangement == "same-gpu"]["on_time_pct"].mean()
    text = cell.text_content()
    assert text.split(" ")[0] == (f"{mean:.1f}" if mean < 9.95 else f"{mean:.0f}") and ("±" in text or "/+" in text)
    assert cell.get_attribute("title").startswith("mean of 2 seeds; seed 1: ")
    assert "The player shows seed" in pg.locator("#lede").text_content()
    assert pg.locator("[data-testid=on-time-interval]").count() == 5 and not errors
    pg.close()


def test_the_gap_charts_tick_labels_do_not_crowd_over_many_decades(browser, tmp_path):
    """A 12 s gap (a 24,000-token prompt read whole at 0.5 ms a token while another reply writes)
    stretches the gap axis over 3.4 decades, as on the Mooncake trace: its labels must not touch."""
    from helpers import write_scenario

    path = write_scenario(tmp_path, [(0.0, 100, 60), (0.1, 24000, 3)], cost={"per_prompt_token_ms": 0.5},
                          slo={"first_word_s": 30})
    assert main([str(path), "--out", str(tmp_path / "o"), "--no-plots", "--html", str(tmp_path / "p.html")]) == 0
    pg = browser.new_page(viewport={"width": 1280, "height": 900})
    pg.goto((tmp_path / "p.html").as_uri())
    pg.wait_for_selector("[data-testid=arrangement-row]")
    boxes = pg.evaluate("""() => {
      const fig = Array.from(document.querySelectorAll("figure.chart")).find((f) => f.textContent.startsWith("Gaps"));
      return Array.from(fig.querySelectorAll("text.tick")).map((t) => { const r = t.getBoundingClientRect(); return [r.left, r.right]; });
    }""")
    pg.close()
    boxes.sort()
    assert len(boxes) >= 3
    assert all(right + 2 <= left for (_, right), (left, _) in zip(boxes, boxes[1:])), boxes


def test_the_player_switches_to_any_seeds_run(browser, tmp_path):
    """With several seeds the player starts on the representative one and a click on the seed
    list switches it: the heading names the seed and its own on-time share, the replies drawn
    are that seed's, the window moves into the span its run holds; no error, no request."""
    from disagg_simpy.page import embedded_data

    folder = tmp_path / "seeds"
    assert main([str(DEFAULT), "--measure-s", "8", "--seeds", "3", "--out", str(folder), "--no-plots",
                 "--html", str(folder / "page.html")]) == 0
    data = embedded_data((folder / "page.html").read_text())
    summary = pd.read_csv(folder / "summary.csv")
    pg = browser.new_page(viewport={"width": 1280, "height": 900})
    seen = {"errors": [], "console": [], "requests": []}
    pg.on("pageerror", lambda e: seen["errors"].append(str(e)))
    pg.on("console", lambda m: seen["console"].append((m.type, m.text)))
    pg.on("request", lambda r: seen["requests"].append(r.url))
    pg.goto((folder / "page.html").as_uri())
    pg.wait_for_selector("[data-testid=arrangement-row]")
    choices = pg.locator("[data-testid=seed-run] option")
    assert [choices.nth(i).get_attribute("value") for i in range(choices.count())] == ["1", "2", "3"]
    shown = data["scenario"]["seed"]
    assert pg.locator("[data-testid=seed-run]").input_value() == str(shown)
    other = next(r for r in data["seed_runs"])
    pg.click("[data-testid=arrangement-row][data-arrangement=split-2-2]")
    pg.select_option("[data-testid=seed-run]", str(other["seed"]))
    row = summary[(summary.seed == other["seed"]) & (summary.arrangement == "split-2-2")].iloc[0]
    heading = pg.locator("#player-h").text_content()
    share = f"{row.on_time_pct:.1f}" if row.on_time_pct < 9.95 else f"{row.on_time_pct:.0f}"
    assert heading.startswith(f"split-2-2 (seed {other['seed']}): {share}% of {row.n_requests:,} replies on time")
    assert pg.locator("#player").get_attribute("data-seed") == str(other["seed"])
    ids = set(np.cumsum(other["requests"]["id"]).tolist())
    drawn = {int(g.get_attribute("data-request-id")) for g in pg.locator("#stage .reply").all()}
    assert drawn and drawn <= ids
    lo, hi = (v / 1e9 for v in other["span_ns"])
    assert lo - 0.05 <= float(pg.locator("#win-start").input_value()) <= hi
    pg.select_option("[data-testid=seed-run]", str(shown))  # and back
    assert pg.locator("#player-h").text_content().startswith(f"split-2-2 (seed {shown}):")
    assert not seen["errors"] and not [m for m in seen["console"] if m[0] == "error"]
    assert seen["requests"] == [(folder / "page.html").as_uri()]
    pg.close()


def test_the_table_note_rounds_a_trace_measured_whole(browser, tmp_path):
    """Issue 37 item 19: a trace measured whole printed its last arrival as '0-16.179838992 s'."""
    from helpers import write_scenario

    path = write_scenario(tmp_path, [(0.0, 100, 3), (16.179838992, 100, 3)])
    assert main([str(path), "--out", str(tmp_path / "out"), "--no-plots", "--html", str(tmp_path / "p.html")]) == 0
    pg = browser.new_page()
    pg.goto((tmp_path / "p.html").as_uri())
    pg.wait_for_selector("[data-testid=arrangement-row]")
    note = pg.text_content("#table-note")
    pg.close()
    assert "2 measured requests (arriving 0–16.18 s)" in note, note


def test_per_gpu_counts_show_every_request_and_say_which_an_arrangement_was_not_sent(browser, tmp_path):
    """F25: with n_requests_per_gpu the player holds the larger arrangement's every request; the
    smaller one draws only those it was sent, and following one it was not sent says so there."""
    from test_page_data import PER_GPU

    path = tmp_path / "per-gpu.yaml"
    path.write_text(PER_GPU, encoding="utf-8")
    html = tmp_path / "page.html"
    assert main([str(path), "--out", str(tmp_path / "out"), "--no-plots", "--html", str(html)]) == 0
    requests = pd.read_csv(tmp_path / "out" / "requests.csv")
    one = set(requests.loc[requests["arrangement"] == "one", "request_id"])
    only_three = sorted(set(requests.loc[requests["arrangement"] == "three", "request_id"]) - one)
    pg = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.goto(html.as_uri())
    pg.wait_for_selector("[data-testid=arrangement-row]")
    rid = only_three[0]
    pg.fill("#follow-id", str(rid))
    pg.keyboard.press("Enter")
    rows = pg.locator("[data-testid=follow] tbody tr")
    assert rows.count() == 2 and "not sent" in rows.nth(0).text_content() and "not sent" not in rows.nth(1).text_content()
    pg.click("[data-testid=arrangement-row][data-arrangement=one]")
    shown = {int(pg.locator("[data-testid=reply-lane]").nth(k).get_attribute("data-request-id"))
             for k in range(pg.locator("[data-testid=reply-lane]").count())}
    assert shown and shown <= one
    rows.nth(1).click()  # three: the request is drawn there
    assert pg.locator(f"[data-testid=reply-lane][data-request-id='{rid}']").count() == 1
    assert errors == []
    pg.close()
