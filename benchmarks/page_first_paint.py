"""Measure the default scenario's HTML page: its size, and how soon headless Chromium shows the
table (and the whole page) after opening the file. Optionally save the screenshot in plots/.

    python benchmarks/page_first_paint.py                 # size and first paint, 5 loads
    python benchmarks/page_first_paint.py --screenshot plots/page.png
    python benchmarks/page_first_paint.py --seeds 30          # the CLI's page of 30 seeds, and a seed switch

Needs Playwright for Python and Debian's Chromium (`apt-get install -y chromium`); no browser
download. Prints figures; asserts nothing (speed is measured here, never in the tests).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

from disagg_simpy import load_scenario, run
from disagg_simpy.page import write_page

ROOT = Path(__file__).resolve().parent.parent
#: On-time shares the explainer reports (claims C2, C6, C7, C9, C10 in docs/explainer.md).
SEED_PAGE = {"same-gpu": 1.0, "chunked-512": 89.0, "split-2-2": 100.0, "split-1-3": 10.0, "split-3-1": 10.0}
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scenario", type=Path, default=ROOT / "scenarios" / "default.yaml")
    p.add_argument("--loads", type=int, default=5, help="page loads to time (default 5)")
    p.add_argument("--chromium", default="/usr/bin/chromium")
    p.add_argument("--screenshot", type=Path, help="also save a screenshot of the page here")
    p.add_argument("--seeds", type=int, default=1,
                   help="with more than 1: the command line's page of that many seeds (built with the run), "
                   "and how long switching the player to another seed takes")
    args = p.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        if args.seeds > 1:
            import contextlib
            import io

            from disagg_simpy.cli import main as cli

            path = Path(tmp) / "page.html"
            with contextlib.redirect_stdout(io.StringIO()):  # (the run's table)
                cli([str(args.scenario), "--seeds", str(args.seeds), "--no-plots", "--out", tmp, "--html", str(path)])
        else:
            path = write_page(run(load_scenario(args.scenario)), Path(tmp) / "page.html", reference=SEED_PAGE)
        build_s = time.perf_counter() - t0
        size = path.stat().st_size
        print(f"page: {size:,} bytes ({size / 1e6:.2f} MB), built in {build_s:.2f} s")
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=args.chromium, args=ARGS)
            wall, table, loaded, switch = [], [], [], []
            for _ in range(args.loads):
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                t0 = time.perf_counter()
                page.goto(path.as_uri())
                page.wait_for_selector("[data-testid=arrangement-row]", state="visible")
                wall.append(time.perf_counter() - t0)
                table.append(page.evaluate("performance.getEntriesByName('table-shown')[0].startTime") / 1000)
                loaded.append(page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd") / 1000)
                if args.seeds > 1:  # the player to the last seed, until its heading names it
                    t0 = time.perf_counter()
                    page.select_option("[data-testid=seed-run]", index=page.locator("[data-testid=seed-run] option").count() - 1)
                    page.wait_for_function("document.getElementById('player').dataset.seed !== undefined")
                    switch.append(time.perf_counter() - t0)
                if args.screenshot and len(wall) == args.loads:
                    shoot(page, args.screenshot)
                page.close()
            browser.close()
    med = statistics.median
    print(f"table shown (in-page, since navigation start): median {med(table):.3f} s, max {max(table):.3f} s")
    print(f"table visible (wall, goto to visible row):     median {med(wall):.3f} s, max {max(wall):.3f} s")
    print(f"load event end (page fully drawn):             median {med(loaded):.3f} s")
    if switch:
        print(f"player switched to another seed (wall):        median {med(switch):.3f} s")


def shoot(page, path: Path) -> None:
    """The page as a reader sees it after clicking same-gpu, a reply, and playing a while."""
    page.click("[data-testid=arrangement-row][data-arrangement=same-gpu]")
    lanes = page.locator("[data-testid=reply-lane]")
    lanes.nth(lanes.count() // 2).click()
    page.locator("h1").click()
    page.evaluate("document.getElementById('scrub').value = 620; document.getElementById('scrub').dispatchEvent(new Event('input'))")
    page.screenshot(path=str(path), full_page=True)
    print(f"screenshot: {path}")


if __name__ == "__main__":
    main()
