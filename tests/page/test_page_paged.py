"""The page with paged KV (E9): its data gives each reply's stretches of words and preemptions,
from which the words are exactly the run's; the player draws a cross at each preemption.

Default scenario at 6 s with 40,000 KV tokens per GPU in blocks of 16: every arrangement
preempts (recompute on the colocated ones, swap on the splits)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
from helpers import DEFAULT
from test_page_data import decode_iterations, decode_requests, ns

from disagg_simpy import load_scenario, run
from disagg_simpy.cli import main
from disagg_simpy.page import embedded_data, page_html


def paged_spec() -> dict:
    spec = yaml.safe_load(DEFAULT.read_text())
    for a in spec["arrangements"]:
        a.update(kv_capacity_tokens=40_000, kv_policy="paged")
        if a["kind"] == "disaggregated":
            a.update(preemption="swap", swap_ms_per_token=0.0005)
    return spec


@pytest.fixture(scope="module")
def paged_res(tmp_path_factory):
    path = tmp_path_factory.mktemp("paged") / "paged.yaml"
    path.write_text(yaml.safe_dump(paged_spec(), sort_keys=False))
    return run(load_scenario(path).with_overrides(**{"workload.measure_s": 6}))


def test_the_words_of_preempted_replies_follow_from_their_stretches(paged_res):
    data = embedded_data(page_html(paged_res))
    lo, hi = data["span_ns"]
    n_pre = 0
    for a in data["arrangements"]:
        st, pre = a["requests"]["st"], a["requests"]["pre"]
        plain = {**a, "requests": {k: v for k, v in a["requests"].items() if k not in ("st", "pre")}}
        its, r = decode_iterations(data, a), decode_requests(data, plain)
        got = []
        for i in range(len(r["id"])):
            if r["first"][i] >= 0:
                got.append((r["id"][i], 1, r["first"][i]))
            for pos, word, n, lead, own in st[i]:
                if own and lead >= 0 and word > 2:  # a re-read's word (word 1 is the first word)
                    got.append((r["id"][i], word - 1, r["arrived"][i] + lead))
                if pos >= 0:
                    it = its[r["wg"][i]]
                    wend = it["end"][it["rep"] > 0]
                    for k in range(n):
                        if 0 <= pos + k - it["wfirst"] < len(wend):
                            got.append((r["id"][i], word + k, wend[pos + k - it["wfirst"]]))
        words = paged_res.words(a["name"])
        at = ns(words["at_s"])
        want = words[(words["word"] == 1) | ((at <= hi) & (at > lo))]
        got = [w for w in got if w[1] == 1 or lo < w[2] <= hi]
        assert sorted(got) == sorted(zip(want["request_id"], want["word"], ns(want["at_s"]))), a["name"]
        log = paged_res.records[a["name"]].preemptions
        measured = np.isin(log["request_id"], r["id"])
        assert sum(len(p) for p in pre) == int(measured.sum())
        n_pre += sum(len(p) for p in pre)
    assert n_pre > 0


sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright for Python is not installed")
CHROMIUM = os.environ.get("DISAGG_SIMPY_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}")
def test_the_player_marks_each_preemption_on_the_reply_lane(tmp_path, paged_res):
    path = tmp_path / "paged.yaml"
    path.write_text(yaml.safe_dump(paged_spec(), sort_keys=False))
    html = tmp_path / "p.html"
    assert main([str(path), "--measure-s", "6", "--seeds", "1", "--out", str(tmp_path / "out"), "--no-plots", "--html", str(html)]) == 0
    log = paged_res.records["same-gpu"].preemptions
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(html.as_uri())
        page.wait_for_selector("[data-testid=arrangement-row]")
        page.click("[data-testid=arrangement-row][data-arrangement=same-gpu]")
        marks = page.eval_on_selector_all("[data-testid=reply-lane]", """els => els.map(e =>
            [Number(e.dataset.requestId), e.querySelectorAll('[data-testid=preempted]').length])""")
        legend = page.inner_text("#legend")
        browser.close()
    assert errors == [] and "preempted" in legend
    assert sum(n for _, n in marks) > 0  # the lanes in the window mark preemptions, only those of their request
    for request_id, n in marks:
        assert n <= int((log["request_id"] == request_id).sum()), request_id
