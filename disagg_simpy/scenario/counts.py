"""A benchmark client's count of requests (`n_requests`, `n_requests_per_gpu`, a trace's `pick`):
the checks shared by synthetic and trace workloads (docs/traffic.md)."""

from __future__ import annotations

from typing import Any


def counted_requests_set(w: Any) -> bool:
    """Whether the workload counts its requests (`n_requests` or `n_requests_per_gpu`)."""
    return w.n_requests is not None or w.n_requests_per_gpu is not None


def counted_problem(w: Any, window: bool = False) -> str | None:
    """A benchmark client's count (`n_requests`, `n_requests_per_gpu`) beside a measured window:
    at most one count, no `measure_s`, no warm-up (every request sent is measured)."""
    keys = [k for k in ("n_requests", "n_requests_per_gpu") if getattr(w, k) is not None]
    if len(keys) > 1:
        return (f"@n_requests_per_gpu: got {w.n_requests_per_gpu} together with n_requests {w.n_requests}, expected "
                "one of them")
    if keys and w.measure_s is not None:
        return (f"@{keys[0]}: got {getattr(w, keys[0])} together with measure_s {w.measure_s:g}, expected one of them "
                f"({keys[0]} measures exactly that many arrivals, all of them: to shorten the run, lower {keys[0]} "
                "rather than set measure_s)")
    if keys and w.warmup_s > 0:
        return f"@warmup_s: got {w.warmup_s:g} with {keys[0]}, expected 0 ({keys[0]} measures every arrival)"
    if window and not keys and w.measure_s is None:  # (synthetic traffic: a window or a count)
        return "@measure_s: missing, expected a number of seconds > 0 (the measured window's end) or n_requests"
    return None


def pick_problem(w: Any) -> str | None:
    """A trace's `pick` where it means nothing: without a count, or on a `lengths` trace."""
    if w.pick != "first" and not counted_requests_set(w):
        return (f"@pick: got {w.pick!r} without n_requests, expected n_requests or n_requests_per_gpu (pick says which "
                "of the trace's requests they are)")
    if w.pick != "first" and w.format == "lengths":
        return "@pick: got 'sampled' on a 'lengths' trace, expected first (a lengths trace draws its rows with the seed already)"
    return None


def counted_requests(scenario: Any) -> float | None:
    """Requests a counted run sends (to its largest arrangement), None without a count."""
    w = scenario.workload
    if w.n_requests is not None:
        return float(w.n_requests)
    if w.n_requests_per_gpu is not None:
        return float(w.n_requests_per_gpu * max(a.n_gpus for a in scenario.arrangements))
    return None


def for_gpus(scenario: Any, n_gpus: int) -> Any:
    """With `workload.n_requests_per_gpu`, the scenario an arrangement of `n_gpus` GPUs runs:
    `n_requests` = per GPU x `n_gpus` (the first that many of the seed's stream); else itself."""
    per_gpu = scenario.workload.n_requests_per_gpu
    if per_gpu is None:
        return scenario
    workload = scenario.workload.model_copy(update={"n_requests": per_gpu * n_gpus, "n_requests_per_gpu": None})
    return scenario.model_copy(update={"workload": workload})


def warmup_problem(warmup_s: float, measure_s: float) -> str:
    """A warm-up that leaves no measured window ([warmup_s, measure_s) is empty), saying how to shorten."""
    return (f"@warmup_s: got {warmup_s:g}, expected less than measure_s ({measure_s:g}): the measured window is "
            f"[warmup_s, measure_s), so a shorter run keeps measure_s above {warmup_s:g} (or lowers warmup_s)")


def seed_matters(scenario: Any) -> bool:
    """Whether the seed moves a figure: it draws the requests (`Scenario.draws_requests`), or a
    per-request draw of a rule (E13's power-of-two router, E16's acceptance keys; rules.md#r87)."""
    return bool(scenario.draws_requests or scenario.speculative is not None or scenario.router == "power_of_two")
