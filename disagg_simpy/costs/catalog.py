"""What each preset is (GPU, model, TP, source, what is measured and what assumed) and how its
numbers are refitted from the public profiles (`minimax.fit_worst`: the smallest worst error on
whole prompts of 64-4,096 tokens, no other group of iterations worse than least squares leaves
it, or than 10% where that earns a point; E14's fields and E15's token tiles each where they earn
a point). `python -m disagg_simpy.costs.catalog > disagg_simpy/costs/fitted.json` writes
the numbers the package ships; tests/costs/test_presets.py checks that a refit gives
them back to the printed precision.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from . import profiles as P
from .gpus import KINDS
from .minimax import TILES, fit_worst, whole_range_error

GIB = 2**30
VIDUR = "Vidur (microsoft/vidur, MIT): per-op profiles composed into iterations"
DISTSERVE = "DistServe (LLMServe/DistServe, Apache-2.0): its fitted A100-80GB latency model"
DISTSERVE_VLLM = "DistServe (LLMServe/DistServe, Apache-2.0): its fitted A100-80GB latency model of vLLM"
SPLITWISE = "SplitwiseSim (Mutinifni/splitwise-sim, MIT): measured vLLM iterations (perf_model.csv)"


@dataclass(frozen=True)
class Engine:
    """The serving engine whose iterations a preset's source timed: the last part of its name."""

    slug: str  # the name's last part
    label: str
    version: str  # short: the table's column
    note: str  # which build, and how it was timed
    licence: str  # the source's (the engine's measurements, not the engine's own code)


ENGINES = {e.slug: e for e in (
    Engine("vidur-sarathi", "Sarathi-Serve", "vidur branch",
           "microsoft/sarathi-serve's vidur branch (2024), whose operators Vidur profiles one by one (linear "
           "layers, FlashAttention or FlashInfer attention, NCCL collectives, CPU time per iteration)", "MIT"),
    Engine("distserve", "DistServe", "82831f1", "LLMServe/DistServe @ 82831f1 (the OSDI 2024 artifact), its "
           "profiler's fit of its own engine", "Apache-2.0"),
    Engine("vllm-0.2", "vLLM", "0.2.3", "vLLM 0.2.3 with DistServe's minor changes (its distserve-baseline-vllm "
           "branch), DistServe's profiler's fit of it", "Apache-2.0"),
    Engine("vllm-splitwise", "vLLM", "not stated", "vLLM as Splitwise (ISCA 2024) ran it in 2023 on DGX machines; "
           "its version is not stated", "MIT"),
)}


@dataclass(frozen=True)
class Model:
    """What memory needs: parameters (fp16), layers, KV heads and head size."""

    label: str
    params: int
    layers: int
    kv_heads: int
    head_size: int
    embd: int

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_size

    @property
    def kv_bytes_per_token(self) -> int:
        """layers x 2 (K and V) x KV heads x head size x 2 bytes (fp16), over the whole model."""
        return self.layers * 2 * self.kv_heads * self.head_size * 2


MODELS = {  # from each model's public config.json and parameter count
    "llama-2-7b": Model("Llama-2-7B", 6_738_415_616, 32, 32, 128, 4096),
    "llama-3-8b": Model("Llama-3-8B", 8_030_261_248, 32, 8, 128, 4096),
    "codellama-34b": Model("CodeLlama-34B", 33_743_970_304, 48, 8, 128, 8192),
    "opt-13b": Model("OPT-13B", 12_853_473_280, 40, 40, 128, 5120),
    "opt-66b": Model("OPT-66B", 65_707_048_960, 64, 72, 128, 9216),
    "llama-2-70b": Model("Llama-2-70B", 68_976_648_192, 80, 8, 128, 8192),
}
GPU_MEMORY = {k: int(KINDS[k].memory_gib * GIB) for k in ("a100-80gb", "h100-80gb")}  # nominal; the driver ~1% less


@dataclass(frozen=True)
class Memory:
    """How an engine shares out a GPU's memory: `share` of it is the engine's (weights, reserve
    and KV cache), `reserve` of it is kept for activations and collectives; each with its source."""

    share: float
    share_source: str
    reserve: float
    reserve_source: str


MEMORY = {
    "vidur-sarathi": Memory(0.9, "Vidur's memory planner (memory_margin_fraction 0.1)", 0.0,
                            "none beside the 10% margin (Vidur's memory planner)"),
    "distserve": Memory(0.95, "DistServe's serving script and memory profiler (gpu_memory_utilization 0.95)", 0.01,
                        "1% of GPU memory (DistServe's memory profiler, profile_memory.py)"),
    "vllm-0.2": Memory(0.95, "as DistServe's evaluation ran vLLM (--gpu-memory-utilization 0.95; vLLM's default "
                       "is 0.9)", 0.01, "1% of GPU memory, DistServe's rule, which its simulator applies to vLLM "
                       "too (vLLM itself measures activations by a dummy forward pass at start-up)"),
    "vllm-splitwise": Memory(0.9, "vLLM's default gpu_memory_utilization", 0.0,
                             "none stated by the source (vLLM measures activations at start-up): a ceiling"),
}


@dataclass(frozen=True)
class Spec:
    gpu: str  # a100-80gb | h100-80gb
    model: str
    tp: int
    source: str
    measured: str
    assumed: str
    engine: str  # a key of ENGINES

    @property
    def name(self) -> str:
        return f"{self.gpu}/{self.model}/tp{self.tp}/{self.engine}"


_CPU = "CPU time per iteration from Vidur's cpu_overheads.csv"
_DS = "DistServe's fitted prefill and decode latency (not raw timings)"
_DS_VLLM = "DistServe's fitted prefill and decode latency of vLLM (not raw timings)"
_SW = "end-to-end vLLM prompt and token iterations (median of 5)"
_SW_ASSUMED = "token iterations' context taken as prompt + tokens / 2"
#: (model, TP) of DistServe's profiles: both files hold each, DistServe's engine and vLLM 0.2.3
DISTSERVE_CONFIGS = (("opt-13b", 1), ("opt-13b", 2), ("opt-13b", 4), ("opt-66b", 2), ("opt-66b", 3),
                     ("opt-66b", 4), ("opt-66b", 8))
SPECS = (
    Spec("a100-80gb", "llama-2-7b", 1, VIDUR, f"linear ops, decode attention (transcribed rows); {_CPU}",
         "prefill attention from the CodeLlama-34B TP2 grid (same 32 query heads of 128 per GPU), scaled by its "
         "measured ratio to the transcribed Llama-2-7B prefill rows", "vidur-sarathi"),
    Spec("a100-80gb", "llama-3-8b", 1, VIDUR, "linear ops, decode attention (transcribed rows, FlashInfer)",
         "prefill attention from the CodeLlama-34B TP2 grid (same query heads per GPU); CPU time of Llama-2-7B",
         "vidur-sarathi"),
    Spec("a100-80gb", "codellama-34b", 2, VIDUR, f"linear ops, attention (complete grid), all-reduce; {_CPU}", "",
         "vidur-sarathi"),
    Spec("h100-80gb", "llama-2-7b", 1, VIDUR, "linear ops on H100",
         "attention: the A100 preset's, scaled by the measured H100/A100 ratio of the linear ops (1-64 tokens for "
         "decode, 2,048-4,096 for prefill); CPU time of the A100 host", "vidur-sarathi"),
    *(Spec("a100-80gb", model, tp, source, measured, "", engine)
      for model, tp in DISTSERVE_CONFIGS
      for engine, source, measured in (("distserve", DISTSERVE, _DS), ("vllm-0.2", DISTSERVE_VLLM, _DS_VLLM))),
    Spec("a100-80gb", "llama-2-70b", 4, SPLITWISE, _SW, _SW_ASSUMED, "vllm-splitwise"),
    Spec("h100-80gb", "llama-2-70b", 4, SPLITWISE, _SW, _SW_ASSUMED, "vllm-splitwise"),
)
_HF = {"llama-2-7b": "meta-llama/Llama-2-7b-hf", "llama-3-8b": "meta-llama/Meta-Llama-3-8B",
       "codellama-34b": "codellama/CodeLlama-34b-Instruct-hf"}


def iterations(spec: Spec, root: Path) -> pd.DataFrame:
    """The measured (or composed) iterations a preset is fitted to."""
    m = MODELS[spec.model]
    if spec.source in (DISTSERVE, DISTSERVE_VLLM):
        return P.distserve_iterations(root, f"facebook/{spec.model}", spec.tp, engine=spec.engine)
    if spec.source == SPLITWISE:
        return P.splitwise_iterations(root, "llama2-70b", spec.gpu, spec.tp)
    gpu = spec.gpu.split("-")[0]
    ops = P.VidurOps(root, gpu, _HF[spec.model], spec.tp, m.layers, m.embd)
    dec_grid, pre = P.vidur_attention_codellama(root)
    if spec.model == "codellama-34b":
        dec = dec_grid[dec_grid.kv.isin((32, 256, 512, 1024, 2048, 3072, 4032))]
        return P.vidur_iterations(ops, P.cpu_overhead(root, _HF[spec.model], 2), dec, pre)
    cpu = P.cpu_overhead(root, _HF["llama-2-7b"], 1)
    name = "llama3_8b_a100_tp1_attn_decode_sample.csv" if spec.model == "llama-3-8b" else \
        "llama2_7b_a100_tp1_attn_decode_sample.csv"
    dec = P.transcribed_decode(root, name)
    if spec.model == "llama-3-8b":
        return P.vidur_iterations(ops, cpu, dec, pre)
    pre_scale = llama2_prefill_ratio(root, pre)
    if gpu == "a100":
        return P.vidur_iterations(ops, cpu, dec, pre, pre_scale=pre_scale)
    a100 = P.VidurOps(root, "a100", _HF[spec.model], 1, m.layers, m.embd)
    return P.vidur_iterations(ops, cpu, dec, pre, dec_scale=P.scale_between(a100, ops, small=True),
                              pre_scale=pre_scale * P.scale_between(a100, ops, small=False))


def llama2_prefill_ratio(root: Path, pre: pd.DataFrame) -> float:
    """Median ratio of the transcribed Llama-2-7B prefill attention to the grid's at the same points."""
    t = pd.read_csv(root / "transcribed/llama2_7b_a100_tp1_attn_prefill_sample.csv")
    both = t.merge(pre, left_on=["prefill_chunk_size", "kv_cache_size"], right_on=["chunk", "kv"])
    return float((both.attn_prefill_median_ms / both.ms).median())


def kv_memory(spec: Spec) -> dict:
    """The KV cache one instance holds, each term per GPU: the GPU's memory x the engine's share,
    less the weights (fp16 parameters / TP) and the reserve for activations and collectives, over a
    token's KV bytes (layers x 2 x KV heads x head size x 2 bytes / TP)."""
    m, mem, gpu = MODELS[spec.model], MEMORY[spec.engine], GPU_MEMORY[spec.gpu]
    weights, reserve = 2 * m.params / spec.tp, mem.reserve * gpu
    per_token = m.kv_bytes_per_token / spec.tp
    kv = mem.share * gpu - weights - reserve
    return {"gpu_memory_gib": gpu / GIB, "memory_share": mem.share, "share_source": mem.share_source,
            "weights_gib_per_gpu": round(weights / GIB, 3), "reserve_gib_per_gpu": round(reserve / GIB, 3),
            "reserve_source": mem.reserve_source, "kv_gib_per_gpu": round(kv / GIB, 3),
            "kv_bytes_per_token_per_gpu": per_token, "kv_capacity_tokens": int(kv // per_token)}


def stated_capacity(spec: Spec, root: Path) -> dict | None:
    """The KV capacity the source states for this model and TP, where it states one: DistServe's
    max_num_tokens.csv (its simulator's, for both engines; pipeline degree 1)."""
    if spec.source not in (DISTSERVE, DISTSERVE_VLLM):
        return None
    t = pd.read_csv(root / "raw/distserve/max_num_tokens.csv")
    row = t[(t.model == f"facebook/{spec.model}") & (t.tp == spec.tp) & (t.pp == 1)]
    if row.empty:
        return None
    return {"tokens": int(row.max_num_tokens.iloc[0]), "source": "DistServe's max_num_tokens.csv (its simulator's "
            "capacity for both engines: 0.95 of the GPU memory torch reports, less 1% and its weights formula)"}


def kv_ship(spec: Spec, root: Path) -> dict[str, float]:
    """ms per token of KV shipped between instances: each GPU ships its share over its own link
    (Vidur's measured send/recv, NVLink within a node, the network between nodes)."""
    machine = "h100_dgx" if spec.gpu.startswith("h100") else "a100_dgx"
    share = MODELS[spec.model].kv_bytes_per_token / spec.tp
    return {path: float(f"{P.ship_ms_per_byte(root, machine, path == 'intra_node') * share:.4g}")
            for path in ("intra_node", "inter_node")}


def refit(spec: Spec, root: Path, tiles: tuple[int, ...] = TILES) -> dict:
    """One preset's shipped facts, fitted afresh from the public files (E15's tile size chosen from
    `tiles`, each a refit: the test passes the shipped one alone)."""
    t = iterations(spec, root)
    plain, attention = fit_worst(t), fit_worst(t, attention=True, unsaturated=True, tiles=tiles)
    m, engine, memory = MODELS[spec.model], ENGINES[spec.engine], kv_memory(spec)
    return {
        "gpu": spec.gpu.upper(), "model": m.label, "tp": spec.tp, "dtype": "fp16",
        "engine": engine.label, "engine_version": engine.version, "engine_note": engine.note,
        "source": spec.source, "licence": engine.licence, "measured": spec.measured, "assumed": spec.assumed,
        "cost": plain.coefficients, "errors_pct": plain.errors_pct,
        "attention_cost": attention.coefficients, "attention_errors_pct": attention.errors_pct,
        "attention_whole_64_4096_pct": whole_range_error(t, attention.fitted),
        "rows": plain.rows, "range": plain.ranges,
        "kv_capacity_tokens": memory["kv_capacity_tokens"], "memory_utilisation": memory["memory_share"],
        "kv_memory": memory, "kv_capacity_stated": stated_capacity(spec, root),
        "kv_ship_ms_per_token": kv_ship(spec, root),
    }


def refit_all(root: Path) -> dict[str, dict]:
    return {spec.name: refit(spec, root) for spec in SPECS}


if __name__ == "__main__":
    folder = P.profiles_folder()
    if folder is None:
        raise SystemExit(f"no public profiles: set ${P.ENV_FOLDER}")
    print(json.dumps(refit_all(folder), indent=1))
