"""Compare the speed of two source trees of disagg_simpy on a busy machine: both in one process,
runs alternated, CPU time per run.

Wall-clock times swing by half on a shared machine, and even CPU times of separate processes by
several percent. Here both trees' packages are imported side by side (copied under two names;
the package only imports itself relatively), and the runs alternate BEFORE, AFTER, AFTER, BEFORE,
... so whatever else the machine does falls on both alike. Each run is run() plus the frames the
CLI writes, for one arrangement of scenarios/default.yaml with 200 s of traffic. The table shows
the least and the median CPU seconds per arrangement and the change from BEFORE to AFTER.

    git archive <commit> | tar -x -C /tmp/before      # the tree to compare against
    python benchmarks/ab.py /tmp/before .              # a few minutes
    python benchmarks/ab.py /tmp/before . --opcodes    # Python opcodes the simulation executes
    python benchmarks/ab.py /tmp/before . --after-options '{"max_batch_replies": 64, "cost.per_attention_pair_ms": 1e-6}'
                                                       # the cost of options on, against them off

`--scenario FILE --measure-s S --max-sim-s S` times another scenario (a path inside the BEFORE
tree, as both trees read it; default scenarios/default.yaml, 200 s, cap 800 s); `--total` adds a
row of the sums over the arrangements (one run of the whole scenario) and the ratio of medians:

    python benchmarks/ab.py /tmp/before . --arrangements same-gpu,chunked-512,split-2-2,split-1-3,split-3-1 --total
    python benchmarks/ab.py /tmp/before . --scenario scenarios/hour.yaml --measure-s 7200 --max-sim-s 7800 \
        --runs 3 --arrangements same-gpu,chunked-512,split-2-2,split-1-3,split-3-1 --total   # issue 25's two hours

`--after-options` sets keys on every arrangement of the AFTER tree's scenario (`cost.KEY`: the
scenario's cost figures), so the options' cost is measured against today's single run; with
`--both` on BEFORE's too, so what a change did to the options' own path is measured.

A second table gives each run's size (iterations, requests arrived, simulated seconds, SimPy
events) and the median change per iteration: an option that adds iterations (E10's prompt-only
ones) or slows an arrangement (its measured replies end later, so more traffic arrives) makes a
bigger run, and the per-iteration figure separates the code's cost from the run's. "run" is the
ratio of the medians; "paired run" the median of the ratios of neighbouring runs (run i of each
tree), steadier when the machine's speed drifts during the measurement (CPU times of the same
run here swing by half within a minute under other virtual machines' load).
`--max-sim-s` equal to `--measure-s` stops both runs at the same simulated time, so both simulate
the same arrivals.

`--opcodes` counts, instead of timing, the Python bytecode instructions the simulation alone
(`api.run_arrangement`, default.yaml with 10 s of traffic unless `--measure-s` says otherwise)
executes in each tree, with `--after-options`/`--both` as above, and the change per iteration:
exact and repeatable, blind to C code (numpy, heapq), so a floor of the interpreter's extra work.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ARRANGEMENTS = "same-gpu,chunked-512,split-2-2,split-3-1"


def count_opcodes(package, scenario_file: Path, name: str, measure_s: float, max_sim_s: float,
                  options: dict) -> tuple[int, int]:
    """Python opcodes executed by one arrangement's simulation (sys.settrace, opcode events), and
    its iterations."""
    api = importlib.import_module(package.__name__ + ".api")
    stream = importlib.import_module(package.__name__ + ".workload.stream")
    s = package.load_scenario(scenario_file).with_overrides(
        **{"workload.measure_s": measure_s, "max_sim_s": max_sim_s})
    s = s.model_copy(update={"arrangements": tuple(a for a in s.arrangements if a.name == name)})
    s = with_options(s, options) if options else s
    arrangement = s.arrangements[0]
    requests = stream.make_requests(s, 1)
    count = 0

    def opcode(frame, event, arg):
        nonlocal count
        count += event == "opcode"
        return opcode

    def call(frame, event, arg):
        frame.f_trace_opcodes, frame.f_trace_lines = True, False
        return opcode

    sys.settrace(call)
    try:
        rec = api.run_arrangement(s, arrangement, requests)
    finally:
        sys.settrace(None)
    return count, int(rec.gpu_offsets[-1])


def with_options(scenario, options: dict):
    """`scenario` with `options` set on each arrangement (validated), `cost.KEY` on its cost."""
    cost = {k.split(".", 1)[1]: v for k, v in options.items() if k.startswith("cost.")}
    rest = {k: v for k, v in options.items() if not k.startswith("cost.")}
    if cost:
        scenario = scenario.with_overrides(**{f"cost.{k}": v for k, v in cost.items()})
    arrangements = tuple(type(a).model_validate({**a.model_dump(exclude_none=True), **rest})
                         for a in scenario.arrangements)
    return scenario.model_copy(update={"arrangements": arrangements})


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("before", help="source tree to compare against (holds disagg_simpy/ and scenarios/)")
    p.add_argument("after", help="source tree to measure")
    p.add_argument("--runs", type=int, default=20, help="runs of each tree per arrangement (default 20)")
    p.add_argument("--arrangements", default=ARRANGEMENTS, help=f"comma-separated (default {ARRANGEMENTS})")
    p.add_argument("--opcodes", action="store_true", help="count the simulation's Python opcodes instead of timing")
    p.add_argument("--after-options", default="{}", help="JSON keys set on every arrangement of the AFTER tree "
                                                          "('cost.KEY': the scenario's cost)")
    p.add_argument("--both", action="store_true", help="set --after-options on BEFORE too (what a change did to the "
                                                        "options' own path)")
    p.add_argument("--scenario", default="scenarios/default.yaml", help="scenario file inside BEFORE")
    p.add_argument("--measure-s", type=float, default=None, help="workload.measure_s (default 200; 10 with --opcodes)")
    p.add_argument("--max-sim-s", type=float, default=800.0, help="max_sim_s (default 800)")
    p.add_argument("--total", action="store_true", help="a last row: sums over the arrangements, ratio of medians")
    args = p.parse_args()
    scenario_file = Path(args.before) / args.scenario  # the older tree reads it too
    with tempfile.TemporaryDirectory() as tmp:
        for label in ("before", "after"):
            shutil.copytree(Path(getattr(args, label)) / "disagg_simpy", Path(tmp) / f"ab_{label}")
        sys.path.insert(0, tmp)
        trees = {label: importlib.import_module(f"ab_{label}") for label in ("before", "after")}
        options = json.loads(args.after_options)
        if args.opcodes:
            measure_s = 10.0 if args.measure_s is None else args.measure_s
            print(f"Python opcodes executed by the simulation, {Path(args.scenario).name} with {measure_s:g} s of "
                  f"traffic (cap {args.max_sim_s:g} s)")
            print(f"{'arrangement':<14}{'before':>12}{'after':>12}{'change':>9}{'iterations before':>19}{'after':>8}"
                  f"{'per iteration':>14}")
            for name in args.arrangements.split(","):
                (b, bi), (a, ai) = (count_opcodes(trees[label], scenario_file, name, measure_s, args.max_sim_s,
                                                  options if label == "after" or args.both else {})
                                    for label in ("before", "after"))
                per = f"{(a / ai) / (b / bi) - 1:>+14.2%}" if ai and bi else f"{'':>14}"
                print(f"{name:<14}{b:>12,}{a:>12,}{a / b - 1:>+9.2%}{bi:>19,}{ai:>8,}{per}", flush=True)
            return 0
        if args.measure_s is None:
            args.measure_s = 200.0
        print(f"CPU s of run() + frames, {Path(args.scenario).name} with {args.measure_s:g} s of traffic "
              f"(cap {args.max_sim_s:g} s), {args.runs} runs each, alternated")
        print(f"{'arrangement':<14}{'least before':>14}{'least after':>13}{'change':>8}"
              f"{'median before':>15}{'median after':>14}{'change':>8}")
        totals: dict[str, list[float]] = {"before": [], "after": []}
        sizes: dict[str, dict] = {}
        for name in args.arrangements.split(","):
            scenarios = {}
            for label, package in trees.items():
                s = package.load_scenario(scenario_file).with_overrides(
                    **{"workload.measure_s": args.measure_s, "max_sim_s": args.max_sim_s})
                s = s.model_copy(update={"arrangements": tuple(a for a in s.arrangements if a.name == name)})
                if label == "after" or args.both:  # (on the measured arrangement only: an option may suit one kind)
                    s = with_options(s, options)
                scenarios[label] = s
                package.run(scenarios[label], seed=1)  # warm-up
            times: dict[str, list[float]] = {"before": [], "after": []}
            for i in range(args.runs):
                for label in ("before", "after") if i % 2 == 0 else ("after", "before"):
                    gc.collect()
                    t0 = time.process_time()
                    r = trees[label].run(scenarios[label], seed=1)
                    r.summary, r.requests, r.iterations, r.reads  # noqa: B018 (builds the frames)
                    times[label].append(time.process_time() - t0)
            b, a = times["before"], times["after"]
            for label, values in (("before", b), ("after", a)):
                totals[label].append(statistics.median(values))
            print(f"{name:<14}{min(b):>14.4f}{min(a):>13.4f}{min(a) / min(b) - 1:>+8.1%}"
                  f"{statistics.median(b):>15.4f}{statistics.median(a):>14.4f}"
                  f"{statistics.median(a) / statistics.median(b) - 1:>+8.1%}", flush=True)
            sizes[name] = {label: run_size(trees[label], scenarios[label]) for label in ("before", "after")}
            sizes[name]["change"] = statistics.median(a) / statistics.median(b)
            sizes[name]["paired"] = statistics.median(x / y for x, y in zip(a, b))  # (run i of each: neighbours)
        if args.total:
            b_sum, a_sum = sum(totals["before"]), sum(totals["after"])
            print(f"{'total':<14}{'':>35}{b_sum:>15.4f}{a_sum:>14.4f}{a_sum / b_sum - 1:>+8.1%}"
                  f"   (sum of medians; {b_sum / a_sum:.2f}x the speed)")
        print_sizes(sizes)
    return 0


def run_size(package, scenario) -> tuple[int, int, float, int]:
    """What one run simulates: (iterations, requests arrived, simulated s, SimPy events)."""
    r = package.run(scenario, seed=1)
    rec = next(iter(r.records.values()))
    return (len(r.iterations), len(rec.requests["request_id"]), rec.stopped_at_ns / 1e9, getattr(rec, "n_events", 0))


def print_sizes(sizes: dict) -> None:
    """The size of each run, and the median CPU change per iteration: when the AFTER run simulates
    more (an option that makes more iterations, or a slower arrangement whose measured replies
    end later), the per-iteration figure is the cost of the code, the run's ratio that of both."""
    print(f"\n{'arrangement':<14}{'iterations before':>18}{'after':>8}{'requests before':>16}{'after':>7}"
          f"{'sim s before':>13}{'after':>7}{'events before':>14}{'after':>8}{'run':>7}{'per iteration':>14}"
          f"{'paired run':>11}{'per iteration':>14}")
    for name, s in sizes.items():
        (bi, br, bs, be), (ai, ar, as_, ae), change, paired = s["before"], s["after"], s["change"], s["paired"]
        print(f"{name:<14}{bi:>18,}{ai:>8,}{br:>16,}{ar:>7,}{bs:>13.0f}{as_:>7.0f}{be:>14,}{ae:>8,}"
              f"{change:>6.2f}x{change * bi / ai:>13.2f}x{paired:>10.2f}x{paired * bi / ai:>13.2f}x")


if __name__ == "__main__":
    raise SystemExit(main())
