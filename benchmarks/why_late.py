"""What explaining late replies costs on top of a run (issue 13: target at most 20%).

    PYTHONPATH=. python benchmarks/why_late.py [SCENARIO] [--repeats N]

CPU times of this one process (so a busy machine inflates them less than wall time), medians of
N repeats (default 5) after one warm-up:
- run: `api.run` (request stream, every arrangement's simulation, verdicts);
- frames: the four tables as they were before issue 13 (requests, iterations, reads, summary);
- why late: freeze blame and the `freezes` table, the time parts of `requests`, the limit shares
  and freeze figures of `summary`.
and prints why-late as a share of run + frames (the CLI also writes CSVs and draws pictures,
which makes the share smaller still).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from disagg_simpy import load_scenario, run
from disagg_simpy.results.blame import freeze_blame, freezes_frame
from disagg_simpy.results.breakdown import time_columns, why_late_row
from disagg_simpy.results.frames import iterations_frame, reads_frame, requests_frame
from disagg_simpy.results.metrics import LimitsNs, summary_row

ROOT = Path(__file__).resolve().parent.parent


def base_frames(result) -> None:
    for name, rec in result.records.items():
        gaps = result.gaps[name]
        requests_frame(rec, gaps)
        iterations_frame(rec)
        reads_frame(rec)
        summary_row(rec, gaps)


def why_late(result) -> int:
    limits = LimitsNs.from_slo(result.scenario.slo)
    n = 0
    for name, rec in result.records.items():
        gaps = result.gaps[name]
        blame = freeze_blame(rec, gaps, limits)
        freezes_frame(name, result.seed, blame)
        time_columns(rec, gaps, limits)
        arrangement = next(a for a in result.scenario.arrangements if a.name == name)
        why_late_row(result.scenario, arrangement, rec, gaps, limits)
        n += len(blame)
    return n


def timed(fn, *args):
    """CPU seconds of this process (other work on a shared machine does not count), and the result."""
    t = time.process_time()
    out = fn(*args)
    return time.process_time() - t, out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("scenario", nargs="?", default=str(ROOT / "scenarios" / "default.yaml"))
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    scenario = load_scenario(args.scenario)
    samples = {"run": [], "frames": [], "why late": []}
    for i in range(args.repeats + 1):
        t_run, result = timed(run, scenario)
        t_frames, _ = timed(base_frames, result)
        t_late, n_freezes = timed(why_late, result)
        if i:  # the first round warms up imports and caches
            samples["run"].append(t_run)
            samples["frames"].append(t_frames)
            samples["why late"].append(t_late)
    med = {k: statistics.median(v) for k, v in samples.items()}
    n_requests = sum(len(r.requests["request_id"]) for r in result.records.values())
    print(f"{scenario.name}: {len(result.records)} arrangements, {n_requests:,} requests simulated, "
          f"{n_freezes:,} freezes; medians of {args.repeats} repeats")
    for k, v in med.items():
        print(f"  {k:<9} {v * 1000:8.1f} ms")
    share = med["why late"] / (med["run"] + med["frames"])
    print(f"  why late costs {100 * share:.1f}% on top of run + frames (target: at most 20%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
