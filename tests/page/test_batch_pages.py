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


def test_goodput_vary_slo_writes_its_table_as_a_page(tmp_path):
    """goodput --vary slo has no chart: its page is its table (a scale per arrangement), self-contained."""
    scenario = tiny_batch_scenario(tmp_path)
    html = tmp_path / "slo.html"
    assert main(["goodput", str(scenario), "--vary", "slo", "--tolerance", "0.5", "--workers", "1",
                 "--out", str(tmp_path / "slo"), "--html", str(html)]) == 0
    text = html.read_text()
    assert "Content-Security-Policy" in text and 'data-testid="table"' in text
    assert text.count('data-testid="row"') == 3 and "slo_scale" in text


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
