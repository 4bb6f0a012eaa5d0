"""The composed presets against AIConfigurator's end-to-end measurements (silicon_refs.csv): for
every row, why it cannot be expressed (every reason, not the first), and for each row that can,
its per-request TTFT and TPOT simulated against the measured ones; nothing is fitted to them.

    DISAGG_SIMPY_AICONFIGURATOR=.../aiconfigurator python benchmarks/silicon_accuracy.py [--write DIR]

`--write DIR` also writes each expressible row's scenario (`aic-<model>-<gpu>-<engine>.yaml`), as
the validation catalog holds them (scenarios/validation/).

A row is expressed with the tables of its engine (vLLM or SGLang: the newest version the tables
hold for its GPU), its model's Hugging Face config (fp8 weights where the checkpoint is fp8, or
where the row runs a bf16 checkpoint in fp8: the tables' fp8 matrix products and MoE layers), its
TP and expert parallelism inside an instance; a disaggregated row as a split arrangement, each side
with the preset of its own TP. Each instance is one simulated GPU with its preset's cost and KV
capacity. vLLM: prompts read beside replies, at most 8,192 tokens an iteration (its default
`max_num_batched_tokens` for the API server on GPUs of 70 GB and more); SGLang: prompt-only
iterations (E10, its default of not mixing), at most `chunked_prefill_size` tokens (8,192 below
160 GB of GPU memory, 16,384 above: server_args.py).

The measurement's client is a closed loop (`--max-concurrency` clients, each sending its next
request when its last reply ends): `validation.closed_loop`, 10 requests a client, TTFT and TPOT
the means over each client's requests after its first. The open-loop column is the earlier
expression (Poisson arrivals at the rate whose requests in flight, by Little's law, equal the
concurrency: `validation.at_concurrency`), kept to show what the client's form does.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from disagg_simpy.costs import composed as C  # noqa: E402
from disagg_simpy.costs import gpus  # noqa: E402
from disagg_simpy.costs import operators as O  # noqa: E402
from disagg_simpy.costs.hf_config import ModelConfig, read_model_config  # noqa: E402
from disagg_simpy.errors import InputError  # noqa: E402
from disagg_simpy.scenario.loading import load_scenario  # noqa: E402
from disagg_simpy.validation import at_concurrency, closed_loop  # noqa: E402

SYSTEMS = {system: gpu for gpu, system in O.GPUS.items()}
ENGINE_OF = {("vllm", gpu): e for gpu, e in C.PAIRS if e.startswith("vllm")} | {
    ("sglang", gpu): e for gpu, e in C.PAIRS if e.startswith("sglang")}
PER_CLIENT = 10


def _int(x) -> int:
    return 1 if pd.isna(x) or x == "" else int(x)


def concurrency_of(r: pd.Series) -> int | None:
    """The benchmark's clients: `silicon_concurrency=` in the row's source, else its batch size."""
    src = str(r.silicon_data_source)
    if "silicon_concurrency=" in src:
        return int(src.split("silicon_concurrency=")[1].split(";")[0])
    return None if pd.isna(r.batch_size) else int(r.batch_size)


def model_of(r: pd.Series, folder: Path) -> ModelConfig:
    """The row's model config, with fp8 weights where the row runs a bf16 checkpoint in fp8."""
    model = read_model_config(folder / "model_configs" / f"{r.model_path.replace('/', '--')}_config.json")
    mode = r.gemm_quant_mode if isinstance(r.gemm_quant_mode, str) else ""
    if model.quant == "bfloat16" and mode in ("fp8", "fp8_block"):
        model = model.quantised(mode)
    return model


def reasons(r: pd.Series, folder: Path) -> list[str]:
    """Every reason the row is not expressible (empty: it is)."""
    out = []
    if r.backend not in ("vllm", "sglang"):
        out.append(f"engine {r.backend}: the tables hold vLLM and SGLang kernels only")
    if r.system not in SYSTEMS:
        out.append(f"GPU {r.system}: not in the tables (A100, H100, H200, B200)")
    for key in ("gemm_quant_mode", "moe_quant_mode"):
        mode = r[key]
        if isinstance(mode, str) and mode not in ("", "bfloat16", "float16", "fp8", "fp8_block"):
            out.append(f"{key} {mode}: weights below 8 bits are not composed")
            break
    agg = r["mode"] == "agg"
    pp = _int(r.pp_size) if agg else max(_int(r.prefill_pp_size), _int(r.decode_pp_size))
    dp = _int(r.attention_dp_size) if agg else max(_int(r.prefill_attention_dp_size), _int(r.decode_attention_dp_size))
    if pp > 1:
        out.append(f"pipeline parallel {pp}: not composed")
    if dp > 1:
        out.append(f"attention data parallel {dp}: not composed")
    path = folder / "model_configs" / f"{r.model_path.replace('/', '--')}_config.json"
    if not path.is_file():
        out.append(f"no config for {r.model_path}")
    else:
        try:
            model_of(r, folder)
        except InputError as e:
            out.append("model: " + str(e).split(": ", 1)[1].split(" (dense")[0])
    if not out:
        for side, tp, ep in sides(r):
            try:
                C.compose(model_of(r, folder), O.tables(folder, SYSTEMS[r.system], ENGINE_OF[(r.backend,
                          SYSTEMS[r.system])]), tp, r.model_path, ep=ep)
            except InputError as e:
                out.append(f"tables ({side} TP{tp}{f' EP{ep}' if ep > 1 else ''}): {e}")
    if not out and concurrency_of(r) is None and r["mode"] == "agg":
        out.append("no concurrency given")
    return out


def sides(r: pd.Series) -> list[tuple[str, int, int]]:
    """(side, TP, EP) of each kind of instance: one for aggregated serving, two for disaggregated."""
    if r["mode"] == "agg":
        return [("instance", _int(r.tp_size), _int(r.moe_ep_size))]
    return [("reading", _int(r.prefill_tp_size), _int(r.prefill_moe_ep_size)),
            ("writing", _int(r.decode_tp_size), _int(r.decode_moe_ep_size))]


@dataclass
class Expressed:
    spec: dict
    quant: str
    arrangement: str
    concurrency: int
    notes: str


def express(r: pd.Series, folder: Path) -> Expressed:
    """The row as a scenario (the module's docstring)."""
    gpu = SYSTEMS[r.system]
    engine = ENGINE_OF[(r.backend, gpu)]
    model = model_of(r, folder)
    t = O.tables(folder, gpu, engine)
    presets = {side: C.compose(model, t, tp, r.model_path, ep=ep) for side, tp, ep in sides(r)}
    budget = 8192 if r.backend == "vllm" or gpus.KINDS[gpu].memory_gib < 160 else 16384
    isl, osl = int(r.isl), int(r.osl)
    workload = {"rate_per_s": 1, "warmup_s": 60, "measure_s": 240, "prompt_mix": [{"share": 1, "tokens": {"fixed": isl}}],
                "reply_words": {"fixed": osl}}
    if r["mode"] == "agg":
        p = presets["instance"]
        tp, ep = sides(r)[0][1:]
        name = f"tp{tp}" + (f"-ep{ep}" if ep > 1 else "")
        arrangement = {"name": name, "kind": "colocated", "gpus": 1, "kv_capacity_tokens": p["kv_capacity_tokens"],
                       "max_batch_tokens": budget}
        if r.backend == "sglang":
            arrangement["mixed_iterations"] = False
        cost = dict(p["attention_cost"])
        concurrency = concurrency_of(r)
        notes = f"one TP{tp}{f' EP{ep}' if ep > 1 else ''} instance"
    else:
        read, write = presets["reading"], presets["writing"]
        (_, rtp, _), (_, wtp, _) = sides(r)
        readers, writers = _int(r.prefill_num_workers), _int(r.decode_num_workers)
        name = f"split-{readers}x{rtp}-{writers}x{wtp}"
        arrangement = {"name": name, "kind": "disaggregated", "reading_gpus": readers, "writing_gpus": writers,
                       "reading_cost": side_cost(read), "writing_cost": side_cost(write),
                       "kv_ship_ms_per_token": read["kv_ship_ms_per_token"]["inter_node"],
                       "reading_kv_capacity_tokens": read["kv_capacity_tokens"],
                       "writing_kv_capacity_tokens": write["kv_capacity_tokens"], "max_batch_tokens": budget,
                       "max_batch_replies": _int(r.decode_batch_size)}
        cost = dict(read["attention_cost"])
        concurrency = concurrency_of(r) or _int(r.decode_batch_size) * writers
        notes = (f"{readers} reading instance(s) of TP{rtp}, {writers} writing of TP{wtp}, each side its own preset; "
                 "KV shipped at the reading GPU's inter-node bandwidth; concurrency: the writing side's batch "
                 "(the row gives none)" if concurrency_of(r) is None else "")
    quant = {"bfloat16": "bf16"}.get(model.quant, model.quant + " weights")
    p0 = next(iter(presets.values()))
    header = (f"validate: AIConfigurator's measured deployment (silicon_refs.csv row {r.id}): {r.model_path} "
              f"({quant}) on {r.system} under {r.backend} {r.backend_version}, ISL {isl:,}, OSL {osl:,}, "
              f"{concurrency} clients in a closed loop. Costs composed from AIConfigurator's per-operator "
              f"kernel timings for {p0['engine']} {p0['engine_version']} (benchmarks/silicon_accuracy.py; nothing "
              f"fitted to end-to-end runs); {notes or 'one instance'}.")
    spec = {"name": slug(r), "seed": 1, "max_sim_s": 3000, "workload": workload, "cost": cost,
            "arrangements": [arrangement]}
    return Expressed({"#": header, **spec}, quant, name, concurrency, notes)


def side_cost(p: dict) -> dict:
    """A side's own cost block: its preset's fields, E15's tile off where its fit kept none (a
    side's unset field would be the scenario's)."""
    return {"per_token_tile_ms": 0.0, **p["attention_cost"]}


def slug(r: pd.Series) -> str:
    model = r.model_path.split("/")[1].lower().replace("-instruct", "").replace(".", "")
    mode = "" if r["mode"] == "agg" else "-disagg"
    return f"aic-{model}-{SYSTEMS[r.system].split('-')[0]}-{r.backend}{mode}"


def write(e: Expressed, folder: Path) -> Path:
    spec = dict(e.spec)
    header = spec.pop("#")
    words, line, lines = header.split(), "#", []
    for w in words:
        if len(line) + len(w) + 1 > 110:
            lines.append(line)
            line = "#"
        line += " " + w
    lines.append(line)
    path = folder / f"{spec['name']}.yaml"
    path.write_text("\n".join(lines) + "\n" + yaml.safe_dump(spec, sort_keys=False, width=120))
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", type=Path, metavar="DIR", help="also write each expressible row's scenario here")
    ap.add_argument("--no-open-loop", action="store_true", help="leave out the open-loop column (faster)")
    args = ap.parse_args()
    folder = O.data_folder()
    if folder is None:
        raise SystemExit(f"no AIConfigurator tables: set ${O.ENV_FOLDER}")
    refs = pd.read_csv(folder / "accuracy_tracking" / "silicon_refs.csv")
    not_expressed = ["| # | measurement | why not expressible |", "|---|---|---|"]
    rows = ["| # | measurement | engine (measured; tables) | model, weights | layout | ISL / OSL | clients | TTFT "
            "measured -> closed loop (error) | TPOT measured -> closed loop (error) | open loop TTFT / TPOT error |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    # (without --write, a folder of this run's own: two runs at once never overwrite each other's scenarios)
    out = Path(tempfile.mkdtemp(prefix="silicon_accuracy-")) if args.write is None else args.write
    for i, r in refs.iterrows():
        why = reasons(r, folder)
        if why:
            not_expressed.append(f"| {i + 1} | `{r.id[:60]}` | {'; '.join(why)} |")
            continue
        e = express(r, folder)
        path = write(e, out)
        scenario = load_scenario(path)
        loop = closed_loop(scenario, e.arrangement, e.concurrency, PER_CLIENT)
        open_cell = "-"
        if not args.no_open_loop and r["mode"] == "agg":
            ttft, tpot = at_concurrency(scenario, e.arrangement, e.concurrency, 1)
            open_cell = f"{ttft / r.silicon_ttft_ms - 1:+.0%} / {tpot / r.silicon_tpot_ms - 1:+.0%}"
        rows.append(f"| {i + 1} | `{r.id[:60]}` | {r.backend} {r.backend_version}; {C.ENGINE_LABELS[r.backend]} "
                    f"{O.ENGINES[ENGINE_OF[(r.backend, SYSTEMS[r.system])]][1]} | {r.model_path.split('/')[1]}, {e.quant} | "
                    f"{SYSTEMS[r.system]}, {e.arrangement} | {int(r.isl):,} / {int(r.osl):,} | {e.concurrency} | "
                    f"{r.silicon_ttft_ms:,.0f} -> {loop.ttft_ms:,.0f} ms ({loop.ttft_ms / r.silicon_ttft_ms - 1:+.0%}) | "
                    f"{r.silicon_tpot_ms:.1f} -> {loop.tpot_ms:.1f} ms ({loop.tpot_ms / r.silicon_tpot_ms - 1:+.0%}) | "
                    f"{open_cell} |")
        print(f"row {i + 1}: {path} ({loop.passes} passes; first wave TTFT {loop.first_ttft_ms:,.0f} ms)", file=sys.stderr)
    print("\n".join(rows))
    print()
    print("\n".join(not_expressed))


if __name__ == "__main__":
    main()
