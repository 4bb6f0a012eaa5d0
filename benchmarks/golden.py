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

from disagg_simpy import load_scenario, run

try:
    from disagg_simpy.results.csv_text import csv_text  # the CLI's CSV writer, where there is one
except ImportError:
    def csv_text(frame):
        return frame.to_csv(index=False)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from helpers import golden_trace_csv as trace_csv  # noqa: E402  (one copy of the case, shared with the test)
from helpers import scenario_text  # noqa: E402
from test_golden import TRACE_SCENARIO  # noqa: E402


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
        (Path(tmp) / "golden.yaml").write_text(scenario_text("golden-trace", **TRACE_SCENARIO))
        lines += report("trace", run(load_scenario(Path(tmp) / "golden.yaml")), words=True)
    for line in lines:
        if args.no_events and " events " in line:
            continue
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
