"""The HTML page's embedded data against the run's frames (no browser needed)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import DEFAULT, SPLIT_1_1

from disagg_simpy import load_scenario, run
from disagg_simpy.errors import InputError
from disagg_simpy.page import embedded_data, page_html, write_page
from disagg_simpy.page.data import (
    FIRST_WORD_GRID_S,
    FROZE,
    GAP_GRID_MS,
    LATE_DELAY,
    LATE_E2E,
    LATE_FIRST_WORD,
    LATE_MEAN_GAP,
    UNFINISHED,
)

NS = 1_000_000_000
SEED_PAGE = {"same-gpu": 1.0, "chunked-512": 89.0, "split-2-2": 100.0, "split-1-3": 10.0, "split-3-1": 10.0}


@pytest.fixture(scope="module")
def res():
    return run(load_scenario(DEFAULT).with_overrides(**{"workload.measure_s": 6}))


@pytest.fixture(scope="module")
def data(res):
    return embedded_data(page_html(res, reference=SEED_PAGE))


def ns(seconds) -> np.ndarray:
    s = np.asarray(seconds, dtype=float)
    return np.where(np.isnan(s), -1, np.round(np.nan_to_num(s) * NS)).astype(np.int64)


def decode_requests(data, a) -> dict[str, np.ndarray]:
    """Absolute times (ns, -1 for never), as the page's script decodes them."""
    shared, r = data["requests"], {k: np.array(v) for k, v in a["requests"].items()}
    arrived = np.cumsum(shared["arrived"])
    plus = lambda base, off: np.where((base >= 0) & (off >= 0), base + off, -1)
    first = plus(arrived, r["first"])
    return {"id": np.cumsum(shared["id"]), "arrived": arrived, "read": plus(arrived, r["read"]), "first": first,
            "joined": plus(first, r["join"]), "fin": plus(arrived, r["fin"]), "n": np.array(shared["words"]),
            "prompt": np.array(shared["prompt"]), **{k: r[k] for k in ("rg", "wg", "maxgap", "nfz", "late", "jw")}}


def decode_iterations(data, a) -> list[dict[str, np.ndarray]]:
    out = []
    for g in a["iterations"]:
        start, end, t = [], [], data["span_ns"][0]
        for wait, dur in zip(g["wait"], g["dur"]):
            start.append(t + wait)
            end.append(t + wait + dur)
            t = end[-1]
        out.append({"number": g["first"] + np.arange(len(start)), "wfirst": g["wfirst"], "start": np.array(start, dtype=np.int64),
                    "end": np.array(end, dtype=np.int64), "tok": np.array(g["tok"]), "rep": np.array(g["rep"])})
    return out


def test_iterations_are_exactly_those_of_the_frames_in_the_span(res, data):
    lo, hi = data["span_ns"]
    assert (lo, hi) == (0, 6 * NS)  # default span: the measured window
    for a in data["arrangements"]:
        frame = res.iterations[res.iterations["arrangement"] == a["name"]]
        assert a["roles"] == list(res.records[a["name"]].gpu_roles)
        for g, got in enumerate(decode_iterations(data, a)):
            rows = frame[frame["gpu"] == g]
            rows = rows[(ns(rows["started_at_s"]) < hi) & (ns(rows["ended_at_s"]) > lo)]
            assert len(rows) > 0
            assert got["number"].tolist() == rows["iteration"].tolist()
            assert got["start"].tolist() == ns(rows["started_at_s"]).tolist()
            assert got["end"].tolist() == ns(rows["ended_at_s"]).tolist()
            assert got["tok"].tolist() == rows["n_prompt_tokens_read"].tolist()
            assert got["rep"].tolist() == rows["n_replies_written"].tolist()


def test_every_reply_number_equals_its_requests_row(res, data):
    assert len(data["requests"]["id"]) == res.summary["n_requests"].iloc[0]  # all arrive in the span
    check_requests(res, data)


def check_requests(res, data):
    for a in data["arrangements"]:
        req = res.requests[res.requests["arrangement"] == a["name"]]
        req = req[req["request_id"].isin(np.cumsum(data["requests"]["id"]))]
        r = decode_requests(data, a)
        if "sent" in a["requests"]:  # (n_requests_per_gpu: the requests this arrangement was sent)
            sent = np.array(a["requests"]["sent"], dtype=bool)
            r = {k: v[sent] for k, v in r.items()}
        assert r["id"].tolist() == req["request_id"].tolist()
        assert r["prompt"].tolist() == req["n_prompt_tokens"].tolist()
        assert r["n"].tolist() == req["n_reply_words"].tolist()
        for key, col in [("arrived", "arrived_at_s"), ("read", "read_started_at_s"), ("first", "first_word_at_s"),
                         ("joined", "joined_at_s"), ("fin", "finished_at_s")]:
            assert r[key].tolist() == ns(req[col]).tolist(), key
        assert (r["first"] - r["arrived"]).tolist() == ns(req["first_word_s"]).tolist()
        for key, col in [("rg", "reading_gpu"), ("wg", "writing_gpu"), ("nfz", "n_freezes")]:
            assert r[key].tolist() == req[col].fillna(-1).astype(int).tolist(), key
        assert (r["maxgap"] / 1e6).tolist() == req["max_gap_ms"].fillna(-1e-6).tolist()
        # the page computes the mean gap as the frames do: (last word - first word) / (n - 1)
        multi = (r["fin"] >= 0) & (r["n"] > 1)
        mean = (r["fin"][multi] - r["first"][multi]) / (r["n"][multi] - 1) / 1e6
        assert mean.tolist() == req["mean_gap_ms"].to_numpy()[multi].tolist()
        assert ((r["late"] == 0) == req["on_time"].to_numpy()).all()


def test_late_reasons_add_up_to_the_summary(res, data):
    for a in data["arrangements"]:
        late, s = np.array(a["requests"]["late"]), a["summary"]

        def share(bits: int, late=late) -> float:
            return round(100 * float(np.mean((late & bits) > 0)), 6)

        assert share(LATE_FIRST_WORD) == pytest.approx(s["late_first_word_pct"])
        assert share(LATE_MEAN_GAP | UNFINISHED) == pytest.approx(s["late_mean_gap_pct"])
        assert share(FROZE | UNFINISHED) == pytest.approx(s["froze_pct"])
        assert s["on_time_pct"] == pytest.approx(100 * float(np.mean(late == 0)))
    assert {a["name"] for a in data["arrangements"]} == set(SEED_PAGE)
    assert any(np.array(a["requests"]["late"]).any() for a in data["arrangements"])


def check_page_words(res, data):
    """The page draws word k >= 2 at the end of writing iteration jw + k - 2 of the writing GPU
    (its iterations that write words, counted from 0): the run's words in the span."""
    lo, hi = data["span_ns"]
    for a in data["arrangements"]:
        its, r = decode_iterations(data, a), decode_requests(data, a)
        got = []
        for i in range(len(r["id"])):
            if r["first"][i] >= 0:
                got.append((r["id"][i], 1, r["first"][i]))
            if r["jw"][i] < 0:
                continue
            it = its[r["wg"][i]]
            wend = it["end"][it["rep"] > 0]
            for k in range(2, r["n"][i] + 1):
                local = r["jw"][i] + k - 2 - it["wfirst"]
                if 0 <= local < len(wend):
                    got.append((r["id"][i], k, wend[local]))
        words = res.words(a["name"])
        at = ns(words["at_s"])
        # every word whose iteration lies in the span (word 1 always)
        want = words[(words["word"] == 1) | ((at <= hi) & (at > lo))]
        got = [w for w in got if w[1] == 1 or lo < w[2] <= hi]
        assert sorted(got) == sorted(zip(want["request_id"], want["word"], ns(want["at_s"])))


def test_word_times_follow_from_the_embedded_iterations(res, data):
    check_page_words(res, data)


def test_word_times_skip_prompt_only_iterations(tmp_path):
    """E10: prompt-only iterations between a reply's words write none of them; the page's
    player draws the words on the iterations that write (and the gap across the others)."""
    s = load_scenario(DEFAULT).with_overrides(**{"workload.measure_s": 4})
    e10 = s.arrangements[0].model_copy(update={"name": "e10", "mixed_iterations": False})
    res = run(s.model_copy(update={"arrangements": [e10]}))
    it = res.iterations
    assert ((it["n_replies_written"] == 0) & (it["n_prompt_tokens_read"] > 0)).sum() > 10
    data = embedded_data(page_html(res))
    check_page_words(res, data)


def test_first_word_shares_are_the_frames(res, data):
    for a in data["arrangements"]:
        waits = res.requests.loc[res.requests["arrangement"] == a["name"], "first_word_s"].to_numpy()
        want = [100 * np.mean(waits <= s + 1e-9) for s in FIRST_WORD_GRID_S]
        assert a["first_words"] == pytest.approx(want, abs=1e-3)
        assert a["first_words"][-1] == pytest.approx(100 * np.mean(~np.isnan(waits)), abs=1e-3)


def test_gap_shares_are_the_runs_pooled_gaps(res, data):
    for a in data["arrangements"]:
        gaps = res.gaps[a["name"]]
        total = gaps.gap_counts.sum()
        want = [100 * gaps.gap_counts[gaps.gap_values_ns <= round(ms * 1e6) + 1].sum() / total for ms in GAP_GRID_MS]
        assert a["gaps"] == pytest.approx(want, abs=1e-3)
        assert a["gaps"][-1] == 100


def test_reference_only_when_given(res, data):
    assert data["reference"] == SEED_PAGE
    assert embedded_data(page_html(res))["reference"] is None


def test_nothing_over_time_without_periods(data):
    assert data["over_time"] is None  # (with periods: test_page_over_time.py)


def test_page_is_self_contained_and_cannot_be_broken_out_of(res, tmp_path):
    nasty = {"</script><script>alert(1)</script>": 5.0}
    path = write_page(res, tmp_path / "page.html", reference=nasty)
    html = path.read_text(encoding="utf-8")
    assert embedded_data(html)["reference"] == nasty
    assert html.count("</script>") == 2  # the data's and the code's, nothing else ends a script
    assert "<link" not in html and " src=" not in html and "url(" not in html
    assert "default-src 'none'" in html  # the page may not fetch anything
    assert [u for u in _urls(html) if u != "http://www.w3.org/2000/svg"] == []
    assert not list(tmp_path.glob(".*.tmp"))


def _urls(html: str) -> list[str]:
    import re

    return re.findall(r"https?://[^\s\"'<>)]+", html)


def test_span_choice_and_bad_span(res):
    data = embedded_data(page_html(res, span_s=(2.0, 3.0)))
    assert data["span_ns"] == [2 * NS, 3 * NS]
    for a in data["arrangements"]:
        for g in decode_iterations(data, a):
            assert (g["end"] > 2 * NS).all() and (g["start"] < 3 * NS).all()
    # the requests in progress in the span, in any arrangement, and only those
    req = res.requests
    live = req[(req["arrived_at_s"] < 3) & ~(req["finished_at_s"] < 2)]
    ids = np.cumsum(data["requests"]["id"])
    assert ids.tolist() == sorted(set(live["request_id"]))
    assert 0 < len(ids) < res.summary["n_requests"].iloc[0]
    check_requests(res, data)
    full = embedded_data(page_html(res))
    for a, b in zip(data["arrangements"], full["arrangements"]):  # the charts still cover everyone
        assert (a["gaps"], a["first_words"], a["summary"]) == (b["gaps"], b["first_words"], b["summary"])
    with pytest.raises(InputError, match="expected an end after the start"):
        page_html(res, span_s=(3.0, 3.0))


def test_default_page_is_small(tmp_path):
    path = write_page(run(load_scenario(DEFAULT)), tmp_path / "default.html", reference=SEED_PAGE)
    assert path.stat().st_size < 5_000_000


def test_cli_html_flag_writes_the_page_with_the_results(tmp_path, capsys):
    from disagg_simpy.cli import main

    page = tmp_path / "pages" / "report.html"
    argv = [str(DEFAULT), "--measure-s", "2", "--seeds", "1", "--out", str(tmp_path / "out"), "--no-plots", "--html", str(page)]
    assert main(argv) == 0
    assert f"page in {page}" in capsys.readouterr().out
    data = embedded_data(page.read_text(encoding="utf-8"))
    assert data["scenario"]["measured_s"] == [0.0, 2.0]
    assert data["reference"] == {"same-gpu": 1, "chunked-512": 89, "split-2-2": 100, "split-1-3": 10, "split-3-1": 10}
    assert len(data["requests"]["id"]) == (tmp_path / "out" / "requests.csv").read_text().count("\nsame-gpu,")


@pytest.mark.parametrize("bad, message", [
    ("", "--html: got an empty path, expected a file name"),
    (".", "--html: got ., which is a folder, expected a file name"),
    (str(DEFAULT), "would overwrite the scenario file"),
])
def test_cli_html_flag_refuses_bad_paths_before_running(tmp_path, capsys, bad, message):
    from disagg_simpy.cli import main

    argv = [str(DEFAULT), "--out", str(tmp_path / "out"), "--no-plots", "--html", bad]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_one_word_and_unfinished_replies(micro):
    """A one-word reply has no gaps and no writing GPU; a reply the cap cuts off is unfinished."""
    res = micro([(0.0, 100, 1), (0.0, 100, 5), (0.001, 200, 1000)], SPLIT_1_1, max_sim_s=1)
    data = embedded_data(page_html(res))
    (a,) = data["arrangements"]
    r = decode_requests(data, a)
    assert r["wg"].tolist()[0] == -1 and r["jw"].tolist()[0] == -1 and r["maxgap"].tolist()[0] == -1
    assert r["late"].tolist()[:2] == [0, 0] and r["late"][2] & UNFINISHED
    assert r["fin"][2] == -1 and r["nfz"][2] == -1
    assert a["summary"]["n_unfinished"] == 1
    check_requests(res, data)


PER_GPU = """name: per-gpu
seed: 3
workload:
  rate_per_s: 5
  n_requests_per_gpu: 12
  prompt_mix:
    - {share: 1, tokens: [100, 2000]}
  reply_words: [10, 100]
cost:
  preset: a100-80gb/llama-3-8b/tp1/vidur-sarathi
arrangements:
  - {name: one, kind: colocated, gpus: 1}
  - {name: three, kind: colocated, gpus: 3}
"""


def test_per_gpu_counts_page_shows_every_request_and_who_was_sent_it(tmp_path, capsys):
    """F25: with n_requests_per_gpu the arrangements get 12 and 36 requests; the page (and
    `run --html`) shows all 36 (it showed only the 12 they share), each arrangement's times for
    those it was sent, and `sent` says which (the smaller one's first 12)."""
    from disagg_simpy.cli import main

    path = tmp_path / "per-gpu.yaml"
    path.write_text(PER_GPU, encoding="utf-8")
    res = run(load_scenario(path))
    counts = res.requests.groupby("arrangement").size()
    assert counts["one"] < counts["three"]
    data = embedded_data(page_html(res))
    ids = np.cumsum(data["requests"]["id"])
    shown = {a["name"]: a["requests"] for a in data["arrangements"]}
    of = {name: set(res.requests.loc[res.requests["arrangement"] == name, "request_id"]) for name in counts.index}
    assert of["one"] < of["three"] and set(ids) <= of["three"] and len(set(ids) - of["one"]) > 0
    assert "sent" not in shown["three"]
    assert [bool(s) for s in shown["one"]["sent"]] == [i in of["one"] for i in ids]
    assert all(shown["one"]["fin"][k] == -1 for k, s in enumerate(shown["one"]["sent"]) if not s)
    check_requests(res, data)
    page = tmp_path / "page.html"
    assert main([str(path), "--out", str(tmp_path / "out"), "--no-plots", "--html", str(page)]) == 0
    assert embedded_data(page.read_text(encoding="utf-8"))["requests"]["id"]
    capsys.readouterr()


def test_end_to_end_and_delay_limits_mark_late_requests_on_the_page(tmp_path):
    """F11: a request late only on end-to-end latency (or delay) was shown "ok" on the page,
    while on_time_pct counted it late."""
    path = tmp_path / "rule.yaml"
    path.write_text(PER_GPU.replace("n_requests_per_gpu: 12", "n_requests: 20")
                    + "slo: {first_word_s: null, mean_gap_ms: null, freeze_ms: null, e2e_s: 0.6, delay_s: 0.05}\n")
    res = run(load_scenario(path))
    data = embedded_data(page_html(res))
    assert data["scenario"]["slo"]["e2e_s"] == 0.6 and data["scenario"]["slo"]["delay_s"] == 0.05
    for a in data["arrangements"]:
        late, s = np.array(a["requests"]["late"]), a["summary"]
        assert s["on_time_pct"] == pytest.approx(100 * float(np.mean(late == 0)))
        assert round(100 * float(np.mean((late & (LATE_E2E | UNFINISHED)) > 0)), 6) == pytest.approx(s["late_e2e_pct"])
        assert round(100 * float(np.mean((late & (LATE_DELAY | UNFINISHED)) > 0)), 6) == pytest.approx(s["late_delay_pct"])
    assert any((np.array(a["requests"]["late"]) & LATE_E2E).any() for a in data["arrangements"])
    check_requests(res, data)
