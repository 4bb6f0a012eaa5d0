"""The page with paged KV (E9): its data gives each reply's stretches of words and preemptions,
from which the words are exactly the run's; the player draws every stretch of a preempted reply
as a piece, the time away between pieces and a cross at each preemption.

Default scenario at 6 s with 40,000 KV tokens per GPU in blocks of 16: every arrangement
preempts (recompute on the colocated ones, swap on the splits)."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from helpers import DEFAULT
from test_page_data import decode_iterations, decode_requests, ns

from disagg_simpy import load_scenario, run
from disagg_simpy.model.words import STRETCH_LOG_FIELDS
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


def decoded(data: dict, a: dict) -> tuple[dict, dict]:
    """An arrangement's iterations and requests as the page holds them, its E9 columns (stretches, preemptions,
    re-reads) left out of the requests' plain decoding (tests/page/test_page_data.py's)."""
    plain = {**a, "requests": {k: v for k, v in a["requests"].items() if k not in ("st", "pre", "rr")}}
    return decode_iterations(data, a), decode_requests(data, plain)


def test_the_words_of_preempted_replies_follow_from_their_stretches(paged_res):
    data = embedded_data(page_html(paged_res))
    lo, hi = data["span_ns"]
    n_pre = 0
    for a in data["arrangements"]:
        st, pre = a["requests"]["st"], a["requests"]["pre"]
        its, r = decoded(data, a)
        got = []
        for i in range(len(r["id"])):
            if r["first"][i] >= 0:
                got.append((r["id"][i], 1, r["first"][i]))
            for gpu, pos, word, n, lead, own in st[i]:
                if own and lead >= 0 and word > 2:  # a re-read's word (word 1 is the first word)
                    got.append((r["id"][i], word - 1, r["arrived"][i] + lead))
                if pos >= 0:
                    it = its[gpu]
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


@pytest.fixture(scope="module")
def paged_spec_res(tmp_path_factory):
    """`paged_res` with speculative decoding (E16, k = 4, a = 0.7: R103-R107) and 24,000 KV tokens a GPU (its
    replies end sooner: with 40,000 only split-3-1 preempts)."""
    spec = {**paged_spec(), "speculative": {"tokens": 4, "acceptance": 0.7}}
    for a in spec["arrangements"]:
        a["kv_capacity_tokens"] = 24_000
    path = tmp_path_factory.mktemp("paged_spec") / "paged_spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return run(load_scenario(path).with_overrides(**{"workload.measure_s": 6}))


def test_with_speculative_decoding_the_words_follow_from_each_iterations_words(paged_spec_res):
    """E9 with E16: a stretch's 7th field gives the words each of its iterations wrote (their sum its
    4th, the words written); read as pieces.js's `stretchPieces` reads them, they are the run's words."""
    data = embedded_data(page_html(paged_spec_res))
    lo, hi = data["span_ns"]
    n_pre = shared = 0
    for a in data["arrangements"]:
        st = a["requests"]["st"]
        assert "wn" not in a["requests"]  # (the stretches say it)
        its, r = decoded(data, a)
        got = []
        for i in range(len(r["id"])):
            if r["first"][i] >= 0:
                got.append((r["id"][i], 1, r["first"][i]))
            for gpu, pos, word, n, lead, own, per in st[i]:
                assert n == sum(per)
                shared += n - len(per)
                if own and lead >= 0 and word > 2:
                    got.append((r["id"][i], word - 1, r["arrived"][i] + lead))
                if pos >= 0:
                    it = its[gpu]
                    wend = it["end"][it["rep"] > 0]
                    for k, m in enumerate(per):  # iteration k: words `word`.. `word + m - 1`
                        if 0 <= pos + k - it["wfirst"] < len(wend):
                            got += [(r["id"][i], word + j, wend[pos + k - it["wfirst"]]) for j in range(m)]
                        word += m
            n_pre += len(a["requests"]["pre"][i])
        words = paged_spec_res.words(a["name"])
        at = ns(words["at_s"])
        want = words[(words["word"] == 1) | ((at <= hi) & (at > lo))]
        got = [w for w in got if w[1] == 1 or lo < w[2] <= hi]
        assert sorted(got) == sorted(zip(want["request_id"], want["word"], ns(want["at_s"]))), a["name"]
    assert n_pre > 0 and shared > 0


sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright for Python is not installed")
CHROMIUM = os.environ.get("DISAGG_SIMPY_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"


@contextmanager
def opened(html: Path) -> Iterator[tuple[Any, list[str]]]:
    """The page `html` in headless Chromium, loaded, and the page errors it raises (a list that fills)."""
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(html.as_uri())
        page.wait_for_selector("[data-testid=arrangement-row]")
        try:
            yield page, errors
        finally:
            browser.close()


#: the span the browser test's page holds: 16 s, the player's longest window, so one window
#: shows every word the page holds
SPAN_S = (0.0, 16.0)


def expected_pieces(res, name: str, request_id: int) -> tuple[list[tuple], list[int]]:
    """The records' stretches of one reply as the player should draw them: per stretch with a
    word, (GPU, first and last word number, words, first and last word's ns, word ticks: word 1
    is the first-word diamond), from the results' words; and its preemptions (ns)."""
    rec = res.records[name]
    st = rec.stretches
    words = res.words(name, [request_id])
    at = dict(zip(words["word"].tolist(), ns(words["at_s"]).tolist()))
    pieces = []
    for k in range(st.by_request[request_id], st.by_request[request_id + 1]):
        own = bool(st.lead_written[k]) and st.lead_at[k] >= 0
        first, last = int(st.first_word[k]) - own, int(st.first_word[k] + st.n[k] - 1)
        if last >= first:
            pieces.append((int(st.gpu[k]), first, last, last - first + 1, at[first], at[last], last - first + 1 - (first == 1)))
    log = rec.preemptions
    return pieces, [] if log is None else sorted(log["at_ns"][log["request_id"] == request_id].tolist())


def expected_rereads(res, name: str, request_id: int) -> list[tuple]:
    """The re-reads (recompute) of one reply from reads.csv and iterations.csv: the reads of its
    prompt after each preemption, as (GPU, first iteration's start ns, last one's end ns, tokens,
    first and last iteration, iterations)."""
    reads, its = res.reads, res.iterations
    mine = reads[(reads["arrangement"] == name) & (reads["request_id"] == request_id)]
    its = its[its["arrangement"] == name].set_index(["gpu", "iteration"])
    _, preempted = expected_pieces(res, name, request_id)
    out: dict[int, list] = {}
    for gpu, it, n in zip(mine["gpu"].tolist(), mine["iteration"].tolist(), mine["n_tokens"].tolist()):
        start, end = (int(round(its.loc[(gpu, it), f"{e}_at_s"] * 1e9)) for e in ("started", "ended"))
        k = sum(t <= start for t in preempted)
        if k:
            got = out.setdefault(k, [gpu, start, end, 0, it, it, 0])
            got[2], got[3], got[5], got[6] = max(got[2], end), got[3] + n, max(got[5], it), got[6] + 1
            got[1], got[4] = min(got[1], start), min(got[4], it)
    return [tuple(out[k]) for k in sorted(out)]


def drawn_lane(page, request_id: int) -> dict:
    """Follow `request_id` in the player and read its lane: pieces (GPU, first and last word,
    words, first and last word's ns, ticks drawn), ticks in the word paths, times away, crosses."""
    page.mouse.move(0, 0)  # (no reply under the pointer: a hovered one would take the detail)
    page.fill("#follow-id", str(request_id))
    page.dispatch_event("#follow-id", "change")
    return page.locator(f"[data-testid=reply-lane][data-request-id='{request_id}']").evaluate("""g => ({
        pieces: [...g.querySelectorAll('[data-testid=piece]')].map(e => [e.dataset.gpu, e.dataset.firstWord,
            e.dataset.lastWord, e.dataset.words, e.dataset.fromNs, e.dataset.toNs, e.dataset.ticks].map(Number)),
        ticks: [...g.querySelectorAll('[data-testid=piece] path.words')].map(e =>
            (e.getAttribute('d').match(/M/g) || []).length),
        gaps: [...g.querySelectorAll('[data-testid=piece-gap]')].map(e => [Number(e.dataset.fromNs), Number(e.dataset.toNs)]),
        crosses: [...g.querySelectorAll('[data-testid=preempted]')].map(e => Number(e.dataset.atNs)).sort((p, q) => p - q),
        rereads: [...g.querySelectorAll('[data-testid=reread]')].map(e => [e.dataset.gpu, e.dataset.fromNs, e.dataset.toNs,
            e.dataset.tokens, e.dataset.firstIteration, e.dataset.lastIteration, e.dataset.iterations].map(Number)),
        reread_x: [...g.querySelectorAll('[data-testid=reread] line.reading')].map(e => Number(e.getAttribute('x1'))),
        away_x: [...g.querySelectorAll('[data-testid=piece-gap] line.away')].map(e => Number(e.getAttribute('x2')))})""")


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}")
def test_the_player_draws_every_piece_of_a_preempted_reply_as_the_records_have_it(tmp_path, paged_res):
    """Every preempted reply the page holds whole, recompute (same-gpu; chunked-512, whose re-reads
    take several iterations) and swap (split-2-2): its
    lane's pieces are the records' stretches (GPU, words, their times), the time away between
    two pieces is the gap between the results' words, each cross is a preemption of the log and
    falls between pieces, each re-read (recompute only) is a reading span over the iterations
    reads.csv says read it, ending the time away, and the detail's counts are requests.csv's,
    the words' and the re-reads'."""
    html = tmp_path / "p.html"
    html.write_text(page_html(paged_res, span_s=SPAN_S))
    lo, hi = (round(s * 1e9) for s in SPAN_S)
    req = paged_res.requests
    checked = n_rereads = n_chunked = 0
    with opened(html) as (page, errors):
        for name in ("same-gpu", "chunked-512", "split-2-2"):
            page.click(f"[data-testid=arrangement-row][data-arrangement={name}]")
            page.select_option("#win-len", "16")
            legend = page.inner_text("#legend")
            assert "preempted" in legend and "away" in legend
            rows = req[(req["arrangement"] == name) & (req["n_preemptions"] > 0)]
            whole = rows[(ns(rows["arrived_at_s"]) >= lo) & (ns(rows["finished_at_s"]) <= hi)]
            for rid, n_pre in zip(whole["request_id"].tolist(), whole["n_preemptions"].tolist()):
                drawn = drawn_lane(page, rid)
                pieces, preempted = expected_pieces(paged_res, name, rid)
                assert len(pieces) > 1, (name, rid)
                assert [tuple(x) for x in drawn["pieces"]] == pieces, (name, rid)
                assert sum(drawn["ticks"]) == sum(x[6] for x in pieces)
                assert drawn["gaps"] == [[a[5], b[4]] for a, b in zip(pieces, pieces[1:])]
                assert drawn["crosses"] == preempted and len(preempted) == n_pre
                for t in preempted:  # a cross between pieces, never inside one
                    assert not any(x[4] < t < x[5] for x in pieces), (name, rid, t)
                rereads = expected_rereads(paged_res, name, rid)
                assert [tuple(x) for x in drawn["rereads"]] == rereads, (name, rid)
                if name != "split-2-2":  # recompute: every preemption is read again, each ends where a piece begins
                    assert len(rereads) == n_pre and [x[2] for x in rereads] == [x[4] for x in pieces[1:]]
                    assert drawn["away_x"] == drawn["reread_x"]  # the time away stops where the re-read starts
                    n_rereads += len(rereads)
                    n_chunked += sum(x[6] > 1 for x in rereads)
                detail = page.locator("[data-testid=reply-detail]")
                assert detail.get_attribute("data-request-id") == str(rid)
                assert int(detail.locator("[data-field=n_preemptions]").text_content()) == n_pre
                if rereads:
                    listed = detail.locator("[data-field=rereads]").text_content()
                    assert [int(t.replace(",", "")) for t in re.findall(r"([\d,]+) tokens", listed)] == [x[3] for x in rereads]
                written = int(detail.locator("[data-field=n_words_written]").text_content())
                assert written == len(paged_res.words(name, [rid]))
                checked += 1
    assert errors == []
    assert checked >= 6 and n_rereads >= 2 and n_chunked >= 1  # (a re-read over several iterations too)


def moved_log(rec, n_moved: int) -> tuple[list[tuple[int, ...]], list[int]]:
    """A stretch log of `rec` (two colocated GPUs) in which `n_moved` replies of at least 6 words
    move after word 3 to the other GPU's next writing iterations: words 4.. there (no model
    moves a reply across GPUs yet; the page must still draw each piece on its own GPU)."""
    r, w, st = rec.requests, rec.writes, rec.stretches
    log, moved = [], []
    for i in range(len(r["request_id"])):
        g, j, n_words, lead = (int(r[f][i]) for f in ("writing_gpu", "join_iteration", "n_reply_words", "first_word_at_ns"))
        h, first = 1 - g, int(st.first[i])
        if len(moved) < n_moved and j >= 0 and n_words >= 6 and st.n[i] == n_words - 1:
            t_last = int(w.ended[first + 1])  # word 3
            p = int(np.searchsorted(w.started[w.offsets[h]:w.offsets[h + 1]], t_last) + w.offsets[h])
            if p + n_words - 3 <= w.offsets[h + 1]:
                log += [(i, g, j, 2, 2, lead, 1), (i, h, int(w.rows[p] - rec.gpu_offsets[h]), 4, n_words - 3, t_last, 0)]
                moved.append(i)
                continue
        log.append((i, g, j, 2, n_words - 1, lead, 1))
    return log, moved


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}")
def test_the_player_draws_each_piece_on_its_own_gpu(tmp_path):
    """Replies whose stretch log moves them from one GPU to the other: each piece is drawn on its
    own GPU's writing iterations, as the records' words have it."""
    import dataclasses

    path = tmp_path / "two.yaml"
    path.write_text(yaml.safe_dump({"name": "two-gpus", "seed": 3, "max_sim_s": 12, "slo": {"freeze_ms": 150},
                                    "workload": {"rate_per_s": 6, "measure_s": 4, "reply_words": [1, 40],
                                                 "prompt_mix": [{"share": 1, "tokens": [200, 1200]}]},
                                    "arrangements": [{"name": "same-gpu", "kind": "colocated", "gpus": 2}]}))
    res = run(load_scenario(path))
    rec = res.records["same-gpu"]
    log, moved = moved_log(rec, 4)
    rec = dataclasses.replace(rec, stretch_log={k: np.array(v, np.int64) for k, v in zip(STRETCH_LOG_FIELDS, zip(*log))})
    res = dataclasses.replace(res, records={"same-gpu": rec})
    html = tmp_path / "p.html"
    html.write_text(page_html(res, span_s=(0.0, 12.0)))
    assert len(moved) == 4
    with opened(html) as (page, _):
        page.select_option("#win-len", "16")
        for rid in moved:
            drawn = drawn_lane(page, rid)
            pieces, _ = expected_pieces(res, "same-gpu", rid)
            assert {x[0] for x in pieces} == {0, 1} and [tuple(x) for x in drawn["pieces"]] == pieces, rid
            assert drawn["gaps"] == [[pieces[0][5], pieces[1][4]]] and drawn["crosses"] == []


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}")
def test_with_speculative_decoding_the_player_draws_each_piece_by_its_iterations(tmp_path, paged_spec_res):
    """E9 with E16: every preempted reply the page holds whole (recompute: same-gpu, chunked-512; swap: split-2-2,
    split-3-1): its
    lane's pieces are the records' stretches, with all their words (several an iteration) and one tick an
    iteration (plus a re-read's word), and the detail counts the words written."""
    res = paged_spec_res
    html = tmp_path / "p.html"
    html.write_text(page_html(res, span_s=SPAN_S))
    lo, hi = (round(s * 1e9) for s in SPAN_S)
    req = res.requests
    checked = shared = 0
    with opened(html) as (page, errors):
        for name in ("same-gpu", "chunked-512", "split-2-2", "split-3-1"):
            page.click(f"[data-testid=arrangement-row][data-arrangement={name}]")
            page.select_option("#win-len", "16")
            rec = res.records[name]
            st, per = rec.stretches, rec.iteration_words
            first_iteration = np.concatenate([[0], np.cumsum(st.n)])
            rows = req[(req["arrangement"] == name) & (req["n_preemptions"] > 0)]
            whole = rows[(ns(rows["arrived_at_s"]) >= lo) & (ns(rows["finished_at_s"]) <= hi)]
            for rid in whole["request_id"].tolist():
                words = res.words(name, [rid])
                at = dict(zip(words["word"].tolist(), ns(words["at_s"]).tolist()))
                pieces = []
                for k in range(st.by_request[rid], st.by_request[rid + 1]):
                    own = bool(st.lead_written[k]) and st.lead_at[k] >= 0
                    mine = per[first_iteration[k]:first_iteration[k + 1]]
                    first, last = int(st.first_word[k]) - own, int(st.first_word[k] + mine.sum() - 1)
                    if last >= first:
                        pieces.append((int(st.gpu[k]), first, last, last - first + 1, at[first], at[last],
                                       len(mine) + (own and first > 1)))
                        shared += int(mine.sum() - len(mine))
                drawn = drawn_lane(page, rid)
                assert len(pieces) > 1, (name, rid)
                assert [tuple(x) for x in drawn["pieces"]] == pieces, (name, rid)
                assert sum(drawn["ticks"]) == sum(x[6] for x in pieces)
                detail = page.locator("[data-testid=reply-detail]")
                assert int(detail.locator("[data-field=n_words_written]").text_content()) == len(words)
                checked += 1
    assert errors == []
    assert checked >= 10 and shared > 0
