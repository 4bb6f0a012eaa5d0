"""Golden check: hashes of a run's outputs, so a speed change can be shown to change no number.

Prints one line per (scenario, seed, table): a SHA-256 prefix of the table's CSV text. Run it
before and after a change and diff the two outputs; any difference is a changed number.

    PYTHONPATH=. python benchmarks/golden.py > /tmp/before.txt
    ... change ...
    PYTHONPATH=. python benchmarks/golden.py | diff /tmp/before.txt - && echo identical

Cases: scenarios/default.yaml with seeds 1..5, and a small trace scenario written here that
stresses the phase order of one instant (D5): arrivals on a 1 ms grid with several at the same
instant, costs that keep every iteration end and ship end on the same grid (so ends, ship
landings and arrivals coincide), one-word replies, prompts that are exact multiples of the
chunk, chunked colocated and chunked split reading.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
from pathlib import Path

import numpy as np

from disagg_simpy import load_scenario, run

try:
    from disagg_simpy.results.csv_text import csv_text  # the CLI's CSV writer, where there is one
except ImportError:
    def csv_text(frame):
        return frame.to_csv(index=False)

ROOT = Path(__file__).resolve().parent.parent

TRACE_YAML = """\
name: golden-trace
seed: 1
workload: {trace: trace.csv, warmup_s: 0.5, measure_s: 8}
max_sim_s: 60
cost: {iteration_ms: 12, per_reply_ms: 1, per_prompt_token_ms: 0.1, kv_ship_ms_per_token: 0.1}
arrangements:
  - {name: same-gpu, kind: colocated, gpus: 4}
  - {name: chunked-200, kind: colocated, gpus: 4, chunk_tokens: 200}
  - {name: chunked-1, kind: colocated, gpus: 2, chunk_tokens: 1}
  - {name: split-2-2, kind: disaggregated, reading_gpus: 2, writing_gpus: 2}
  - {name: split-2-2-chunked, kind: disaggregated, reading_gpus: 2, writing_gpus: 2, chunk_tokens: 300}
  - {name: split-1-3, kind: disaggregated, reading_gpus: 1, writing_gpus: 3}
  - {name: split-3-1, kind: disaggregated, reading_gpus: 3, writing_gpus: 1}
"""


def trace_csv() -> str:
    """A fixed trace: 600 requests in about 10 s, bursts of same-instant arrivals, 1-word replies."""
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
    lines = ["arrived_at_s,n_prompt_tokens,n_reply_words"]
    lines += [f"{m / 1000:.3f},{p},{w}" for m, p, w in zip(ms, prompts, words)]
    return "\n".join(lines) + "\n"


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def report(label: str, res, words: bool) -> list[str]:
    tables = {"requests": res.requests, "iterations": res.iterations, "reads": res.reads, "summary": res.summary}
    if hasattr(res, "freezes"):  # (issue 13 on)
        tables["freezes"] = res.freezes
    same = all(csv_text(t) == t.to_csv(index=False) for t in tables.values())
    out = [
        f"{label} csv_text-equals-pandas {same}",
        f"{label} requests {digest(res.requests.to_csv(index=False))}",
        f"{label} iterations {digest(res.iterations.to_csv(index=False))}",
        f"{label} reads {digest(res.reads.to_csv(index=False))}",
        f"{label} summary {digest(res.summary.to_csv(index=False))}",
        f"{label} events {','.join(str(r.n_events) for r in res.records.values())}",
    ]
    if "freezes" in tables:
        out.insert(-1, f"{label} freezes {digest(res.freezes.to_csv(index=False))}")
    if words:
        for name in res.records:
            out.append(f"{label} words[{name}] {digest(res.words(name).to_csv(index=False))}")
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=5, help="default.yaml seeds 1..N (default 5)")
    p.add_argument("--no-events", action="store_true", help="leave out the SimPy event counts")
    args = p.parse_args()
    lines: list[str] = []
    default = load_scenario(ROOT / "scenarios" / "default.yaml")
    for seed in range(1, args.seeds + 1):
        lines += report(f"default/seed{seed}", run(default, seed=seed), words=seed == 1)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "trace.csv").write_text(trace_csv())
        (Path(tmp) / "golden.yaml").write_text(TRACE_YAML)
        lines += report("trace", run(load_scenario(Path(tmp) / "golden.yaml")), words=True)
    for line in lines:
        if args.no_events and " events " in line:
            continue
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
