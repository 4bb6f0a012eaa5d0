"""Presets composed from AIConfigurator's per-operator timings (`operators.py`): a grid of
iterations is composed for each model, GPU, engine and TP, and the project's cost fields are
fitted to it as the other presets are (`minimax.fit_worst`: M1/E2/E3, and E7/E14/E15 in the
attention fit; a mixture-of-experts model's with E17's `per_expert_ms` in both, over every batch),
each stating its largest error against the composed times per kind of iteration and per size
(`errors_by_size`).

`python -m disagg_simpy.costs.composed` writes `composed_presets.json` (the numbers the package
ships, read with the other tables by `presets.py`: `presets.from_table`); `--report` prints the
error tables instead. tests/costs/test_composed.py checks that a refit gives the shipped numbers
back.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from . import operators as O
from .fitting import KINDS, kinds
from .hf_config import ModelConfig, read_model_config
from .instance_memory import kv_capacity_tokens
from .minimax import TILES, fit_worst, whole_range_error

LICENCE = "Apache-2.0"
ENGINE_LABELS = {"vllm": "vLLM", "sglang": "SGLang"}
SHIPPED = Path(__file__).with_name("composed_presets.json")
#: preset model name -> (label, the config file in AIConfigurator's model_configs/, TP degrees shipped)
MODELS = {
    "llama-3.1-8b": ("Llama-3.1-8B", "meta-llama--Meta-Llama-3.1-8B", (1, 2, 4)),
    "llama-3.1-70b": ("Llama-3.1-70B", "meta-llama--Meta-Llama-3.1-70B", (2, 4, 8)),
    "qwen3-8b": ("Qwen3-8B", "Qwen--Qwen3-8B", (1, 2, 4)),
    "qwen3-32b": ("Qwen3-32B", "Qwen--Qwen3-32B", (1, 2, 4)),
    "mixtral-8x7b": ("Mixtral-8x7B", "mistralai--Mixtral-8x7B-v0.1", (2, 4, 8)),
    "qwen3-30b-a3b": ("Qwen3-30B-A3B", "Qwen--Qwen3-30B-A3B", (1, 2, 4)),
}
#: (GPU, engine) pairs the tables hold (A100: the older engine versions AIConfigurator measured)
PAIRS = (("a100-80gb", "vllm-0.14"), ("a100-80gb", "sglang-0.5.10"),
         ("h100-80gb", "vllm-0.24"), ("h100-80gb", "sglang-0.5.14"),
         ("h200", "vllm-0.24"), ("h200", "sglang-0.5.14"),
         ("b200", "vllm-0.24"), ("b200", "sglang-0.5.14"))

#: what each engine's scheduler does by default, and how a scenario says it (a preset's engine_note)
ENGINE_NOTES = {
    "vllm": "vLLM {version} (V1 engine; kernels timed by AIConfigurator's collectors): chunked prefill on, each "
            "iteration writes a word for every running reply first and reads prompts in the room left, up to "
            "max_num_batched_tokens (8,192 for the API server on GPUs of 70 GB or more): in a scenario, "
            "max_batch_tokens: 8192 with mixed iterations (the default)",
    "sglang": "SGLang {version} (kernels timed by AIConfigurator's collectors): prefill first, in prompt-only "
              "iterations (it does not mix prompts and replies by default) of at most chunked_prefill_size tokens "
              "(8,192 below 160 GB of GPU memory, 16,384 above): in a scenario, mixed_iterations: false and "
              "max_batch_tokens: 8192 (16384 on the B200)",
}


def engine_note(engine: str) -> str:
    framework, version = O.ENGINES[engine]
    return ENGINE_NOTES[framework].format(version=version)


def engine_for(name: str, gpu: str) -> str:
    """The engine `name` means on `gpu`: a name of O.ENGINES, or its start (vllm, sglang: as the
    listing's --engine reads it), among the versions the tables hold for that GPU; refused in one
    line otherwise."""
    if gpu not in O.GPUS:
        raise O.InputError(f"--gpu: got {gpu!r}, expected one of {', '.join(O.GPUS)}")
    held = [e for g, e in PAIRS if g == gpu]
    if name in O.ENGINES and name not in held:
        raise O.InputError(f"--engine: got {name!r}, but the tables hold {', '.join(held)} for --gpu {gpu}")
    found = [e for e in held if e == name or e.startswith(name)]
    if len(found) != 1:
        raise O.InputError(f"--engine: got {name!r}, expected one of {', '.join(held)} (or its start: vllm, sglang) "
                           f"for --gpu {gpu}")
    return found[0]


REPLIES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
CONTEXTS = (128, 256, 512, 1024, 2048, 4096, 8192)
PROMPTS = (64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192)
BATCHED = ((2, 256), (2, 1024), (2, 2048), (4, 256), (4, 1024), (4, 2048))  # (prompts, tokens each)
CHUNKS = (512, 2048)
EARLIER = (0, 1024, 2048, 4096, 6144)
BESIDE = ((8, 1024), (32, 1024), (64, 2048))  # (replies, context each) written beside a chunk


@dataclass(frozen=True)
class Spec:
    gpu: str
    model: str
    tp: int
    engine: str

    @property
    def name(self) -> str:
        return f"{self.gpu}/{self.model}/tp{self.tp}/{self.engine}"


def saturated_replies(model: ModelConfig) -> int:
    """The smallest batch at which a MoE layer's every expert is busy under balanced routing
    (ceil(experts / top-k)); 1 for a dense model. Below it an expert layer's time steps with the
    experts the batch touches, which E17's `per_expert_ms` follows (docs/composed-presets.md)."""
    return -(-model.experts // model.topk) if model.experts else 1


def config_of(folder: Path, model: str) -> ModelConfig:
    return read_model_config(folder / "model_configs" / f"{MODELS[model][1]}_config.json")


def grid(t: O.Tables, model: ModelConfig, tp: int, ep: int = 1) -> pd.DataFrame:
    """The composed iterations a preset is fitted to (rows of `fitting.COLUMNS` plus
    earlier_tokens, prompts, and the model's experts and experts_per_token, 0 for a dense model):
    writing only at REPLIES x CONTEXTS, whole prompts (PROMPTS alone, BATCHED in twos and fours),
    and CHUNKS after EARLIER tokens beside BESIDE replies; each point the tables measure (a point
    outside a table's measured range is left out, any other gap refuses the preset)."""
    rows = []

    def add(replies: int, context: int, prompts: int, chunk: int, earlier: int) -> None:
        try:
            ms = O.iteration_ms(t, model, tp, replies=replies, context=context, prompts=prompts, chunk=chunk,
                                earlier=earlier, ep=ep)
        except O.OutOfRange:
            return
        rows.append((replies, prompts * chunk, replies * context, earlier, prompts, ms))

    for r in REPLIES:
        for c in CONTEXTS:
            add(r, c, 0, 0, 0)
    for p in PROMPTS:
        add(0, 0, 1, p, 0)
    for n, p in BATCHED:
        add(0, 0, n, p, 0)
    for chunk in CHUNKS:
        for e in EARLIER:
            for r, c in BESIDE:
                add(r, c, 1, chunk, e)
    out = pd.DataFrame(rows, columns=["replies", "prompt_tokens", "context_tokens", "earlier_tokens", "prompts", "ms"])
    return out.assign(experts=model.experts, experts_per_token=model.topk)


def errors_by_size(t: pd.DataFrame, fitted: np.ndarray) -> dict[str, dict[str, float]]:
    """The largest error (signed, %) per kind of iteration and size: writing only by replies,
    whole prompts and chunked by prompt tokens of the iteration."""
    rel = fitted / t.ms.to_numpy(float) - 1
    kind = kinds(t)
    size = np.where(kind == KINDS[0], t.replies.to_numpy(), t.prompt_tokens.to_numpy())
    bands = {KINDS[0]: ((1, 8), (16, 64), (128, 256)), KINDS[1]: ((512, 512), (2048, 2048)),
             KINDS[2]: ((64, 512), (513, 2048), (2049, 16384))}
    out: dict[str, dict[str, float]] = {}
    for k, spans in bands.items():
        for lo, hi in spans:
            r = rel[(kind == k) & (size >= lo) & (size <= hi)]
            if len(r):
                label = f"{lo:,}" if lo == hi else f"{lo:,}-{hi:,}"
                out.setdefault(k, {})[label] = round(100 * float(r[np.argmax(np.abs(r))]), 1) + 0.0
    return out


def kv_ship(t: O.Tables, model: ModelConfig, tp: int) -> dict[str, float]:
    """ms per token of KV shipped between instances: each GPU ships its share over its own link at
    the bandwidth AIConfigurator's systems/<gpu>.yaml states (NVLink within a node, the network
    between nodes; stated, not measured)."""
    share = model.kv_bytes_per_token(tp)
    return {"intra_node": float(f"{1e3 * share / float(t.node['intra_node_bw']):.4g}"),
            "inter_node": float(f"{1e3 * share / float(t.node['inter_node_bw']):.4g}")}


def compose(model: ModelConfig, t: O.Tables, tp: int, label: str, tiles: tuple[int, ...] = TILES,
            ep: int = 1) -> dict:
    """One composed preset's facts: the grid composed for `model` on `t`'s GPU and engine at TP
    `tp` (experts over `ep` of its GPUs), the cost fields fitted to it, their errors, range, KV
    capacity and ship cost. A MoE model's fields hold E17's `per_expert_ms` (with its `experts`
    and `experts_per_token`), fitted over every writing batch, the small ones whose expert layers
    touch only some experts included."""
    O.check_tp(model, tp)
    O.check_ep(model, tp, ep)
    rows = grid(t, model, tp, ep)
    missing = [k for k in KINDS if k not in set(kinds(rows))]
    if missing or len(rows) < 20:
        raise O.InputError(f"{label} at TP{tp} on {t.gpu} with {t.engine}: the tables measure only {len(rows)} of the "
                           f"grid's iterations{' (none ' + ', '.join(missing) + ')' if missing else ''}; too few to fit")
    capacity, terms = kv_capacity_tokens(t, model, tp)
    if capacity <= 0:
        raise O.InputError(f"{label} at TP{tp} on {t.gpu}: the weights ({terms['weights_gib']:.1f} GiB a GPU) leave no "
                           f"room for KV cache in {terms['engine_share']:.0%} of {terms['gpu_memory_gib']:.0f} GiB; "
                           "give a larger --tp")
    plain, attention = fit_worst(rows), fit_worst(rows, attention=True, unsaturated=True, tiles=tiles)
    framework, version = O.ENGINES[t.engine]
    return {
        "gpu": t.gpu.upper(), "model": label, "tp": tp, **({"ep": ep} if ep > 1 else {}),
        "dtype": {"bfloat16": "bf16"}.get(model.quant, f"{model.quant} weights, bf16 activations and KV"),
        "engine": ENGINE_LABELS[framework],
        "engine_version": version, "engine_note": engine_note(t.engine),
        "source": f"{O.SOURCE} composed into iterations; {O.HOST_SOURCE}", "licence": LICENCE,
        "measured": "matrix products, prefill and decode attention, MoE layers, all-reduce (kernel timings)",
        "assumed": "element-wise ops from memory bandwidth; host overhead from Vidur's 2024 vLLM",
        "cost": plain.coefficients, "errors_pct": plain.errors_pct,
        "attention_cost": attention.coefficients, "attention_errors_pct": attention.errors_pct,
        "attention_whole_64_4096_pct": whole_range_error(rows, attention.fitted),
        "errors_by_size_pct": errors_by_size(rows, attention.fitted),
        "rows": plain.rows,
        "range": plain.ranges,
        "kv_capacity_tokens": capacity, "memory_utilisation": terms["engine_share"],
        "kv_bytes_per_token": int(model.kv_bytes_per_token(tp)),
        "kv_ship_ms_per_token": kv_ship(t, model, tp),
    }


def refit(spec: Spec, folder: Path, tiles: tuple[int, ...] = TILES) -> dict:
    """One shipped composed preset's facts, fitted afresh from the tables in `folder`."""
    return compose(config_of(folder, spec.model), O.tables(folder, spec.gpu, spec.engine), spec.tp,
                   MODELS[spec.model][0], tiles)


def specs() -> list[Spec]:
    return [Spec(gpu, model, tp, engine) for model, (_, _, tps) in MODELS.items() for gpu, engine in PAIRS
            for tp in tps]


def refit_all(folder: Path, out=sys.stderr) -> dict[str, dict]:
    """Every spec the tables cover; the refused ones are named on `out` with the reason."""
    presets = {}
    for spec in specs():
        try:
            presets[spec.name] = refit(spec, folder)
        except O.InputError as e:
            print(f"{spec.name}: not composed: {e}", file=out)
    return presets


def report(presets: dict[str, dict]) -> str:
    """The fit's largest error against the composed times, by kind of iteration and size."""
    lines = ["| preset | writing only (replies 1-8 / 16-64 / 128-256) | chunked (512 / 2,048 tokens) | "
             "whole prompt (64-512 / 513-2,048 / 2,049-16,384 tokens) |", "|---|---|---|---|"]
    for name, p in presets.items():
        e = p["errors_by_size_pct"]
        cells = [" / ".join(f"{v:+.1f}%" for v in e.get(k, {}).values()) or "n/a" for k in KINDS]
        lines.append(f"| `{name}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    folder = O.data_folder()
    if folder is None:
        raise SystemExit(f"no AIConfigurator tables: set ${O.ENV_FOLDER}")
    shipped = refit_all(folder)
    if "--report" in sys.argv:
        print(report(shipped))
    else:
        SHIPPED.write_text(json.dumps(shipped, indent=1) + "\n")
        print(f"wrote {len(shipped)} presets to {SHIPPED}")
