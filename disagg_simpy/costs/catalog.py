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
from .minimax import TILES, fit_worst, whole_range_error

GIB = 2**30
MEMORY_UTILISATION = 0.9  # vLLM's default gpu_memory_utilization
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
    """What memory needs: parameters (fp16), layers, KV heads x head size."""

    label: str
    params: int
    layers: int
    kv_dim: int  # KV heads x head dimension
    embd: int

    @property
    def kv_bytes_per_token(self) -> int:
        return 2 * self.layers * self.kv_dim * 2  # K and V, fp16


MODELS = {  # from each model's public config.json and parameter count
    "llama-2-7b": Model("Llama-2-7B", 6_738_415_616, 32, 32 * 128, 4096),
    "llama-3-8b": Model("Llama-3-8B", 8_030_261_248, 32, 8 * 128, 4096),
    "codellama-34b": Model("CodeLlama-34B", 33_743_970_304, 48, 8 * 128, 8192),
    "opt-13b": Model("OPT-13B", 12_853_473_280, 40, 5120, 5120),
    "opt-66b": Model("OPT-66B", 65_707_048_960, 64, 9216, 9216),
    "llama-2-70b": Model("Llama-2-70B", 68_976_648_192, 80, 8 * 128, 8192),
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


def kv_capacity_tokens(spec: Spec) -> int:
    """Tokens of KV cache one instance holds: each GPU's memory x utilisation less its share of
    the weights, over its share of a token's KV bytes (activations and CUDA graphs ignored)."""
    m = MODELS[spec.model]
    per_gpu = MEMORY_UTILISATION * 80 * GIB - 2 * m.params / spec.tp
    return int(per_gpu // (m.kv_bytes_per_token / spec.tp))


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
    m, engine = MODELS[spec.model], ENGINES[spec.engine]
    return {
        "gpu": spec.gpu.upper(), "model": m.label, "tp": spec.tp, "dtype": "fp16",
        "engine": engine.label, "engine_version": engine.version, "engine_note": engine.note,
        "source": spec.source, "licence": engine.licence, "measured": spec.measured, "assumed": spec.assumed,
        "cost": plain.coefficients, "errors_pct": plain.errors_pct,
        "attention_cost": attention.coefficients, "attention_errors_pct": attention.errors_pct,
        "attention_whole_64_4096_pct": whole_range_error(t, attention.fitted),
        "rows": plain.rows, "range": plain.ranges,
        "kv_capacity_tokens": kv_capacity_tokens(spec), "memory_utilisation": MEMORY_UTILISATION,
        "kv_ship_ms_per_token": kv_ship(spec, root),
    }


def refit_all(root: Path) -> dict[str, dict]:
    return {spec.name: refit(spec, root) for spec in SPECS}


if __name__ == "__main__":
    folder = P.profiles_folder()
    if folder is None:
        raise SystemExit(f"no public profiles: set ${P.ENV_FOLDER}")
    print(json.dumps(refit_all(folder), indent=1))
