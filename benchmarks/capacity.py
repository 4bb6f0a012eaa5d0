"""Capacity at scale, on the default traffic: a 200-point x 10-seed sweep (five arrangements);
a goodput search of the five arrangements at 10 seeds with a 300 s window; `plan --gpus 4`
(20 arrangements, 10 seeds); a 20 x 20 `map` of 4 GPUs (5 seeds per cell). Each with 1 and
with 2 local workers. Prints wall times and the speed-up; asserts nothing about speed.

    python benchmarks/capacity.py                 # every case, 1 and 2 workers (about an hour)
    python benchmarks/capacity.py --case goodput --workers 2

Each case runs the real command (`python -m disagg_simpy sweep|goodput ...`) in a fresh
process with a fresh store, so nothing is reused and start-up is counted.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "scenarios" / "default.yaml"

CASES = {
    # 200 rates from 5 to 24.9 requests/s, 10 seeds: 2,000 runs of five arrangements each
    "sweep": ["sweep", str(SCENARIO), "--rate", "5:24.9:0.1", "--seeds", "10"],
    "goodput": ["goodput", str(SCENARIO), "--seeds", "10", "--measure-s", "300"],
    "plan": ["plan", str(SCENARIO), "--gpus", "4", "--seeds", "10"],
    # 20 rates x 20 long-prompt shares (the defaults), 5 seeds per cell
    "map": ["map", str(SCENARIO), "--gpus", "4"],
}


def measure(case: str, workers: int) -> tuple[float, str]:
    with tempfile.TemporaryDirectory() as out:
        argv = [sys.executable, "-m", "disagg_simpy", *CASES[case], "--out", out, "--workers", str(workers),
                "--no-plots"]
        start = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
        wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{case} failed: {done.stderr.strip()}")
    return wall, done.stdout


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", choices=[*CASES, "all"], default="all")
    p.add_argument("--workers", type=int, nargs="*", default=[1, 2])
    args = p.parse_args()
    for case in CASES if args.case == "all" else [args.case]:
        walls = {}
        for w in args.workers:
            walls[w], stdout = measure(case, w)
            print(f"{case}, {w} worker{'s' * (w > 1)}: {walls[w]:.1f} s", flush=True)
        if case in ("goodput", "plan", "map"):
            print(stdout)
        if 1 in walls and len(walls) > 1:
            for w in walls:
                if w != 1:
                    print(f"{case}: speed-up of {w} workers over 1: {walls[1] / walls[w]:.2f}x")
        print(f"command: python -m disagg_simpy {' '.join(CASES[case])} --workers N --no-plots")


if __name__ == "__main__":
    main()
