"""Traffic that changes over time (E11): a `schedule` of periods, and a `rate_curve`.

- `schedule: [{until_s: T1, rate_per_s: R1, prompt_mix: ..., reply_words: ...}, {until_s: T2, ...}]`:
  period k covers [T(k-1), T(k)) (T0 = 0); the last period also goes on after its `until_s`, to
  the end of the run (the traffic after the window, D6). A period sets its own `rate_per_s`
  (unless a `rate_curve` sets the rate) and may set `prompt_mix` and `reply_words` (otherwise
  the workload's own).
- `rate_curve: {diurnal: {mean_per_s: M, amplitude: A, period_s: P, phase_s: F}}`: the rate at
  time t is M x (1 + A x cos(2 pi (t - F) / P)): its peak M x (1 + A) at F, F + P, ..., its
  lowest M x (1 - A) half a period later; 0 <= A <= 1 keeps it from going negative.

How the arrivals are drawn from the rate (thinning) is `workload/periods.py`. Here: the models,
their checks, and the rate and its integral (the expected arrivals).
"""

from __future__ import annotations

import math
from typing import Annotated

import numpy as np
from pydantic import Field, field_validator, model_validator

from .base import NonNegSeconds, Seconds, _as_tuple, _Strict
from .lengths import Length, PromptClass, mix_problem, ordered_length

#: Periods of one schedule.
MAX_PERIODS = 10_000

Rate = Annotated[float, Field(gt=0)]


class Period(_Strict):
    """One period of a schedule: until `until_s` (from the previous period's), its own rate and,
    if given, its own prompt mix and reply lengths."""

    until_s: Seconds
    rate_per_s: Rate | None = None
    prompt_mix: tuple[PromptClass, ...] | None = Field(default=None, min_length=1, max_length=1000)
    reply_words: Length | None = None

    _tuple = field_validator("reply_words", "prompt_mix", mode="before")(_as_tuple)
    _range = field_validator("reply_words")(ordered_length)

    @model_validator(mode="after")
    def _check(self) -> Period:
        problem = mix_problem(self.prompt_mix) if self.prompt_mix is not None else None
        if problem:
            raise ValueError(f"@prompt_mix: {problem}")
        return self


class Diurnal(_Strict):
    """A rate that swings around `mean_per_s` once every `period_s`, peaking at `phase_s`."""

    mean_per_s: Rate
    amplitude: Annotated[float, Field(ge=0)]
    period_s: Seconds
    phase_s: NonNegSeconds = 0.0

    @model_validator(mode="after")
    def _check(self) -> Diurnal:
        if self.amplitude > 1:
            lowest = self.mean_per_s * (1 - self.amplitude)
            raise ValueError(f"@amplitude: got {self.amplitude:g}, which makes the rate negative (mean_per_s x "
                             f"(1 - amplitude) = {lowest:.6g} requests/s at its lowest); expected 0 to 1")
        return self


class RateCurve(_Strict):
    """A rate that follows a curve over time (one form so far: `diurnal`)."""

    diurnal: Diurnal

    @property
    def peak_per_s(self) -> float:
        d = self.diurnal
        return d.mean_per_s * (1 + d.amplitude)

    def rate(self, t_s: np.ndarray) -> np.ndarray:
        """The rate (requests/s) at times `t_s` (s)."""
        d = self.diurnal
        return d.mean_per_s * (1 + d.amplitude * np.cos(2 * np.pi * (np.asarray(t_s) - d.phase_s) / d.period_s))

    def integral(self, a_s: float, b_s: float) -> float:
        """Expected arrivals in [a_s, b_s): the rate's integral."""
        d = self.diurnal
        w = 2 * math.pi / d.period_s
        swing = d.amplitude / w * (math.sin(w * (b_s - d.phase_s)) - math.sin(w * (a_s - d.phase_s)))
        return d.mean_per_s * ((b_s - a_s) + swing)


def schedule_problem(w) -> str | None:
    """None, or the one thing wrong with a synthetic workload's rate keys (`@key: message`):
    exactly one of rate_per_s, schedule (each period with its rate) and rate_curve sets the rate;
    periods in order; Poisson arrivals whenever the rate changes."""
    schedule, curve = w.schedule, w.rate_curve
    if schedule is None and curve is None:
        if w.rate_per_s is None:
            return "@rate_per_s: required key is missing, expected a number of requests per second > 0 (or a " \
                   "schedule or rate_curve)"
        return None
    if w.rate_per_s is not None:
        what = "rate_curve (which sets the rate)" if curve is not None else "a schedule (each period sets its rate)"
        return f"@rate_per_s: got {w.rate_per_s:g} with {what}, expected no workload.rate_per_s"
    if w.arrivals != "poisson":
        return (f"@arrivals: got {w.arrivals!r} with a {'schedule' if schedule else 'rate_curve'}, expected poisson "
                "(a changing rate draws a non-homogeneous Poisson process, by thinning)")
    for i, p in enumerate(schedule or ()):
        if i and p.until_s <= schedule[i - 1].until_s:
            return (f"@schedule[{i}].until_s: got {p.until_s:g}, expected more than schedule[{i - 1}].until_s "
                    f"({schedule[i - 1].until_s:g}): periods in order, none overlapping")
        if curve is None and p.rate_per_s is None:
            return f"@schedule[{i}].rate_per_s: required key is missing, expected a number of requests per second > 0"
        if curve is not None and p.rate_per_s is not None:
            return (f"@schedule[{i}].rate_per_s: got {p.rate_per_s:g} with rate_curve, expected none (the curve "
                    "sets the rate; periods then change the mix)")
    return None


def period_starts(schedule) -> list[float]:
    """Each period's start (s): 0, then the previous period's until_s."""
    return [0.0] + [p.until_s for p in schedule[:-1]]


def expected_arrivals(w, end_s: float) -> float:
    """Arrivals a synthetic workload expects in [0, end_s)."""
    if w.rate_curve is not None:
        return w.rate_curve.integral(0.0, end_s)
    if w.schedule is None:
        return w.rate_per_s * end_s
    total = 0.0
    starts = period_starts(w.schedule)
    for k, (start, p) in enumerate(zip(starts, w.schedule)):
        stop = end_s if k == len(w.schedule) - 1 else min(p.until_s, end_s)
        total += p.rate_per_s * max(0.0, stop - start)
    return total


def peak_rate(w) -> float:
    """The highest rate the workload reaches (requests/s)."""
    if w.rate_curve is not None:
        return w.rate_curve.peak_per_s
    if w.schedule is None:
        return w.rate_per_s
    return max(p.rate_per_s for p in w.schedule)


def length_variants(w) -> list[tuple]:
    """(prompt mix, reply_words) of every part of the traffic: each period's (its own, or the
    workload's), or the workload's alone without a schedule."""
    if w.schedule is None:
        return [(w.prompt_mix, w.reply_words)]
    return [(p.prompt_mix or w.prompt_mix, p.reply_words or w.reply_words) for p in w.schedule]


def rate_key(w) -> str:
    """The key that sets a workload's rate (for messages)."""
    curve, schedule = getattr(w, "rate_curve", None), getattr(w, "schedule", None)
    return "rate_curve" if curve is not None else "schedule" if schedule is not None else "rate_per_s"


def rate_text(w) -> str:
    """The workload's rate in words: '14.5', 'a schedule of 2 periods (peak 20 requests/s)', ..."""
    if rate_key(w) == "rate_per_s":
        return f"{w.rate_per_s:g}"
    what = "a rate curve" if w.rate_curve is not None else f"a schedule of {len(w.schedule)} periods"
    return f"{what} (peak {peak_rate(w):g} requests/s)"


def rate_words(w) -> str:
    """A workload's rate for the run's header: '14.5 requests/s', 'a schedule of 2 periods (peak
    11 requests/s)', or '' (a trace without a rate of its own)."""
    if rate_key(w) != "rate_per_s":
        return rate_text(w)
    return f"{w.rate_per_s:g} requests/s" if w.rate_per_s is not None else ""
