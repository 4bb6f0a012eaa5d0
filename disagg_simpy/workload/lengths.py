"""Drawing lengths from a length distribution (`scenario/lengths.py`): one uniform u in [0, 1)
per request, from that quantity's own seeded stream, mapped by the inverse of the distribution's
CDF, so request k's length depends only on its own u (a longer run sees the same prefix):

- `[low, high]`: low + floor(u x (high - low + 1)) (as the page's traffic always was);
- `{fixed: N}`: N (u is drawn and unused, so other classes' draws do not move);
- histogram: with C_i the cumulative weights over their sum (C_0 = 0, C_k = 1), the bin is the
  first i with u < C_i, and the length e(i-1) + floor((u - C_(i-1)) / (C_i - C_(i-1)) x
  (e(i) - e(i-1))), kept inside the bin against rounding;
- lognormal: u' = F(min - 0.5) + u x (F(max + 0.5) - F(min - 0.5)) with F the log-normal's CDF,
  X = exp(mu + sigma x Phi^-1(u')) (Python's `statistics.NormalDist.inv_cdf`), the length
  round-half-up(X) = floor(X + 0.5), kept inside [min, max] against rounding. This is exactly
  the truncation by redrawing until the rounded X lands in [min, max].

Also the histogram of a trace's lengths that `describe --fit` prints.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

from ..scenario.lengths import FixedLength, HistogramLength, LognormalLength


def draw_lengths(spec, u: np.ndarray) -> np.ndarray:
    """Lengths (int64) for the uniforms `u`, by the rule of `spec` (module docstring)."""
    u = np.asarray(u, dtype=np.float64)
    if isinstance(spec, FixedLength):
        return np.full(u.shape, spec.fixed, dtype=np.int64)
    if isinstance(spec, HistogramLength):
        return _histogram(spec.histogram.edges, spec.histogram.weights, u)
    if isinstance(spec, LognormalLength):
        return _lognormal(spec.lognormal, u)
    lo, hi = spec
    return lo + np.floor(u * (hi - lo + 1)).astype(np.int64)


def _histogram(edges, weights, u: np.ndarray) -> np.ndarray:
    e = np.asarray(edges, dtype=np.int64)
    cum = np.cumsum(np.asarray(weights, dtype=np.float64))
    cum = cum / cum[-1]
    cum[-1] = 1.0
    below = np.concatenate(([0.0], cum[:-1]))
    i = np.minimum(np.searchsorted(cum, u, side="right"), len(cum) - 1)  # first i with u < C_i
    width = e[1:] - e[:-1]
    inside = np.floor((u - below[i]) / (cum[i] - below[i]) * width[i]).astype(np.int64)
    return e[i] + np.clip(inside, 0, width[i] - 1)


def _lognormal(spec, u: np.ndarray) -> np.ndarray:
    mu, sigma = spec.log_params
    lo, hi = spec.cdf(spec.min - 0.5), spec.cdf(spec.max + 0.5)
    p = lo + u * (hi - lo)
    inv = np.frompyfunc(NormalDist(mu, sigma).inv_cdf, 1, 1)
    # p in (0, 1) strictly: inv_cdf refuses 0 and 1 (only reachable by rounding at the bounds)
    tiny = math.ulp(0.5)
    z = inv(np.clip(p, tiny, 1 - tiny)).astype(np.float64) if p.size else p
    return np.clip(np.floor(np.exp(z) + 0.5), spec.min, spec.max).astype(np.int64)


def fit_histogram(values: np.ndarray, bins: int) -> tuple[list[int], list[int]]:
    """(edges, weights) of a histogram length distribution shaped like `values` (whole numbers
    >= 1): with at most `bins` distinct values, one bin per value ([v, v+1), weight its count,
    empty bins between them where values are not consecutive), which draws exactly the values'
    empirical distribution; otherwise edges at the values' quantiles 0, 1/bins, ..., 1 (rounded
    down to whole numbers, duplicates dropped, the last edge max + 1), weights the counts in each bin."""
    v = np.sort(np.asarray(values, dtype=np.int64))
    distinct, counts = np.unique(v, return_counts=True)
    if len(distinct) <= bins:
        edges, weights = [int(distinct[0])], []
        for x, c in zip(distinct, counts):
            if x > edges[-1]:
                edges.append(int(x))
                weights.append(0)
            edges.append(int(x) + 1)
            weights.append(int(c))
        return edges, weights
    inner = np.floor(np.quantile(v, np.arange(1, bins) / bins)).astype(np.int64)
    e = np.unique(np.concatenate(([v[0]], inner, [v[-1] + 1])))
    n = np.searchsorted(v, e, side="left")
    return [int(x) for x in e], [int(x) for x in np.diff(n)]
