"""Length distributions of prompts (`prompt_mix[].tokens`) and replies (`reply_words`).

Four forms, each a whole number of tokens or words from 1 to 2**53:

- `[low, high]`: uniform over the whole numbers low..high (the page's M6);
- `{fixed: N}`: always N;
- `{histogram: {edges: [e0, ..., ek], weights: [w1, ..., wk]}}`: bin i holds the whole numbers
  e(i-1) <= n < e(i) (half-open, edges whole numbers, strictly increasing), is drawn with
  probability w_i / sum(w), and is uniform inside (each of its e(i) - e(i-1) numbers equally likely);
- `{lognormal: {mean: M, sd: S, min: A, max: B}}`: X is log-normal with E[X] = M and SD[X] = S,
  i.e. ln X ~ Normal(mu, sigma) with sigma^2 = ln(1 + S^2/M^2) and mu = ln M - sigma^2/2; the length
  is X rounded to the nearest whole number, truncated to A..B by conditioning (as if X were
  redrawn until it rounds into A..B: no mass piles up at the bounds).

How each is drawn from one seeded uniform per request is `workload/lengths.py`. Here: the
models, their checks, and the smallest and largest length each can draw (for E4f and the KV
ship limit).
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Annotated, Any

from pydantic import Discriminator, Field, Tag, field_validator, model_validator

from .base import Count, _as_tuple, _show, _Strict
from .limits import MAX_COUNT

#: Bins of one histogram.
MAX_BINS = 10_000
#: The least probability a lognormal's [min, max] may hold: below it the bounds sit so far in a
#: tail that the truncated distribution is all rounding error.
MIN_LOGNORMAL_MASS = 1e-9

#: The largest histogram weight (weights are summed: 10,000 bins of it stay finite).
MAX_WEIGHT = 1e300
Weight = Annotated[float, Field(ge=0, le=MAX_WEIGHT)]
Positive = Annotated[float, Field(gt=0, le=MAX_COUNT)]


class Histogram(_Strict):
    """Bins [edges[i], edges[i+1]) of whole numbers, drawn with probability weights[i] / sum."""

    edges: tuple[Count, ...] = Field(min_length=2, max_length=MAX_BINS + 1)
    weights: tuple[Weight, ...] = Field(min_length=1, max_length=MAX_BINS)

    _tuple = field_validator("edges", "weights", mode="before")(_as_tuple)

    @model_validator(mode="after")
    def _check(self) -> Histogram:
        e, w = self.edges, self.weights
        if len(w) != len(e) - 1:
            raise ValueError(f"@weights: got {len(w)} weights for {len(e)} edges, expected one weight per bin ({len(e) - 1})")
        for i in range(1, len(e)):
            if e[i] <= e[i - 1]:
                raise ValueError(f"@edges[{i}]: got {e[i]} after {e[i - 1]}, expected edges that increase")
        if not math.fsum(w) > 0:
            raise ValueError(f"@weights: got {_show(list(w))}, expected weights >= 0, not all zero")
        return self

    @property
    def bounds(self) -> tuple[int, int]:
        used = [i for i, x in enumerate(self.weights) if x > 0]
        return self.edges[used[0]], self.edges[used[-1] + 1] - 1


class Lognormal(_Strict):
    """A log-normal with this mean and SD, rounded, truncated to [min, max] (module docstring)."""

    mean: Positive
    sd: Positive
    min: Count = 1
    max: Count

    @model_validator(mode="after")
    def _check(self) -> Lognormal:
        if self.min > self.max:
            raise ValueError(f"@min: got {self.min} above max {self.max}, expected min <= max")
        lo, hi = self.cdf(self.min - 0.5), self.cdf(self.max + 0.5)
        if not hi - lo >= MIN_LOGNORMAL_MASS:
            raise ValueError(
                f"@max: got [min, max] = [{self.min}, {self.max}], which holds {hi - lo:.3g} of a lognormal with "
                f"mean {self.mean:g} and sd {self.sd:g}; expected bounds holding at least {MIN_LOGNORMAL_MASS:g} of it"
            )
        return self

    @property
    def log_params(self) -> tuple[float, float]:
        """(mu, sigma) of ln X."""
        sigma2 = math.log1p((self.sd / self.mean) ** 2)
        return math.log(self.mean) - sigma2 / 2, math.sqrt(sigma2)

    def cdf(self, x: float) -> float:
        """P(X <= x) of the untruncated log-normal."""
        mu, sigma = self.log_params
        return 0.0 if x <= 0 else NormalDist(mu, sigma).cdf(math.log(x))

    @property
    def bounds(self) -> tuple[int, int]:
        return self.min, self.max


class HistogramLength(_Strict):
    histogram: Histogram


class LognormalLength(_Strict):
    lognormal: Lognormal


class FixedLength(_Strict):
    fixed: Count


_FORMS = {"histogram": "<histogram>", "lognormal": "<lognormal>", "fixed": "<fixed>"}
_MODELS: dict[type, str] = {HistogramLength: "<histogram>", LognormalLength: "<lognormal>", FixedLength: "<fixed>"}
LENGTH_TAGS = ("<range>", *_FORMS.values())


def _length_tag(value: Any) -> str:
    if isinstance(value, dict):
        for key in value:
            if key in _FORMS:
                return _FORMS[key]
    return _MODELS.get(type(value), "<range>")


Length = Annotated[
    Annotated[tuple[Count, Count], Tag("<range>")]
    | Annotated[HistogramLength, Tag("<histogram>")]
    | Annotated[LognormalLength, Tag("<lognormal>")]
    | Annotated[FixedLength, Tag("<fixed>")],
    Discriminator(_length_tag),
]


def ordered_length(value: Any) -> Any:
    """A `[low, high]` range must have low <= high (the other forms check themselves)."""
    if isinstance(value, tuple) and value[0] > value[1]:
        raise ValueError(f"got {_show(list(value))}, expected a range [low, high] with low <= high")
    return value


def length_bounds(spec: Any) -> tuple[int, int]:
    """The smallest and largest length `spec` can draw."""
    if isinstance(spec, tuple):
        return spec[0], spec[1]
    if isinstance(spec, FixedLength):
        return spec.fixed, spec.fixed
    inner = spec.histogram if isinstance(spec, HistogramLength) else spec.lognormal
    return inner.bounds


def length_raw(spec: Any) -> Any:
    """`spec` as a scenario file would write it (for overrides)."""
    return list(spec) if isinstance(spec, tuple) else spec.model_dump(mode="python")


class PromptClass(_Strict):
    """One class of prompts: drawn with probability `share`, tokens from `tokens` (a `[low, high]`
    range, inclusive, or another length distribution)."""

    share: Annotated[float, Field(gt=0, le=1)]
    tokens: Length

    _tuple = field_validator("tokens", mode="before")(_as_tuple)
    _range = field_validator("tokens")(ordered_length)


def mix_problem(mix: tuple[PromptClass, ...]) -> str | None:
    """None, or what is wrong with a prompt mix as a whole: its shares must sum to 1."""
    total = math.fsum(c.share for c in mix)
    if math.isclose(total, 1.0, abs_tol=1e-9):
        return None
    shares = " + ".join(f"{c.share:g}" for c in mix[:6])
    more = " + ..." if len(mix) > 6 else ""
    return f"got shares {shares}{more} = {total:g}, expected shares summing to 1"
