"""E16's speed cost: CPU time of a scenario's arrangements with speculative decoding off and on
(k = 4, a = 0.7 unless given), paired and interleaved, median of N runs of each: the simulation
(`api.run_arrangement`: the draws of every reply's writing iterations included) and the records
read as every consumer reads them (`reply_gaps`, and every measured word's time).

    PYTHONPATH=. python benchmarks/speculative_cost.py [--scenario scenarios/default.yaml] [--runs 7]
        [--tokens 4] [--acceptance 0.7]

Speculation writes more words an iteration, so a run has fewer iterations; the draws (numpy, over
each reply's words, for the requests that reach a writing GPU) and the words' times cost more.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

from disagg_simpy import load_scenario
from disagg_simpy.api import run_arrangement
from disagg_simpy.results.metrics import LimitsNs, reply_gaps
from disagg_simpy.scenario.schema import DROP
from disagg_simpy.workload.speculative import writing_iterations
from disagg_simpy.workload.stream import make_requests

ROOT = Path(__file__).resolve().parent.parent


def one_run(scenario, stream) -> tuple[float, float, int, int]:
    """CPU s of the simulation and of reading its records; iterations run and words written."""
    limits = LimitsNs.from_slo(scenario.slo)
    sim = read = 0.0
    n_iterations = n_words = 0
    for arrangement in scenario.arrangements:
        t0 = time.process_time()
        rec = run_arrangement(scenario, arrangement, stream)
        t1 = time.process_time()
        reply_gaps(rec, limits)
        ids, _, _ = rec.word_times(np.flatnonzero(rec.requests["measured"]))
        t2 = time.process_time()
        sim, read = sim + t1 - t0, read + t2 - t1
        n_iterations += len(rec.iterations["gpu"])
        n_words += len(ids)
    return sim, read, n_iterations, n_words


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scenario", default=str(ROOT / "scenarios" / "default.yaml"))
    p.add_argument("--runs", type=int, default=7, help="paired runs (default 7)")
    p.add_argument("--tokens", type=int, default=4)
    p.add_argument("--acceptance", type=float, default=0.7)
    args = p.parse_args()
    base = load_scenario(args.scenario)
    spec = {"tokens": args.tokens, "acceptance": args.acceptance}
    cases = {"off": base.with_overrides(speculative=DROP),  # (a scenario that sets speculative: off all the same)
             "on": base.with_overrides(speculative=spec)}
    streams = {name: make_requests(s, 1) for name, s in cases.items()}
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
    sizes = {}
    for _ in range(args.runs):
        for name, scenario in cases.items():
            sim, read, n_it, n_words = one_run(scenario, streams[name])
            times[name].append((sim, read))
            sizes[name] = (n_it, n_words)
    keys = streams["on"].draft_keys
    t0 = time.process_time()
    for _ in range(args.runs):
        writing_iterations(keys, streams["on"].n_reply_words, args.tokens, args.acceptance)
    draws = (time.process_time() - t0) / args.runs
    n = len(streams["on"].n_reply_words)
    print(f"{Path(args.scenario).name}, seed 1, {len(base.arrangements)} arrangements, {n:,} requests, "
          f"k = {args.tokens}, a = {args.acceptance}; CPU s, median of {args.runs} paired runs")
    print(f"{'':13}{'simulation':>11}{'records':>9}{'total':>8}{'iterations':>12}{'words':>10}")
    med = {}
    for name in cases:
        sim = statistics.median(t[0] for t in times[name])
        read = statistics.median(t[1] for t in times[name])
        med[name] = (sim, read)
        n_it, n_words = sizes[name]
        print(f"{'speculative ' + name:13}{sim:11.3f}{read:9.3f}{sim + read:8.3f}{n_it:12,}{n_words:10,}")
    (s0, r0), (s1, r1) = med["off"], med["on"]
    print(f"on / off: simulation {s1 / s0:.2f}x, records {r1 / r0:.2f}x, total {(s1 + r1) / (s0 + r0):.2f}x; "
          f"drawing the iterations of all {n:,} replies of the stream at once would take {draws:.3f} s an arrangement "
          f"(a run draws those of the requests that reach a writing GPU, a block at a time)")


if __name__ == "__main__":
    main()
