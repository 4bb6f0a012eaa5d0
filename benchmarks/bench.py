"""Speed and memory of disagg_simpy (issue 5): throughput, scale, growth, words, --help.

Runs against the installed package (whatever `import disagg_simpy` finds; the header names it).
Each measurement runs in a fresh Python process, so its peak RSS is its own, and each case is
repeated (5 times, or 3 with --quick); the table shows medians. Prints a table (case,
requests, words, wall s, requests/s, peak MB), the growth table, then one JSON line per case.

    python benchmarks/bench.py            # the full benchmark (a few minutes)
    python benchmarks/bench.py --quick    # about a minute: smaller cases, 3 repeats

What is counted: "requests" are every request that arrived during a run (measured or not,
summed over the case's arrangements); "words" every word written before the run stopped.
"wall s" times stream generation, the simulation, the gap metrics and building the summary,
requests, iterations and reads frames; not interpreter start-up or imports, and not CSV
writing (timed separately as `csv s`). Small cases are run once untimed first (warm-up).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"
KEEP_UP = ("same-gpu", "chunked-512", "split-2-2")
CANNOT = ("split-1-3", "split-3-1")
DEFAULT_RATE = 14.25


# -- helpers used inside a child process ------------------------------------------------------
def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def _scenario(file: str, arrangements=None, **overrides):
    from disagg_simpy import load_scenario

    s = load_scenario(SCENARIOS / file)
    if overrides:
        s = s.with_overrides(**overrides)
    if arrangements is not None:
        s = s.model_copy(update={"arrangements": tuple(a for a in s.arrangements if a.name in arrangements)})
    return s


def _words_written(rec) -> int:
    """Words written before the run stopped: words 2..n from iterations, plus first words."""
    it, r = rec.iterations, rec.requests
    return int(it["n_replies_written"].sum()) + int((r["first_word_at_ns"] >= 0).sum())


def _timed_run(scenario, seed=None) -> tuple[object, float]:
    """run() and every frame the CLI writes: the unit of work a sweep point costs."""
    from disagg_simpy import run

    t0 = time.perf_counter()
    res = run(scenario, seed=seed)
    res.summary, res.requests, res.iterations, res.reads  # noqa: B018 (builds the frames)
    return res, time.perf_counter() - t0


def _describe(res, wall: float) -> dict:
    recs = res.records.values()
    n = sum(len(r.requests["request_id"]) for r in recs)
    return {
        "requests": n,
        "measured": sum(int(r.requests["measured"].sum()) for r in recs),
        "words": sum(_words_written(r) for r in recs),
        "iterations": sum(len(r.iterations["gpu"]) for r in recs),
        "events": sum(r.n_events for r in recs),
        "sim_s": max(r.stopped_at_ns for r in recs) / 1e9,
        "capped": res.capped,
        "wall_s": wall,
        "requests_per_s": n / wall,
    }


def _csv_text(frame) -> str:
    try:  # the CLI's writer, if this version of the package has one
        from disagg_simpy.results.csv_text import csv_text
    except ImportError:
        return frame.to_csv(index=False)
    return csv_text(frame)


def case_run(file: str, arrangements, warm_up: bool, csv: bool = False, **overrides) -> dict:
    scenario = _scenario(file, arrangements, **overrides)
    if warm_up:
        _timed_run(scenario)
    res, wall = _timed_run(scenario)
    out = _describe(res, wall)
    out["peak_mb"] = _peak_mb()
    if csv:  # as the CLI writes them
        frames = {"summary": res.summary, "requests": res.requests, "iterations": res.iterations, "reads": res.reads}
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            for name, frame in frames.items():
                Path(tmp, f"{name}.csv").write_text(_csv_text(frame), encoding="utf-8")
            out["csv_s"] = time.perf_counter() - t0
            out["csv_mb"] = sum(f.stat().st_size for f in Path(tmp).iterdir()) / 1e6
        out["peak_mb_with_csv"] = _peak_mb()
    return out


def case_words(file: str, arrangement: str, **overrides) -> dict:
    from disagg_simpy import run

    res = run(_scenario(file, (arrangement,), **overrides))
    before = _peak_mb()
    t0 = time.perf_counter()
    words = res.words(arrangement)
    wall = time.perf_counter() - t0
    n = len(words)
    return {
        "requests": int(res.records[arrangement].requests["measured"].sum()),
        "words": n,
        "wall_s": wall,
        "requests_per_s": None,  # building words simulates nothing
        "bytes_per_word": words.memory_usage(deep=True, index=False).sum() / max(n, 1),
        "dtypes": {k: str(v) for k, v in words.dtypes.items()},
        "peak_mb_before": before,
        "peak_mb": _peak_mb(),
    }


# -- the cases ---------------------------------------------------------------------------------
def cases(quick: bool) -> dict[str, tuple]:
    """name -> (function, kwargs). Quick mode shrinks the long cases."""
    hour = {"workload.measure_s": 600.0, "max_sim_s": 1200.0} if quick else {}
    hour_label = "10min" if quick else "hour"
    growth_sizes = (1_000, 10_000) if quick else (1_000, 10_000, 100_000)
    c: dict[str, tuple] = {}
    # target 1: throughput on the default traffic (default.yaml: 30 s measured, then drain)
    for a in KEEP_UP + CANNOT:
        c[f"default/{a}"] = (case_run, dict(file="default.yaml", arrangements=(a,), warm_up=True))
    # target 2: one hour through the arrangements that keep up, in one run, then the CSVs
    c[f"{hour_label}/keep-up"] = (
        case_run, dict(file="hour.yaml", arrangements=KEEP_UP, warm_up=False, csv=True, **hour))
    for a in CANNOT:
        c[f"{hour_label}/{a}"] = (case_run, dict(file="hour.yaml", arrangements=(a,), warm_up=False, **hour))
    # target 3: growth with the number of requests, and with reply length at equal words/s
    for a in KEEP_UP:
        for n in growth_sizes:
            m = n / DEFAULT_RATE
            c[f"growth/{a}/{n // 1000}k"] = (case_run, dict(
                file="default.yaml", arrangements=(a,), warm_up=n <= 1_000,
                **{"workload.measure_s": m, "max_sim_s": m + 600.0}))
        m = 300.0 if quick else 1800.0
        for label, rate, words in (("x1", DEFAULT_RATE, [100, 400]), ("x10", DEFAULT_RATE / 10, [1000, 4000])):
            c[f"replies{label}/{a}"] = (case_run, dict(
                file="default.yaml", arrangements=(a,), warm_up=False,
                **{"workload.measure_s": m, "max_sim_s": m + 600.0,
                   "workload.rate_per_s": rate, "workload.reply_words": words}))
    # target 4: .words(arrangement) of one hour
    for a in KEEP_UP if not quick else ("split-2-2",):
        c[f"words/{hour_label}/{a}"] = (case_words, dict(file="hour.yaml", arrangement=a, **hour))
    return c


def child(name: str, quick: bool) -> None:
    fn, kwargs = cases(quick)[name]
    print(json.dumps({"case": name, **fn(**kwargs)}))


# -- the parent: repeat each case in fresh processes, take medians ---------------------------
def run_case(name: str, quick: bool, repeats: int) -> dict:
    runs = []
    for _ in range(repeats):
        cmd = [sys.executable, __file__, "--child", name] + (["--quick"] if quick else [])
        done = subprocess.run(cmd, capture_output=True, text=True, env=os.environ)
        if done.returncode != 0:
            raise SystemExit(f"case {name} failed:\n{done.stderr}")
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    out = dict(runs[-1])
    for key in ("wall_s", "requests_per_s", "peak_mb", "csv_s", "peak_mb_with_csv", "bytes_per_word"):
        if out.get(key) is not None:
            out[key] = statistics.median(r[key] for r in runs)
    out["wall_s_runs"] = [round(r["wall_s"], 4) for r in runs]
    out["repeats"] = repeats
    return out


def time_help(repeats: int) -> dict:
    walls = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "disagg_simpy", "--help"], capture_output=True, check=True)
        walls.append(time.perf_counter() - t0)
    return {"case": "cli/--help", "wall_s": statistics.median(walls), "wall_s_runs": [round(w, 4) for w in walls]}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="about a minute: smaller cases, 3 repeats")
    p.add_argument("--repeats", type=int, help="runs per case (default 5, or 3 with --quick)")
    p.add_argument("--only", metavar="PREFIX", help="run only the cases whose name starts with PREFIX")
    p.add_argument("--child", metavar="CASE", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args.child, args.quick)
        return 0
    import disagg_simpy

    repeats = args.repeats or (3 if args.quick else 5)
    names = [n for n in cases(args.quick) if not args.only or n.startswith(args.only)]
    print(f"disagg_simpy {disagg_simpy.__version__} from {Path(disagg_simpy.__file__).parent}")
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores; "
          f"medians of {repeats} runs, each in a fresh process")
    results = []
    header = f"{'case':32s} {'requests':>9s} {'words':>11s} {'wall s':>8s} {'requests/s':>11s} {'peak MB':>8s}"
    print(header)
    print("-" * len(header))
    for name in names:
        r = run_case(name, args.quick, repeats)
        results.append(r)
        rps = f"{r['requests_per_s']:11,.0f}" if r["requests_per_s"] is not None else f"{'-':>11s}"
        notes = ""
        if "csv_s" in r:
            notes += f"   + csv {r['csv_s']:.2f} s ({r['csv_mb']:.0f} MB), peak {r['peak_mb_with_csv']:.0f} MB"
        if "bytes_per_word" in r:
            notes += f"   {r['bytes_per_word']:.1f} B/word"
        if r.get("capped"):
            notes += f"   capped at {r['sim_s']:.0f} s sim"
        print(f"{name:32s} {r['requests']:9,d} {r['words']:11,d} {r['wall_s']:8.3f} {rps} {r['peak_mb']:8.0f}{notes}",
              flush=True)
    if not args.only or "cli/--help".startswith(args.only):
        h = time_help(repeats)
        results.append(h)
        print(f"{'python -m disagg_simpy --help':32s} {'':9s} {'':11s} {h['wall_s']:8.3f}")
    _growth_table(results)
    targets = _targets(results, args.quick)
    for r in results:
        print(json.dumps(r))
    print(json.dumps({"case": "targets", "targets": targets}))
    return 0


#: "flat" time per request: no size from 1,000 to 100,000 requests costs more than this
#: times the smallest run's time per request
FLAT = 1.25


def _targets(results: list[dict], quick: bool) -> list[dict]:
    """Issue 5's targets, judged on the medians above (hour-sized ones only in the full run)."""
    by = {r["case"]: r for r in results}
    out: list[dict] = []

    def judge(target: str, what: str, value, limit, ok: bool | None) -> None:
        out.append({"target": target, "what": what, "value": value, "limit": limit, "met": ok})

    for a, floor in (("split-2-2", 20_000), ("same-gpu", 15_000), ("chunked-512", 15_000)):
        r = by.get(f"default/{a}")
        if r:
            judge("1", f"default {a} requests/s", round(r["requests_per_s"]), f">= {floor:,}", r["requests_per_s"] >= floor)
    r = by.get("hour/keep-up")
    if r:
        judge("2", "hour keep-up wall s", round(r["wall_s"], 2), "< 12", r["wall_s"] < 12)
        judge("2", "hour keep-up peak MB (with CSVs)", round(r["peak_mb_with_csv"]), "< 500", r["peak_mb_with_csv"] < 500)
        judge("2", "hour keep-up CSV s", round(r["csv_s"], 2), "< 3", r["csv_s"] < 3)
    for a in CANNOT:
        r = by.get(f"hour/{a}")
        if r:
            judge("2", f"hour {a} (capped at {r['sim_s']:.0f} s sim) wall s, peak MB",
                  [round(r["wall_s"], 2), round(r["peak_mb"])], "bounded", None)
    for a in KEEP_UP:
        per = [r["wall_s"] / r["requests"] for k, r in by.items() if k.startswith(f"growth/{a}/")]
        if len(per) > 1:
            worst = max(per) / per[0]
            judge("3", f"growth {a}: worst us/request vs 1k", round(worst, 2), f"<= {FLAT} (flat)", worst <= FLAT)
        one, ten = by.get(f"repliesx1/{a}"), by.get(f"repliesx10/{a}")
        if one and ten:
            ratio = (ten["wall_s"] / ten["sim_s"]) / (one["wall_s"] / one["sim_s"])
            judge("3", f"{a}: 10x replies, cost per sim-s vs 1x", round(ratio, 2), "< 2", ratio < 2)
    for a in KEEP_UP:
        r = by.get(f"words/hour/{a}")
        if r:
            judge("4", f"words(hour {a}) s, B/word", [round(r["wall_s"], 2), r["bytes_per_word"]], "< 2, <= 16",
                  r["wall_s"] < 2 and r["bytes_per_word"] <= 16)
    r = by.get("cli/--help")
    if r:
        judge("5", "python -m disagg_simpy --help s", round(r["wall_s"], 3), "< 0.5", r["wall_s"] < 0.5)
    if out:
        print("\ntargets (issue 5)" + (" -- quick run: the hour-sized ones are not judged" if quick else ""))
        for t in out:
            verdict = {True: "met", False: "NOT MET", None: "-"}[t["met"]]
            print(f"  {t['target']}  {t['what']:52s} {str(t['value']):>16s}  {t['limit']:>14s}  {verdict}")
    return out


def _growth_table(results: list[dict]) -> None:
    by = {r["case"]: r for r in results}
    rows = [r for r in results if r["case"].startswith("growth/")]
    if rows:
        print("\ngrowth: time per simulated request as the run grows")
        print(f"{'arrangement':14s} {'requests':>9s} {'us/request':>11s} {'vs smallest':>12s}")
        first: dict[str, float] = {}
        for r in rows:
            a = r["case"].split("/")[1]
            per = r["wall_s"] / r["requests"] * 1e6
            first.setdefault(a, per)
            print(f"{a:14s} {r['requests']:9,d} {per:11.1f} {per / first[a]:11.2f}x")
    pairs = [(k.split("/", 1)[1], by[k], by.get(k.replace("repliesx1/", "repliesx10/")))
             for k in by if k.startswith("repliesx1/")]
    if pairs:
        print("\nreplies 10x as long at 1/10 the rate (same words/s): wall time per simulated second")
        print(f"{'arrangement':14s} {'x1 ms/sim-s':>12s} {'x10 ms/sim-s':>13s} {'ratio':>7s}")
        for a, one, ten in pairs:
            if ten is None:
                continue
            x1 = one["wall_s"] / one["sim_s"] * 1e3
            x10 = ten["wall_s"] / ten["sim_s"] * 1e3
            print(f"{a:14s} {x1:12.2f} {x10:13.2f} {x10 / x1:7.2f}")


if __name__ == "__main__":
    sys.exit(main())
