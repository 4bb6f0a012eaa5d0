"""Tensor-parallel instances: `tp` on a colocated arrangement, `reading_tp` / `writing_tp` on a
split. GPUs stay GPUs; instances = GPUs / TP are what the model runs (costs per instance); each
side of a split may hold its own KV capacity. (The rules to the nanosecond: test_reference.py.)"""

from __future__ import annotations

import json

import pytest
from helpers import run_rows, write_scenario

from disagg_simpy import load_scenario, run
from disagg_simpy.cli import main
from disagg_simpy.page import embedded_data, page_html
from disagg_simpy.sweep.goodput import Probe, goodput_row

TP2_1 = {"name": "tp2-1", "kind": "disaggregated", "reading_gpus": 2, "writing_gpus": 1, "reading_tp": 2}
ROWS = [(0.0, 200, 3), (0.001, 100, 4), (0.004, 300, 2), (0.02, 50, 5)]


def test_a_tp2_reading_and_tp1_writing_split_is_three_gpus_and_two_instances(tmp_path):
    res = run_rows(tmp_path, ROWS, [TP2_1])
    a = res.scenario.arrangements[0]
    assert (a.n_gpus, a.n_instances, a.instance_gpus, a.roles) == (3, 2, (2, 1), ("reads", "writes"))
    assert res.gpu_roles("tp2-1") == ("reads", "writes")  # the model runs instances
    assert set(res.iterations["gpu"]) == {0, 1}
    row = goodput_row(res.scenario, "tp2-1", (1,), 90.0, Probe(6.0, []), None, 1)
    assert (row["n_gpus"], row["goodput_per_gpu_per_s"]) == (3, 2.0)  # per GPU divides by GPUs


def test_lanes_are_instances_named_by_their_gpus(tmp_path):
    res = run_rows(tmp_path, ROWS, [TP2_1, {"name": "c", "kind": "colocated", "gpus": 4, "tp": 2}])
    data = embedded_data(page_html(res))
    lanes = {a["name"]: a["lanes"] for a in data["arrangements"]}
    assert lanes == {"tp2-1": ["instance 0 (GPUs 0-1)", "instance 1 (GPU 2)"],
                     "c": ["instance 0 (GPUs 0-1)", "instance 1 (GPUs 2-3)"]}
    described = {a["name"]: a["description"] for a in data["arrangements"]}
    assert described["c"] == "4 GPUs as 2 TP2 instances, each reads prompts and writes replies"
    assert described["tp2-1"] == ("2 GPUs read prompts (1 TP2 instance), 1 GPU writes replies (1 TP1 instance); "
                                  "KV caches ship between them")


def test_timeline_lanes_are_labelled_by_instance(tmp_path, monkeypatch):
    from disagg_simpy.plots import style, timeline

    res = run_rows(tmp_path, ROWS, [TP2_1])
    figures = []
    monkeypatch.setattr(style, "save_figure", lambda fig, path: figures.append(fig) or path)
    timeline.save_timeline(res, "tp2-1", tmp_path / "t.png", (0.0, 0.05), 4)
    labels = [t.get_text() for t in figures[0].axes[0].get_yticklabels()]
    assert labels[:2] == ["instance 0 (GPUs 0-1): reads prompts", "instance 1 (GPU 2): writes replies"]
    replies = [t.get_text() for t in figures[0].axes[1].get_yticklabels()]
    assert replies and all(" instance " in text for text in replies), replies


def test_follow_picture_names_instances(tmp_path):
    from disagg_simpy.plots.follow import journey, story

    res = run_rows(tmp_path, ROWS, [TP2_1])
    before, after = story(journey(res, "tp2-1", 0), res.scenario.slo)
    assert "read on instance 0 (GPUs 0-1)" in before and "to instance 1 (GPU 2)" in after


def test_without_tp_nothing_changes_in_the_dump():
    from disagg_simpy.scenario.arrangements import Colocated, Disaggregated

    assert "tp" not in Colocated(name="c", kind="colocated", gpus=2).model_dump()
    dumped = Disaggregated(name="s", kind="disaggregated", reading_gpus=1, writing_gpus=1).model_dump(mode="json")
    assert not {"reading_tp", "writing_tp", "reading_kv_capacity_tokens", "writing_kv_capacity_tokens"} & set(dumped)


def test_each_side_has_its_own_kv_capacity(tmp_path):
    split = {**TP2_1, "reading_kv_capacity_tokens": 600, "writing_kv_capacity_tokens": 400}
    res = run_rows(tmp_path, ROWS, [split])
    rec = res.records["tp2-1"]
    assert rec.kv_capacity_tokens.tolist() == [600, 400]
    s = res.summary.iloc[0]
    assert s["kv_peak_reading_pct"] == pytest.approx(100 * rec.kv_peak_tokens[0] / 600)
    assert s["kv_peak_writing_pct"] == pytest.approx(100 * rec.kv_peak_tokens[1] / 400)


@pytest.mark.parametrize("arrangement, message", [
    ({"name": "c", "kind": "colocated", "gpus": 3, "tp": 2},
     "arrangements[0].tp: got 2 with gpus 3, expected a TP degree that divides the GPUs into whole instances"),
    ({**TP2_1, "writing_gpus": 3, "writing_tp": 2},
     "arrangements[0].writing_tp: got 2 with writing_gpus 3, expected a TP degree that divides the GPUs"),
    ({**TP2_1, "reading_kv_capacity_tokens": 1000},
     "arrangements[0].writing_kv_capacity_tokens: missing with reading_kv_capacity_tokens, expected both sides'"),
    ({**TP2_1, "kv_capacity_tokens": 1000, "writing_kv_capacity_tokens": 249},
     "arrangements[0].writing_kv_capacity_tokens: got 249, but the workload can draw a request reserving prompt 200 "
     "+ reply 50 = 250"),
    ({"name": "c", "kind": "colocated", "gpus": 2, "tp": 0}, "arrangements[0].tp: got 0, expected a TP degree"),
])
def test_bad_tp_is_one_line_and_exit_2(tmp_path, capsys, arrangement, message):
    workload = {"rate_per_s": 2, "measure_s": 1, "prompt_mix": [{"share": 1, "tokens": [10, 200]}], "reply_words": [1, 50]}
    write_scenario(tmp_path, ROWS, [arrangement])
    path = tmp_path / "s.yaml"
    spec = {"name": "s", "workload": workload, "arrangements": [arrangement]}
    path.write_text(json.dumps(spec))
    out = tmp_path / "out"
    assert main([str(path), "--out", str(out), "--no-plots"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert not out.exists()


def test_a_tp_run_is_deterministic(tmp_path):
    path = write_scenario(tmp_path, ROWS, [TP2_1, {"name": "c", "kind": "colocated", "gpus": 2, "tp": 2}])
    a, b = run(load_scenario(path)), run(load_scenario(path))
    assert a.requests.equals(b.requests) and a.iterations.equals(b.iterations)


def test_a_preset_whose_tp_disagrees_with_the_side_is_refused():
    from types import SimpleNamespace

    from disagg_simpy.scenario.arrangements import Colocated, Disaggregated
    from disagg_simpy.scenario.options import preset_tp_problem

    tp1 = SimpleNamespace(preset="a100-80gb/opt-13b/tp1/distserve")
    tp2 = SimpleNamespace(preset="a100-80gb/opt-13b/tp2/distserve")
    split = Disaggregated(name="s", kind="disaggregated", reading_gpus=2, writing_gpus=1, reading_tp=2)
    assert preset_tp_problem(split, SimpleNamespace(preset=None)) is None  # no preset: the user's own figures
    key, text = preset_tp_problem(split, tp1)  # the scenario's TP1 preset on a TP2 reading side
    assert key == "reading_tp" and "got 2 with preset 'a100-80gb/opt-13b/tp1/distserve' (the scenario's cost)" in text
    assert "expected reading_tp: 1, or a TP2 preset" in text
    own = split.model_copy(update={"reading_cost": tp2})  # each side its own degree's preset
    assert preset_tp_problem(own, tp1) is None
    same = Colocated(name="c", kind="colocated", gpus=4, tp=2)
    assert preset_tp_problem(same, tp2) is None
    assert preset_tp_problem(same, tp1)[0] == "tp"
