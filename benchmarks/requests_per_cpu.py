"""Simulated requests per CPU-second: scenarios/default.yaml at seed 1, its five arrangements,
`api.run_arrangement` alone (the simulation, no frames), the median and best of N runs.

    PYTHONPATH=. python benchmarks/requests_per_cpu.py [TREE] [--runs N]

TREE (default: this one) is a source tree whose scenarios/default.yaml is read; run it with that
tree on PYTHONPATH to time its model (docs/performance.md compares the figure with other simulators).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from disagg_simpy import load_scenario
from disagg_simpy.api import run_arrangement
from disagg_simpy.workload.stream import make_requests


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("tree", nargs="?", default=str(Path(__file__).resolve().parent.parent))
    p.add_argument("--runs", type=int, default=7, help="runs (default 7)")
    args = p.parse_args()
    scenario = load_scenario(Path(args.tree) / "scenarios" / "default.yaml")
    stream = make_requests(scenario, 1)
    times, n_requests = [], 0
    for _ in range(args.runs):
        t0, n_requests = time.process_time(), 0
        for arrangement in scenario.arrangements:
            n_requests += len(run_arrangement(scenario, arrangement, stream).requests["measured"])
        times.append(time.process_time() - t0)
    median = statistics.median(times)
    print(f"{n_requests:,} requests through 5 arrangements; CPU s median {median:.3f}, best {min(times):.3f}: "
          f"{n_requests / median:,.0f} simulated requests per CPU-second (median), {n_requests / min(times):,.0f} (best)")


if __name__ == "__main__":
    main()
