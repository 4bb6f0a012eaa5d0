"""A model as the composition sees it (costs/operators.py), read from a Hugging Face config.json:
layers, hidden size, heads, KV heads, head size, FFN size, vocabulary, experts and top-k; its KV
bytes a token and its parameter count. Weights in fp8 (a `quantization_config` of
`quant_method: fp8`, block-scaled when it gives `weight_block_size`) compose from the tables' fp8
matrix products and MoE layers; activations and the KV cache stay bf16 (the engines' default).
A config the composition cannot express (latent or sliding-window attention, Mamba or
shared-expert layers, a dtype other than bf16/fp16, another quantisation) is refused in one line
naming the key."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from ..errors import InputError

DTYPES = {"bfloat16": "bfloat16", "float16": "bfloat16"}  # fp16 runs at bf16's speed (the tables hold bf16)
#: weight formats composed: the tables' gemm_dtype / moe_dtype, and bytes a weight
QUANTS = {"bfloat16": 2, "fp8": 1, "fp8_block": 1}

@dataclass(frozen=True)
class ModelConfig:
    """What the composition needs of a model (a Hugging Face config.json's fields)."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    inter: int  # the dense FFN's intermediate size (0: every layer is MoE)
    vocab: int
    dtype: str = "bfloat16"
    experts: int = 0  # 0: dense
    topk: int = 0
    moe_inter: int = 0
    moe_layers: int = 0  # how many of the layers are MoE layers
    quant: str = "bfloat16"  # the weights' format (QUANTS): which rows of the gemm and MoE tables
    tied: bool = False  # `tie_word_embeddings`: the LM head is the embedding matrix (one copy in memory)

    @property
    def dtype_bytes(self) -> int:
        """Bytes an activation or KV value takes (bf16)."""
        return 2

    @property
    def weight_bytes(self) -> int:
        return QUANTS[self.quant]

    def quantised(self, quant: str, where: str = "--quant") -> ModelConfig:
        """The same model with its weights in `quant` (one of QUANTS; refused in one line otherwise)."""
        if quant not in QUANTS:
            raise InputError(f"{where}: got {quant!r}, expected one of {', '.join(QUANTS)} (the weight formats the "
                             "tables measure)")
        return replace(self, quant=quant)

    def kv_bytes_per_token(self, tp: int = 1) -> float:
        """Bytes of KV cache a token takes on each GPU: layers x 2 (K, V) x KV heads x head size x
        dtype bytes / TP (KV heads are split over TP, or replicated when TP exceeds them)."""
        return self.layers * 2 * max(self.kv_heads / tp, 1) * self.head_dim * self.dtype_bytes

    def parameters(self) -> int:
        """Weights: embedding, lm head (none of its own when tied to the embedding), and per layer
        the attention, norms and FFN or experts."""
        h, d = self.hidden, self.head_dim
        attention = h * (self.heads + 2 * self.kv_heads) * d + self.heads * d * h
        dense = 3 * h * self.inter
        moe = self.experts * 3 * h * self.moe_inter + h * self.experts
        per_layer = attention + 2 * h
        total = self.layers * per_layer + self.moe_layers * moe + (self.layers - self.moe_layers) * dense
        return int(total + (1 if self.tied else 2) * self.vocab * h + h)


_UNSUPPORTED = {  # config key -> what it means; a config with it is refused
    "kv_lora_rank": "multi-head latent attention (DeepSeek-style)",
    "q_lora_rank": "multi-head latent attention (DeepSeek-style)",
    "layer_types": "layers of several kinds (linear or sliding-window attention)",
    "hybrid_override_pattern": "Mamba layers",
    "shared_expert_intermediate_size": "shared experts",
    "n_shared_experts": "shared experts",
    "vision_config": "a vision encoder",
}
#: what each refused key names, singular or plural, for the verb
_PLURAL = {"shared experts", "Mamba layers", "layers of several kinds (linear or sliding-window attention)"}


def _quant(raw: dict, where: str) -> str:
    """The weights' format from `quantization_config` (fp8, block-scaled or per tensor), else bf16."""
    q = raw.get("quantization_config")
    if not q:
        return "bfloat16"
    method = q.get("quant_method") if isinstance(q, dict) else None
    if method != "fp8":
        raise InputError(f"{where}: 'quantization_config': quant_method {method!r} is not composed (fp8 weights or "
                         "none; the tables measure bf16 and fp8 matrix products)")
    return "fp8_block" if q.get("weight_block_size") else "fp8"


def _refuse_unsupported(raw: dict, where: str) -> None:
    for key, what in _UNSUPPORTED.items():
        if raw.get(key) not in (None, 0, [], {}):
            verb = "are" if what in _PLURAL else "is"
            raise InputError(f"{where}: {key!r}: {what} {verb} not composed from the tables (dense and MoE decoders "
                             "with full attention only)")


def model_config(raw: dict, where: str = "config.json") -> ModelConfig:
    """A ModelConfig from a Hugging Face config, refusing in one line what the composition cannot
    express (naming the key)."""
    if not isinstance(raw, dict):
        raise InputError(f"{where}: expected a JSON object (a Hugging Face config.json)")
    tied = bool(raw.get("tie_word_embeddings"))
    _refuse_unsupported(raw, where)  # (the outer config first: a VLM's vision_config sits beside its text_config)
    if isinstance(raw.get("text_config"), dict) and "num_hidden_layers" not in raw:
        raw = {**raw["text_config"]}
        tied = bool(raw.get("tie_word_embeddings", tied))
        _refuse_unsupported(raw, where)
    if raw.get("use_sliding_window") or (raw.get("sliding_window") and raw.get("use_sliding_window") is not False):
        raise InputError(f"{where}: 'sliding_window': sliding-window attention is not composed (full attention only)")

    def whole(key: str, default: int | None = None) -> int:
        value = raw.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            got = "missing" if key not in raw else repr(value)
            raise InputError(f"{where}: {key!r}: got {got}, expected a whole number >= 1")
        return value

    layers, hidden, heads = whole("num_hidden_layers"), whole("hidden_size"), whole("num_attention_heads")
    kv_heads = whole("num_key_value_heads", heads)
    head_dim = whole("head_dim", hidden // heads) if raw.get("head_dim") is not None else hidden // heads
    if raw.get("head_dim") is None and hidden % heads:
        raise InputError(f"{where}: 'hidden_size' {hidden} is not a multiple of 'num_attention_heads' {heads}; give "
                         "'head_dim'")
    if heads % kv_heads:
        raise InputError(f"{where}: 'num_attention_heads' {heads} is not a multiple of 'num_key_value_heads' "
                         f"{kv_heads}")
    dtype = raw.get("torch_dtype", raw.get("dtype", "bfloat16"))
    if dtype not in DTYPES:
        raise InputError(f"{where}: 'torch_dtype': got {dtype!r}, expected one of {', '.join(DTYPES)} (the tables "
                         "composed are bf16)")
    quant = _quant(raw, where)
    experts = raw.get("num_local_experts", raw.get("num_experts", 0)) or 0
    vocab = whole("vocab_size")
    if not experts:
        return ModelConfig(layers, hidden, heads, kv_heads, head_dim, whole("intermediate_size"), vocab, dtype,
                           quant=quant, tied=tied)
    experts = whole("num_local_experts" if "num_local_experts" in raw else "num_experts")
    topk = whole("num_experts_per_tok")
    if topk > experts:
        raise InputError(f"{where}: 'num_experts_per_tok' {topk} exceeds the {experts} experts")
    moe_inter = whole("moe_intermediate_size") if "moe_intermediate_size" in raw else whole("intermediate_size")
    step = raw.get("decoder_sparse_step", 1) or 1
    dense_layers = set(raw.get("mlp_only_layers") or [])
    moe_layers = sum(1 for i in range(layers) if i not in dense_layers and (i + 1) % step == 0)
    inter = whole("intermediate_size") if moe_layers < layers else 0
    return ModelConfig(layers, hidden, heads, kv_heads, head_dim, inter, vocab, dtype, experts, topk, moe_inter,
                       moe_layers, quant, tied)


def read_model_config(path: Path) -> ModelConfig:
    """A Hugging Face config.json read from `path` (refused in one line if it is no such file)."""
    try:
        raw = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise InputError(f"{path}: no such file (give a Hugging Face config.json)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"{path}: not a JSON file ({e}); give a Hugging Face config.json") from None
    return model_config(raw, str(path))
