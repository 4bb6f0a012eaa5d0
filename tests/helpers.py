"""Shared test helpers (a plain module, not a conftest): scenario text and tiny trace runs.

    from helpers import run_rows, scenario_text, write_scenario

`scenario_text` builds a scenario's YAML from plain dicts, so a test states only what it
changes; `write_trace` and `write_scenario` put a hand-written trace beside it; `run_rows` runs
one through the public API. `golden_trace_csv` is the fixed trace of benchmarks/golden.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import yaml

from disagg_simpy import load_scenario, run
from disagg_simpy.cli import main as cli_main
from disagg_simpy.workload.catalog import CATALOG, ENV_FOLDER

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ROOT / "scenarios" / "default.yaml"
CLAIM_SEEDS = range(1, 31)  # 30 seeds: fewer swing too much to test a claim honestly
NS_PER_S = 1_000_000_000

TRACE_HEADER = "arrived_at_s,n_prompt_tokens,n_reply_words"
COLOCATED_1 = [{"name": "same", "kind": "colocated", "gpus": 1}]
SPLIT_1_1 = [{"name": "split", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 1}]
#: The explainer's five arrangements of four GPUs (as in scenarios/default.yaml).
PAGE_ARRANGEMENTS = [
    {"name": "same-gpu", "kind": "colocated", "gpus": 4},
    {"name": "chunked-512", "kind": "colocated", "gpus": 4, "chunk_tokens": 512},
    {"name": "split-2-2", "kind": "disaggregated", "reading_gpus": 2, "writing_gpus": 2},
    {"name": "split-1-3", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 3},
    {"name": "split-3-1", "kind": "disaggregated", "reading_gpus": 3, "writing_gpus": 1},
]
#: The explainer's traffic mix (M6), at a rate and window of the caller's choosing.
PAGE_MIX = {"prompt_mix": [{"share": 0.3, "tokens": [3000, 8000]}, {"share": 0.7, "tokens": [200, 1200]}],
            "reply_words": [100, 400]}


def scenario_text(name="micro", workload=None, cost=None, slo=None, arrangements=COLOCATED_1, **extra) -> str:
    """A scenario as YAML. `workload` defaults to the trace `<name>.csv`; cost and slo keep
    their defaults unless given; `extra` adds top-level keys (seed, max_sim_s)."""
    spec = {"name": name, "workload": workload or {"trace": f"{name}.csv"}}
    spec.update({k: v for k, v in (("cost", cost), ("slo", slo)) if v is not None})
    spec.update(extra)
    spec["arrangements"] = list(arrangements)
    return yaml.safe_dump(spec, sort_keys=False)


#: the preset small plans over costs and GPU kinds run on (Vidur's Llama-2-7B, TP1 on an A100)
A100_7B = "a100-80gb/llama-2-7b/tp1/vidur-sarathi"


def preset_scenario(folder: Path, name: str, workload: dict, arrangements: list[dict], preset: str = A100_7B,
                    **top) -> Path:
    """A scenario of `workload` on `preset`'s costs (`top`: other keys, like seeds), written to `name`.yaml."""
    spec = {"name": name, **top, "workload": workload, "cost": {"preset": preset}, "arrangements": arrangements}
    path = Path(folder) / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def write_trace(folder: Path, rows, name="micro") -> Path:
    """`<name>.csv` with one line per (arrived_at_s, n_prompt_tokens, n_reply_words) row.

    Times are written as given: a str is copied verbatim (a decimal exactly as a trace holds
    it), a float as its shortest repr."""
    lines = [TRACE_HEADER] + [f"{t if isinstance(t, str) else repr(t)},{p},{w}" for t, p, w in rows]
    path = Path(folder) / f"{name}.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def write_scenario(folder: Path, rows, arrangements=COLOCATED_1, name="micro", workload=None, **extra) -> Path:
    """A scenario replaying `rows` as a CSV trace; `workload` keys are added to the trace's
    (warmup_s, measure_s, ...); `extra` goes to `scenario_text` (cost, slo, max_sim_s)."""
    write_trace(folder, rows, name)
    text = scenario_text(name, {"trace": f"{name}.csv", **(workload or {})}, arrangements=arrangements, **extra)
    path = Path(folder) / f"{name}.yaml"
    path.write_text(text)
    return path


def run_rows(folder: Path, rows, arrangements=COLOCATED_1, **extra):
    """Run a tiny trace through `arrangements` (like conftest's `micro`); the RunResult."""
    return run(load_scenario(write_scenario(folder, rows, arrangements, **extra)))


def request(result, arrangement: str, request_id: int):
    """One row of `result.requests`."""
    r = result.requests
    return r[(r.arrangement == arrangement) & (r.request_id == request_id)].iloc[0]


def seconds(ns: int) -> float:
    """Whole nanoseconds as the seconds the frames hold (ns / 1e9, correctly rounded), so a
    test can compare hand-worked integer times with `==`."""
    return ns / NS_PER_S


#: One GPU three ways: whole prompts, chunked prompts, split reading and writing (1 + 1).
ONE_GPU_THREE_WAYS = [
    {"name": "same", "kind": "colocated", "gpus": 1},
    {"name": "chunked", "kind": "colocated", "gpus": 1, "chunk_tokens": 128},
    *SPLIT_1_1,
]
#: Light synthetic traffic: 6 requests/s, 3 s measured, short prompts and replies.
SMALL_TRAFFIC = {
    "rate_per_s": 6, "measure_s": 3,
    "prompt_mix": [{"share": 1.0, "tokens": [50, 400]}], "reply_words": [3, 12],
}


def small_traffic_scenario(folder: Path, arrangements=ONE_GPU_THREE_WAYS, **workload) -> Path:
    """`synthetic.yaml`: SMALL_TRAFFIC (keys replaced by `workload`) through `arrangements`, capped at 20 s."""
    path = folder / "synthetic.yaml"
    path.write_text(scenario_text("synthetic", {**SMALL_TRAFFIC, **workload}, arrangements=arrangements, max_sim_s=20))
    return path


def golden_trace_csv() -> str:
    """benchmarks/golden.py's fixed trace: 600 requests in about 10 s, bursts of same-instant
    arrivals on a 1 ms grid, one-word replies, prompts of exactly one chunk (copied here so the
    golden test does not depend on where the benchmark lives)."""
    rng = np.random.default_rng(20240601)
    n = 600
    ms = np.cumsum(rng.integers(0, 34, n))  # arrival times on a 1 ms grid; 0 = same instant
    burst = rng.random(n) < 0.15
    ms[1:][burst[1:]] = ms[:-1][burst[1:]]  # some arrive with the one before
    ms = np.maximum.accumulate(ms)
    prompts = 10 * rng.integers(1, 120, n)  # multiples of 10 tokens: 0.1 ms each -> whole ms
    prompts[rng.random(n) < 0.1] = 200  # exactly one chunk
    words = rng.integers(1, 40, n)
    words[rng.random(n) < 0.15] = 1
    lines = [TRACE_HEADER]
    lines += [f"{m / 1000:.3f},{p},{w}" for m, p, w in zip(ms, prompts, words)]
    return "\n".join(lines) + "\n"


def real_traces_missing() -> str | None:
    """Why the public traces are not at hand (None if they are)."""
    folder = os.environ.get(ENV_FOLDER)
    if not folder:
        return f"{ENV_FOLDER} is not set"
    missing = [t.file for t in CATALOG.values() if not (Path(folder) / t.file).is_file()]
    return f"{ENV_FOLDER}={folder} lacks {', '.join(missing)}" if missing else None


def freezes_by_reply(result, arrangement: str):
    """Each freeze of each finished measured reply (one row per freeze, by request then time):
    the rows of `result.freezes` each reply saw, repeated per reply, with its `request_id` and the
    row's `gpu` as `writing_gpu`. `reply_freezes` pairs them; the cells are the frame's."""
    from disagg_simpy.results.blame import reply_freezes

    f = result.freezes
    f = f[f.arrangement == arrangement].reset_index(drop=True)
    rid, rows = reply_freezes(result.records[arrangement], result.gaps[arrangement], result.blame[arrangement])
    out = f.iloc[rows].reset_index(drop=True)
    out.insert(2, "request_id", rid)
    return out.rename(columns={"gpu": "writing_gpu"})


def tiny_batch_scenario(folder: Path) -> Path:
    """The default scenario cut for the batch commands' tests: 3 arrangements, one seed, a 2 s
    measured window, no reference figures; written as `<folder>/tiny.yaml`."""
    raw = yaml.safe_load(DEFAULT.read_text())
    raw.update(name="tiny", seeds=1, max_sim_s=30, arrangements=raw["arrangements"][:3])
    raw.pop("reference")
    raw["workload"]["measure_s"] = 2
    path = Path(folder) / "tiny.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def assert_scenario_refused(tmp_path: Path, capsys, spec: dict, fragment: str) -> None:
    """A run of scenario `spec` (written to tmp_path/s.yaml) exits 2 with one line on stderr that
    names the file and contains `fragment`, prints nothing else and writes nothing."""
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    assert cli_main([str(tmp_path / "s.yaml"), "--out", str(tmp_path / "out"), "--no-plots"]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("error: ") and captured.err.count("\n") == 1 and captured.out == "", captured.err
    assert fragment in captured.err and "s.yaml:" in captured.err, captured.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml"]
