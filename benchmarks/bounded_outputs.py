"""Memory and file sizes of big runs: peak RSS of the whole command and the bytes it writes.

    PYTHONPATH=. python benchmarks/bounded_outputs.py [--before TREE] [--case hours2|seeds300] [--format csv|parquet]

Cases (issue 25's targets beside each):
- `hours2`: two hours of the default traffic through the five arrangements of scenarios/hour.yaml
  (measure_s 7200, safety cap 7800 s; split-1-3 and split-3-1 overloaded), seed 1, no pictures:
  target under 1.5 GB peak and under 400 MB of files.
- `seeds300`: `--seeds 300` of scenarios/default.yaml, no pictures: target under 1 GB peak.

Each command runs in a child process of a fresh wrapper, so its peak RSS
(`resource.getrusage(RUSAGE_CHILDREN).ru_maxrss`) is its own. `--before TREE` runs the same
command with TREE's package first (e.g. `git archive <commit> | tar -x -C /tmp/before`) and
prints both, today's figure first; a tree that does not know `--format` runs CSV.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGETS = {"hours2": ("1.5 GB peak, 400 MB of files", 1.5e9, 400e6), "seeds300": ("1 GB peak", 1e9, None)}


def hours2_scenario(folder: Path) -> Path:
    """scenarios/hour.yaml measured for two hours."""
    text = (ROOT / "scenarios" / "hour.yaml").read_text()
    text = text.replace("name: hour\n", "name: hours2\n").replace("measure_s: 3600", "measure_s: 7200")
    text = text.replace("max_sim_s: 4200", "max_sim_s: 7800")
    path = folder / "hours2.yaml"
    path.write_text(text)
    return path


def command(case: str, folder: Path, out: Path, fmt: str | None) -> list[str]:
    args = [sys.executable, "-m", "disagg_simpy"]
    if case == "hours2":
        args += [str(hours2_scenario(folder))]
    else:
        args += [str(ROOT / "scenarios" / "default.yaml"), "--seeds", "300"]
    args += ["--out", str(out), "--no-plots"]
    if fmt:
        args += ["--format", fmt]
    return args


def measure(tree: Path, case: str, fmt: str | None) -> dict:
    """Run the case with `tree`'s package in a wrapper process; its peak RSS, wall time, bytes."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        cmd = command(case, Path(tmp), out, fmt)
        wrapper = ("import resource, subprocess, sys, json, time\n"
                   "t = time.perf_counter(); rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode\n"
                   "print(json.dumps({'rc': rc, 'wall_s': time.perf_counter() - t,"
                   " 'peak_kb': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))")
        env = dict(os.environ, PYTHONPATH=str(tree))
        done = subprocess.run([sys.executable, "-c", wrapper, *cmd], env=env, capture_output=True, text=True,
                              cwd=tmp)  # (python -m puts the working folder first on the path)
        if done.returncode:
            sys.exit(done.stderr)
        figures = json.loads(done.stdout.strip().splitlines()[-1])
        files = {p.name: p.stat().st_size for p in out.iterdir() if p.is_file()} if out.exists() else {}
    figures["bytes"] = sum(files.values())
    figures["files"] = files
    return figures


def line(label: str, f: dict) -> str:
    if f["rc"]:
        return f"{label}: exit {f['rc']}"
    big = ", ".join(f"{k} {v / 1e6:.0f} MB" for k, v in sorted(f["files"].items(), key=lambda kv: -kv[1])[:3])
    return (f"{label}: peak {f['peak_kb'] / 1e6:.2f} GB, files {f['bytes'] / 1e6:.0f} MB ({big}), "
            f"wall {f['wall_s']:.0f} s")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", type=Path, help="today's tree, run first for the figure beside")
    p.add_argument("--case", choices=sorted(TARGETS), action="append", help="default: both")
    p.add_argument("--format", choices=("csv", "parquet"), default="csv")
    args = p.parse_args()
    for case in args.case or sorted(TARGETS):
        target = TARGETS[case][0]
        print(f"{case} (target: {target}); {time.strftime('%H:%M')}, load {os.getloadavg()[0]:.1f}", flush=True)
        if args.before:
            print("  " + line(f"before ({args.before})", measure(args.before, case, None)), flush=True)
        fmt = None if args.format == "csv" else args.format
        print("  " + line(f"now ({args.format})", measure(ROOT, case, fmt)), flush=True)
    return 0


if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    sys.exit(main())
