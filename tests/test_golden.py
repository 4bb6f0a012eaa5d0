"""Golden hashes: the outputs of fixed runs, byte for byte, so no change moves a number unseen.

The cases of benchmarks/golden.py: scenarios/default.yaml with seeds 1..3, and its small trace
scenario that stresses one instant's order (D5) with same-instant arrivals, iteration ends,
ship ends and arrivals on one 1 ms grid, one-word replies and prompts of exactly one chunk.
Each table is hashed as its CSV text (`to_csv(index=False)`: the bytes the CLI writes); the
expected values were taken on main before the package was split into subpackages.
If a change is meant to move numbers, say why in its commit and update the values here with
`PYTHONPATH=. python benchmarks/golden.py --seeds 3 --no-events`.
"""

from __future__ import annotations

import hashlib

import pandas as pd
import pytest
from helpers import ROOT, freezes_by_reply, golden_trace_csv, scenario_text

from disagg_simpy import load_scenario, run

TRACE_SCENARIO = {
    "seed": 1,
    "workload": {"trace": "trace.csv", "warmup_s": 0.5, "measure_s": 8},
    "max_sim_s": 60,
    "cost": {"iteration_ms": 12, "per_reply_ms": 1, "per_prompt_token_ms": 0.1, "kv_ship_ms_per_token": 0.1},
    "arrangements": [
        {"name": "same-gpu", "kind": "colocated", "gpus": 4},
        {"name": "chunked-200", "kind": "colocated", "gpus": 4, "chunk_tokens": 200},
        {"name": "chunked-1", "kind": "colocated", "gpus": 2, "chunk_tokens": 1},
        {"name": "split-2-2", "kind": "disaggregated", "reading_gpus": 2, "writing_gpus": 2},
        {"name": "split-2-2-chunked", "kind": "disaggregated", "reading_gpus": 2, "writing_gpus": 2,
         "chunk_tokens": 300},
        {"name": "split-1-3", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 3},
        {"name": "split-3-1", "kind": "disaggregated", "reading_gpus": 3, "writing_gpus": 1},
    ],
}

# from `PYTHONPATH=. python benchmarks/golden.py --seeds 3` on main at f8f4037; then the
# summaries for busy_pct renamed to iterating_pct plus two new columns (old columns' values checked
# equal), and the trace case for csv times taken as written: its first row is at 5 ms, and the old
# outputs equal the new ones of the same trace shifted to start at 0. Then (options E1-E6) requests,
# iterations and summary gain columns that stay empty with its options off (handoff_wait_s,
# link_wait_s, kv_used_tokens, kv_peak_*_pct, handoff/link_waited_pct): every older column was
# compared value for value with pandas against main's outputs and is unchanged.
# Then (why late) requests and summary gain columns (queued_s .. frozen_s; the late-by-one-limit
# shares, n_freezes, freezes_by_long_prompt_pct), compared the same way and unchanged, and the
# freezes table is hashed too. Then (bounded outputs) freezes.csv has one row per freezing iteration
# with the replies it froze: its old rows, one per freeze of a reply, are `freezes_by_reply`
# (each reply paired with the rows it saw, in the old columns), and they hash to the old values.
EXPECTED = {
    "default/seed1": {
        "requests": "daef55324c7e829f",
        "iterations": "9b3c9af72fb34e5c",
        "reads": "3e3258d239931cc5",
        "summary": "1d81f77714f3a59b",
        "freezes": "fbb3a28aacb990ee",
        "freezes_by_reply": "a3d35a6bdc55a1e9",
        "words[same-gpu]": "96ed5df5df89e14a",
        "words[chunked-512]": "500ef93a98a56de2",
        "words[split-2-2]": "2ab939c3da96a73d",
        "words[split-1-3]": "7d9ced01e2de50a6",
        "words[split-3-1]": "2a5a100c4a2d3284",
    },
    "default/seed2": {
        "requests": "01d308a3c6b30870",
        "iterations": "6336f1a2dd1d5a63",
        "reads": "a9e5ab1a9ee8a175",
        "summary": "ae1dfb95635695d6",
        "freezes": "615191fff9dc2c4d",
        "freezes_by_reply": "12f0ab6204eb11cc",
    },
    "default/seed3": {
        "requests": "361b3954bbeb3d4c",
        "iterations": "32aec4d43eaa62cc",
        "reads": "28750f2dbfbfa946",
        "summary": "c238bf137988bcb3",
        "freezes": "4182119546e54b00",
        "freezes_by_reply": "e5fb0edc5b3cc04d",
    },
    "trace": {
        "requests": "14d5c858e0b07ac6",
        "iterations": "3e15c6d5456601a7",
        "reads": "243491ff3ca172a0",
        "summary": "5162ebd88b9f2414",
        "freezes": "b5e0af7b98ea061e",
        "freezes_by_reply": "73e56f37afbfaee8",
        "words[same-gpu]": "0481fc87ef079d70",
        "words[chunked-200]": "f90e9dd1730997cb",
        "words[chunked-1]": "f425e54a8657a2f0",
        "words[split-2-2]": "3a420c3caa66d746",
        "words[split-2-2-chunked]": "f8f9b921c0b984e3",
        "words[split-1-3]": "d063206c638fda7f",
        "words[split-3-1]": "b1821b5e402a27fc",
    },
}


def digest(frame) -> str:
    return hashlib.sha256(frame.to_csv(index=False).encode()).hexdigest()[:16]


#: the columns of freezes.csv before it had one row per freezing iteration: one row per freeze of a reply
FREEZES_BY_REPLY = ["arrangement", "seed", "request_id", "gap_started_at_s", "gap_s", "writing_gpu", "cause",
                    "blamed_request_ids", "blamed_prompt_tokens"]


def digests(result, words: bool) -> dict[str, str]:
    """Hash of each table, and of every arrangement's word times if `words`."""
    out = {name: digest(getattr(result, name)) for name in ("requests", "iterations", "reads", "summary", "freezes")}
    by_reply = [freezes_by_reply(result, a)[FREEZES_BY_REPLY] for a in result.records]
    out["freezes_by_reply"] = digest(pd.concat(by_reply, ignore_index=True))
    if words:
        out.update({f"words[{a}]": digest(result.words(a)) for a in result.summary["arrangement"]})
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_default_scenario_outputs_are_unchanged(seed):
    result = run(load_scenario(ROOT / "scenarios" / "default.yaml"), seed=seed)
    assert digests(result, words=seed == 1) == EXPECTED[f"default/seed{seed}"]


def test_golden_trace_outputs_are_unchanged(tmp_path):
    (tmp_path / "trace.csv").write_text(golden_trace_csv())
    (tmp_path / "golden.yaml").write_text(scenario_text("golden-trace", **TRACE_SCENARIO))
    assert digests(run(load_scenario(tmp_path / "golden.yaml")), words=True) == EXPECTED["trace"]
