"""`validate` and the accuracy gate (docs/accuracy.md): the catalog is complete and sourced, the
gate fails on what it should, and a model whose every writing iteration is 20% slower fails it."""

from __future__ import annotations

import json

import pytest

from disagg_simpy.cli import main
from disagg_simpy.sweep.cost_error import scaled_costs
from disagg_simpy.sweep.runner import LocalPool, Runner
from disagg_simpy.sweep.store import Store
from disagg_simpy.validation import SCENARIOS, closed_loop, gate, load_catalog, load_recorded, measure, row, summary


def test_every_figure_has_a_source_a_reasoned_tolerance_and_a_scenario():
    sources, figures = load_catalog()
    assert len({f.id for f in figures}) == len(figures)
    for f in figures:
        assert f.source in sources and sources[f.source]["cite"] and sources[f.source]["group"]
        assert f.published > 0 and 0 < f.tolerance_pct <= 50 and len(f.tolerance_why) > 40, f.id
        assert (SCENARIOS / f.scenario).is_file(), f.scenario
        assert f.how in ("goodput", "slo_scale", "concurrency", "closed_loop", "run")
        assert f.grid is None or (f.how in ("goodput", "slo_scale") and len(f.grid) >= 2), f.id
        assert f.metric in {"goodput": ("goodput_per_s", "goodput_per_gpu_per_s"), "slo_scale": ("slo_scale",),
                            "concurrency": ("ttft_ms", "tpot_ms"), "closed_loop": ("ttft_ms", "tpot_ms"),
                            "run": ("ttft_ms", "tpot_ms")}[f.how]
    recorded = {r["id"] for r in load_recorded()["rows"]}
    assert recorded == {f.id for f in figures}  # every figure has its recorded value


def fake(figure_id: str, error: float, tolerance: float = 15.0) -> dict:
    return {"id": figure_id, "metric": "tpot_ms", "published": 100.0, "ours": 100.0 + error, "error_pct": error,
            "tolerance_pct": tolerance, "verdict": "within" if abs(error) <= tolerance else "outside"}


def test_the_gate_fails_on_a_figure_leaving_its_tolerance_a_moved_error_and_a_worse_median():
    recorded = {"rows": [fake("a", 13.0), fake("b", -40.0), fake("c", 2.0)]}
    assert gate([fake("a", 14.0), fake("b", -42.0), fake("c", 4.0)], recorded) == []  # moves of 5 points or less pass
    left = gate([fake("a", 16.0), fake("b", -40.0), fake("c", 2.0)], recorded)
    assert left == ["a: 116 against 100 published (+16.0%), outside its +-15% (recorded: within)"]
    moved = gate([fake("a", 13.0), fake("b", -30.0), fake("c", 2.0)], recorded)  # closer to published, but unrecorded
    assert moved == ["b: error -30.0% against -40.0% recorded (moved more than 5 points; validate --record accepts it)"]
    worse = gate([fake("a", 13.0), fake("b", -40.0), fake("c", 14.0)], recorded)  # the median 13 -> 14: passes
    assert len(worse) == 1 and worse[0].startswith("c: error +14.0%")
    worse = gate([fake("a", -19.0, 50), fake("b", -40.0), fake("c", 2.0)], recorded)  # median 13 -> 19
    assert any(p.startswith("tpot_ms: median absolute error 19.0% against 13.0% recorded") for p in worse)
    assert gate([fake("new", 30.0)], recorded)[0].startswith("new: 130 against 100 published")  # not recorded, outside


@pytest.fixture()
def runner(tmp_path):
    return Runner(Store(tmp_path / "store.sqlite", "test"), LocalPool(1), progress=False)


def test_a_model_whose_writing_iterations_are_20_percent_slower_fails_the_gate(runner):
    """The gate's reason to exist: slow every writing iteration by 20% (its fixed cost, per reply
    and per context token), run two of the fast figures, and the gate fails; as recorded, it passes."""
    sources, figures = load_catalog()
    chosen = [f for f in figures if f.id in ("distserve-fig1-decode-only", "aic-qwen3-32b-h100-vllm-tpot")]
    recorded = load_recorded()
    as_is = [row(f, sources, measure(f, runner)) for f in chosen]
    assert gate(as_is, recorded) == []
    slowed = [row(f, sources, measure(f, runner, transform=lambda s: scaled_costs(s, writing=1.2))) for f in chosen]
    problems = gate(slowed, recorded)
    assert len(problems) >= 2, problems  # both figures move (the TPOT one leaves its tolerance)
    assert any(p.startswith("aic-qwen3-32b-h100-vllm-tpot") and "outside its +-15%" in p for p in problems)
    assert summary(slowed)["median_abs_error_pct"]["tpot_ms"] > 18  # +3% recorded, about +22% slowed


def test_validate_runs_from_a_fresh_clone_without_public_data(tmp_path):
    """Issue 39: `validate` runs from a fresh clone. The package and scenarios/validation/ alone, copied
    where no shared/data lies beside them, every public-data variable pointing at nothing (no traces,
    profiles, AIConfigurator tables or cache): `validate --fast` in a new process exits 0 against the
    recorded figures, prints the table, the summary and the gate's verdict, and writes the CSV, JSON and
    a page with a chart per source. (No figure needs public data: each cites its measured value.)"""
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    clone, empty = tmp_path / "clone", tmp_path / "empty"
    shutil.copytree(root / "disagg_simpy", clone / "disagg_simpy", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(root / "scenarios" / "validation", clone / "scenarios" / "validation")
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DISAGG_SIMPY")}
    env.update(PYTHONPATH=str(clone), HOME=str(empty), XDG_CACHE_HOME=str(empty), DISAGG_SIMPY_TRACES=str(empty),
               DISAGG_SIMPY_PROFILES=str(empty), DISAGG_SIMPY_AICONFIGURATOR="")
    out, page = tmp_path / "v", tmp_path / "page.html"
    done = subprocess.run([sys.executable, "-m", "disagg_simpy", "validate", "--fast", "--out", str(out), "--html",
                           str(page)], cwd=clone, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "figures within their tolerance; median absolute error: goodput_per_s" in done.stdout
    assert "accuracy gate: passes" in done.stdout and "distserve-fig1-vllm-colocated" in done.stdout
    facts = json.loads((out / "validate.json").read_text())
    assert facts["gate"] == "passes" and facts["summary"]["figures"] == sum(f.fast for f in load_catalog()[1])
    assert (out / "validate.csv").read_text().startswith("id,source,group,metric,published,ours,error_pct")
    assert not any(empty.iterdir())  # nothing fetched or cached
    html = page.read_text()
    fast_sources = {f.source for f in load_catalog()[1] if f.fast}  # one chart per source in the subset
    assert html.count("<svg") == len(fast_sources) >= 2 and "DistServe" in html and "AIConfigurator" in html


IDLE = """name: idle
seed: 1
seeds: 2
workload: {rate_per_s: 0.5, n_requests: 20, arrivals: constant, prompt_mix: [{share: 1, tokens: {fixed: 500}}],
           reply_words: {fixed: 2}}
cost: {iteration_ms: 10, per_prompt_token_ms: 0.1, per_reply_ms: 0, per_context_token_ms: 0}
slo: {first_word_s: 0.1, mean_gap_ms: null, freeze_ms: null}
arrangements:
  - {name: two, kind: colocated, gpus: 2}
"""


def test_a_slo_scale_figure_is_the_smallest_scale_meeting_the_rule_and_a_per_gpu_goodput_divides(tmp_path, runner):
    """DistServe's Figures 8-9 kinds of figure, by hand: requests 2 s apart never queue, so every
    first word takes exactly 10 + 500 x 0.1 = 60 ms: the smallest scale of a 0.1 s limit meeting
    it is 0.6 (to the search's 0.01); goodput per GPU is the arrangement's goodput over its 2 GPUs."""
    from disagg_simpy.validation import Figure

    (tmp_path / "idle.yaml").write_text(IDLE, encoding="utf-8")
    common = dict(source="s", where="w", setup="s", published=1.0, tolerance_pct=15, tolerance_why="w",
                  scenario="idle.yaml", arrangement="two")
    scale = measure(Figure(id="scale", metric="slo_scale", how="slo_scale", **common), runner, folder=tmp_path)
    assert 0.6 <= scale <= 0.61
    total = measure(Figure(id="total", metric="goodput_per_s", how="goodput", **common), runner, folder=tmp_path)
    per_gpu = measure(Figure(id="gpu", metric="goodput_per_gpu_per_s", how="goodput", **common), runner,
                      folder=tmp_path)
    assert total > 0 and per_gpu == pytest.approx(total / 2)


def test_a_grid_figure_is_read_off_the_panel_s_points_as_distserve_read_them(tmp_path, runner):
    """DistServe's notebook reads a 90% crossing by linear interpolation between the panel's measured
    points, the first pair that crosses (plot.ipynb `find_intersection`). By hand on the idle scenario
    (every first word 60 ms): scales 1.0, 0.8, 0.7 meet a 0.1 s limit (100%), 0.5 does not (0%), so the
    reading is 0.7 + (90 - 100) x (0.5 - 0.7) / (0 - 100) = 0.68, where the search gives 0.6; a panel
    that never crosses 90% is searched instead (the notebook would draw its first point)."""
    from disagg_simpy.validation import Figure, first_crossing

    assert first_crossing([0.25, 0.5, 1.0], [100, 95, 80], 90) == pytest.approx(0.5 + 0.5 * 5 / 15)
    assert first_crossing([1, 2, 3, 4], [95, 85, 95, 80], 90) == pytest.approx(1.5)  # the first crossing
    assert first_crossing([1, 2, 3], [80, 95, 99], 90) == pytest.approx(1 + 10 / 15)  # upwards too
    assert first_crossing([1, 2], [95, 91], 90) is None
    (tmp_path / "idle.yaml").write_text(IDLE, encoding="utf-8")
    common = dict(id="scale", source="s", where="w", setup="s", metric="slo_scale", published=1.0, tolerance_pct=15,
                  tolerance_why="w", scenario="idle.yaml", arrangement="two", how="slo_scale")
    read = measure(Figure(grid=(0.5, 1.0, 0.7, 0.8), **common), runner, folder=tmp_path)  # (any order: largest first)
    assert read == pytest.approx(0.68)
    assert 0.6 <= measure(Figure(grid=(1.0, 0.8), **common), runner, folder=tmp_path) <= 0.61  # no crossing: searched


def test_a_closed_loop_sends_each_request_when_its_clients_last_one_ends():
    """The benchmark's clients (validation.closed_loop): every client's first request at 0, each
    next one at the end of its last, and the run of those arrivals gives those ends (a fixed
    point, checked by running the stream again here); one client alone waits for nothing."""
    import numpy as np

    from disagg_simpy.api import run_arrangement
    from disagg_simpy.scenario.loading import load_scenario
    from disagg_simpy.workload.stream import Requests

    scenario = load_scenario(SCENARIOS / "aic-qwen3-32b-h100-sglang.yaml")
    loop = closed_loop(scenario, "tp2", clients=5, per_client=4)
    arrived, finished = loop.arrived_ns.reshape(5, 4), loop.finished_ns.reshape(5, 4)
    assert (arrived[:, 0] == 0).all() and (arrived[:, 1:] == finished[:, :-1]).all()
    order = np.lexsort((np.repeat(np.arange(5), 4), loop.arrived_ns))
    stream = Requests(loop.arrived_ns[order], np.full(20, 1024), np.full(20, 128), np.ones(20, bool), cap_ns=3 * 10**12)
    again = run_arrangement(scenario, scenario.arrangements[0], stream).requests["finished_at_ns"]
    assert (again == loop.finished_ns[order]).all()
    alone = closed_loop(scenario, "tp2", clients=1, per_client=3)
    assert alone.ttft_ms == pytest.approx(alone.first_ttft_ms, rel=1e-12)  # nobody ahead of it, every time
    assert loop.ttft_ms > 2 * alone.ttft_ms  # five equal clients stay in step: each prompt waits for the others


@pytest.mark.parametrize("gpu", ["a100", "h100"])
def test_splitwise_figures_are_one_prefill_iteration_and_a_steady_batch(gpu):
    """How the Splitwise figures are expressed (how: run). TTFT: the one prompt of 2,048 tokens is read
    by one iteration alone (no reply written), whose end is its first word, so ours is that iteration's
    time. TPOT: the 16 prompts of 512 tokens are read by one iteration (8,192 tokens), then 127
    iterations write all 16 replies and nothing else, so each reply's mean gap is their mean time."""
    from disagg_simpy import load_scenario, run
    from disagg_simpy.validation import as_written

    ttft = load_scenario(SCENARIOS / f"splitwise-{gpu}-ttft.yaml")
    tpot = load_scenario(SCENARIOS / f"splitwise-{gpu}-tpot.yaml")
    first, batch = run(ttft), run(tpot)
    for name in ("tp2", "tp4", "tp8"):
        it = first.iterations.query(f"arrangement == '{name}'")
        assert it[["n_replies_written", "n_prompt_tokens_read"]].values.tolist()[0] == [0, 2048]
        ms = 1e3 * (it.ended_at_s.iloc[0] - it.started_at_s.iloc[0])
        assert as_written(ttft, name, "ttft_ms", 1) == pytest.approx(ms, rel=1e-9)
        it = batch.iterations.query(f"arrangement == '{name}'")
        assert it[["n_replies_written", "n_prompt_tokens_read"]].values.tolist() == [[0, 8192]] + [[16, 0]] * 127
        writing = 1e3 * (it.ended_at_s.iloc[-1] - it.ended_at_s.iloc[0]) / 127
        req = batch.requests.query(f"arrangement == '{name}'")
        assert len(req) == 16 and (req.first_word_s == req.first_word_s.iloc[0]).all()
        assert as_written(tpot, name, "tpot_ms", 1) == pytest.approx(writing, rel=1e-9)


@pytest.mark.parametrize("html", ["", "{tmp}"])
def test_a_bad_page_path_is_refused_before_any_run_and_nothing_is_written(tmp_path, capsys, html):
    """`--html` is checked as every command's is: before any figure runs, one line, exit 2, no
    --out folder left (it was found only after every run, exit 1, with validate.csv written)."""
    assert main(["validate", "--fast", "--out", str(tmp_path / "v"), "--html", html.format(tmp=tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: --html: got "), err
    assert not (tmp_path / "v").exists()


def test_seeds_count_from_each_scenario_s_own_seed(monkeypatch):
    """`validate --seeds N` means what it means in run, goodput and sweep: N seeds from the
    scenario's seed (it ran seeds 1..N, whatever the scenario's seed)."""
    import disagg_simpy.sweep.goodput as goodput_module

    seen = []
    monkeypatch.setattr(goodput_module, "goodput", lambda scenario, runner, seeds, *a, **k: seen.append((scenario.seed, seeds))
                        or __import__("pandas").DataFrame({"goodput_per_s": [1.0]}))
    figure = next(f for f in load_catalog()[1] if f.how == "goodput")
    measure(figure, runner=None, seeds=3)
    (seed, seeds), = seen
    assert seeds == (seed, seed + 1, seed + 2)


def test_a_model_change_after_a_validate_is_seen_by_the_next_one_into_the_same_folder(tmp_path, monkeypatch):
    """Review F20: validate kept its runs in DIR/store.sqlite keyed by the package version, so after
    a model change the next validate (and --record) read yesterday's figures. The idle scenario's
    first word takes 10 + 500 x 0.1 = 60 ms (SLO scale 0.6 of a 0.1 s limit); a model whose every
    iteration costs 20 ms more takes 80 ms (scale 0.8), and the second validate must say so."""
    import functools

    from disagg_simpy import validation
    from disagg_simpy.cli.validate import run_validate
    from disagg_simpy.model.costs import CostNs
    from disagg_simpy.validation import Figure

    (tmp_path / "idle.yaml").write_text(IDLE, encoding="utf-8")
    figure = Figure(id="idle-scale", source="s", where="w", setup="s", metric="slo_scale", published=0.7,
                    tolerance_pct=50, tolerance_why="w", scenario="idle.yaml", arrangement="two", how="slo_scale")
    monkeypatch.setattr(validation, "load_catalog", lambda: ({"s": {"group": "g", "cite": "c"}}, [figure]))
    monkeypatch.setattr(validation, "measure", functools.partial(validation.measure, folder=tmp_path))

    def ours() -> float:
        run_validate(False, tmp_path / "v", None, False, "csv", None, 1)
        return json.loads((tmp_path / "v" / "validate.json").read_text())["rows"][0]["ours"]

    assert 0.6 <= ours() <= 0.61
    slower = CostNs.from_ms.__func__

    def from_ms(cls, iteration_ms, *rest, **named):
        return slower(cls, iteration_ms + 20.0, *rest, **named)

    monkeypatch.setattr(CostNs, "from_ms", classmethod(from_ms))
    assert 0.8 <= ours() <= 0.81  # the changed model, not the stored run of the old one


def test_other_seeds_are_not_gated_and_not_recorded(tmp_path, capsys, monkeypatch):
    """Review G6: `validate --seeds 1 --record` replaced the 8-seed reference with 1-seed figures, and
    `--seeds N` alone failed the gate on seed noise and said to record it. Now --record with --seeds
    is refused in one line before any run (exit 2, recorded.json untouched), and a --seeds run says
    its gate is not run."""
    import functools

    from disagg_simpy import validation
    from disagg_simpy.validation import RECORDED, Figure

    before = RECORDED.read_bytes()
    assert main(["validate", "--fast", "--seeds", "1", "--record", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--record with --seeds 1" in err and "expected --record without --seeds" in err
    assert RECORDED.read_bytes() == before and not (tmp_path / "r").exists()
    (tmp_path / "idle.yaml").write_text(IDLE, encoding="utf-8")
    figure = Figure(id="idle-scale", source="s", where="w", setup="s", metric="slo_scale", published=1.0,
                    tolerance_pct=15, tolerance_why="w", scenario="idle.yaml", arrangement="two", how="slo_scale")
    monkeypatch.setattr(validation, "load_catalog", lambda: ({"s": {"group": "g", "cite": "c"}}, [figure]))
    monkeypatch.setattr(validation, "measure", functools.partial(validation.measure, folder=tmp_path))
    assert main(["validate", "--seeds", "1", "--out", str(tmp_path / "v")]) == 0  # (-40%: outside, not gated)
    assert "accuracy gate: not run (--seeds 1: the recorded figures are of each scenario's own seeds)" in \
        capsys.readouterr().out


def test_the_accuracy_page_shows_the_recorded_table():
    """docs/accuracy.md's full table is `validate --record`'s, row for row: the figures recorded for
    the gate (recorded.json) are the figures the page shows, so neither can move without the other."""
    from pathlib import Path

    from disagg_simpy.validation.report import markdown_table

    page = (Path(__file__).resolve().parents[2] / "docs" / "accuracy.md").read_text(encoding="utf-8")
    recorded = load_recorded()
    assert markdown_table(recorded["rows"]) in page, "docs/accuracy.md: paste the table validate --record prints"
    assert f"**Answer first: {recorded['summary']['within']} of {recorded['summary']['figures']} published figures" in page
