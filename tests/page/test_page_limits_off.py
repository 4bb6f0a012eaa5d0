"""The HTML page of a run whose limits are partly off (null): it opens without errors, says only
the limits that are on, and draws no freeze. Skipped like the other browser tests without
Playwright or Chromium."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml
from helpers import DEFAULT

from disagg_simpy.cli import main

sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright for Python is not installed (pip install -e '.[test]')")
CHROMIUM = os.environ.get("DISAGG_SIMPY_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
if not Path(CHROMIUM).exists():
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install -y chromium)", allow_module_level=True)


def test_page_with_freeze_and_first_word_off(tmp_path):
    spec = yaml.safe_load(DEFAULT.read_text())
    spec["slo"] = {"first_word_s": None, "mean_gap_ms": 50, "freeze_ms": None}
    path = tmp_path / "off.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    assert main([str(path), "--measure-s", "4", "--seeds", "2", "--out", str(tmp_path / "out"), "--no-plots",
                 "--html", str(tmp_path / "p.html")]) == 0  # two seeds: the several-seed page, not 30 runs
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto((tmp_path / "p.html").as_uri())
        page.wait_for_selector("[data-testid=arrangement-row]")
        page.click("[data-testid=arrangement-row][data-arrangement=same-gpu]")
        page.click("[data-testid=play]")
        page.wait_for_timeout(200)
        note = page.inner_text("#table-note")
        freezes = page.locator(".freeze").count()
        browser.close()
    assert errors == []
    assert "On time: mean gap within 50 ms." in note and "freeze" not in note and "first word within" not in note
    assert freezes == 0
