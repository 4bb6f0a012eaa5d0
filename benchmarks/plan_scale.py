"""Time of `plan` on many GPUs, skipping by bounds against searching every arrangement.

    PYTHONPATH=. python benchmarks/plan_scale.py [--gpus 16] [--seeds 10] [--repeat 1] [-- EXTRA FLAGS]

Runs `plan scenarios/default.yaml --gpus N --seeds S --workers 2 --no-plots` as a child process,
with and without `--exhaustive`, alternated, a fresh results folder each time (nothing skipped
from the store); prints wall and CPU seconds (the child's user + system), the medians and the
ratio, and whether both recommend the same arrangement. The issue's cases: `--gpus 16 --seeds 10`
(target under 2 minutes) and `--gpus 64 --seeds 5` (under 10 minutes; refused by the estimate
unless narrowed, e.g. `-- --splits 36,40,44,48 --chunks 512`).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def timed(gpus: int, seeds: int, exhaustive: bool, extra: list[str]) -> tuple[float, float, str]:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "disagg_simpy", "plan", str(ROOT / "scenarios" / "default.yaml"), "--gpus", str(gpus),
               "--seeds", str(seeds), "--workers", "2", "--no-plots", "--out", str(Path(tmp) / "out"), *extra]
        if exhaustive:
            cmd.append("--exhaustive")
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp, env=dict(os.environ, PYTHONPATH=str(ROOT)))
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        sys.exit(done.stderr)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    best = next((line.split(" carries")[0] for line in done.stdout.splitlines() if " carries the most" in line), "?")
    return wall, cpu, best


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gpus", type=int, default=16)
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("extra", nargs="*", help="more plan flags (after --)")
    args = p.parse_args()
    walls: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(args.repeat):
        for exhaustive in (True, False):
            load = os.getloadavg()[0]
            wall, cpu, best = timed(args.gpus, args.seeds, exhaustive, args.extra)
            walls[exhaustive].append(wall)
            label = "exhaustive" if exhaustive else "bounds"
            print(f"{label}: {wall:.0f} s wall, {cpu:.0f} s CPU (load {load:.1f} before); recommends {best}", flush=True)
    every, fast = statistics.median(walls[True]), statistics.median(walls[False])
    print(f"plan --gpus {args.gpus} --seeds {args.seeds}: median {fast:.0f} s with bounds, {every:.0f} s exhaustive: "
          f"{every / fast:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
