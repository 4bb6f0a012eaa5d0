"""An iteration's time composed from NVIDIA AIConfigurator's per-operator GPU timings (Apache-2.0).

For a model config (a Hugging Face config.json), a GPU, an engine and a TP degree, one iteration
that writes `replies` replies (each attending to `context` tokens) and reads `prompts` equal
prompt pieces of `chunk` tokens (each after `earlier` tokens of the same prompt read before)
costs, on every GPU of the instance at once:

    layers x [ matrix products(N)                    qkv, output projection, FFN (or router)
               + prefill attention(prompts, chunk, earlier) + decode attention(replies, context)
               + MoE layer(N)                        MoE models' layers, from the MoE table
               + 2 all-reduces(N x hidden x 2 bytes) when TP > 1
               + memory-bound element-wise ops(N) ]  add + RMSnorm x2, activation, RoPE, KV write
    + logits(sequences) + host overhead(sequences)

with N = replies + prompts x chunk the tokens of the iteration and the shapes divided by TP. Each
operator is interpolated in its measured table (linearly between measured points; a shape the
table does not hold is refused, naming it). What is not measured, and how it is taken:

- element-wise ops: bytes moved / (the GPU's memory bandwidth x 0.8) + 3 us, the empirical
  correction in AIConfigurator's systems/<gpu>.yaml (`mem_bw_empirical_scaling_factor`,
  `mem_empirical_constant_latency`);
- prefill attention after `earlier` tokens: the table's time for a prompt of `earlier + chunk`
  tokens x ((earlier + chunk)^2 - earlier^2) / (earlier + chunk)^2 (the share of attention pairs
  the chunk computes; AIConfigurator's prefix correction);
- matrix products wider than the table (a vocabulary of 128k, the table up to n = 65,536): the
  widest measured time x n / n_max; narrower than the table (a router of 8 experts): the
  narrowest measured time;
- host overhead: `HOST_MS + HOST_MS_PER_SEQUENCE x sequences` (sequences = replies + prompts),
  the line through Vidur's measured vLLM CPU time per iteration (microsoft/vidur, MIT,
  data/profiling/a100/cpu_overheads.csv: schedule + sampler + input preparation + output
  processing, 78 rows of 6 models, batches of 8-128, one line over all). It is a 2024 vLLM's; a
  current engine overlaps part of it with the GPU, so it is the least certain term (up to
  6.8 ms at 128 replies).

The tables are found through $DISAGG_SIMPY_AICONFIGURATOR (a folder holding `systems/` and
`model_configs/`: the shared data's `cost-profiles/aiconfigurator`, or a clone's
`aic-core/src/aiconfigurator_core`), else $DISAGG_SIMPY_PROFILES/aiconfigurator, else
`../shared/data/cost-profiles/aiconfigurator` beside the repository. Nothing here is shipped data.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from ..errors import InputError
from .hf_config import ModelConfig

ENV_FOLDER = "DISAGG_SIMPY_AICONFIGURATOR"
SOURCE = "NVIDIA AIConfigurator (ai-dynamo/aiconfigurator @ 095f58a, Apache-2.0): per-operator timings"
#: Vidur's vLLM CPU time per iteration, one line over all its rows (see the module's docstring)
HOST_MS, HOST_MS_PER_SEQUENCE = 1.428, 0.04168
HOST_SOURCE = ("host overhead 1.428 ms + 0.04168 ms a sequence: Vidur's measured vLLM CPU time per iteration "
               "(microsoft/vidur, MIT; a 2024 vLLM on an A100 host)")

#: the project's GPU names -> AIConfigurator's system folders
GPUS = {"a100-80gb": "a100_sxm", "h100-80gb": "h100_sxm", "h200": "h200_sxm", "b200": "b200_sxm"}
#: engine name -> (framework folder, version folder) per GPU folder
ENGINES = {
    "vllm-0.14": ("vllm", "0.14.0"), "vllm-0.24": ("vllm", "0.24.0"),
    "sglang-0.5.10": ("sglang", "0.5.10"), "sglang-0.5.14": ("sglang", "0.5.14"),
}
TP_DEGREES = (1, 2, 4, 8)
_GEMM_KERNEL = {"vllm": "torch.nn.functional.linear", "sglang": "sglang_torch_linear"}
#: the gemm rows each weight format is timed from. Block-scaled fp8's own rows hold a fixed
#: 0.06-0.27 ms a call that does not follow the shape (10x bf16's time at 1,024 tokens on the
#: B200, where the same kernels run at bf16's speed or better): a measurement outside CUDA
#: graphs, not the kernel's time under the engines' graphs; per-tensor fp8 kernels stand in.
GEMM_ROWS = {"bfloat16": "bfloat16", "fp8": "fp8", "fp8_block": "fp8"}


def data_folder() -> Path | None:
    """AIConfigurator's tables (see the module's docstring), or None ($DISAGG_SIMPY_AICONFIGURATOR set
    to a folder without them, or to nothing)."""
    if ENV_FOLDER in os.environ:  # set (even to nothing): the only place looked at
        folder = Path(os.environ[ENV_FOLDER])
        return folder if os.environ[ENV_FOLDER] and (folder / "systems" / "data").is_dir() else None
    candidates = []
    if os.environ.get("DISAGG_SIMPY_PROFILES"):
        candidates.append(Path(os.environ["DISAGG_SIMPY_PROFILES"]) / "aiconfigurator")
    candidates.append(Path(__file__).resolve().parents[2].parent / "shared" / "data" / "cost-profiles" / "aiconfigurator")
    for folder in candidates:
        if (folder / "systems" / "data").is_dir():
            return folder
    return None


def require_folder() -> Path:
    folder = data_folder()
    if folder is None:
        raise InputError(f"no AIConfigurator tables: set ${ENV_FOLDER} to a folder holding systems/data/ (git clone "
                         "https://github.com/ai-dynamo/aiconfigurator and give its aic-core/src/aiconfigurator_core)")
    return folder


# -- the tables ----------------------------------------------------------------------------------

class OutOfRange(InputError):
    """A point outside the measured range of a table the shape is in (the shape itself is measured)."""


def _interp(x: float, xs: np.ndarray, ys: np.ndarray, what: str) -> float:
    """Linear interpolation at `x` within the measured `xs` (sorted); refused outside them."""
    if x < xs[0] - 1e-9 or x > xs[-1] + 1e-9:
        raise OutOfRange(f"{what}: {x:g} is outside the measured {xs[0]:g}-{xs[-1]:g}")
    return float(np.interp(x, xs, ys))


def _bracket(x: float, xs: np.ndarray) -> tuple[float, float, float]:
    """(low, high, weight of high) of the measured points around `x` (inside them)."""
    i = int(np.searchsorted(xs, x))
    if i < len(xs) and xs[i] == x:
        return xs[i], xs[i], 0.0
    lo, hi = xs[i - 1], xs[i]
    return lo, hi, (x - lo) / (hi - lo)


class Tables:
    """One GPU's and engine's tables, loaded once, with the composition's queries."""

    def __init__(self, folder: Path, gpu: str, engine: str):
        if gpu not in GPUS:
            raise InputError(f"--gpu: got {gpu!r}, expected one of {', '.join(GPUS)}")
        if engine not in ENGINES:
            raise InputError(f"--engine: got {engine!r}, expected one of {', '.join(ENGINES)}")
        self.gpu, self.engine = gpu, engine
        system = GPUS[gpu]
        framework, version = ENGINES[engine]
        self.framework, self.version = framework, version
        root = folder / "systems" / "data" / system
        def path(op: str, table: str) -> Path:
            return root / op / framework / version / f"{table}.parquet"

        for op, table in (("gemm", "gemm_perf"), ("attention", "context_attention_perf"),
                          ("attention", "generation_attention_perf")):
            if not path(op, table).is_file():
                raise InputError(f"--engine {engine} on --gpu {gpu}: AIConfigurator has no {op} table "
                                 f"({path(op, table).relative_to(folder)}); the pairs measured: {covered(folder)}")
        spec = yaml.safe_load((folder / "systems" / f"{system}.yaml").read_text())
        self.mem_bw = float(spec["gpu"]["mem_bw"]) * float(spec["gpu"].get("mem_bw_empirical_scaling_factor", 1.0))
        self.mem_constant_ms = 1e3 * float(spec["gpu"].get("mem_empirical_constant_latency", 0.0))
        self.mem_capacity = int(spec["gpu"]["mem_capacity"])
        self.nccl_mem = {int(k): int(v) for k, v in (spec.get("misc", {}).get("nccl_mem") or {}).items()}
        self.node = spec.get("node", {})
        self._paths = {"gemm": path("gemm", "gemm_perf"), "context": path("attention", "context_attention_perf"),
                       "generation": path("attention", "generation_attention_perf"),
                       "moe": path("moe", "moe_perf"), "allreduce": path("comm", "custom_allreduce_perf")}
        self._gemm: dict[str, dict[tuple[int, int], tuple[np.ndarray, np.ndarray]]] = {}
        self._nks: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._attention: dict[tuple, dict] = {}
        self._moe: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
        self._allreduce: dict[int, tuple[np.ndarray, np.ndarray]] | None = None

    # matrix products
    def _gemm_grid(self, dtype: str = "bfloat16") -> dict[tuple[int, int], tuple[np.ndarray, np.ndarray]]:
        """The gemm table of one weight format: bf16 from the engine's own kernel; fp8 the median
        over the kernels measured (the engine picks one at start, by what is installed)."""
        if dtype not in self._gemm:
            g = pd.read_parquet(self._paths["gemm"], columns=["kernel_source", "gemm_dtype", "m", "n", "k", "latency"])
            g = g[g.gemm_dtype == dtype]
            if not len(g):
                raise InputError(f"matrix products in {dtype}: not in AIConfigurator's {self.gpu} {self.engine} gemm "
                                 "table (give a bf16 model, or another GPU)")
            own = g[g.kernel_source == _GEMM_KERNEL[self.framework]]
            g = own if len(own) else g
            g = g.groupby(["n", "k", "m"], sort=True).latency.median().reset_index()
            grid = {(int(n), int(k)): (d.m.to_numpy(float), d.latency.to_numpy(float))
                    for (n, k), d in g.groupby(["n", "k"])}
            self._gemm[dtype] = grid
            self._nks[dtype] = (np.array(sorted({n for n, _ in grid}), float),
                                np.array(sorted({k for _, k in grid}), float))
        return self._gemm[dtype]

    def gemm(self, m: float, n: int, k: int, dtype: str = "bfloat16") -> float:
        """ms of one (m x k) by (k x n) matrix product with `dtype` weights: linear in m, n and k
        between measured points; n above the widest measured scaled in proportion, below the
        narrowest at it."""
        if m <= 0:
            return 0.0
        grid = self._gemm_grid(dtype)
        ns, ks = self._nks[dtype]
        what = f"matrix product of n={n}, k={k}"
        if k < ks[0] or k > ks[-1]:
            raise InputError(f"{what}: k={k} is outside the measured {ks[0]:g}-{ks[-1]:g} ({self.gpu}, {self.engine})")
        scale = 1.0
        if n > ns[-1]:
            scale, n = n / ns[-1], int(ns[-1])
        n_eff = max(float(n), ns[0])
        n0, n1, wn = _bracket(n_eff, ns)
        k0, k1, wk = _bracket(float(k), ks)
        total = 0.0
        for nn, wn_ in ((n0, 1 - wn), (n1, wn)):
            for kk, wk_ in ((k0, 1 - wk), (k1, wk)):
                if wn_ * wk_ == 0:
                    continue
                key = (int(nn), int(kk))
                if key not in grid:
                    raise InputError(f"{what}: no measured n={key[0]}, k={key[1]} ({self.gpu}, {self.engine})")
                ms, lat = grid[key]
                total += wn_ * wk_ * _interp(m, ms, lat, f"{what}: tokens m")
        return scale * total

    # attention
    def _attention_table(self, kind: str, heads: int, kv_heads: int, head_dim: int) -> dict:
        key = (kind, heads, kv_heads, head_dim)
        if key not in self._attention:
            a = pd.read_parquet(self._paths[kind])
            keep = ((a.num_heads == heads) & (a.num_key_value_heads == kv_heads) & (a.head_dim == head_dim)
                    & (a.kv_cache_dtype == "bfloat16") & (a.attn_dtype == "bfloat16"))
            if "window_size" in a:
                keep &= a.window_size == 0
            a = a[keep]
            if not len(a):
                phase = "prefill" if kind == "context" else "decode"
                raise InputError(f"{phase} attention of {heads} query heads, {kv_heads} KV heads of {head_dim} per GPU: "
                                 f"not in AIConfigurator's {self.gpu} {self.engine} table (try another TP)")
            counts = a.kernel_source.value_counts()
            a = a[a.kernel_source == counts.index[0]]
            x = "isl" if kind == "context" else "context"
            a = a.assign(context=a.isl + a.step)
            grid = a.groupby(["batch_size", x]).latency.median()
            self._attention[key] = {int(b): (s.index.get_level_values(1).to_numpy(float), s.to_numpy(float))
                                    for b, s in grid.groupby(level=0)}
        return self._attention[key]

    def _attention_at(self, table: dict, batch: int, length: float, what: str) -> float:
        """Linear in the batch and the length between measured points."""
        batches = np.array(sorted(table), float)
        if batch < batches[0] or batch > batches[-1]:
            raise OutOfRange(f"{what}: batch {batch} is outside the measured {batches[0]:g}-{batches[-1]:g}")
        b0, b1, w = _bracket(float(batch), batches)
        out = 0.0
        for b, wb in ((b0, 1 - w), (b1, w)):
            if wb:
                xs, ys = table[int(b)]
                out += wb * _interp(length, xs, ys, f"{what} (batch {int(b)}): tokens")
        return out

    def prefill_attention(self, prompts: int, chunk: float, earlier: float, heads: int, kv_heads: int,
                          head_dim: int) -> float:
        """ms of one layer's prefill attention for `prompts` pieces of `chunk` tokens, each after
        `earlier` tokens of its prompt: the table at the whole length, times the chunk's share of
        the attention pairs."""
        if prompts <= 0 or chunk <= 0:
            return 0.0
        full = earlier + chunk
        t = self._attention_at(self._attention_table("context", heads, kv_heads, head_dim), prompts, full,
                               "prefill attention")
        return t * (full**2 - earlier**2) / full**2

    def decode_attention(self, replies: int, context: float, heads: int, kv_heads: int, head_dim: int) -> float:
        """ms of one layer's decode attention for `replies` replies of `context` tokens each."""
        if replies <= 0:
            return 0.0
        return self._attention_at(self._attention_table("generation", heads, kv_heads, head_dim), replies, context,
                                  "decode attention")

    # MoE
    def moe(self, tokens: float, hidden: int, inter: int, topk: int, experts: int, tp: int, ep: int = 1,
            dtype: str = "bfloat16") -> float:
        """ms of one MoE layer (each expert split over `tp` GPUs, the experts over `ep`; balanced
        routing; `dtype` weights), linear in tokens."""
        if tokens <= 0:
            return 0.0
        key = (hidden, inter, topk, experts, tp, ep, dtype)
        if key not in self._moe:
            split = f"TP{tp}" + (f" EP{ep}" if ep > 1 else "")
            what = (f"MoE layer of hidden {hidden}, expert size {inter}, top-{topk} of {experts} experts at {split}")
            if not self._paths["moe"].is_file():
                raise InputError(f"{what}: AIConfigurator has no MoE table for {self.engine} on {self.gpu}")
            m = pd.read_parquet(self._paths["moe"])
            m = m[(m.moe_dtype == dtype) & (m.hidden_size == hidden) & (m.inter_size == inter) & (m.topk == topk)
                  & (m.num_experts == experts) & (m.moe_tp_size == tp) & (m.moe_ep_size == ep)
                  & (m.distribution == "balanced")]
            if not len(m):
                raise InputError(f"{what}: not in AIConfigurator's {self.gpu} {self.engine} MoE table ({dtype}, "
                                 "balanced)")
            m = m[m.kernel_source == m.kernel_source.value_counts().index[0]]
            s = m.groupby("num_tokens").latency.median()
            self._moe[key] = (s.index.to_numpy(float), s.to_numpy(float))
        xs, ys = self._moe[key]
        return _interp(tokens, xs, ys, f"MoE layer (hidden {hidden}, {experts} experts): tokens")

    # all-reduce
    def allreduce(self, message_bytes: float, gpus: int) -> float:
        """ms of one all-reduce of `message_bytes` over `gpus` GPUs (the engine's own all-reduce,
        CUDA-graph variant), linear in bytes."""
        if gpus <= 1 or message_bytes <= 0:
            return 0.0
        if self._allreduce is None:
            a = pd.read_parquet(self._paths["allreduce"])
            a = a[a.kernel_source.str.contains("graph")]
            s = a.groupby(["num_gpus", "message_size"]).latency.median()
            self._allreduce = {int(g): (x.index.get_level_values(1).to_numpy(float), x.to_numpy(float))
                               for g, x in s.groupby(level=0)}
        if gpus not in self._allreduce:
            raise InputError(f"all-reduce over {gpus} GPUs: not measured ({self.gpu}, {self.engine}: "
                             f"{', '.join(map(str, sorted(self._allreduce)))})")
        xs, ys = self._allreduce[gpus]
        return _interp(max(message_bytes, xs[0]), xs, ys, f"all-reduce over {gpus} GPUs: bytes")

    def memory_op(self, nbytes: float) -> float:
        """ms of a memory-bound op moving `nbytes` (AIConfigurator's empirical bandwidth and constant)."""
        return 1e3 * nbytes / self.mem_bw + self.mem_constant_ms if nbytes > 0 else 0.0


@cache
def tables(folder: Path, gpu: str, engine: str) -> Tables:
    return Tables(folder, gpu, engine)


def covered(folder: Path) -> str:
    """The (GPU, engine) pairs whose tables are present."""
    pairs = [f"{g}/{e}" for g, system in GPUS.items() for e, (fw, v) in ENGINES.items()
             if (folder / "systems" / "data" / system / "gemm" / fw / v / "gemm_perf.parquet").is_file()]
    return ", ".join(pairs)


# -- the composition -----------------------------------------------------------------------------

def check_tp(model: ModelConfig, tp: int) -> None:
    """Refuse a TP degree the model's heads (or the tables) cannot take."""
    if isinstance(tp, bool) or not isinstance(tp, int) or tp not in TP_DEGREES:
        raise InputError(f"--tp: got {tp!r}, expected one of {', '.join(map(str, TP_DEGREES))} (one node)")
    if model.heads % tp:
        raise InputError(f"--tp {tp}: the model's {model.heads} attention heads do not split over {tp} GPUs")
    if model.kv_heads % tp and tp % model.kv_heads:
        raise InputError(f"--tp {tp}: the model's {model.kv_heads} KV heads neither split over nor replicate "
                         f"evenly on {tp} GPUs")


def check_ep(model: ModelConfig, tp: int, ep: int) -> None:
    """Refuse an expert-parallel degree the instance cannot take (EP divides TP, on a MoE model)."""
    if ep == 1:
        return
    if not model.moe_layers:
        raise InputError(f"--ep {ep}: the model has no MoE layers (expert parallelism is for MoE models)")
    if isinstance(ep, bool) or not isinstance(ep, int) or ep < 1 or tp % ep or model.experts % ep:
        raise InputError(f"--ep: got {ep!r}, expected a divisor of --tp {tp} and of the {model.experts} experts")


def iteration_parts(t: Tables, model: ModelConfig, tp: int, replies: int = 0, context: float = 0,
                    prompts: int = 0, chunk: float = 0, earlier: float = 0, ep: int = 1) -> dict[str, float]:
    """ms of each part of one iteration (see the module's docstring): `replies` replies of
    `context` tokens each, `prompts` prompt pieces of `chunk` tokens each after `earlier` ones;
    with `ep` > 1 the experts are spread over `ep` of the TP GPUs (each expert over TP / EP), the
    rest of the layer as at TP (vLLM's and SGLang's expert parallelism inside one instance)."""
    check_tp(model, tp)
    check_ep(model, tp, ep)
    n = replies + prompts * chunk
    if n <= 0:
        return {"total": 0.0}
    h, d, L = model.hidden, model.head_dim, model.layers
    heads, kv = model.heads // tp, max(model.kv_heads // tp, 1)
    b, q, g = model.dtype_bytes, model.quant, GEMM_ROWS[model.quant]
    linear = t.gemm(n, (heads + 2 * kv) * d, h, g) + t.gemm(n, h, heads * d, g)
    dense_ffn = t.gemm(n, 2 * model.inter // tp, h, g) + t.gemm(n, h, model.inter // tp, g) if model.inter else 0.0
    moe = 0.0
    if model.moe_layers:  # the router stays bf16 (quantised checkpoints leave it out)
        moe = t.moe(n, h, model.moe_inter, model.topk, model.experts, tp // ep, ep, q) + t.gemm(n, model.experts, h)
    attention = (t.prefill_attention(prompts, chunk, earlier, heads, kv, d)
                 + t.decode_attention(replies, context, heads, kv, d))
    reduce = 2 * t.allreduce(n * h * b, tp)
    elementwise = (2 * t.memory_op(n * 4 * h * b)  # add + RMSnorm, twice: residual and input in, both out
                   + t.memory_op(n * 2 * (heads + kv) * d * b)  # RoPE on q and k
                   + t.memory_op(n * 2 * kv * d * b))  # K and V into the cache
    act = t.memory_op(n * 3 * model.inter // tp * b) if model.inter else 0.0  # gate x up -> activation
    dense_layers = L - model.moe_layers
    sequences = replies + prompts
    parts = {
        "matrix products": L * linear + dense_layers * dense_ffn,
        "MoE": model.moe_layers * moe,
        "attention": L * attention,
        "all-reduce": L * reduce,
        "element-wise": L * elementwise + dense_layers * act + t.memory_op(n * 2 * h * b),  # + embedding
        "logits": t.gemm(sequences, model.vocab // tp, h),
        "host": HOST_MS + HOST_MS_PER_SEQUENCE * sequences,
    }
    parts = {k: float(v) for k, v in parts.items()}
    parts["total"] = sum(parts.values())
    return parts


def iteration_ms(t: Tables, model: ModelConfig, tp: int, replies: int = 0, context: float = 0, prompts: int = 0,
                 chunk: float = 0, earlier: float = 0, ep: int = 1) -> float:
    """ms of one iteration (`iteration_parts`' total)."""
    return iteration_parts(t, model, tp, replies, context, prompts, chunk, earlier, ep)["total"]
