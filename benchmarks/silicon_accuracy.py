"""The composed presets against AIConfigurator's end-to-end measurements (silicon_refs.csv): per
request TTFT and TPOT, simulated with the composed cost fields, against the measured ones, for each
row a dense or MoE composed preset can express; nothing is fitted to these rows.

    DISAGG_SIMPY_AICONFIGURATOR=.../aiconfigurator python benchmarks/silicon_accuracy.py

A row is expressible when its engine is vLLM or SGLang, its GPU one the tables hold, its model a
config the composition takes (dense or MoE, full attention), its weights bf16 (no quantisation
given), aggregated serving on one TP instance (no pipeline, expert or attention-data parallel).
The others are counted by the first reason they are not.

How a row is run: one colocated instance with the composed preset's fields (E7, E14, E15 where
the fit kept them) and its KV capacity; prompts of exactly `isl` tokens, replies of `osl` words.
The measurement holds `concurrency` requests in flight (a closed loop); the simulator's traffic is
open (Poisson arrivals at a rate), so the rate is the one at which the simulated requests in flight
(Little's law: rate x (TTFT + (osl - 1) x TPOT)) are `concurrency`, found by bisection (the
largest of 10 halvings below it); arrivals that bunch make queues a closed loop never has, so
TTFT near saturation is the least comparable figure. vLLM:
prompts read beside replies, at most 8,192 tokens an iteration (its default
max_num_batched_tokens on 80 GB GPUs); SGLang: prompt-only iterations (E10, its default of not
mixing). TTFT is the mean first-word wait, TPOT the mean of the replies' mean gaps, over measured
requests (warm-up 60 s, 240 s measured, seed 1).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from disagg_simpy.api import run  # noqa: E402
from disagg_simpy.costs import composed as C  # noqa: E402
from disagg_simpy.costs import operators as O  # noqa: E402
from disagg_simpy.costs.hf_config import read_model_config  # noqa: E402
from disagg_simpy.errors import InputError  # noqa: E402
from disagg_simpy.scenario.loading import load_scenario  # noqa: E402

SYSTEMS = {system: gpu for gpu, system in O.GPUS.items()}
ENGINE_OF = {("vllm", gpu): e for gpu, e in C.PAIRS if e.startswith("vllm")} | {
    ("sglang", gpu): e for gpu, e in C.PAIRS if e.startswith("sglang")}


def why_not(r: pd.Series, folder: Path) -> str | None:
    """The first reason a row is not expressible, or None."""
    if r.backend not in ("vllm", "sglang"):
        return f"engine {r.backend} (no tables composed)"
    if r.system not in SYSTEMS:
        return f"GPU {r.system} (no tables composed)"
    if r["mode"] != "agg":
        return "disaggregated deployment"
    for key in ("gemm_quant_mode", "moe_quant_mode", "precision"):
        if isinstance(r[key], str) and r[key] not in ("", "bfloat16", "float16"):
            return f"quantised ({key} {r[key]})"
    if (r.pp_size or 1) > 1 or (r.attention_dp_size or 1) > 1 or (r.moe_ep_size or 1) > 1:
        return "pipeline, attention-data or expert parallel"
    path = folder / "model_configs" / f"{r.model_path.replace('/', '--')}_config.json"
    if not path.is_file():
        return f"no config for {r.model_path}"
    try:
        read_model_config(path)
    except InputError as e:
        return f"model not composed ({str(e).split(': ', 1)[1][:50]})"
    return None


def simulate(p: dict, engine: str, isl: int, osl: int, concurrency: int) -> tuple[float, float, float]:
    """(TTFT ms, TPOT ms, rate per s) at the rate whose requests in flight are `concurrency` (the
    module's docstring): bisection on the rate, 10 halvings below the rate an idle GPU would give."""
    arrangement = {"name": "one", "kind": "colocated", "gpus": 1, "kv_capacity_tokens": p["kv_capacity_tokens"]}
    if engine.startswith("vllm"):
        arrangement["max_batch_tokens"] = 8192
    else:
        arrangement["mixed_iterations"] = False

    def at(rate: float) -> tuple[float, float, float]:
        spec = {"name": "silicon", "seed": 1, "max_sim_s": 3000,
                "workload": {"rate_per_s": float(f"{rate:.6g}"), "warmup_s": 60, "measure_s": 240,
                             "prompt_mix": [{"share": 1, "tokens": [isl, isl]}], "reply_words": [osl, osl]},
                "cost": dict(p["attention_cost"]), "arrangements": [arrangement]}
        path = Path("/tmp/silicon_accuracy.yaml")
        path.write_text(yaml.safe_dump(spec, sort_keys=False))
        req = run(load_scenario(path)).requests
        ttft, tpot = 1e3 * float(req.first_word_s.mean()), float(req.mean_gap_ms.mean())
        return ttft, tpot, rate * (ttft + (osl - 1) * tpot) / 1e3  # Little's law: requests in flight

    ttft, tpot, _ = at(0.05)
    lo, hi = 0.0, concurrency / ((ttft + (osl - 1) * tpot) / 1e3)  # in flight at hi >= concurrency
    for _ in range(10):
        mid = (lo + hi) / 2
        ttft, tpot, in_flight = at(mid)
        lo, hi = (mid, hi) if in_flight < concurrency else (lo, mid)
    ttft, tpot, _ = at(lo)
    return ttft, tpot, lo


def main() -> None:
    folder = O.data_folder()
    if folder is None:
        raise SystemExit(f"no AIConfigurator tables: set ${O.ENV_FOLDER}")
    refs = pd.read_csv(folder / "accuracy_tracking" / "silicon_refs.csv")
    reasons: dict[str, int] = {}
    lines = ["| measurement | engine (measured; tables) | GPU | model | TP | ISL / OSL | concurrency (rate found) | TTFT "
             "measured -> simulated (error) | TPOT measured -> simulated (error) |", "|---|---|---|---|---|---|---|---|---|"]
    for _, r in refs.iterrows():
        reason = why_not(r, folder)
        if reason:
            reasons[reason] = reasons.get(reason, 0) + 1
            continue
        gpu, tp = SYSTEMS[r.system], int(r.tp_size)
        engine = ENGINE_OF[(r.backend, gpu)]
        model = read_model_config(folder / "model_configs" / f"{r.model_path.replace('/', '--')}_config.json")
        p = C.compose(model, O.tables(folder, gpu, engine), tp, r.model_path)
        concurrency = int(str(r.silicon_data_source).split("silicon_concurrency=")[1].split(";")[0]) \
            if "silicon_concurrency=" in str(r.silicon_data_source) else int(r.batch_size)
        ttft, tpot, rate = simulate(p, engine, int(r.isl), int(r.osl), concurrency)
        lines.append(f"| `{r.id[:48]}` | {r.backend} {r.backend_version}; {engine} | {gpu} | {r.model_path} | {tp} | "
                     f"{r.isl:,} / {r.osl:,} | {concurrency} ({rate:.2f}/s) | {r.silicon_ttft_ms:,.0f} -> {ttft:,.0f} ms "
                     f"({ttft / r.silicon_ttft_ms - 1:+.0%}) | {r.silicon_tpot_ms:.1f} -> {tpot:.1f} ms "
                     f"({tpot / r.silicon_tpot_ms - 1:+.0%}) |")
    print("\n".join(lines))
    print(f"\n{len(refs)} measurements; not expressible: " + "; ".join(f"{n} {k}" for k, n in
                                                                     sorted(reasons.items(), key=lambda kv: -kv[1])))


if __name__ == "__main__":
    main()
