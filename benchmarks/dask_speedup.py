"""Speed-up of a batch command on a Dask cluster: 2 local workers against 1.

    PYTHONPATH=. python benchmarks/dask_speedup.py [--repeat 2] [-- COMMAND ARGS...]

Starts a `dask.distributed.LocalCluster` of N worker processes (one thread each), points the
command at its scheduler with `--dask ADDRESS` (exactly as a multi-machine cluster would be
used, docs/scale.md), and times it (wall seconds; a fresh results folder each time, so nothing
is skipped from the store). Default command: `goodput scenarios/default.yaml --seeds 8
--measure-s 10` (five arrangements, about 400 runs). Prints the load average beside each figure:
on a shared machine the neighbours' jobs take from the speed-up.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ["goodput", str(ROOT / "scenarios" / "default.yaml"), "--seeds", "8", "--measure-s", "10", "--no-plots"]


def timed(command: list[str], n_workers: int) -> float:
    from dask.distributed import LocalCluster

    from disagg_simpy.cli import main

    with LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        code = main([*command, "--out", str(Path(tmp) / "out"), "--dask", cluster.scheduler_address])
        wall = time.perf_counter() - start
    if code:
        sys.exit(f"the command failed (exit {code})")
    return wall


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=2, help="runs of each worker count, alternated (default 2)")
    p.add_argument("command", nargs="*", help="the batch command and its arguments (default: goodput ...)")
    args = p.parse_args()
    command = args.command or DEFAULT
    walls: dict[int, list[float]] = {1: [], 2: []}
    for _ in range(args.repeat):
        for n in (1, 2):
            load = os.getloadavg()[0]
            walls[n].append(timed(command, n))
            print(f"{n} worker{'s' * (n > 1)}: {walls[n][-1]:.1f} s wall (load {load:.1f} before)", flush=True)
    one, two = statistics.median(walls[1]), statistics.median(walls[2])
    print(f"median: 1 worker {one:.1f} s, 2 workers {two:.1f} s: {one / two:.2f}x ({' '.join(command[:2])} ...)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
