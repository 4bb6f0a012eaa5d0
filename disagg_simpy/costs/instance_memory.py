"""KV memory of one composed instance: the engine's default share of GPU memory (vLLM's
`gpu_memory_utilization`, SGLang's `mem_fraction_static`), less the weights and the collectives'
buffers, in tokens of KV cache (costs/composed.py states each term in every preset)."""

from __future__ import annotations

from .hf_config import ModelConfig
from .operators import ENGINES, Tables


def memory_share(engine: str, mem_capacity: int, tp: int) -> float:
    """The share of GPU memory the engine takes for weights and KV cache by default: vLLM's
    `gpu_memory_utilization` (0.9 to v0.21, 0.92 from v0.22: vllm/config/cache.py, as
    AIConfigurator's vllm_backend.py cites it); SGLang's `mem_fraction_static`, derived at start
    from the GPU's memory (server_args.py: 512 MB + 1.5 MB x the prefill chunk + TP/8 GiB + 2 MB
    x the largest CUDA-graph batch, at least 10 GiB on GPUs over 60 GB)."""
    framework, version = ENGINES[engine]
    if framework == "vllm":
        minor = int(version.split(".")[1])
        return 0.92 if minor >= 22 else 0.9
    mb = mem_capacity / 2**20
    chunk, graph = (8192, 256 if tp < 4 else 512) if mb < 160 * 1024 else (16384, 512)
    reserved = max(512 + 1.5 * chunk + tp / 8 * 1024 + 2 * graph, 10 * 1024)
    return round((mb - reserved) / mb, 3)


def kv_capacity_tokens(t: Tables, model: ModelConfig, tp: int) -> tuple[int, dict[str, float]]:
    """Tokens of KV cache one instance holds, and each term in GiB per GPU: the GPU's memory x
    the engine's share - the weights / TP - the collectives' buffers (AIConfigurator's
    `nccl_mem`), over a token's KV bytes per GPU. Activations are left out (the engine profiles
    them at start), so it is a ceiling."""
    gib = 2**30
    share = memory_share(t.engine, t.mem_capacity, tp)
    weights = model.parameters() * model.weight_bytes / tp
    nccl = t.nccl_mem.get(tp, 0)
    free = t.mem_capacity * share - weights - nccl
    terms = {"gpu_memory_gib": t.mem_capacity / gib, "engine_share": share, "weights_gib": weights / gib,
             "collectives_gib": nccl / gib, "kv_bytes_per_token_per_gpu": model.kv_bytes_per_token(tp)}
    return max(int(free // model.kv_bytes_per_token(tp)), 0), terms

