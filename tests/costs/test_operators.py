"""The composition of an iteration from per-operator tables (costs/operators.py): against sums
computed by hand on small made-up tables, interpolation at and between measured points, and
every bad model config, GPU, engine or TP refused in one line."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from disagg_simpy.costs import hf_config as H
from disagg_simpy.costs import operators as O
from disagg_simpy.costs.instance_memory import kv_capacity_tokens
from disagg_simpy.errors import InputError

GIB = 2**30
# the small model: 2 layers, hidden 64, 4 query heads and 2 KV heads of 16, FFN 128, vocabulary 256
SMALL = {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
         "head_dim": 16, "intermediate_size": 128, "vocab_size": 256, "torch_dtype": "bfloat16"}
MOE = {**SMALL, "num_local_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32}


def gemm_ms(m, n, k):  # linear in each of m, n, k: interpolation between points is exact
    return 0.001 * m + n / 1e4 + k / 1e5


def ctx_ms(b, isl):
    return 0.01 * b * isl


def gen_ms(b, ctx):
    return 0.001 * b + 1e-5 * b * ctx


def ar_ms(size):
    return 0.002 + 1e-7 * size


def moe_ms(tokens):
    return 0.01 + 0.001 * tokens


@pytest.fixture
def folder(tmp_path):
    """AIConfigurator's layout with made-up tables for one GPU (h100_sxm) and engine (vLLM 0.24)."""
    spec = {"gpu": {"mem_bw": 1e12, "mem_bw_empirical_scaling_factor": 0.5, "mem_empirical_constant_latency": 1e-6,
                    "mem_capacity": 80 * GIB},
            "node": {"intra_node_bw": 4e11, "inter_node_bw": 5e10}, "misc": {"nccl_mem": {1: 0, 2: GIB}}}
    (tmp_path / "systems").mkdir()
    (tmp_path / "systems" / "h100_sxm.yaml").write_text(yaml.safe_dump(spec))
    root = tmp_path / "systems" / "data" / "h100_sxm"

    def put(op: str, table: str, rows: list[dict], framework: str = "vllm") -> None:
        d = root / op / framework / "0.24.0"
        d.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(rows).to_parquet(d / f"{table}.parquet")

    put("gemm", "gemm_perf", [{"kernel_source": "torch.nn.functional.linear", "gemm_dtype": "bfloat16", "m": m, "n": n,
                               "k": k, "latency": gemm_ms(m, n, k)}
                              for m in (1, 64, 128) for n in (32, 64, 128, 256) for k in (32, 64, 128)]
        + [{"kernel_source": "cutlass", "gemm_dtype": "fp8", "m": m, "n": n, "k": k, "latency": gemm_ms(m, n, k) / 2}
           for m in (1, 64, 128) for n in (32, 64, 128, 256) for k in (32, 64, 128)]
        + [{"kernel_source": "deepgemm", "gemm_dtype": "fp8_block", "m": m, "n": n, "k": k, "latency": 99.0}
           for m in (1, 64, 128) for n in (32, 64, 128, 256) for k in (32, 64, 128)])
    base = {"attn_dtype": "bfloat16", "kv_cache_dtype": "bfloat16", "window_size": 0, "kernel_source": "fa3"}
    shapes = ((4, 2), (2, 1))  # (query heads, KV heads) per GPU at TP1 and TP2
    put("attention", "context_attention_perf",
        [{**base, "batch_size": b, "isl": s, "step": 0, "num_heads": h, "num_key_value_heads": kv, "head_dim": 16,
          "latency": ctx_ms(b, s)} for b in (1, 2) for s in (16, 64, 256) for h, kv in shapes])
    put("attention", "generation_attention_perf",
        [{**base, "batch_size": b, "isl": 1, "step": c - 1, "num_heads": h, "num_key_value_heads": kv, "head_dim": 16,
          "latency": gen_ms(b, c)} for b in (1, 4) for c in (16, 64, 256) for h, kv in shapes])
    put("comm", "custom_allreduce_perf",
        [{"kernel_source": f"vLLM_custom_{kind}", "num_gpus": 2, "message_size": s,
          "latency": ar_ms(s) if kind == "graph" else 50.0} for s in (128, 1024, 65536) for kind in ("graph", "eager")])
    put("moe", "moe_perf", [{"kernel_source": "triton", "moe_dtype": "bfloat16", "num_tokens": t, "hidden_size": 64,
                             "inter_size": 32, "topk": 2, "num_experts": 4, "moe_tp_size": tp, "moe_ep_size": 1,
                             "distribution": "balanced", "latency": moe_ms(t)} for t in (1, 64, 256) for tp in (1, 2)]
        + [{"kernel_source": "triton", "moe_dtype": "fp8_block", "num_tokens": t, "hidden_size": 64, "inter_size": 32,
            "topk": 2, "num_experts": 4, "moe_tp_size": 1, "moe_ep_size": ep, "distribution": "balanced",
            "latency": moe_ms(t) / (3 * ep)} for t in (1, 64, 256) for ep in (1, 2)])
    O.tables.cache_clear()
    return tmp_path


def mem(nbytes):  # the memory-bound ops: bytes / (1e12 x 0.5) in ms, + 1 us
    return 1e3 * nbytes / 5e11 + 1e-3


def test_a_dense_iteration_is_the_sum_computed_by_hand(folder):
    """4 replies of 64 tokens of context + one 60-token chunk after 100 earlier tokens, TP1:
    N = 64 tokens, 2 layers."""
    t = O.tables(folder, "h100-80gb", "vllm-0.24")
    m = H.model_config(SMALL)
    n = 64
    layer = (gemm_ms(n, 128, 64)  # qkv: (4 + 2 x 2) x 16 = 128 wide
             + gemm_ms(n, 64, 64)  # output projection
             + gemm_ms(n, 256, 64) + gemm_ms(n, 64, 128)  # gate + up, down
             + ctx_ms(1, 160) * (160**2 - 100**2) / 160**2  # the chunk's share of a 160-token prompt
             + gen_ms(4, 64)
             + 2 * mem(n * 4 * 64 * 2) + mem(n * 2 * 6 * 16 * 2) + mem(n * 2 * 2 * 16 * 2) + mem(n * 3 * 128 * 2))
    host = O.HOST_MS + O.HOST_MS_PER_SEQUENCE * 5
    want = 2 * layer + mem(n * 2 * 64 * 2) + gemm_ms(5, 256, 64) + host
    got = O.iteration_ms(t, m, 1, replies=4, context=64, prompts=1, chunk=60, earlier=100)
    assert got == pytest.approx(want, rel=1e-12)


def test_tp2_halves_the_shapes_and_adds_two_all_reduces_a_layer(folder):
    """4 replies of 128 tokens of context at TP2: 2 query heads and 1 KV head per GPU."""
    t = O.tables(folder, "h100-80gb", "vllm-0.24")
    m = H.model_config(SMALL)
    n = 4
    layer = (gemm_ms(n, 64, 64) + gemm_ms(n, 64, 32)  # qkv (2 + 2 x 1) x 16 wide; output from 2 x 16
             + gemm_ms(n, 128, 64) + gemm_ms(n, 64, 64)  # gate + up of 64 each, down from 64
             + gen_ms(4, 128) + 2 * ar_ms(n * 64 * 2)
             + 2 * mem(n * 4 * 64 * 2) + mem(n * 2 * 3 * 16 * 2) + mem(n * 2 * 1 * 16 * 2) + mem(n * 3 * 64 * 2))
    want = 2 * layer + mem(n * 2 * 64 * 2) + gemm_ms(4, 128, 64) + O.HOST_MS + O.HOST_MS_PER_SEQUENCE * 4
    assert O.iteration_ms(t, m, 2, replies=4, context=128) == pytest.approx(want, rel=1e-12)


def test_a_moe_layer_takes_the_moe_table_and_a_router(folder):
    t = O.tables(folder, "h100-80gb", "vllm-0.24")
    m = H.model_config(MOE)
    parts = O.iteration_parts(t, m, 1, replies=4, context=64)
    assert parts["MoE"] == pytest.approx(2 * (moe_ms(4) + gemm_ms(4, 32, 64)), rel=1e-12)  # 4 experts: n at 32
    dense = O.iteration_parts(t, H.model_config(SMALL), 1, replies=4, context=64)
    assert parts["matrix products"] < dense["matrix products"]  # no dense FFN in MoE layers


FP8 = {"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}


def test_fp8_weights_take_the_fp8_rows_and_half_the_weight_bytes(folder):
    """A block-scaled fp8 checkpoint: its matrix products from the per-tensor fp8 rows (the block
    rows' fixed time is a measurement artifact: operators.GEMM_ROWS), its MoE layers from the
    fp8_block rows, its weights one byte each; a bf16 config is unchanged."""
    t = O.tables(folder, "h100-80gb", "vllm-0.24")
    bf16, fp8 = H.model_config(SMALL), H.model_config({**SMALL, **FP8})
    assert (bf16.quant, fp8.quant) == ("bfloat16", "fp8_block")
    assert H.model_config({**SMALL, "quantization_config": {"quant_method": "fp8"}}).quant == "fp8"
    assert fp8.weight_bytes == 1 and bf16.weight_bytes == 2
    a = O.iteration_parts(t, bf16, 1, replies=4, context=64)
    b = O.iteration_parts(t, fp8, 1, replies=4, context=64)
    assert b["matrix products"] == pytest.approx(a["matrix products"] / 2, rel=1e-12)
    assert kv_capacity_tokens(t, fp8, 1)[1]["weights_gib"] == pytest.approx(
        kv_capacity_tokens(t, bf16, 1)[1]["weights_gib"] / 2, rel=1e-12)
    moe = H.model_config({**MOE, **FP8})
    assert O.iteration_parts(t, moe, 1, replies=4, context=64)["MoE"] == pytest.approx(
        2 * (moe_ms(4) / 3 + gemm_ms(4, 32, 64)), rel=1e-12)  # the router stays bf16


def test_expert_parallel_takes_the_ep_rows_and_is_checked(folder):
    t = O.tables(folder, "h100-80gb", "vllm-0.24")
    moe = H.model_config({**MOE, **FP8})
    assert O.iteration_parts(t, moe, 2, replies=4, context=64, ep=2)["MoE"] == pytest.approx(
        2 * (moe_ms(4) / 6 + gemm_ms(4, 32, 64)), rel=1e-12)  # each expert whole (TP 2 / EP 2), on half the GPUs
    with pytest.raises(InputError, match="--ep 2: the model has no MoE layers"):
        O.check_ep(H.model_config(SMALL), 2, 2)
    with pytest.raises(InputError, match="--ep: got 4, expected a divisor of --tp 2 and of the 4 experts"):
        O.check_ep(moe, 2, 4)


def test_interpolation_at_and_between_measured_points(folder):
    t = O.tables(folder, "h100-80gb", "vllm-0.24")
    assert t.gemm(64, 128, 64) == pytest.approx(gemm_ms(64, 128, 64), rel=1e-12)  # at a point
    assert t.gemm(100, 96, 100) == pytest.approx(gemm_ms(100, 96, 100), rel=1e-12)  # between, in m, n and k
    assert t.gemm(10, 512, 64) == pytest.approx(2 * gemm_ms(10, 256, 64), rel=1e-12)  # wider: in proportion
    assert t.gemm(10, 8, 64) == pytest.approx(gemm_ms(10, 32, 64), rel=1e-12)  # narrower: the narrowest
    assert t.decode_attention(4, 64, 4, 2, 16) == pytest.approx(gen_ms(4, 64), rel=1e-12)
    assert t.decode_attention(2, 40, 4, 2, 16) == pytest.approx(  # between batches 1 and 4, contexts 16 and 64
        (2 / 3) * gen_ms(1, 40) + (1 / 3) * gen_ms(4, 40), rel=1e-12)
    assert t.prefill_attention(1, 256, 0, 4, 2, 16) == pytest.approx(ctx_ms(1, 256), rel=1e-12)
    assert t.prefill_attention(1, 64, 64, 4, 2, 16) == pytest.approx(ctx_ms(1, 128) * 0.75, rel=1e-12)
    assert t.allreduce(600, 2) == pytest.approx(ar_ms(600), rel=1e-12)  # graph rows only, not eager
    assert t.allreduce(10, 2) == pytest.approx(ar_ms(128), rel=1e-12)  # below the smallest message
    assert t.moe(32, 64, 32, 2, 4, 1) == pytest.approx(moe_ms(32), rel=1e-12)
    assert t.memory_op(5e8) == pytest.approx(1.001, rel=1e-12)


def test_outside_a_table_is_refused_naming_it(folder):
    t = O.tables(folder, "h100-80gb", "vllm-0.24")
    with pytest.raises(O.OutOfRange, match=r"decode attention \(batch 4\): tokens: 512 is outside the measured 16-256"):
        t.decode_attention(4, 512, 4, 2, 16)
    with pytest.raises(O.OutOfRange, match="matrix product of n=64, k=64: tokens m: 129 is outside the measured 1-128"):
        t.gemm(129, 64, 64)
    with pytest.raises(InputError, match="k=4096 is outside the measured 32-128"):
        t.gemm(1, 64, 4096)
    with pytest.raises(InputError, match="prefill attention of 8 query heads, 8 KV heads of 128 per GPU: not in"):
        t.prefill_attention(1, 64, 0, 8, 8, 128)
    with pytest.raises(InputError, match="MoE layer of hidden 64, expert size 32, top-2 of 4 experts at TP4: not in"):
        t.moe(1, 64, 32, 2, 4, 4)
    with pytest.raises(InputError, match="all-reduce over 4 GPUs: not measured"):
        t.allreduce(1024, 4)


@pytest.mark.parametrize(("change", "message"), [
    ({"num_hidden_layers": 0}, "'num_hidden_layers': got 0, expected a whole number >= 1"),
    ({"hidden_size": None}, "'hidden_size': got None, expected a whole number >= 1"),
    ({"num_attention_heads": "32"}, "'num_attention_heads': got '32', expected a whole number >= 1"),
    ({"num_key_value_heads": 3}, "'num_attention_heads' 4 is not a multiple of 'num_key_value_heads' 3"),
    ({"torch_dtype": "float32"}, "'torch_dtype': got 'float32', expected one of bfloat16, float16"),
    ({"kv_lora_rank": 512}, "'kv_lora_rank': multi-head latent attention"),
    ({"sliding_window": 4096}, "'sliding_window': sliding-window attention is not composed"),
    ({"n_shared_experts": 1}, "'n_shared_experts': shared experts are not composed from the tables"),
    ({"kv_lora_rank": 512}, "multi-head latent attention \\(DeepSeek-style\\) is not composed"),
    ({"quantization_config": {"quant_method": "awq"}}, "'quantization_config': quant_method 'awq' is not composed"),
    ({"quantization_config": "fp8"}, "'quantization_config': quant_method None is not composed"),
    ({"num_local_experts": 4, "num_experts_per_tok": 8}, "'num_experts_per_tok' 8 exceeds the 4 experts"),
    ({"num_local_experts": 4}, "'num_experts_per_tok': got missing, expected a whole number >= 1"),
])
def test_a_bad_model_config_is_refused_in_one_line(change, message):
    raw = {k: v for k, v in {**SMALL, **change}.items()}
    with pytest.raises(InputError, match=message) as e:
        H.model_config(raw, "cfg.json")
    assert str(e.value).startswith("cfg.json: ") and "\n" not in str(e.value)


def test_a_missing_key_is_named():
    raw = {k: v for k, v in SMALL.items() if k != "vocab_size"}
    with pytest.raises(InputError, match="cfg.json: 'vocab_size': got missing"):
        H.model_config(raw, "cfg.json")


def test_a_config_file_that_is_not_json_or_not_there_is_refused(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    with pytest.raises(InputError, match="config.json: not a JSON file"):
        H.read_model_config(bad)
    with pytest.raises(InputError, match="no such file"):
        H.read_model_config(tmp_path / "absent.json")
    bad.write_text(json.dumps([1, 2]))
    with pytest.raises(InputError, match="expected a JSON object"):
        H.read_model_config(bad)


@pytest.mark.parametrize(("tp", "message"), [
    (3, "--tp: got 3, expected one of 1, 2, 4, 8"),
    (16, "--tp: got 16, expected one of 1, 2, 4, 8"),
    (8, "--tp 8: the model's 4 attention heads do not split over 8 GPUs"),
    (True, "--tp: got True"),
])
def test_a_bad_tp_is_refused_in_one_line(tp, message):
    with pytest.raises(InputError, match=message):
        O.check_tp(H.model_config(SMALL), tp)


def test_a_bad_gpu_or_engine_is_refused_in_one_line(folder):
    with pytest.raises(InputError, match="--gpu: got 'h100', expected one of a100-80gb, h100-80gb"):
        O.Tables(folder, "h100", "vllm-0.24")
    with pytest.raises(InputError, match="--engine: got 'vllm', expected one of vllm-0.14, vllm-0.24"):
        O.Tables(folder, "h100-80gb", "vllm")
    with pytest.raises(InputError, match="--engine sglang-0.5.14 on --gpu h100-80gb: AIConfigurator has no gemm table.*"
                                         "the pairs measured: h100-80gb/vllm-0.24$"):
        O.Tables(folder, "h100-80gb", "sglang-0.5.14")
    with pytest.raises(InputError, match="--engine vllm-0.24 on --gpu a100-80gb"):
        O.Tables(folder, "a100-80gb", "vllm-0.24")


def test_kv_bytes_and_capacity_from_the_config(folder):
    """Bytes a token: layers x 2 x KV heads x head size x 2 bytes / TP; capacity: the GPU's memory
    x vLLM 0.24's 0.92 - the weights / TP - the collectives' buffer, over those bytes."""
    t = O.tables(folder, "h100-80gb", "vllm-0.24")
    m = H.model_config(SMALL)
    assert m.kv_bytes_per_token(1) == 2 * 2 * 2 * 16 * 2
    assert m.kv_bytes_per_token(2) == 2 * 2 * 1 * 16 * 2
    assert m.kv_bytes_per_token(4) == 2 * 2 * 1 * 16 * 2  # 2 KV heads over 4 GPUs: one replicated on each
    params = 2 * (64 * 8 * 16 + 4 * 16 * 64 + 2 * 64 + 3 * 64 * 128) + 2 * 256 * 64 + 64
    assert m.parameters() == params
    tokens, terms = kv_capacity_tokens(t, m, 2)
    assert terms["engine_share"] == 0.92
    assert tokens == int((80 * GIB * 0.92 - params * 2 / 2 - GIB) // 128)


def test_llama_3_1_8b_from_its_config_matches_its_published_shape():
    """Llama-3.1-8B's config: 8.03 billion parameters (its model card), 128 KiB of KV a token."""
    raw = {"num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
           "intermediate_size": 14336, "vocab_size": 128256, "torch_dtype": "bfloat16"}
    m = H.model_config(raw)
    assert m.head_dim == 128 and m.kv_bytes_per_token(1) == 131072
    assert m.parameters() == 8_030_261_248


QWEN3_0_6B = {"num_hidden_layers": 28, "hidden_size": 1024, "num_attention_heads": 16, "num_key_value_heads": 8,
              "head_dim": 128, "intermediate_size": 3072, "vocab_size": 151936, "torch_dtype": "bfloat16",
              "tie_word_embeddings": True}


def test_tied_embeddings_are_one_matrix_in_the_weights():
    """Qwen3-0.6B ties its LM head to its embedding: 0.596 billion weights (its model card's 0.6B,
    0.44B without the embedding), not 0.752 with the matrix counted twice (review F9); a VLM's
    text_config inherits the outer tie_word_embeddings, and an untied config counts both."""
    tied = H.model_config(QWEN3_0_6B)
    assert tied.tied and tied.parameters() == 596_042_752
    untied = H.model_config({**QWEN3_0_6B, "tie_word_embeddings": False})
    assert untied.parameters() - tied.parameters() == 151936 * 1024
    inner = {k: v for k, v in QWEN3_0_6B.items() if k != "tie_word_embeddings"}
    assert H.model_config({"text_config": inner, "tie_word_embeddings": True}).parameters() == 596_042_752
