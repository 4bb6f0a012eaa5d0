"""A run beyond a preset's fitted range warns once per arrangement, on stderr and in run.json,
saying how far (the largest prompt tokens an iteration read, replies it wrote, context a finished
reply reached, from the run's own tables), and a run within the range says nothing."""

from __future__ import annotations

import json

import pandas as pd
from helpers import scenario_text

from disagg_simpy.cli import main
from disagg_simpy.costs.presets import PRESETS

NAME = "a100-80gb/llama-3-8b/tp1/vidur-sarathi"
ARRANGEMENTS = [{"name": "same-gpu", "kind": "colocated", "gpus": 2},
                {"name": "split-1-1", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 1},
                {"name": "chunked", "kind": "colocated", "gpus": 2, "chunk_tokens": 512}]


def run(tmp_path, capsys, tokens, words, rate=3):
    workload = {"rate_per_s": rate, "measure_s": 6, "prompt_mix": [{"share": 1, "tokens": tokens}],
                "reply_words": words}
    path = tmp_path / "s.yaml"
    path.write_text(scenario_text(workload=workload, cost={"preset": NAME}, arrangements=ARRANGEMENTS))
    out = tmp_path / "out"
    assert main([str(path), "--out", str(out), "--no-plots", "--seeds", "2"]) == 0
    err = [line for line in capsys.readouterr().err.splitlines() if "fitted range" in line]
    return err, json.loads((out / "run.json").read_text()), out


def test_beyond_the_range_warns_once_per_arrangement_saying_how_far(tmp_path, capsys):
    err, info, out = run(tmp_path, capsys, [3000, 9000], [100, 300])
    warnings = info["preset_range_warnings"]
    assert [w.split(":")[0] for w in warnings] == ["same-gpu", "split-1-1", "chunked"]  # once each, over 2 seeds
    assert err == [f"warning: {tmp_path / 's.yaml'}: {w}" for w in warnings]
    it, req = pd.read_csv(out / "iterations.csv"), pd.read_csv(out / "requests.csv")
    covers = PRESETS[NAME]["range"]
    for name, text in zip(["same-gpu", "split-1-1", "chunked"], warnings, strict=True):
        mine = it[it.arrangement == name]
        done = req[(req.arrangement == name) & req.finished_at_s.notna() & (req.n_reply_words >= 2)]
        context = int((done.n_prompt_tokens + done.n_reply_words - 1).max())
        assert f"contexts up to {context:,} tokens a reply, where the preset covers 768-4,096" in text
        prompts = int(mine.n_prompt_tokens_read.max())
        said = f"prompts up to {prompts:,} tokens an iteration, where the preset covers 64-4,096"
        assert (said in text) == (prompts > covers["prompt_tokens"][1]), (name, prompts)
    assert "chunked" in warnings[2] and "prompts up to" not in warnings[2]  # 512-token chunks: within
    assert "its reading GPUs" in warnings[1] and "its writing GPUs" in warnings[1]


def test_within_the_range_says_nothing(tmp_path, capsys):
    err, info, _ = run(tmp_path, capsys, [800, 1200], [20, 60], rate=1)
    assert err == [] and info["preset_range_warnings"] == []


def test_a_run_without_presets_has_no_range_key(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    workload = {"rate_per_s": 2, "measure_s": 3, "prompt_mix": [{"share": 1, "tokens": [9000, 9000]}],
                "reply_words": [5, 10]}
    path.write_text(scenario_text(workload=workload, arrangements=ARRANGEMENTS[:1]))
    assert main([str(path), "--out", str(tmp_path / "o"), "--no-plots"]) == 0
    assert "preset_range_warnings" not in json.loads((tmp_path / "o" / "run.json").read_text())


def test_a_moe_preset_at_light_load_is_within_its_range(tmp_path, capsys):
    """A MoE preset is fitted over every writing batch (E17's `per_expert_ms`, costs/composed.py):
    a light load whose writing batches are below experts / top-k replies (16 for Qwen3-30B-A3B),
    where not every expert is busy, is no longer warned (review2 G9, G13)."""
    moe = "h100-80gb/qwen3-30b-a3b/tp1/vllm-0.24"
    assert PRESETS[moe]["attention_cost"]["per_expert_ms"] > 0 and PRESETS[moe]["range"]["replies"][0] <= 1
    workload = {"rate_per_s": 0.5, "measure_s": 6, "prompt_mix": [{"share": 1, "tokens": [200, 400]}],
                "reply_words": [20, 40]}
    path = tmp_path / "s.yaml"
    path.write_text(scenario_text(workload=workload, cost={"preset": moe}, arrangements=ARRANGEMENTS[:1]))
    out = tmp_path / "out"
    assert main([str(path), "--out", str(out), "--no-plots"]) == 0
    assert json.loads((out / "run.json").read_text())["preset_range_warnings"] == []
    it = pd.read_csv(out / "iterations.csv")
    writing = it[(it.n_replies_written > 0) & (it.n_prompt_tokens_read == 0)]
    assert int(writing.n_replies_written.max()) < 16  # (every writing batch below where all experts are busy)
    assert "warning" not in capsys.readouterr().err
