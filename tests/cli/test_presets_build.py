"""`presets build`: a paste-ready cost block for any Hugging Face config (composed from
AIConfigurator's tables, found through $DISAGG_SIMPY_AICONFIGURATOR), and every bad model config,
GPU, engine or TP refused with exit code 2 in one line (those need no tables)."""

from __future__ import annotations

import json

import pytest
import yaml
from helpers import scenario_text

from disagg_simpy import load_scenario
from disagg_simpy.cli import main
from disagg_simpy.costs import operators as O

TABLES = pytest.mark.aiconfigurator
QWEN3_8B = {"architectures": ["Qwen3ForCausalLM"], "head_dim": 128, "hidden_size": 4096, "intermediate_size": 12288,
            "num_attention_heads": 32, "num_hidden_layers": 36, "num_key_value_heads": 8, "torch_dtype": "bfloat16",
            "vocab_size": 151936}


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "qwen3-8b" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(QWEN3_8B))
    return path


def refused(capsys, argv) -> str:
    assert main(["presets", "build", *argv]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("error: "), err
    return err


@TABLES
def test_the_block_pastes_into_a_scenario_and_runs_with_the_composed_fields(config, capsys, tmp_path):
    assert main(["presets", "build", "--model-config", str(config), "--gpu", "h100-80gb", "--engine", "vllm-0.24",
                 "--tp", "2"]) == 0
    out = capsys.readouterr().out
    assert "qwen3-8b" in out and "vLLM 0.24.0" in out and "Apache-2.0" in out and "# kv_capacity_tokens: " in out
    cost = yaml.safe_load(out)["cost"]
    capacity = int(out.split("# kv_capacity_tokens: ")[1].split()[0])
    workload = {"rate_per_s": 2, "measure_s": 3, "prompt_mix": [{"share": 1, "tokens": [100, 1500]}],
                "reply_words": [5, 60]}
    path = tmp_path / "s.yaml"
    path.write_text(scenario_text(workload=workload, cost=cost, arrangements=[
        {"name": "same", "kind": "colocated", "gpus": 1, "kv_capacity_tokens": capacity}]))
    s = load_scenario(path)
    assert s.cost.iteration_ms == cost["iteration_ms"] and s.cost.per_reply_ms == cost["per_reply_ms"]
    assert main(["presets", "build", "--model-config", str(config), "--gpu", "h100-80gb", "--engine", "vllm-0.24",
                 "--tp", "2", "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert facts["attention_cost"]["iteration_ms"] == cost["iteration_ms"] and facts["kv_capacity_tokens"] == capacity


@TABLES
@pytest.mark.parametrize(("change", "argv", "message"), [
    ({"num_attention_heads": 128, "head_dim": 128}, ["--tp", "1"],
     "decode attention of 128 query heads, 8 KV heads of 128 per GPU: not in AIConfigurator's h100-80gb vllm-0.24"),
    ({"num_hidden_layers": 400}, ["--tp", "1"], "give a larger --tp"),
])
def test_a_shape_the_tables_do_not_hold_is_refused_naming_it(config, capsys, change, argv, message):
    config.write_text(json.dumps({**QWEN3_8B, **change}))
    err = refused(capsys, ["--model-config", str(config), "--gpu", "h100-80gb", "--engine", "vllm-0.24", *argv])
    assert message in err


def test_an_engine_the_gpu_was_not_measured_with_is_refused_naming_the_pairs(config, capsys):
    err = refused(capsys, ["--model-config", str(config), "--gpu", "a100-80gb", "--engine", "vllm-0.24", "--tp", "1"])
    assert "--engine: got 'vllm-0.24', but the tables hold vllm-0.14, sglang-0.5.10 for --gpu a100-80gb" in err


@TABLES
def test_an_engines_short_name_means_what_the_listing_means_by_it(config, capsys):
    """One dialect: `presets --engine vllm` lists the presets whose engine starts with vllm, and
    `presets build --engine vllm` takes the vLLM version the tables hold for the GPU."""
    blocks = []
    for engine in ("vllm", "vllm-0.24"):
        assert main(["presets", "build", "--model-config", str(config), "--gpu", "h100-80gb", "--engine", engine,
                     "--tp", "1"]) == 0
        blocks.append(capsys.readouterr().out)
    assert blocks[0] == blocks[1] and "vLLM 0.24.0" in blocks[0]
    assert main(["presets", "--engine", "vllm", "--gpu", "h100-80gb", "--model", "qwen3-8b", "--tp", "1"]) == 0
    assert "h100-80gb/qwen3-8b/tp1/vllm-0.24" in capsys.readouterr().out


@pytest.mark.parametrize(("argv", "message"), [
    (["--gpu", "h100", "--engine", "vllm-0.24", "--tp", "1"], "--gpu: got 'h100', expected one of a100-80gb, h100-80gb"),
    (["--gpu", "h100-80gb", "--engine", "trt", "--tp", "1"],
     "--engine: got 'trt', expected one of vllm-0.24, sglang-0.5.14 (or its start: vllm, sglang) for --gpu h100-80gb"),
    (["--gpu", "h100-80gb", "--engine", "vllm-0.24", "--tp", "3"], "--tp: got 3, expected one of 1, 2, 4, 8"),
    (["--gpu", "h100-80gb", "--engine", "vllm-0.24", "--tp", "64"], "--tp: got 64"),
])
def test_a_bad_gpu_engine_or_tp_is_refused_in_one_line(config, capsys, argv, message):
    assert message in refused(capsys, ["--model-config", str(config), *argv])


@pytest.mark.parametrize(("content", "message"), [
    ("{", "not a JSON file"),
    (json.dumps({**QWEN3_8B, "kv_lora_rank": 512}), "'kv_lora_rank': multi-head latent attention"),
    (json.dumps({**QWEN3_8B, "torch_dtype": "float8"}), "'torch_dtype': got 'float8'"),
    (json.dumps({k: v for k, v in QWEN3_8B.items() if k != "num_hidden_layers"}), "'num_hidden_layers': got missing"),
    # a vision-language config: its vision_config sits beside the text_config it was replaced by (review F31)
    (json.dumps({"model_type": "qwen3_vl", "text_config": QWEN3_8B, "vision_config": {"depth": 27, "hidden_size": 1152}}),
     "'vision_config': a vision encoder is not composed from the tables"),
])
def test_a_bad_model_config_is_refused_in_one_line(config, capsys, content, message):
    config.write_text(content)
    err = refused(capsys, ["--model-config", str(config), "--gpu", "h100-80gb", "--engine", "vllm-0.24", "--tp", "1"])
    assert message in err and str(config) in err


def test_without_the_tables_build_says_how_to_get_them(config, capsys, monkeypatch):
    monkeypatch.setattr(O, "data_folder", lambda: None)
    err = refused(capsys, ["--model-config", str(config), "--gpu", "h100-80gb", "--engine", "vllm-0.24", "--tp", "1"])
    assert "set $DISAGG_SIMPY_AICONFIGURATOR" in err and "git clone https://github.com/ai-dynamo/aiconfigurator" in err
