"""95% intervals of a mean over seeds, sound when the seeds' figures are skewed.

A seed's on-time share is bounded (0-100%) and often piles up near 100% with a long tail of bad
seeds, so the mean's sampling distribution is skewed and a symmetric Student-t interval misses
on the tail's side more often than 5%. The interval here is the hull of two:

- the Student-t interval (exact for normal figures; it keeps its width with few seeds, where a
  bootstrap is too narrow: 2 seeds resample to 3 distinct means);
- the expanded percentile bootstrap (Hesterberg 2015, "What teachers should know about the
  bootstrap", section 5.1): percentiles of 2,000 resampled means, at levels widened so that on
  normal figures it matches the t interval (quantile Phi(sqrt(n/(n-1)) t_{n-1,0.975})); it
  follows the skew, reaching further on the tail's side.

The hull covers at least as often as either; measured coverage on the simulator's own skewed
shares is in docs/statistics.md (tests/results/test_intervals.py checks it by simulation). Resamples
come from a fixed-seed generator, so the same figures always give the same interval.
Known limit: when every seed has the same figure (say all 100%), the interval is that figure
alone; a rare bad seed can only show with more seeds.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import NamedTuple

import numpy as np

# Student t, two-sided 95% (the 0.975 quantile), for 1..30 degrees of freedom.
_T975 = (
    12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
    2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860,
    2.0796, 2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423,
)
RESAMPLES = 2000
LOPSIDED = 1.25  # sides further apart than this ratio are printed apart
RNG_SEED = 20150424  # fixed: the same figures give the same interval


def t975(dof: int) -> float:
    """The 97.5% quantile of Student's t (a table to 30, a Cornish-Fisher series beyond)."""
    if dof <= len(_T975):
        return _T975[dof - 1]
    z, v = 1.959963984540054, float(dof)
    return (
        z
        + (z**3 + z) / (4 * v)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * v**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * v**3)
    )


def _normal_cdf(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2))


class Interval(NamedTuple):
    """A mean over seeds and its 95% interval (NaN bounds with fewer than two figures)."""

    mean: float
    low: float
    high: float
    n: int

    def holds(self, value: float) -> bool:
        return self.low <= value <= self.high

    def text(self, decimals: int = 1, lopsided: bool = True) -> str:
        """'93.1±1.2' when the sides are within a quarter of each other or not `lopsided` (± the
        longer side: the interval lies within it), else the interval itself, '93.1 (90.2 to 94.5)';
        '93.1' without an interval."""
        if math.isnan(self.mean):
            return "-"
        m = f"{self.mean:.{decimals}f}"
        if math.isnan(self.low):
            return m
        below, above = self.mean - self.low, self.high - self.mean
        if not lopsided or max(below, above) <= LOPSIDED * min(below, above) or f"{below:.{decimals}f}" == f"{above:.{decimals}f}":
            return f"{m}±{max(below, above):.{decimals}f}"
        return f"{m} ({self.low:.{decimals}f} to {self.high:.{decimals}f})"


def decimals_below(mean: float, target: float, decimals: int = 1) -> int:
    """The decimals to show `mean` with so that a share below `target` does not read as reaching
    it (89.96 at a 90% target: '89.96', not '90.0'): `decimals`, or more, up to 4."""
    while decimals < 4 and mean < target and float(f"{mean:.{decimals}f}") >= target:
        decimals += 1
    return decimals


def interval(values: Iterable[float], bounds: tuple[float, float] | None = None) -> Interval:
    """The mean of the figures (NaN ones left out) and its 95% interval: the hull of the
    Student-t interval and the expanded percentile bootstrap (see the module's text), cut to
    `bounds` where the figure cannot lie outside them (a share: 0-100)."""
    v = np.asarray([x for x in values if x is not None and not math.isnan(x)], dtype=float)
    n = len(v)
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, 0)
    mean = float(v.mean())
    if n == 1 or math.isinf(mean):  # (a seed's figure infinite, e.g. $/M with nothing on time: no spread)
        return Interval(mean, math.nan, math.nan, n)
    half = t975(n - 1) * float(v.std(ddof=1)) / math.sqrt(n)
    low, high = mean - half, mean + half
    if half > 0:
        rng = np.random.default_rng(RNG_SEED)
        means = v[rng.integers(0, n, size=(RESAMPLES, n))].mean(axis=1)
        tail = _normal_cdf(-math.sqrt(n / (n - 1)) * t975(n - 1))
        b_low, b_high = np.quantile(means, [tail, 1 - tail])
        low, high = min(low, float(b_low)), max(high, float(b_high))
    if bounds is not None:
        low, high = min(mean, max(low, bounds[0])), max(mean, min(high, bounds[1]))
    return Interval(mean, low, high, n)


SHARE = (0.0, 100.0)  # the bounds of a share in percent
DIFFERENCE = (-100.0, 100.0)  # the bounds of a difference of two shares, in points
NOT_NEGATIVE = (0.0, math.inf)  # the bounds of a cost, a power or a rate


def bounds_of(column: str) -> tuple[float, float] | None:
    """Where a summary column's figure must lie: a share (`*_pct`) 0-100; the paired difference
    `on_time_vs_best_pct` -100 to 100 points; a cost, power or rate per unit (`dollars_*`,
    `power_kw`, `on_time_per_*`) at least 0 (an interval past them is cut, as for a share)."""
    if column == "on_time_vs_best_pct":
        return DIFFERENCE
    if column.startswith(("dollars_", "on_time_per_")) or column == "power_kw":
        return NOT_NEGATIVE
    return SHARE if column.endswith("_pct") else None


def mean_half_width(values) -> tuple[float, float]:
    """Mean and the 95% Student-t half-width of the mean (NaN half-width for one value); the
    symmetric interval `interval` widens where the seeds are skewed."""
    v = np.asarray([x for x in values if x is not None and not math.isnan(x)], dtype=float)
    if len(v) == 0:
        return math.nan, math.nan
    if len(v) == 1:
        return float(v[0]), math.nan
    return float(v.mean()), t975(len(v) - 1) * float(v.std(ddof=1)) / math.sqrt(len(v))
