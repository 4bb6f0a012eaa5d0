"""The registry of output columns (results/columns.py) against what is built from it: summary
rows, the console table, the page's table, and the docs' outputs reference."""

from __future__ import annotations

import re

import pytest
from helpers import DEFAULT, ROOT

from disagg_simpy import load_scenario, run
from disagg_simpy.page import embedded_data, page_html
from disagg_simpy.results import columns as registry
from disagg_simpy.results.report import format_table


@pytest.fixture(scope="module")
def res():
    return run(load_scenario(DEFAULT).with_overrides(**{"workload.measure_s": 3}))


def outputs_reference() -> str:
    """The docs' outputs reference: the README's section, or wherever the docs moved it."""
    texts = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return "\n".join(p.read_text(encoding="utf-8") for p in texts if p.exists())


def test_summary_frame_has_exactly_the_registry_columns_in_order(res):
    assert list(res.summary.columns) == list(registry.SUMMARY_COLUMNS)


def test_a_summary_row_missing_a_registry_column_is_refused():
    row = dict.fromkeys(registry.SUMMARY_COLUMNS, 0.0)
    registry.checked(row, registry.SUMMARY_COLUMNS, "row")
    del row["p99_gap_ms"]
    with pytest.raises(AssertionError, match="p99_gap_ms"):
        registry.checked(row, registry.SUMMARY_COLUMNS, "row")
    with pytest.raises(AssertionError, match="not_registered"):
        registry.checked({**dict.fromkeys(registry.SUMMARY_COLUMNS), "not_registered": 1}, registry.SUMMARY_COLUMNS, "row")


def test_every_column_the_page_shows_exists_in_its_data_and_is_filled(res):
    data = embedded_data(page_html(res))
    shown = [c["key"] for c in data["columns"]]
    assert shown == list(registry.PAGE_ORDER)
    for a in data["arrangements"]:
        for key in shown:
            if key == "arrangement":
                continue
            assert key in a["summary"], f"the page shows {key}, its data has no such figure"
            assert a["summary"][key] is not None, f"{a['name']}: {key} is empty on the page"


def test_page_script_keeps_no_column_list_of_its_own():
    script = (ROOT / "disagg_simpy" / "page" / "page.js").read_text(encoding="utf-8")
    rows = re.findall(r'\["([a-z0-9_]+)", "[^"]*", ', script)  # [key, label, format] rows
    assert rows == ["reference"], f"page.js lists columns itself: {rows}"


def test_console_table_shows_the_registry_console_columns(res):
    top, bottom = format_table(res.summary).splitlines()[:2]
    names = ["".join(pair) for pair in zip(top.split()[0:], bottom.split()[1:])]  # names broken over two lines
    assert names == list(registry.CONSOLE_COLUMNS)
    wide = ["arrangement", *(c for line in format_table(res.summary, wide=True).splitlines()
                             if line.startswith("arrangement") for c in line.split()[1:])]  # blocks of 120 characters
    assert wide == [c for c in registry.SUMMARY_COLUMNS if c not in registry.OPTION_COLUMNS]  # E4, E5 off


@pytest.mark.parametrize("table", registry.TABLES)
def test_every_registry_column_is_in_the_outputs_reference(table):
    text = outputs_reference()
    missing = [c.name for c in registry.columns(table) if f"`{c.name}`" not in text]
    assert not missing, f"{table} columns missing from the docs' outputs reference: {missing}"


def test_every_column_the_summary_reference_names_is_registered():
    text = outputs_reference()
    block = re.search(r"\*\*`summary\.csv`\*\*.*?\n\n(\|.*?)\n\n", text, re.S)
    assert block, "the outputs reference has no summary.csv table"
    named = set()
    for line in block.group(1).splitlines()[2:]:
        first = line.split("|")[1]
        named |= set(re.findall(r"`([a-z0-9_]+)`", first))
    known = {c.name for c in registry.columns("summary")}
    assert named - known == set(), f"documented but not registered: {sorted(named - known)}"
    assert known - named - {"arrangement"} == set(), f"registered but not in the table: {sorted(known - named)}"


def test_the_cost_cells_headings_come_from_the_registry(monkeypatch):
    """G16 (review2): goodput's and plan's cost headings, console (cli/cost_text.py) and page
    (page/commands.py), are the registry's `COST` labels, not typed again: a renamed label shows
    in both."""
    import dataclasses

    import pandas as pd

    from disagg_simpy.cli import cost_text
    from disagg_simpy.page.commands import _cost_cells

    renamed = {"dollars_per_hour": "USD an hour", "dollars_per_million": "USD a million",
               "requests_per_gpu_hour": "per GPU-hour", "power_kw": "kilowatts", "gpu_kinds": "kinds"}
    monkeypatch.setattr(registry, "COST", tuple(dataclasses.replace(c, label=renamed.get(c.name, c.label))
                                                for c in registry.COST))
    expected = ["USD an hour", "USD a million (95% interval)", "per GPU-hour", "kilowatts"]
    assert cost_text.header() == expected
    columns: list = []
    _cost_cells(pd.DataFrame(columns=list(registry.COST_COLUMNS)), columns, {})
    assert [label for _, label in columns] == ["kinds", *expected]
