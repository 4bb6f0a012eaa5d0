"""Records-identical digest: a hash of every run's records and frames over every scenario x
arrangement x option set, so a refactoring of the model can be shown to change no number.

One line per run: `scenario | arrangement | option set | records HASH | frames HASH | events N`
(records: every array and figure of the arrangement's `ArrangementRecords`; frames: the CSV text
of requests, iterations, reads, summary, freezes and the measured replies' words). Runs are short
(`--measure-s`, default 10 s of traffic, seed 1). Trace scenarios run when DISAGG_SIMPY_TRACES is
set. An option set that an arrangement cannot take (a split-only key on a colocated arrangement,
say) leaves that key out; one the scenario rejects prints `skip` with the reason.

    PYTHONPATH=/tmp/base python benchmarks/digest.py --out /tmp/digest-base.txt   # the baseline tree
    PYTHONPATH=. python benchmarks/digest.py --against /tmp/digest-base.txt        # a change: 0 differences?
    python benchmarks/digest.py --compare /tmp/digest-base.txt /tmp/digest-new.txt  # two files, nothing run

`--against FILE` prints each run whose records or frames differ (and SimPy event counts apart:
they measure the code's structure, not its results) and a last line with the counts; exit 1 on
any difference of records or frames. `--only TEXT` keeps the runs whose label contains TEXT.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import os
import re
import sys
import time
from pathlib import Path

import numpy as np

from disagg_simpy import load_scenario, run
from disagg_simpy.model.gpu import Gpu

ROOT = Path(__file__).resolve().parent.parent
PAGED = {"kv_policy": "paged", "kv_capacity_tokens": 60_000}
TIGHT = {"kv_policy": "paged", "kv_capacity_tokens": 14_000, "kv_block_tokens": 16}

#: Option sets covering E1-E17 (keys an arrangement does not have are left out for it): `cost.KEY`
#: sets the scenario's cost, `scenario.` before a key a scenario key, `ff` False runs one iteration at a time.
OPTION_SETS: dict[str, dict] = {
    "off": {},
    "off-ff-off": {"ff": False},
    "chunk-256": {"chunk_tokens": 256},
    "e1-sides": {"reading_cost": {"iteration_ms": 20}, "writing_cost": {"iteration_ms": 8, "per_reply_ms": 0.6},
                 "cost": {"iteration_ms": 9, "per_prompt_token_ms": 0.04}, "kv_ship_ms_per_token": 0.02},
    "e2-reread": {"cost.per_reread_token_ms": 0.002, "chunk_tokens": 512},
    "e3-context": {"cost.per_context_token_ms": 0.0003},
    "e3-context-ff-off": {"cost.per_context_token_ms": 0.0003, "ff": False},
    "e4-reserve": {"kv_capacity_tokens": 30_000},
    "e4-tight-noreply": {"kv_capacity_tokens": 12_000},
    "e5-link-shared": {"kv_link": "shared", "kv_capacity_tokens": 40_000},
    "e5-link-per-reading": {"kv_link": "per_reading_gpu"},
    "e6-local": {"local_prompt_max_tokens": 600},
    "e7-attention": {"cost.per_attention_pair_ms": 1e-6},
    "e7-attention-chunk": {"cost.per_attention_pair_ms": 1e-6, "chunk_tokens": 512},
    "e8-replies": {"max_batch_replies": 24},
    "e8-tokens": {"max_batch_tokens": 2048},
    "e8-tokens-chunk": {"max_batch_tokens": 1024, "chunk_tokens": 512},
    "e8-sides": {"max_batch_tokens": 2048, "reading_max_batch_requests": 4, "writing_max_batch_replies": 24,
                 "writing_max_batch_tokens": 4096},
    "e8-sides-chunk-e9": {**TIGHT, "chunk_tokens": 512, "reading_max_batch_requests": 2, "reading_max_batch_tokens": 1024,
                          "writing_max_batch_replies": 40},
    "e10-unmixed": {"mixed_iterations": False},
    "e7-e10": {"cost.per_attention_pair_ms": 1e-6, "max_batch_replies": 32, "max_batch_tokens": 4096,
               "mixed_iterations": False, "cost.per_context_token_ms": 0.0002},
    "e7-e10-ff-off": {"cost.per_attention_pair_ms": 1e-6, "max_batch_replies": 32, "max_batch_tokens": 4096,
                      "mixed_iterations": False, "cost.per_context_token_ms": 0.0002, "ff": False},
    "e9-paged": dict(PAGED),
    "e9-recompute-tight": dict(TIGHT),
    "e9-swap-tight": {**TIGHT, "preemption": "swap", "swap_ms_per_token": 0.002},
    "e9-drop": {**TIGHT, "max_preemptions": 0},
    "e9-paged-chunk-e8": {**TIGHT, "chunk_tokens": 512, "max_batch_tokens": 2048, "max_batch_replies": 40},
    "e9-e10": {**TIGHT, "mixed_iterations": False},
    "e9-tight-ff-off": {**TIGHT, "preemption": "swap", "swap_ms_per_token": 0.002, "ff": False},
    "e7-e9": {"cost.per_attention_pair_ms": 1e-6, **TIGHT},
    "e7-e9-chunk": {"cost.per_attention_pair_ms": 1e-6, "chunk_tokens": 512, **TIGHT},
    "e7-e9-e3-chunk-fractions": {"cost.per_attention_pair_ms": 1.3e-6, "cost.per_context_token_ms": 0.0003,
                                 "cost.per_reread_token_ms": 0.0011, "chunk_tokens": 384, **PAGED},
    "e7-e9-e10": {"cost.per_attention_pair_ms": 1e-6, "mixed_iterations": False, "max_batch_replies": 32, **TIGHT},
    "e12-roles": {"roles": {"policy": "queue", "switch_s": 1, "check_s": 0.5, "cooldown_s": 2}},
    "e13-prefix": {"scenario.prefix_cache_tokens": 200_000, "cost.per_cached_token_ms": 0.005,
                   "workload.prefixes": {"share": 0.6, "groups": 4, "tokens": [50, 190]}},
    "e13-prefix-aware-e4": {"scenario.prefix_cache_tokens": 100_000, "scenario.router": "prefix_aware",
                            "workload.prefixes": {"share": 0.6, "groups": 4, "tokens": [50, 190]},
                            "kv_capacity_tokens": 40_000, "chunk_tokens": 512},
    "e14-unsaturated": {"cost.prompt_iteration_ms": 3, "cost.free_prompt_tokens": 256},
    "e15-tiles": {"cost.token_tile": 128, "cost.per_token_tile_ms": 0.5},
    "e14-e15-chunk": {"cost.prompt_iteration_ms": 2, "cost.free_prompt_tokens": 128, "cost.token_tile": 64,
                      "cost.per_token_tile_ms": 0.25, "chunk_tokens": 512},
    "tp-2": {"tp": 2, "reading_tp": 2, "writing_tp": 2},
    "fractional-costs": {"cost.iteration_ms": 11.3333, "cost.per_reply_ms": 0.41234567, "cost.per_prompt_token_ms": 0.0511,
                         "cost.per_context_token_ms": 0.0001234, "chunk_tokens": 384},
    "e16-speculative": {"scenario.speculative": {"tokens": 4, "acceptance": 0.7, "per_draft_token_ms": 0.02}},
    "e16-speculative-ff-off": {"scenario.speculative": {"tokens": 4, "acceptance": 0.7}, "ff": False},
    "e16-e4-e8-e10-e15": {"scenario.speculative": {"tokens": 2, "acceptance": 0.5}, "kv_capacity_tokens": 30_000,
                          "max_batch_replies": 24, "mixed_iterations": False, "cost.token_tile": 64,
                          "cost.per_token_tile_ms": 0.25},
    "e17-experts": {"cost.per_expert_ms": 0.2, "cost.experts": 64, "cost.experts_per_token": 8},
    "e17-e16-e15-chunk": {"cost.per_expert_ms": 0.0000003, "cost.experts": 128, "cost.experts_per_token": 8,
                          "scenario.speculative": {"tokens": 2, "acceptance": 0.6}, "cost.token_tile": 64,
                          "cost.per_token_tile_ms": 0.25, "chunk_tokens": 512},
}
#: records fields added by a later option, left out of the hash while off (so older digests still match)
OFF_WHEN_NONE = ("speculative",)


def hash_value(h, value) -> None:
    """Feed `value` (arrays, dicts, dataclasses, sequences, scalars) to hash `h`, structure included."""
    if isinstance(value, np.ndarray):
        h.update(f"nd{value.dtype.str}{value.shape}".encode())
        h.update(np.ascontiguousarray(value).tobytes())
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        h.update(type(value).__name__.encode())
        for f in dataclasses.fields(value):
            if f.name == "n_events" or (f.name in OFF_WHEN_NONE and getattr(value, f.name) is None):
                continue
            h.update(f.name.encode())
            hash_value(h, getattr(value, f.name))
    elif isinstance(value, dict):
        h.update(b"{")
        for k in sorted(value, key=str):
            h.update(repr(k).encode())
            hash_value(h, value[k])
        h.update(b"}")
    elif isinstance(value, (list, tuple)):
        h.update(b"[")
        for v in value:
            hash_value(h, v)
        h.update(b"]")
    else:
        h.update(repr(value).encode())


def short(h) -> str:
    return h.hexdigest()[:16]


def scenario_files() -> list[Path]:
    traces = bool(os.environ.get("DISAGG_SIMPY_TRACES"))
    out = []
    for path in sorted((ROOT / "scenarios").glob("*.yaml")):
        text = path.read_text()
        if "\n  trace:" in text and not traces:
            continue
        out.append(path)
    return out


def short_window(scenario, measure_s: float):
    """The scenario cut to `measure_s` of measured traffic from 0 (traces: from their start)."""
    w = scenario.workload
    changes: dict = {"workload.warmup_s": 0, "workload.measure_s": measure_s, "max_sim_s": measure_s + 30}
    if getattr(w, "trace", None) is not None and w.format != "lengths":  # (a lengths table has no clock to cut)
        changes["workload.duration_s"] = measure_s
    if getattr(w, "n_requests", None) is not None:  # (a fixed count: as many as the rate sends in the window)
        changes = {"workload.n_requests": max(1, round((w.rate_per_s or 1) * measure_s))}
    try:
        return scenario.with_overrides(**changes)
    except Exception:  # (a schedule or other keys tied to the window: keep the scenario's own, capped)
        return scenario.with_overrides(**{"max_sim_s": min(scenario.max_sim_s or 1e9, measure_s + 30)})


def with_option_set(scenario, arrangement, options: dict):
    """`scenario` with only `arrangement`, `options` applied (keys it lacks left out)."""
    cost = {k: v for k, v in options.items() if k.startswith("cost.")}
    top = {k.split(".", 1)[1]: v for k, v in options.items() if k.startswith("scenario.")}
    work = {k: v for k, v in options.items() if k.startswith("workload.")}
    rest = {k: v for k, v in options.items() if "." not in k and k != "ff"}
    fields = type(arrangement).model_fields
    aliases = {f.alias: name for name, f in fields.items() if f.alias}
    rest = {k: v for k, v in rest.items() if k in fields or k in aliases}
    data = {**arrangement.model_dump(exclude_none=True, by_alias=True), **rest}
    a = type(arrangement).model_validate(data)
    s = scenario.model_copy(update={"arrangements": (a,)})
    if work:
        if getattr(s.workload, "trace", None) is not None:
            work = {}
        else:
            w = s.workload.model_dump(exclude_none=True)
            for k, v in work.items():
                w[k.split(".", 1)[1]] = v
            s = s.model_copy(update={"workload": type(s.workload).model_validate(w)})
    if cost or top:
        s = s.with_overrides(**cost, **top)
    return s


def one_run(scenario, name: str) -> tuple[str, str, int]:
    res = run(scenario, seed=1)
    rec = res.records[name]
    h = hashlib.sha256()
    hash_value(h, rec)
    f = hashlib.sha256()
    for table in ("requests", "iterations", "reads", "summary", "freezes"):
        frame = getattr(res, table, None)
        if frame is not None:
            f.update(table.encode())
            f.update(frame.to_csv(index=False).encode())
    f.update(res.words(name).to_csv(index=False).encode())
    return short(h), short(f), rec.n_events


def lines(only: str | None, measure_s: float):
    for path in scenario_files():
        try:
            base = short_window(load_scenario(path), measure_s)
        except Exception as e:  # noqa: BLE001 (reported, not fatal: a scenario this tree cannot load)
            yield f"{path.stem} | * | * | skip {type(e).__name__}: {str(e).splitlines()[0][:120]}"
            continue
        for arrangement in base.arrangements:
            for set_name, options in OPTION_SETS.items():
                label = f"{path.stem} | {arrangement.name} | {set_name}"
                if only and only not in label:
                    continue
                try:
                    s = with_option_set(base, arrangement, options)
                except Exception as e:  # noqa: BLE001
                    yield f"{label} | skip {type(e).__name__}: {str(e).splitlines()[0][:120]}"
                    continue
                Gpu.fast_forward = options.get("ff", True)
                try:
                    records, frames, events = one_run(s, arrangement.name)
                except Exception as e:  # noqa: BLE001 (a run this tree refuses: printed, compared as text)
                    yield f"{label} | error {type(e).__name__}: {str(e).splitlines()[0][:120]}"
                    continue
                finally:
                    Gpu.fast_forward = True
                yield f"{label} | records {records} | frames {frames} | events {events}"


def parse(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        line = re.sub(r"/\S*/scenarios/", "scenarios/", line)  # (a tree's own path in a refusal's text)
        parts = line.split(" | ")
        if len(parts) >= 4:
            value = " | ".join(parts[3:])
            out[" | ".join(parts[:3])] = value if value.startswith("records") else value[:90]
    return out


def compare(before: dict[str, str], after: dict[str, str]) -> int:
    differ = events = missing = 0
    for key, old in before.items():
        new = after.get(key)
        if new is None:
            missing += 1
            print(f"MISSING {key}")
            continue
        o, n = old.rsplit(" | events ", 1) if " | events " in old else (old, ""), \
            new.rsplit(" | events ", 1) if " | events " in new else (new, "")
        if o[0] != n[0]:
            differ += 1
            print(f"DIFFER {key}\n   before {old}\n   after  {new}")
        elif o[1] != n[1]:
            events += 1
            print(f"events {key}: {o[1]} -> {n[1]}")
    extra = [k for k in after if k not in before]
    for k in extra:
        print(f"NEW {k}")
    ran = sum(1 for k, v in after.items() if k in before and v.startswith("records"))
    print(f"compared {ran} runs ({len(before)} lines before): {differ} differ in records or frames, "
          f"{missing} missing, {len(extra)} new, {events} differ only in SimPy event counts")
    return 1 if differ or missing else 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", help="also write the lines to this file")
    p.add_argument("--against", help="a digest file to compare with: print the differences")
    p.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"), help="compare two digest files, running nothing")
    p.add_argument("--only", help="only runs whose label contains this text")
    p.add_argument("--measure-s", type=float, default=10.0, help="seconds of measured traffic (default 10)")
    args = p.parse_args()
    if args.compare:
        return compare(parse(Path(args.compare[0]).read_text()), parse(Path(args.compare[1]).read_text()))
    t0 = time.process_time()
    got: list[str] = []
    for line in lines(args.only, args.measure_s):
        got.append(line)
        if not args.against:
            print(line, flush=True)
    if args.out:
        Path(args.out).write_text("\n".join(got) + "\n")
    print(f"# {len(got)} lines, {time.process_time() - t0:.0f} CPU s", file=sys.stderr)
    if args.against:
        before = parse(Path(args.against).read_text())
        if args.only:
            before = {k: v for k, v in before.items() if args.only in k}
        return compare(before, parse("\n".join(got)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
