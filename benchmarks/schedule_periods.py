"""Drawing the arrivals of a schedule of many periods (issue 37 item 8): seconds per draw.

    PYTHONPATH=. python benchmarks/schedule_periods.py [--periods 10000] [--repeat 3] [--before TREE]

A schedule of `--periods` periods (the documented maximum is 10,000) over a 3 s window, rates
20-26 requests/s, one colocated GPU: the time of `make_requests` (thinning, each period's
lengths) and of the whole run, medians of `--repeat`. The scenario is built in memory (no YAML: parsing a 10,000-period
file takes seconds of its own, which this does not measure). `--before TREE` runs the same in
a child process with TREE's package first (e.g. `git archive <commit> | tar -x -C /tmp/before`)
and prints both, today's first.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def scenario_dict(n: int) -> dict:
    return {
        "name": "schedule-periods", "seed": 1, "max_sim_s": 10,
        "workload": {"schedule": [{"until_s": 3 * (k + 1) / n, "rate_per_s": 20 + k % 7} for k in range(n)],
                     "warmup_s": 0, "measure_s": 3, "prompt_mix": [{"share": 1, "tokens": [100, 200]}],
                     "reply_words": [10, 20]},
        "arrangements": [{"name": "same", "kind": "colocated", "gpus": 1}],
    }


def measure(n: int, repeat: int) -> dict:
    """Medians of `repeat` timings in this process (the package first on sys.path)."""
    from disagg_simpy import run
    from disagg_simpy.scenario.schema import Scenario
    from disagg_simpy.workload.stream import make_requests

    scenario = Scenario.model_validate(scenario_dict(n))
    draws, runs = [], []
    for _ in range(repeat):
        t = time.perf_counter()
        requests = make_requests(scenario)
        draws.append(time.perf_counter() - t)
        t = time.perf_counter()
        run(scenario)
        runs.append(time.perf_counter() - t)
    return {"periods": n, "requests": len(requests), "draw_s": statistics.median(draws),
            "run_s": statistics.median(runs)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--periods", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--before", type=Path, metavar="TREE", help="also measure TREE's package (printed second)")
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # (the child's answer)
    args = ap.parse_args()
    if args.json:
        print(json.dumps(measure(args.periods, args.repeat)))
        return
    rows = [("today", measure(args.periods, args.repeat))]
    if args.before is not None:
        code = f"import runpy, sys; sys.path.insert(0, {str(args.before)!r}); " \
               f"runpy.run_path({__file__!r}, run_name='__main__')"
        done = subprocess.run([sys.executable, "-c", code, "--json", "--periods", str(args.periods), "--repeat",
                               str(args.repeat)], capture_output=True, text=True, check=True)
        rows.append((str(args.before), json.loads(done.stdout.strip().splitlines()[-1])))
    print(f"a schedule of {args.periods:,} periods over 3 s; medians of {args.repeat}")
    print(f"{'tree':<24} {'requests':>9} {'draw (s)':>9} {'run (s)':>8}")
    for name, r in rows:
        print(f"{name[-24:]:<24} {r['requests']:>9,} {r['draw_s']:>9.3f} {r['run_s']:>8.3f}")


if __name__ == "__main__":
    main()
