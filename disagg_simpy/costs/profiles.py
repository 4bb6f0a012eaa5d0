"""Measured iterations from the public cost profiles (Vidur, DistServe, SplitwiseSim).

Each source becomes one table of iterations (columns of `fitting.COLUMNS` plus `kind`), which
`fitting.fit` turns into cost fields. Nothing here is shipped data: the folder is found through
$DISAGG_SIMPY_PROFILES, else `../shared/data/cost-profiles` next to the repository (its README
names each file's source and licence).

How an iteration is composed from Vidur's per-op profiles (ms per layer):
`layers x [linear ops(N = replies + prompt tokens) + decode attention(replies, context)
+ prefill attention(chunk, earlier tokens) + 2 all-reduces when TP > 1] + embedding(N)
+ CPU overhead(sequences)`. The linear ops are every op of `mlp.csv` but the embedding (the
residual `add` twice a layer), interpolated in N; attention is taken at measured points only.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd

ENV_FOLDER = "DISAGG_SIMPY_PROFILES"
_LINEAR_OPS = ("input_layernorm", "attn_pre_proj", "attn_rope", "attn_post_proj", "post_attention_layernorm",
               "mlp_up_proj", "mlp_act", "mlp_down_proj", "add", "add")
_CPU_PARTS = ("schedule_median", "sampler_e2e_median", "prepare_inputs_e2e_median", "process_model_outputs_median")


def profiles_folder() -> Path | None:
    """The public profiles: $DISAGG_SIMPY_PROFILES, else ../shared/data/cost-profiles beside the
    repository; None when neither holds them."""
    env = os.environ.get(ENV_FOLDER)
    candidates = [Path(env)] if env else []
    candidates.append(Path(__file__).resolve().parents[2].parent / "shared" / "data" / "cost-profiles")
    for folder in candidates:
        if (folder / "raw").is_dir() and (folder / "transcribed").is_dir():
            return folder
    return None


def _table(replies, prompt, context, earlier, ms, kind: str) -> pd.DataFrame:
    return pd.DataFrame({"replies": replies, "prompt_tokens": prompt, "context_tokens": context,
                         "earlier_tokens": earlier, "ms": ms, "kind": kind})


# -- Vidur: composed from per-op profiles -------------------------------------------------------

class VidurOps:
    """One model's per-layer op times on one GPU at one TP degree, read from Vidur's files."""

    def __init__(self, root: Path, gpu: str, model_path: str, tp: int, layers: int, embd: int):
        mlp = pd.read_csv(root / "raw/vidur/compute" / gpu / model_path / "mlp.csv")
        mlp = mlp[mlp.num_tensor_parallel_workers == tp]
        cols = [f"time_stats.{op}.median" for op in _LINEAR_OPS]
        per_n = mlp.assign(linear=mlp[cols].sum(axis=1), emb=mlp["time_stats.emb.median"])
        per_n = per_n.groupby("num_tokens")[["linear", "emb"]].median()
        self.n = per_n.index.to_numpy(float)
        self.linear_ms = per_n["linear"].to_numpy()
        self.emb_ms = per_n["emb"].to_numpy()
        self.tp, self.layers, self.embd = tp, layers, embd
        self.reduce = None
        if tp > 1:
            ar = pd.read_csv(root / "raw/vidur/network/a100_pairwise_nvlink/all_reduce.csv")
            ar = ar[ar.num_workers == tp].groupby("size")["time_stats.all_reduce.median"].median()
            self.reduce = (ar.index.to_numpy(float), ar.to_numpy())

    def linear(self, n) -> np.ndarray:
        """Per-iteration ms of everything but attention and CPU for `n` tokens (all layers)."""
        n = np.asarray(n, float)
        out = self.layers * np.interp(n, self.n, self.linear_ms) + np.interp(n, self.n, self.emb_ms)
        if self.reduce is not None:
            out = out + 2 * self.layers * np.interp(n * self.embd * 2, *self.reduce)
        return out


def cpu_overhead(root: Path, model_name: str, tp: int):
    """Vidur's measured CPU time per iteration against sequences in the batch (schedule,
    sampler, input preparation, output processing; Ray's time left out), as a fitted line."""
    cpu = pd.read_csv(root / "raw/vidur/history_b09e4ff/a100/cpu_overheads.csv")
    cpu = cpu[(cpu.model_name == model_name) & (cpu.tensor_parallel_degree == tp)]
    slope, intercept = np.polyfit(cpu.batch_size.to_numpy(float), cpu[list(_CPU_PARTS)].sum(axis=1).to_numpy(), 1)
    return lambda seqs: intercept + slope * np.asarray(seqs, float)


def vidur_attention_codellama(root: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(decode, prefill) attention per layer from the one complete attention.csv (A100,
    32 query heads of 128 per GPU: CodeLlama-34B at TP2)."""
    a = pd.read_csv(root / "raw/vidur/history_e2d00e9/a100/attention.csv")
    dec = a[~a.is_prefill].groupby(["batch_size", "kv_cache_size"])["time_stats.attn_decode.median"].median()
    pre = a[a.is_prefill].groupby(["prefill_chunk_size", "kv_cache_size"])["time_stats.attn_prefill.median"].median()
    dec = dec.rename("ms").reset_index().rename(columns={"batch_size": "batch", "kv_cache_size": "kv"})
    pre = pre.rename("ms").reset_index().rename(columns={"prefill_chunk_size": "chunk", "kv_cache_size": "kv"})
    return dec, pre


def transcribed_decode(root: Path, name: str) -> pd.DataFrame:
    d = pd.read_csv(root / "transcribed" / name)
    return d.rename(columns={"batch_size": "batch", "kv_cache_size": "kv", "attn_decode_median_ms": "ms"})


def vidur_iterations(ops: VidurOps, cpu, dec: pd.DataFrame, pre: pd.DataFrame,
                     dec_scale: float = 1.0, pre_scale: float = 1.0) -> pd.DataFrame:
    """Writing-only, whole-prompt and chunked iterations at the attention profiles' measured
    points: writing at every (replies, context) measured; whole prompts of 64-4,096 tokens;
    512-token chunks after 0-3,584 earlier tokens beside 8, 32 or 64 replies."""
    L = ops.layers
    dec = dec[dec.batch <= 128]
    w = dec.batch.to_numpy()
    writing = _table(w, 0, w * dec.kv.to_numpy(), 0,
                     ops.linear(w) + L * dec_scale * dec.ms.to_numpy() + cpu(w), "writing only")
    whole = pre[pre.kv == 0]
    c = whole.chunk.to_numpy()
    reads = _table(0, c, 0, 0, ops.linear(c) + L * pre_scale * whole.ms.to_numpy() + cpu(1), "whole prompt")
    chunks = pre[(pre.chunk == 512) & pre.kv.isin(range(0, 3585, 512))]
    mixes = []
    for batch in (8, 32, 64):
        near = dec.loc[(dec.batch - batch).abs() == (dec.batch - batch).abs().min()]
        for _, d in near.iterrows():
            for _, p in chunks.iterrows():
                n = d.batch + 512
                ms = ops.linear(n) + L * (dec_scale * d.ms + pre_scale * p.ms) + cpu(d.batch + 1)
                mixes.append((d.batch, 512, d.batch * d.kv, p.kv, float(ms)))
    mixed = pd.DataFrame(mixes, columns=["replies", "prompt_tokens", "context_tokens", "earlier_tokens", "ms"])
    mixed["kind"] = "chunked"
    return pd.concat([writing, reads, mixed], ignore_index=True)


def scale_between(slow: VidurOps, fast: VidurOps, small: bool) -> float:
    """Median ratio fast/slow of the linear ops: at 1-64 tokens (memory bound: decode attention)
    or 2,048-4,096 tokens (compute bound: prefill attention)."""
    n = np.array([x for x in slow.n if (x <= 64 if small else x >= 2048)])
    return float(np.median(fast.linear(n) / slow.linear(n)))


# -- DistServe: fitted coefficients, evaluated on a grid --------------------------------------

def distserve_iterations(root: Path, model: str, tp: int, engine: str = "distserve") -> pd.DataFrame:
    """DistServe's own fits (prefill `a + b sum(l) + c sum(l^2)`; decode `a + b sum(ctx) + c batch`,
    large-batch coefficients from batch 95) of its own engine (`distserve`) or of vLLM 0.2.3
    (`vllm-0.2`: the same profiler's file for vLLM), evaluated at prompts of 64-4,096 tokens (1-4
    of them) and 1-256 replies of 128-4,096 tokens of context."""
    file = {"distserve": "distserve", "vllm-0.2": "vllm"}[engine]
    coef = json.loads((root / f"raw/distserve/profiler-a100-80g.{file}.json").read_text())[model][str(tp)]
    a, b, c = coef["prefill"]
    rows = []
    for length in (64, 128, 256, 512, 1024, 2048, 4096):
        for k in (1, 2, 4):
            if k * length <= 8192:
                rows.append((0, k * length, 0, k, a + b * k * length + c * k * length**2, "whole prompt"))
    threshold = coef["decoding_large_small_bs_threshold"]
    for batch in (1, 2, 4, 8, 16, 32, 64, 94, 95, 128, 192, 256):
        a, b, c = coef["decoding_smallbs" if batch < threshold else "decoding_largebs"]
        for ctx in (128, 512, 1024, 2048, 4096):
            rows.append((batch, 0, batch * ctx, 0, a + b * batch * ctx + c * batch, "writing only"))
    t = pd.DataFrame(rows, columns=["replies", "prompt_tokens", "context_tokens", "prompts", "ms", "kind"])
    t["earlier_tokens"] = 0
    return t


# -- SplitwiseSim: end-to-end vLLM iterations ----------------------------------------------------

def splitwise_iterations(root: Path, model: str, hardware: str, tp: int) -> pd.DataFrame:
    """Median of the 5 repeats: a prompt iteration reads `batch` prompts of `prompt_size`;
    a token iteration writes for `batch` replies whose context averages prompt + tokens / 2."""
    d = pd.read_csv(root / "raw/splitwise-sim/perf_model.csv")
    d = d[(d.model == model) & (d.hardware == hardware) & (d.tensor_parallel == tp)]
    g = d.groupby(["prompt_size", "batch_size", "token_size"])[["prompt_time", "token_time"]].median().reset_index()
    pro = g.groupby(["prompt_size", "batch_size"]).prompt_time.median().reset_index()
    reads = _table(0, pro.prompt_size * pro.batch_size, 0, 0, pro.prompt_time, "whole prompt")
    reads["prompts"] = pro.batch_size
    writes = _table(g.batch_size, 0, g.batch_size * (g.prompt_size + g.token_size / 2), 0, g.token_time,
                    "writing only")
    return pd.concat([reads, writes], ignore_index=True)


# -- KV ships -----------------------------------------------------------------------------------

def ship_ms_per_byte(root: Path, machine: str, intra_node: bool) -> float:
    """Slope of Vidur's measured send/recv time against size (1 MiB and up), in ms per byte,
    between two GPUs of one node (NVLink) or of two nodes."""
    d = pd.read_csv(root / f"raw/vidur/network/{machine}/send_recv.csv")
    d = d[(d.devices_per_node == (2 if intra_node else 1)) & (d["size"] >= 2**20)]
    slope, _ = np.polyfit(d["size"].to_numpy(float), d["time_stats.send_recv.median"].to_numpy(), 1)
    return float(slope)
