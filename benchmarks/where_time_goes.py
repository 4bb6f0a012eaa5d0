"""Where a run's time goes: a sampling profile (pyinstrument) of run() + frames, by part.

    pip install -e ".[dev]"    # brings pyinstrument, a profiling tool only (not a dependency)
    PYTHONPATH=. python benchmarks/where_time_goes.py [default|hour] [arrangement ...]

Parts, by the code each sample is executing (self time; builtins and numpy count toward the
part that called them): the SimPy event loop (simpy), the model's processes (gpu, engine,
kv_link), routing (router), recording (the per-iteration record appends and records.collect),
the request stream (workload), gap metrics (metrics) and frame building (frames, api, pandas).
The profiler's own overhead falls mostly on code that makes many small calls, so read the
shares as a rough guide.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

try:
    from pyinstrument import Profiler
except ImportError:
    sys.exit('where_time_goes.py needs pyinstrument: pip install -e ".[dev]" (or pip install pyinstrument)')

from disagg_simpy import load_scenario, run

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"


def part(frame, caller: str | None) -> str:
    path, name = frame.file_path or "", frame.function
    if path.startswith("<built-in>"):  # builtins count toward their caller's part ...
        if name in ("array.append", "array.extend") and caller == "model processes":
            return "recording"  # ... except the per-iteration record appends
        return caller or "other"
    if "/simpy/" in path:
        return "SimPy event loop"
    if path.endswith("router.py"):
        return "routing"
    if path.endswith("records.py"):
        return "recording"
    if path.endswith(("gpu.py", "engine.py", "kv_link.py", "phases.py", "request.py")):
        return "model processes"
    if "/workload/" in path:
        return "request stream"
    if path.endswith("metrics.py"):
        return "gap metrics"
    if path.endswith(("frames.py", "api.py", "run_result.py")) or "/pandas/" in path:
        return "frame building"
    if "/numpy/" in path and caller:
        return caller
    return "other"


def walk(frame, totals, caller=None):
    label = part(frame, caller)
    totals[label] += frame.total_self_time  # (includes its synthetic "[self]" children)
    for child in frame.children:
        if not child.is_synthetic:
            walk(child, totals, label)


def stages(scenario, repeats: int) -> dict[str, float]:
    """Seconds per stage of run() + frames, timed directly (no profiler), summed over repeats."""
    import time

    from disagg_simpy.api import RunResult
    from disagg_simpy.model.engine import Engine
    from disagg_simpy.model.records import ArrangementRecords
    from disagg_simpy.results.metrics import LimitsNs, reply_gaps
    from disagg_simpy.workload.stream import make_requests

    t: dict[str, float] = defaultdict(float)
    for seed in range(1, repeats + 1):
        t0 = time.perf_counter()
        stream = make_requests(scenario, seed)
        t["request stream"] += time.perf_counter() - t0
        records, gaps = {}, {}
        for a in scenario.arrangements:
            engine = Engine(scenario, a, stream)
            t0 = time.perf_counter()
            records[a.name] = engine.run()
            t1 = time.perf_counter()
            ArrangementRecords.collect(engine)  # again, to time it alone
            t2 = time.perf_counter()
            gaps[a.name] = reply_gaps(records[a.name], LimitsNs.from_slo(scenario.slo))
            t3 = time.perf_counter()
            t["simulation"] += (t1 - t0) - (t2 - t1)
            t["recording (collect)"] += t2 - t1
            t["gap metrics"] += t3 - t2
        res = RunResult(scenario, seed, stream, records, gaps)
        t0 = time.perf_counter()
        res.summary, res.requests, res.iterations, res.reads  # noqa: B018
        t["frame building"] += time.perf_counter() - t0
    return t


def main() -> int:
    which = sys.argv[1] if len(sys.argv) > 1 else "default"
    names = sys.argv[2:] or ["same-gpu", "chunked-512", "split-2-2"]
    scenario = load_scenario(SCENARIOS / f"{'hour' if which == 'hour' else 'default'}.yaml")
    scenario = scenario.model_copy(update={"arrangements": tuple(a for a in scenario.arrangements if a.name in names)})
    repeats = 1 if which == "hour" else 20
    run(scenario)  # warm-up

    t = stages(scenario, repeats)
    whole = sum(t.values())
    print(f"{which}: {', '.join(names)}; {repeats} run(s) with frames")
    print(f"stages, timed directly: {whole:.2f} s")
    for label, v in sorted(t.items(), key=lambda kv: -kv[1]):
        print(f"  {label:26s} {100 * v / whole:5.1f}%")

    profiler = Profiler(interval=0.0005)
    profiler.start()
    for seed in range(1, repeats + 1):
        res = run(scenario, seed=seed)
        res.summary, res.requests, res.iterations, res.reads  # noqa: B018
    profiler.stop()
    totals: dict[str, float] = defaultdict(float)
    walk(profiler.last_session.root_frame(), totals)
    whole = sum(totals.values())
    print(f"parts, sampled by pyinstrument (self time, with its overhead): {whole:.2f} s")
    for label, v in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"  {label:26s} {100 * v / whole:5.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
