"""How long a plan would take, said before it runs: a plan of many GPUs searches many
arrangements (every split, every chunk size), each at rates that grow with the GPUs, so its
cost grows with about the square of the GPU count.

The estimate counts the GPU-iterations the probes could simulate: each arrangement's GPUs
iterating through the measured window and the first-word limit after it, at its shortest
iteration, about `PROBES_PER_SEARCH` probes of every seed; times the CPU seconds one
GPU-iteration costs (calibrated by benchmarks/plan_scale.py on a 2-core machine). Probes above
capacity stop early, so it is an upper estimate, good to a factor of about 2. A plan that leaves
what cannot reach its top two (sweep/plan.py; not `--exhaustive`) searches its first wave in
full and costs about `LEFT_SHARE` of that for each arrangement after it (measured on the default
traffic at 16 and 64 GPUs).
"""

from __future__ import annotations

#: CPU seconds one simulated GPU-iteration costs a probe, all in (benchmarks/plan_scale.py)
SECONDS_PER_ITERATION = 6e-6
#: probes a goodput search makes (steps out from the start rate, then bisection to 0.1/s)
PROBES_PER_SEARCH = 10
#: a plan estimated to take longer than this (wall seconds on its workers) is refused
MAX_PLAN_S = 3600.0
#: what an arrangement after a plan's first wave costs, as a share of a search in full
LEFT_SHARE = 0.1
#: arrangements in a plan's first wave (sweep/plan.py WAVE)
FIRST_WAVE = 8


def plan_seconds(scenario, gpus: list[int], n_seeds: int, workers: int, exhaustive: bool = True) -> float:
    """Wall seconds a plan of arrangements of `gpus` GPUs each (on `scenario`'s traffic and
    costs) would take on `workers` workers."""
    w = scenario.workload
    window_s = (w.measure_s if w.measure_s is not None else scenario.cap_s(None)) + scenario.slo.first_word_s
    iteration_ms = min(a.shortest_iteration_ms(scenario.cost) for a in scenario.arrangements)
    shares = [1.0 if exhaustive or i < FIRST_WAVE else LEFT_SHARE for i in range(len(gpus))]
    iterations = sum(g * share for g, share in zip(sorted(gpus, reverse=True), shares)) * window_s * 1e3 / iteration_ms
    return iterations * PROBES_PER_SEARCH * n_seeds * SECONDS_PER_ITERATION / max(workers, 1)


def duration_text(seconds: float) -> str:
    """'40 s', '12 min', '3.5 hours'."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} hours"


def plan_cost_problem(scenario, arrangements: list[dict], n_seeds: int, workers: int | None, narrow: str,
                      exhaustive: bool = True) -> tuple[str | None, str]:
    """(a refusal, or None; a one-line note of the estimate, or '') for planning the candidate
    `arrangements` (plan.candidates) on `scenario`'s traffic. `workers` None: a Dask cluster of
    unknown size (noted, never refused). `narrow` names the flags that narrow the search."""
    n = len(arrangements)
    gpus = [a.get("gpus", a.get("reading_gpus", 0) + a.get("writing_gpus", 0)) for a in arrangements]
    n_gpus = max(gpus)
    seconds = plan_seconds(scenario, gpus, n_seeds, workers or 1, exhaustive)
    on = f"{workers} worker{'s' * (workers != 1)}" if workers else "one Dask worker (divide by the cluster's)"
    searched = "" if exhaustive else f" (the first {FIRST_WAVE} in full, about {LEFT_SHARE:.0%} of that each after)"
    what = (f"{n} arrangements of {n_gpus} GPUs{searched} x about {PROBES_PER_SEARCH} probes x {n_seeds} seed"
            f"{'s' * (n_seeds != 1)}: about {duration_text(seconds)} on {on}")
    if workers is not None and seconds > MAX_PLAN_S:
        return (f"--gpus {n_gpus}: got {what}, above the limit of {duration_text(MAX_PLAN_S)}; expected a narrower "
                f"search: {narrow}"), ""
    return None, f"plan: {what} (a rough upper estimate)" if seconds > 120 else ""
