"""--html on sweep, goodput, plan and map (issue 24): one self-contained page each, opened in
headless Chromium from the file: no console error, no request but the file itself, a click on a
column header sorts the table by it, and each chart shows what its command found (a band per
arrangement, the goodput marks, a cell per map point with its figures). Tiny runs (2 s windows,
one or two seeds)."""

from __future__ import annotations

import re

import pytest
from helpers import tiny_batch_scenario
from test_page_browser import CHROMIUM, CHROMIUM_ARGS, sync_api

from disagg_simpy.cli import main

COMMANDS = {
    "sweep": ["--rate", "9,14", "--seeds", "2", "--limits"],
    "goodput": ["--tolerance", "2"],
    "plan": ["--gpus", "2", "--chunks", "512", "--tolerance", "2"],
    "map": ["--gpus", "2", "--rate", "6,12", "--y", "workload.reply_words=[50,100],[100,400]", "--seeds", "1"],
}


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pages")
    path = tiny_batch_scenario(folder)
    out = {}
    for command, flags in COMMANDS.items():
        html = folder / f"{command}.html"
        assert main([command, str(path), *flags, "--no-plots", "--workers", "1", "--out", str(folder / command),
                     "--html", str(html)]) == 0
        out[command] = html
    return out


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_batch_page_opens_alone_and_sorts_on_a_click(command, pages, browser):
    html = pages[command]
    text = html.read_text()
    assert "Content-Security-Policy" in text and not re.search(r"(src|href)=\"(https?:)?//", text)
    page = browser.new_page()
    seen = {"console": [], "errors": [], "requests": []}
    page.on("console", lambda m: seen["console"].append((m.type, m.text)))
    page.on("pageerror", lambda e: seen["errors"].append(str(e)))
    page.on("request", lambda r: seen["requests"].append(r.url))
    page.goto(html.as_uri())
    table = page.locator("table[data-testid=table]")
    rows = table.locator("tbody tr")
    assert rows.count() >= 2
    headers = table.locator("thead th")
    column = next(i for i in range(headers.count())
                  if len({rows.nth(j).locator("td").nth(i).get_attribute("data-v") for j in range(rows.count())}) > 1)
    for direction in ("descending", "ascending"):  # the first click sorts high to low, the next low to high
        headers.nth(column).locator("button").click()
        values = [rows.nth(j).locator("td").nth(column).get_attribute("data-v") for j in range(rows.count())]
        filled = [v for v in values if v != ""]
        assert values == filled + [""] * (len(values) - len(filled))  # empty cells last
        key = [float(v) for v in filled] if all(_number(v) for v in filled) else filled
        assert key == sorted(key, reverse=direction == "descending"), (direction, values)
        assert headers.nth(column).get_attribute("aria-sort") == direction
    assert page.locator("svg").count() >= 1 and page.locator("svg title").count() >= 1  # a chart with tooltips
    assert not seen["errors"] and not [m for m in seen["console"] if m[0] == "error"]
    assert seen["requests"] == [html.as_uri()]
    page.close()


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def test_each_chart_shows_what_its_command_found(pages, browser):
    """sweep: a band and the limits' own lines per arrangement; goodput and plan: a goodput mark
    per arrangement searched (not a plan's rows left: `below X`); map: a cell per (rate, y) with
    its winner in the tooltip."""
    page = browser.new_page()
    page.goto(pages["sweep"].as_uri())
    assert page.locator("svg polygon").count() == 3  # one panel, three arrangements
    assert page.locator("svg path[stroke-dasharray]").count() == 6  # each limit alone, per arrangement
    assert "% within the first-word limit" in page.locator("svg circle title").all_text_contents()[-4]
    for command in ("goodput", "plan"):
        page.goto(pages[command].as_uri())
        marks = [t for t in page.locator("svg line title").all_text_contents() if ": goodput " in t]
        rows = page.locator("table[data-testid=table] tbody tr")
        column = 1 if command == "goodput" else 2
        names = [rows.nth(i).locator(f"td:nth-child({column})").text_content() for i in range(rows.count())
                 if not rows.nth(i).locator(f"td:nth-child({column + 2})").text_content().startswith("below")]
        assert sorted(m.split(":")[0] for m in marks) == sorted(names) and names
    page.goto(pages["map"].as_uri())
    cells = page.locator("svg rect[data-testid=cell] title").all_text_contents()
    assert len(cells) == 4 and all(" on time" in c or "no measured request" in c for c in cells)
    page.close()


def _opened(browser, html):
    """The page opened from its file: (page, what it logged and asked for)."""
    page = browser.new_page()
    seen = {"errors": [], "requests": []}
    page.on("console", lambda m: seen["errors"].append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: seen["errors"].append(str(e)))
    page.on("request", lambda r: seen["requests"].append(r.url))
    page.goto(html.as_uri())
    return page, seen


def test_goodput_vary_slo_page_charts_each_scale_from_slo_scale_csv(tmp_path, browser):
    """goodput --vary slo's page was a bare table: it now draws a bar per arrangement to its
    smallest passing SLO scale and a line to the largest found to fail, each tooltip the CSV's
    figures, with the table below; self-contained (no request but the file, no console error)."""
    import pandas as pd

    scenario = tiny_batch_scenario(tmp_path)
    html = tmp_path / "slo.html"
    assert main(["goodput", str(scenario), "--vary", "slo", "--tolerance", "0.5", "--workers", "1",
                 "--out", str(tmp_path / "slo"), "--html", str(html)]) == 0
    table = pd.read_csv(tmp_path / "slo" / "slo_scale.csv")
    page, seen = _opened(browser, html)
    bars = page.locator("svg rect[data-testid=cell] title").all_text_contents()
    assert len(bars) == len(table) == 3
    for row, tip in zip(table.itertuples(), bars):
        assert tip.startswith(f"{row.arrangement}: passes at scale {row.passing_scale:.4g} ")
        assert f"fails at {row.failing_scale:.4g} " in tip
    assert page.locator("svg line[data-testid=bracket]").count() == table["failing_scale"].notna().sum()
    assert page.locator("table[data-testid=table] tbody tr").count() == 3
    assert not seen["errors"] and seen["requests"] == [html.as_uri()]
    page.close()


def test_the_goodput_page_says_what_every_seed_to_its_verdict_means(pages):
    text = pages["goodput"].read_text()
    assert "every seed to its verdict" in text and 'data-testid="verdict-note"' in text
    assert "stopped early" in text.split('data-testid="verdict-note"', 1)[1].split("</p>", 1)[0]


def test_plan_over_time_page_draws_the_day_from_its_results(tmp_path, browser):
    """plan --over-time's page was a bare table: it now draws what plan_over_time.png does, from
    the same results: the offered rate per period, the reading GPUs serving over the day of the
    switching plan, the reactive policy and the best static split, and their on-time share per
    period and over the day (a bar per arrangement and part, its tooltip plan_over_time.csv's
    figure); then the table and the roles block to paste (run.json's plan)."""
    import json

    import pandas as pd
    import yaml
    path = tmp_path / "day.yaml"  # reading-heavy, then writing-heavy (as tests/sweep/test_role_plan.py's day)
    day = {"name": "day", "seed": 1, "workload": {"measure_s": 8, "prompt_mix": [{"share": 1.0, "tokens": [200, 1200]}],
                                                  "reply_words": [100, 400], "schedule": [
        {"until_s": 4, "rate_per_s": 9, "prompt_mix": [{"share": 1.0, "tokens": [3000, 8000]}], "reply_words": [10, 40]},
        {"until_s": 8, "rate_per_s": 12, "prompt_mix": [{"share": 1.0, "tokens": [100, 300]}],
         "reply_words": [300, 600]}]},
           "arrangements": [{"name": "split-2-2", "kind": "disaggregated", "reading_gpus": 2, "writing_gpus": 2}]}
    path.write_text(yaml.safe_dump(day, sort_keys=False))
    html, out = tmp_path / "day.html", tmp_path / "day"
    assert main(["plan", str(path), "--gpus", "4", "--over-time", "--switch-s", "1", "--seeds", "2", "--no-plots",
                 "--workers", "1", "--out", str(out), "--html", str(html)]) == 0
    table = pd.read_csv(out / "plan_over_time.csv")
    info = json.loads((out / "run.json").read_text())
    best_static = info["best_static"] if "best_static" in info else info["info"]["best_static"]
    page, seen = _opened(browser, html)
    shown = ["switching", "reactive", best_static]
    steps = page.locator("svg path[data-arrangement]")
    drawn = [steps.nth(i).get_attribute("data-arrangement") for i in range(steps.count())]
    assert drawn == ["offered rate", *shown]
    bars = page.locator("svg rect[data-testid=bar] title").all_text_contents()
    assert len(bars) == 3 * 3  # three arrangements x (two periods and the day)
    for tip in bars:
        name, part = tip.split(":")[0].split(", ")
        key = "day" if part == "whole day" else "period_" + part.split()[1]
        row = table[(table.arrangement == name) & (table.part == key)].iloc[0]
        assert f": {row.on_time_pct:.1f}% on time" in tip, tip
    roles = yaml.safe_load(page.locator("pre[data-testid=roles]").text_content())[0]["roles"]
    plan = info["switching_plan"] if "switching_plan" in info else info["info"]["switching_plan"]
    assert roles["schedule"] == plan["schedule"]
    assert page.locator("table[data-testid=table] tbody tr").count() == len(table)
    assert not seen["errors"] and seen["requests"] == [html.as_uri()]
    page.close()


def test_the_plan_page_shows_a_splits_gpus_as_reading_plus_writing(tmp_path):
    """plan --html's GPUs column: a split's GPUs as reading+writing ("1+3" for split-1-3, never
    "4" or "1.0+3.0"), a colocated arrangement's as its count; every row, searched or left."""
    scenario = tiny_batch_scenario(tmp_path)
    html = tmp_path / "plan.html"
    assert main(["plan", str(scenario), "--gpus", "4", "--chunks", "none", "--tolerance", "2", "--no-plots",
                 "--workers", "1", "--out", str(tmp_path / "plan"), "--html", str(html)]) == 0
    ranked = html.read_text().split('data-testid="table"', 1)[1].split("</table>", 1)[0]
    rows = re.findall(r'<td data-v="\d+">\d+</td><td data-v="([\w-]+)">[\w-]+</td><td data-v="\d+">([^<]*)</td>', ranked)
    shown = dict(rows)
    assert shown == {"same-gpu": "4", "split-1-3": "1+3", "split-2-2": "2+2", "split-3-1": "3+1"}, rows


def test_the_goodput_page_shows_and_sorts_goodput_csvs_costs(tmp_path, browser):
    """goodput --html with GPU kinds: the page's table has goodput.csv's cost columns (read, not
    recomputed) and a click on '$/M at goodput' sorts the rows by dollars per million, high first."""
    import pandas as pd
    from helpers import preset_scenario

    path = preset_scenario(tmp_path, "g", {"rate_per_s": 4.0, "measure_s": 4, "prompt_mix": [
        {"share": 1, "tokens": [100, 1000]}], "reply_words": [50, 200]},
        [{"name": "a100", "kind": "colocated", "gpus": 1}, {"name": "h100", "kind": "colocated", "gpus": 1,
                                                             "gpu": "h100-80gb"},
         {"name": "a100s", "kind": "colocated", "gpus": 2}], seeds=2)
    html = tmp_path / "g.html"
    assert main(["goodput", str(path), "--out", str(tmp_path / "out"), "--no-plots", "--workers", "1",
                 "--tolerance", "1", "--html", str(html)]) == 0
    table = pd.read_csv(tmp_path / "out" / "goodput.csv").set_index("arrangement")
    page, seen = _opened(browser, html)
    grid = page.locator("table[data-testid=table]")
    headers = [h.strip() for h in grid.locator("thead th").all_text_contents()]
    column = headers.index("$/M at goodput (95% interval)")
    assert {"GPU kinds", "$/h", "requests/GPU-h", "kW"} <= set(headers)
    grid.locator("thead th").nth(column).locator("button").click()
    rows = grid.locator("tbody tr")
    shown = [(rows.nth(i).locator("td").nth(0).text_content(), rows.nth(i).locator("td").nth(column).text_content())
             for i in range(rows.count())]
    assert [n for n, _ in shown] == list(table["dollars_per_million"].sort_values(ascending=False).index)
    for name, cell in shown:
        r = table.loc[name]
        assert cell == f"{r.dollars_per_million:.2f} ({r.dollars_per_million_low:.2f}-{r.dollars_per_million_high:.2f})"
    assert not seen["errors"] and seen["requests"] == [html.as_uri()]
    page.close()
